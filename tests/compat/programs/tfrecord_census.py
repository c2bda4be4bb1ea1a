"""A TF 1.x program that writes its data as TFRecord files of ``tf.Example`` and trains a
canned estimator from them, written as TF 1.x code.

It reads UCI Adult's CSV files, writes each row as a ``tf.train.Example`` into GZIP
TFRecord shards with ``tf.io.TFRecordWriter``, and trains a
``tf.estimator.LinearClassifier`` on the census wide columns with an ``input_fn`` in TF's
recommended shape: ``tf.data.Dataset.list_files`` → ``interleave`` of
``tf.data.TFRecordDataset`` → ``shuffle`` → ``repeat`` → ``batch`` →
``tf.io.parse_example`` with ``tf.feature_column.make_parse_example_spec`` → ``prefetch``.
It runs under TensorFlow 2.15 as written; under jax-estimator with the import line
changed to ``import estimator.compat.v1 as tf``.
"""

import argparse
import csv
import os
import tempfile
import time

import tensorflow.compat.v1 as tf
from _report import print_result

_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", default=64, type=int)
parser.add_argument("--train_steps", default=1000, type=int)
parser.add_argument("--model_dir", default=None, type=str)
parser.add_argument("--seed", default=1, type=int)
parser.add_argument("--shards", default=4, type=int)
parser.add_argument("--max_rows", default=None, type=int)
parser.add_argument(
    "--data_dir", default=os.path.join(_ROOT, "..", "shared", "data", "adult"), type=str
)

CSV_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
    "occupation", "relationship", "race", "gender", "capital_gain", "capital_loss",
    "hours_per_week", "native_country", "income_bracket",
]  # fmt: skip
NUMERIC = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"]


def to_example(row):
    """One CSV row as a tf.train.Example: numbers as float lists, strings as bytes lists,
    the label as an int64 list."""
    feature = {}
    for name, value in zip(CSV_COLUMNS, row, strict=True):
        if name == "income_bracket":
            label = 1 if value.rstrip(".") == ">50K" else 0
            feature["label"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
        elif name in NUMERIC:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
        else:
            feature[name] = tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[value.encode("utf-8")])
            )
    return tf.train.Example(features=tf.train.Features(feature=feature))


def write_tfrecords(csv_path, prefix, shards, max_rows=None):
    """Writes the rows of ``csv_path`` (the first ``max_rows``) round-robin into ``shards``
    GZIP TFRecord files."""
    with open(csv_path) as f:
        rows = [[v.strip() for v in r] for r in csv.reader(f) if len(r) == len(CSV_COLUMNS)]
    rows = rows[:max_rows]
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    writers = [
        tf.io.TFRecordWriter(f"{prefix}-{i:05d}-of-{shards:05d}.tfrecord.gz", options)
        for i in range(shards)
    ]
    for i, row in enumerate(rows):
        writers[i % shards].write(to_example(row).SerializeToString())
    for writer in writers:
        writer.close()
    return len(rows)


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
    occupation = tf.feature_column.categorical_column_with_hash_bucket(
        "occupation", hash_bucket_size=1000
    )
    age_buckets = tf.feature_column.bucketized_column(
        age, boundaries=[18, 25, 30, 35, 40, 45, 50, 55, 60, 65]
    )
    return [
        education,
        marital_status,
        relationship,
        occupation,
        age_buckets,
        tf.feature_column.crossed_column(["education", "occupation"], hash_bucket_size=1000),
    ]


def input_fn(pattern, columns, batch_size, training):
    spec = tf.feature_column.make_parse_example_spec(columns)
    spec["label"] = tf.io.FixedLenFeature([1], tf.int64)

    def parse(serialized):
        features = tf.io.parse_example(serialized, spec)
        labels = features.pop("label")
        return features, labels

    files = tf.data.Dataset.list_files(pattern, shuffle=training)
    dataset = files.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"), cycle_length=2
    )
    if training:
        dataset = dataset.shuffle(buffer_size=10000).repeat()
    dataset = dataset.batch(batch_size).map(parse)
    return dataset.prefetch(1)


def main(argv):
    args = parser.parse_args(argv[1:])
    start = time.time()
    files = tempfile.mkdtemp(prefix="tfrecord_census_")
    n_train = write_tfrecords(
        os.path.join(args.data_dir, "adult.data"),
        os.path.join(files, "train"),
        args.shards,
        args.max_rows,
    )
    write_tfrecords(
        os.path.join(args.data_dir, "adult.test"), os.path.join(files, "test"), 1, args.max_rows
    )
    written = time.time()
    columns = build_columns()
    model = tf.estimator.LinearClassifier(
        model_dir=args.model_dir,
        feature_columns=columns,
        config=tf.estimator.RunConfig(tf_random_seed=args.seed),
    )
    train_files = os.path.join(files, "train-*.tfrecord.gz")
    model.train(
        input_fn=lambda: input_fn(train_files, columns, args.batch_size, True),
        steps=args.train_steps,
    )
    trained = time.time()
    test_files = os.path.join(files, "test-*.tfrecord.gz")
    results = model.evaluate(input_fn=lambda: input_fn(test_files, columns, 1000, False))
    for key in sorted(results):
        print(f"{key}: {results[key]}")
    print_result(
        start,
        results,
        ("accuracy", "auc"),
        train_examples_written=n_train,
        write_seconds=written - start,
        train_seconds=trained - written,
    )


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run(main)
