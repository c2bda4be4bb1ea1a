"""TF 2.15's side of ``census_throughput.py``: run with a Python that has TensorFlow 2.15
and tensorflow-estimator 2.15 (never this package). Same data, columns and models as
``examples/census.py``; input by TF's recommended path (``tf.data``: from_tensor_slices,
shuffle, repeat, batch, prefetch) and the default ``RunConfig``. Prints one JSON line.

Usage: ``<tf python> benchmarks/_tf_census.py DATA_DIR MODEL EPOCHS BATCH``.
"""

import csv
import gzip
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
    "occupation", "relationship", "race", "gender", "capital_gain", "capital_loss",
    "hours_per_week", "native_country", "income_bracket",
]  # fmt: skip
NUMERIC = {"age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"}
VOCABULARIES = {
    "education": ["Bachelors", "HS-grad", "11th", "Masters", "9th", "Some-college",
                  "Assoc-acdm", "Assoc-voc", "7th-8th", "Doctorate", "Prof-school", "5th-6th",
                  "10th", "1st-4th", "Preschool", "12th"],
    "marital_status": ["Married-civ-spouse", "Divorced", "Married-spouse-absent",
                       "Never-married", "Separated", "Married-AF-spouse", "Widowed"],
    "relationship": ["Husband", "Not-in-family", "Wife", "Own-child", "Unmarried",
                     "Other-relative"],
    "workclass": ["Self-emp-not-inc", "Private", "State-gov", "Federal-gov", "Local-gov", "?",
                  "Self-emp-inc", "Without-pay", "Never-worked"],
}  # fmt: skip


def load(path):
    """An Adult file (or its gzipped copy ``path + ".gz"``) as columns and 0/1 labels."""
    opened = open(path, newline="") if os.path.exists(path) else gzip.open(path + ".gz", "rt")
    with opened as f:
        rows = [r for r in csv.reader(f, skipinitialspace=True) if len(r) == 15]
    table = list(zip(*rows, strict=True))
    features = {
        name: np.asarray(values, np.float32) if name in NUMERIC else np.asarray(values, object)
        for name, values in zip(COLUMNS[:-1], table[:-1], strict=True)
    }
    labels = np.asarray([v.rstrip(".") == ">50K" for v in table[-1]], np.int64)
    return features, labels


def columns(train):
    fc = tf.feature_column
    age = fc.numeric_column("age")
    vocab = {k: fc.categorical_column_with_vocabulary_list(k, v) for k, v in VOCABULARIES.items()}
    occupation = fc.categorical_column_with_hash_bucket("occupation", 1000)
    buckets = fc.bucketized_column(age, [18, 25, 30, 35, 40, 45, 50, 55, 60, 65])
    wide = [*vocab.values(), occupation, buckets]
    wide += [
        fc.crossed_column(["education", "occupation"], 1000),
        fc.crossed_column([buckets, "education", "occupation"], 1000),
    ]
    stats = {k: (float(train[k].mean()), float(train[k].std())) for k in NUMERIC}
    numeric = [
        fc.numeric_column(k, normalizer_fn=lambda x, m=stats[k][0], s=stats[k][1]: (x - m) / s)
        for k in ("age", "education_num", "capital_gain", "capital_loss", "hours_per_week")
    ]
    deep = numeric + [fc.indicator_column(vocab[k]) for k in sorted(vocab)]
    deep.append(fc.embedding_column(occupation, dimension=8))
    return wide, deep


def main():
    data_dir, model, epochs, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    train_x, train_y = load(os.path.join(data_dir, "adult.data"))
    test_x, test_y = load(os.path.join(data_dir, "adult.test"))
    wide, deep = columns(train_x)
    hidden = [100, 75, 50, 25]
    dnn_optimizer = tf.keras.optimizers.legacy.Adagrad(learning_rate=0.05)
    model_dir = tempfile.mkdtemp(prefix="tf_census_")
    if model == "linear":
        estimator = tf.estimator.LinearClassifier(wide, model_dir)
    elif model == "dnn":
        estimator = tf.estimator.DNNClassifier(hidden, deep, model_dir, optimizer=dnn_optimizer)
    else:
        estimator = tf.estimator.DNNLinearCombinedClassifier(
            model_dir,
            linear_feature_columns=wide,
            dnn_feature_columns=deep,
            dnn_hidden_units=hidden,
            dnn_optimizer=dnn_optimizer,
        )

    def train_input():
        data = tf.data.Dataset.from_tensor_slices((dict(train_x), train_y))
        return data.shuffle(10000).repeat(epochs).batch(batch).prefetch(tf.data.AUTOTUNE)

    def eval_input():
        data = tf.data.Dataset.from_tensor_slices((dict(test_x), test_y))
        return data.batch(batch).prefetch(tf.data.AUTOTUNE)

    start = time.perf_counter()
    estimator.train(train_input)
    train_time = time.perf_counter() - start
    start = time.perf_counter()
    results = estimator.evaluate(eval_input)
    eval_time = time.perf_counter() - start
    print(
        json.dumps(
            {
                "train_examples_per_s": len(train_y) * epochs / train_time,
                "train_s": train_time,
                "eval_examples_per_s": len(test_y) / eval_time,
                "accuracy": float(results["accuracy"]),
                "auc": float(results["auc"]),
            }
        )
    )


if __name__ == "__main__":
    main()
