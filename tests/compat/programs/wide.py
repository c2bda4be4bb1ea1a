"""TF's census "wide" model (``wide_n_deep_tutorial.py``), written as TF 1.x code.

A ``tf.estimator.LinearClassifier`` over the tutorial's wide columns on UCI Adult:
vocabulary-list, hash-bucket and bucketized columns and two ``tf.feature_column.crossed_column``
crosses, fed by ``tf.data.Dataset.from_tensor_slices`` input functions. It runs under
TensorFlow 2.15 as written; under jax-estimator with the import line changed to
``import estimator.compat.v1 as tf``.

The data: ``adult.data`` / ``adult.test`` from ``--data_dir`` (default
``../shared/data/adult`` relative to the repository root).
"""

import argparse
import csv
import os
import time

import numpy as np
import tensorflow.compat.v1 as tf
from _report import print_result

_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", default=40, type=int)
parser.add_argument("--train_steps", default=1000, type=int)
parser.add_argument("--model_dir", default=None, type=str)
parser.add_argument("--seed", default=1, type=int)
parser.add_argument(
    "--data_dir", default=os.path.join(_ROOT, "..", "shared", "data", "adult"), type=str
)

CSV_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
    "occupation", "relationship", "race", "gender", "capital_gain", "capital_loss",
    "hours_per_week", "native_country", "income_bracket",
]  # fmt: skip
NUMERIC = ["age", "education_num", "capital_gain", "capital_loss", "hours_per_week"]


def load(path):
    """The columns of an Adult file as NumPy arrays, and the labels (1 for >50K)."""
    with open(path) as f:
        rows = [
            [field.strip() for field in row]
            for row in csv.reader(f)
            if len(row) == len(CSV_COLUMNS)
        ]
    columns = {name: np.array([r[i] for r in rows]) for i, name in enumerate(CSV_COLUMNS)}
    labels = np.array([v.rstrip(".") == ">50K" for v in columns.pop("income_bracket")], np.int32)
    for name in NUMERIC:
        columns[name] = columns[name].astype(np.float32)
    return columns, labels


def build_columns():
    age = tf.feature_column.numeric_column("age")
    education = tf.feature_column.categorical_column_with_vocabulary_list(
        "education",
        [
            "Bachelors", "HS-grad", "11th", "Masters", "9th", "Some-college", "Assoc-acdm",
            "Assoc-voc", "7th-8th", "Doctorate", "Prof-school", "5th-6th", "10th", "1st-4th",
            "Preschool", "12th",
        ],
    )  # fmt: skip
    marital_status = tf.feature_column.categorical_column_with_vocabulary_list(
        "marital_status",
        [
            "Married-civ-spouse", "Divorced", "Married-spouse-absent", "Never-married",
            "Separated", "Married-AF-spouse", "Widowed",
        ],
    )  # fmt: skip
    relationship = tf.feature_column.categorical_column_with_vocabulary_list(
        "relationship",
        ["Husband", "Not-in-family", "Wife", "Own-child", "Unmarried", "Other-relative"],
    )
    workclass = tf.feature_column.categorical_column_with_vocabulary_list(
        "workclass",
        [
            "Self-emp-not-inc", "Private", "State-gov", "Federal-gov", "Local-gov", "?",
            "Self-emp-inc", "Without-pay", "Never-worked",
        ],
    )  # fmt: skip
    occupation = tf.feature_column.categorical_column_with_hash_bucket(
        "occupation", hash_bucket_size=1000
    )
    age_buckets = tf.feature_column.bucketized_column(
        age, boundaries=[18, 25, 30, 35, 40, 45, 50, 55, 60, 65]
    )
    base_columns = [education, marital_status, relationship, workclass, occupation, age_buckets]
    crossed_columns = [
        tf.feature_column.crossed_column(["education", "occupation"], hash_bucket_size=1000),
        tf.feature_column.crossed_column(
            [age_buckets, "education", "occupation"], hash_bucket_size=1000
        ),
    ]
    return base_columns + crossed_columns


def input_fn(features, labels, batch_size, training):
    dataset = tf.data.Dataset.from_tensor_slices((dict(features), labels))
    if training:
        dataset = dataset.shuffle(buffer_size=10000).repeat()
    return dataset.batch(batch_size)


def main(argv):
    args = parser.parse_args(argv[1:])
    start = time.time()
    train_x, train_y = load(os.path.join(args.data_dir, "adult.data"))
    test_x, test_y = load(os.path.join(args.data_dir, "adult.test"))

    model = tf.estimator.LinearClassifier(
        model_dir=args.model_dir,
        feature_columns=build_columns(),
        config=tf.estimator.RunConfig(tf_random_seed=args.seed),
    )
    model.train(
        input_fn=lambda: input_fn(train_x, train_y, args.batch_size, True),
        steps=args.train_steps,
    )
    trained = time.time()
    results = model.evaluate(input_fn=lambda: input_fn(test_x, test_y, 1000, False))
    for key in sorted(results):
        print(f"{key}: {results[key]}")
    print_result(start, results, ("accuracy", "auc", "loss"), train_seconds=trained - start)


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run(main)
