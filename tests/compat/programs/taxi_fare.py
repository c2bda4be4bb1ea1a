"""A TF 1.x wide-and-deep regression exported for serving, in the style of the taxi-fare
and baby-weight courses' ``task.py`` / ``model.py`` (2018-2019).

* CSV files read with ``TextLineDataset`` and ``tf.decode_csv``;
* feature columns: a vocabulary column and an identity column crossed, bucketized
  coordinates crossed, numeric columns; a ``DNNLinearCombinedRegressor``;
* an RMSE metric added with ``tf.estimator.add_metrics`` from a ``tf.metrics`` pair;
* ``train_and_evaluate`` with a ``LatestExporter`` whose ``serving_input_fn`` receives
  ``[None]`` placeholders and gives the model ``tf.expand_dims(placeholder, -1)``, as those
  courses do.

TF 1 code that TensorFlow 2.15 runs as written (``import tensorflow.compat.v1 as tf``). The
data: synthetic trips (a fixed NumPy seed) whose fare grows with the distance, the number of
passengers and the rush hours.
"""

import argparse
import os
import time

import numpy as np
import tensorflow.compat.v1 as tf
from _report import print_result

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir", default=None)
parser.add_argument("--train_steps", default=1000, type=int)
parser.add_argument("--batch_size", default=64, type=int)
parser.add_argument("--seed", default=1, type=int)

COLUMNS = ["fare", "dayofweek", "hourofday", "pickuplon", "pickuplat", "dropofflon", "dropofflat",
           "passengers", "key"]  # fmt: skip
DEFAULTS = [[0.0], ["Sun"], [0], [-74.0], [40.0], [-74.0], [40.0], [1.0], ["nokey"]]
DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
INPUTS = COLUMNS[1:-1]


def write_trips(path, n, seed):
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(n):
            day, hour = rng.integers(0, 7), rng.integers(0, 24)
            plon, plat = rng.uniform(-74.05, -73.75), rng.uniform(40.60, 40.85)
            dlon, dlat = plon + rng.normal(0, 0.05), plat + rng.normal(0, 0.05)
            passengers = rng.integers(1, 5)
            distance = np.hypot(dlon - plon, dlat - plat) * 100  # about km
            rush = 1.5 if hour in (8, 9, 17, 18) else 0.0
            fare = 2.5 + 1.8 * distance + 0.5 * passengers + rush + rng.normal(0, 0.5)
            f.write(f"{fare:.2f},{DAYS[day]},{hour},{plon:.5f},{plat:.5f},{dlon:.5f},{dlat:.5f},"
                    f"{passengers},k{i}\n")  # fmt: skip


def read_dataset(path, mode, batch_size):
    def decode(line):
        values = tf.decode_csv(line, record_defaults=DEFAULTS)
        features = dict(zip(COLUMNS, values, strict=True))
        features.pop("key")
        return features, features.pop("fare")

    def input_fn():
        dataset = tf.data.TextLineDataset(path).map(decode)
        if mode == tf.estimator.ModeKeys.TRAIN:
            dataset = dataset.shuffle(1000).repeat()
        return dataset.batch(batch_size)

    return input_fn


def feature_columns():
    day = tf.feature_column.categorical_column_with_vocabulary_list("dayofweek", DAYS)
    hour = tf.feature_column.categorical_column_with_identity("hourofday", 24)
    lat_buckets = np.linspace(40.55, 40.9, 8).tolist()
    lon_buckets = np.linspace(-74.1, -73.7, 8).tolist()
    plat = tf.feature_column.bucketized_column(
        tf.feature_column.numeric_column("pickuplat"), lat_buckets
    )
    plon = tf.feature_column.bucketized_column(
        tf.feature_column.numeric_column("pickuplon"), lon_buckets
    )
    wide = [
        tf.feature_column.crossed_column([day, hour], 24 * 7),
        tf.feature_column.crossed_column([plat, plon], 64),
        day,
    ]
    centres = {"pickuplon": -73.9, "dropofflon": -73.9, "pickuplat": 40.72, "dropofflat": 40.72}
    deep = [
        tf.feature_column.numeric_column(k, normalizer_fn=lambda x, c=c: (x - c) * 10.0)
        for k, c in centres.items()
    ]
    deep.append(tf.feature_column.numeric_column("passengers"))
    deep.append(tf.feature_column.embedding_column(wide[0], 4))
    return wide, deep


def rmse(labels, predictions):
    return {"rmse": tf.metrics.root_mean_squared_error(labels, predictions["predictions"])}


def serving_input_fn():
    placeholders = {
        key: tf.placeholder(tf.string if key == "dayofweek" else tf.float32, [None])
        for key in INPUTS
    }
    placeholders["hourofday"] = tf.placeholder(tf.int32, [None])
    features = {key: tf.expand_dims(tensor, -1) for key, tensor in placeholders.items()}
    return tf.estimator.export.ServingInputReceiver(features, placeholders)


def main(argv):
    args = parser.parse_args(argv[1:])
    start = time.time()
    os.makedirs(args.model_dir, exist_ok=True)
    train_path = os.path.join(args.model_dir, "train.csv")
    eval_path = os.path.join(args.model_dir, "eval.csv")
    write_trips(train_path, 4000, args.seed)
    write_trips(eval_path, 1000, args.seed + 100)
    wide, deep = feature_columns()
    estimator = tf.estimator.DNNLinearCombinedRegressor(
        model_dir=args.model_dir,
        linear_feature_columns=wide,
        dnn_feature_columns=deep,
        dnn_hidden_units=[32, 8],
        dnn_optimizer=tf.train.AdamOptimizer(0.01),
        config=tf.estimator.RunConfig(tf_random_seed=args.seed, save_checkpoints_steps=200),
    )
    estimator = tf.estimator.add_metrics(estimator, rmse)
    train_spec = tf.estimator.TrainSpec(
        read_dataset(train_path, tf.estimator.ModeKeys.TRAIN, args.batch_size),
        max_steps=args.train_steps,
    )
    exporter = tf.estimator.LatestExporter("exporter", serving_input_fn)
    eval_spec = tf.estimator.EvalSpec(
        read_dataset(eval_path, tf.estimator.ModeKeys.EVAL, 200),
        steps=None,
        exporters=exporter,
        start_delay_secs=0,
        throttle_secs=1,
    )
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    results = estimator.evaluate(read_dataset(eval_path, tf.estimator.ModeKeys.EVAL, 200))
    exports = tf.gfile.ListDirectory(os.path.join(args.model_dir, "export", "exporter"))
    print_result(start, results, ("rmse", "average_loss"), exports=len(exports))


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run(main)
