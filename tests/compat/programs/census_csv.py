"""The TF 1.x census tutorial read from CSV files (``official/wide_deep/census_main.py``
style), written as TF 1.x code.

* flags with ``tf.flags`` (absl), ``tf.app.run``;
* ``tf.data.TextLineDataset`` + ``tf.decode_csv`` in a ``map``, the label a string compared
  to a literal (``tf.equal(income, '>50K')``), the ``input_fn`` ending in
  ``dataset.make_one_shot_iterator().get_next()``;
* a ``tf.estimator.LinearClassifier`` with its default logging hooks,
  ``RunConfig(session_config=tf.ConfigProto(...))``;
* an export with a CSV serving receiver (``tf.decode_csv`` on a ``tf.placeholder``).

It runs under TensorFlow 2.15 as written; under jax-estimator with the import line changed
to ``import estimator.compat.v1 as tf``. The data: ``adult.data`` / ``adult.test`` in
``--data_dir`` (default ``../shared/data/adult`` relative to the repository root).
"""

import os
import time

import tensorflow.compat.v1 as tf
from _report import print_result

_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)

flags = tf.flags
flags.DEFINE_string("data_dir", os.path.join(_ROOT, "..", "shared", "data", "adult"),
                    "Directory of adult.data and adult.test.")  # fmt: skip
flags.DEFINE_string("model_dir", None, "Where to keep checkpoints.")
flags.DEFINE_integer("train_steps", 300, "Training steps.")
flags.DEFINE_integer("batch_size", 64, "Batch size.")
flags.DEFINE_integer("seed", 1, "tf_random_seed of the RunConfig.")
FLAGS = flags.FLAGS

_CSV_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
    "occupation", "relationship", "race", "gender", "capital_gain", "capital_loss",
    "hours_per_week", "native_country", "income_bracket",
]  # fmt: skip
_CSV_COLUMN_DEFAULTS = [
    [0], [""], [0], [""], [0], [""], [""], [""], [""], [""], [0], [0], [0], [""], [""],
]  # fmt: skip


def build_model_columns():
    """The tutorial's wide columns."""
    age = tf.feature_column.numeric_column("age")
    education_num = tf.feature_column.numeric_column("education_num")
    capital_gain = tf.feature_column.numeric_column("capital_gain")
    hours_per_week = tf.feature_column.numeric_column("hours_per_week")
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
    occupation = tf.feature_column.categorical_column_with_hash_bucket(
        "occupation", hash_bucket_size=100
    )
    age_buckets = tf.feature_column.bucketized_column(
        age, boundaries=[18, 25, 30, 35, 40, 45, 50, 55, 60, 65]
    )
    return [
        education_num, capital_gain, hours_per_week, education, marital_status, occupation,
        age_buckets,
    ]  # fmt: skip


def clean_file(source, target):
    """The tutorial's ``_download_and_clean_file``: no spaces after commas, no header or
    empty lines, no period after adult.test's labels."""
    with tf.gfile.Open(source, "r") as raw, tf.gfile.Open(target, "w") as cleaned:
        for line in raw:
            line = line.strip().replace(", ", ",")
            if not line or "," not in line:
                continue
            if line[-1] == ".":
                line = line[:-1]
            cleaned.write(line + "\n")


def parse_csv(value):
    """One batch of CSV lines -> (features, labels)."""
    columns = tf.decode_csv(value, record_defaults=_CSV_COLUMN_DEFAULTS)
    features = dict(zip(_CSV_COLUMNS, columns, strict=True))
    labels = features.pop("income_bracket")
    return features, tf.cast(tf.equal(labels, ">50K"), tf.int32)


def input_fn(data_file, num_epochs, shuffle, batch_size):
    """Reads the CSV file, as the tutorial does, and ends in a one-shot iterator."""
    dataset = tf.data.TextLineDataset(data_file)
    if shuffle:
        dataset = dataset.shuffle(buffer_size=10000)
    dataset = dataset.repeat(num_epochs)
    dataset = dataset.batch(batch_size)
    dataset = dataset.map(parse_csv)
    features, labels = dataset.make_one_shot_iterator().get_next()
    return features, labels


def csv_serving_input_fn():
    """A serving input receiver taking CSV lines without the label."""
    csv_row = tf.placeholder(shape=[None], dtype=tf.string)
    columns = tf.decode_csv(csv_row, _CSV_COLUMN_DEFAULTS)
    features = dict(zip(_CSV_COLUMNS, columns, strict=True))
    features.pop("income_bracket")
    return tf.estimator.export.ServingInputReceiver(features, {"csv_row": csv_row})


def main(_):
    start = time.time()
    session_config = tf.ConfigProto(allow_soft_placement=True)
    session_config.gpu_options.allow_growth = True
    model = tf.estimator.LinearClassifier(
        model_dir=FLAGS.model_dir,
        feature_columns=build_model_columns(),
        config=tf.estimator.RunConfig(tf_random_seed=FLAGS.seed, session_config=session_config),
    )
    tf.gfile.MakeDirs(FLAGS.model_dir)
    train_file = os.path.join(FLAGS.model_dir, "adult.data.csv")
    test_file = os.path.join(FLAGS.model_dir, "adult.test.csv")
    clean_file(os.path.join(FLAGS.data_dir, "adult.data"), train_file)
    clean_file(os.path.join(FLAGS.data_dir, "adult.test"), test_file)
    model.train(
        input_fn=lambda: input_fn(train_file, None, True, FLAGS.batch_size),
        steps=FLAGS.train_steps,
    )
    results = model.evaluate(input_fn=lambda: input_fn(test_file, 1, False, 1000))
    for key in sorted(results):
        tf.logging.info("%s: %s", key, results[key])
    export_dir = model.export_saved_model(
        os.path.join(FLAGS.model_dir, "export"), csv_serving_input_fn
    )
    print_result(
        start,
        results,
        ("accuracy", "auc", "label/mean"),
        export_dir=export_dir.decode() if isinstance(export_dir, bytes) else export_dir,
    )


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run(main)
