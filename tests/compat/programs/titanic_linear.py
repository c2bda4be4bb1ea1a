"""TF's "Build a linear model with Estimators" tutorial (Titanic), migrated to TF 2 the way
many programs were: ``tf.compat.v1`` spelled out inside a ``tensorflow.compat.v1`` program.

* ``tf.compat.v1.keras.utils.get_file`` downloads (and caches) the CSV files; pandas reads
  them;
* ``tf.compat.v1.data.Dataset.from_tensor_slices((dict(df), y))`` input functions;
* ``tf.compat.v1.estimator.LinearClassifier`` over vocabulary-list columns built from the
  data, a crossed column, ``tf.compat.v1.errors`` around prediction.

It runs under TensorFlow 2.15 as written; under jax-estimator with the import line changed
to ``import estimator.compat.v1 as tf``. ``--data_url`` is where the files are fetched from
(the tutorial's Google Cloud Storage bucket by default; the tests give the local copy in
``../shared/data/titanic`` as a ``file://`` URL).
"""

import argparse
import time

import pandas as pd
import tensorflow.compat.v1 as tf
from _report import print_result

parser = argparse.ArgumentParser()
parser.add_argument("--data_url", default="https://storage.googleapis.com/tf-datasets/titanic")
parser.add_argument("--model_dir", default=None)
parser.add_argument("--cache_dir", default=None)
parser.add_argument("--train_steps", default=400, type=int)
parser.add_argument("--seed", default=1, type=int)

CATEGORICAL_COLUMNS = ["sex", "n_siblings_spouses", "parch", "class", "deck", "embark_town",
                       "alone"]  # fmt: skip
NUMERIC_COLUMNS = ["age", "fare"]


def load(url, name, cache_dir):
    path = tf.compat.v1.keras.utils.get_file(
        f"titanic_{name}", f"{url}/{name}", cache_dir=cache_dir
    )
    df = pd.read_csv(path)
    for column in CATEGORICAL_COLUMNS:
        df[column] = df[column].astype(str).astype(object)
    return df, df.pop("survived")


def make_input_fn(df, y, num_epochs=10, shuffle=True, batch_size=32):
    def input_function():
        ds = tf.compat.v1.data.Dataset.from_tensor_slices((dict(df), y))
        if shuffle:
            ds = ds.shuffle(1000)
        return ds.batch(batch_size).repeat(num_epochs)

    return input_function


def main(argv):
    args = parser.parse_args(argv[1:])
    start = time.time()
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
    train, y_train = load(args.data_url, "train.csv", args.cache_dir)
    test, y_test = load(args.data_url, "eval.csv", args.cache_dir)
    feature_columns = []
    for name in CATEGORICAL_COLUMNS:
        vocabulary = sorted(train[name].unique())
        feature_columns.append(
            tf.compat.v1.feature_column.categorical_column_with_vocabulary_list(name, vocabulary)
        )
    for name in NUMERIC_COLUMNS:
        feature_columns.append(
            tf.compat.v1.feature_column.numeric_column(name, dtype=tf.compat.v1.float32)
        )
    age_x_gender = tf.compat.v1.feature_column.crossed_column(["age", "sex"], hash_bucket_size=100)
    model = tf.compat.v1.estimator.LinearClassifier(
        feature_columns=feature_columns + [age_x_gender],
        model_dir=args.model_dir,
        config=tf.compat.v1.estimator.RunConfig(tf_random_seed=args.seed),
    )
    model.train(make_input_fn(train, y_train), max_steps=args.train_steps)
    results = model.evaluate(make_input_fn(test, y_test, num_epochs=1, shuffle=False))
    probabilities = []
    try:
        for prediction in model.predict(make_input_fn(test, y_test, num_epochs=1, shuffle=False)):
            probabilities.append(float(prediction["probabilities"][1]))
    except tf.compat.v1.errors.OutOfRangeError:
        pass
    print_result(
        start,
        results,
        ("accuracy", "auc"),
        predictions=len(probabilities),
        mean_probability=sum(probabilities) / len(probabilities),
    )


if __name__ == "__main__":
    tf.app.run(main)
