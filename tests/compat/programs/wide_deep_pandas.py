"""The census wide & deep model fed from pandas (the TF 1.x "TensorFlow Wide & Deep Learning
Tutorial" with ``tf.estimator.inputs.pandas_input_fn``), written as TF 1.x code.

* ``pandas.read_csv`` of the Adult files, ``tf.estimator.inputs.pandas_input_fn``;
* ``tf.estimator.DNNLinearCombinedClassifier`` with TF 1's defaults: crossed and
  categorical columns on the linear side, embeddings and numeric columns on the deep side;
* a ``tf.train.LoggingTensorHook`` on the tensors TF's canned head names
  (``head/truediv``, the average loss; ``head/weighted_loss/Sum``, the loss).

It runs under TensorFlow 2.15 as written; under jax-estimator with the import line changed
to ``import estimator.compat.v1 as tf``. The data: ``adult.data`` / ``adult.test`` in
``--data_dir`` (default ``../shared/data/adult`` relative to the repository root).
"""

import argparse
import os
import time

import pandas as pd
import tensorflow.compat.v1 as tf
from _report import print_result

_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)

parser = argparse.ArgumentParser()
parser.add_argument("--data_dir", default=os.path.join(_ROOT, "..", "shared", "data", "adult"))
parser.add_argument("--model_dir", default=None)
parser.add_argument("--train_steps", default=2000, type=int)
parser.add_argument("--batch_size", default=64, type=int)
parser.add_argument("--seed", default=1, type=int)

COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
    "occupation", "relationship", "race", "gender", "capital_gain", "capital_loss",
    "hours_per_week", "native_country", "income_bracket",
]  # fmt: skip
LABEL_COLUMN = "label"
CATEGORICAL_COLUMNS = ["workclass", "education", "marital_status", "occupation", "relationship"]
CONTINUOUS_COLUMNS = ["age", "education_num", "capital_gain", "capital_loss", "hours_per_week"]


def load(path):
    """A DataFrame of the file, with the label column (1 for >50K)."""
    df = pd.read_csv(
        path, names=COLUMNS, skipinitialspace=True, skiprows=1 * path.endswith(".test")
    )
    df = df.dropna(how="any", axis=0)
    df[LABEL_COLUMN] = df["income_bracket"].apply(lambda x: ">50K" in x).astype(int)
    for column in CONTINUOUS_COLUMNS:
        df[column] = df[column].astype("float32")
    for column in CATEGORICAL_COLUMNS + ["gender"]:
        # pandas >= 3 reads text as its own string dtype, which TF's feeding code rejects.
        df[column] = df[column].astype(object)
    return df


def build_estimator(model_dir, seed):
    """The tutorial's wide and deep columns."""
    gender = tf.feature_column.categorical_column_with_vocabulary_list("gender", ["Female", "Male"])
    education = tf.feature_column.categorical_column_with_hash_bucket(
        "education", hash_bucket_size=100
    )
    relationship = tf.feature_column.categorical_column_with_hash_bucket(
        "relationship", hash_bucket_size=50
    )
    workclass = tf.feature_column.categorical_column_with_hash_bucket(
        "workclass", hash_bucket_size=50
    )
    occupation = tf.feature_column.categorical_column_with_hash_bucket(
        "occupation", hash_bucket_size=100
    )
    age = tf.feature_column.numeric_column("age")
    age_buckets = tf.feature_column.bucketized_column(
        age, boundaries=[18, 25, 30, 35, 40, 45, 50, 55, 60, 65]
    )
    wide_columns = [
        gender, education, relationship, workclass, occupation, age_buckets,
        tf.feature_column.crossed_column(["education", "occupation"], hash_bucket_size=1000),
    ]  # fmt: skip
    deep_columns = [
        tf.feature_column.embedding_column(workclass, dimension=8),
        tf.feature_column.embedding_column(education, dimension=8),
        tf.feature_column.embedding_column(occupation, dimension=8),
        tf.feature_column.indicator_column(relationship),
        age,
        tf.feature_column.numeric_column("education_num"),
        tf.feature_column.numeric_column("hours_per_week"),
    ]
    return tf.estimator.DNNLinearCombinedClassifier(
        model_dir=model_dir,
        linear_feature_columns=wide_columns,
        dnn_feature_columns=deep_columns,
        dnn_hidden_units=[32, 16],
        config=tf.estimator.RunConfig(tf_random_seed=seed),
    )


def input_fn(df, num_epochs, shuffle, batch_size):
    """A pandas input function over the features, the label apart."""
    features = df[CATEGORICAL_COLUMNS + CONTINUOUS_COLUMNS + ["gender"]]
    return tf.estimator.inputs.pandas_input_fn(
        x=features,
        y=df[LABEL_COLUMN],
        batch_size=batch_size,
        num_epochs=num_epochs,
        shuffle=shuffle,
        num_threads=1,
    )


def main(argv):
    args = parser.parse_args(argv[1:])
    start = time.time()
    train = load(os.path.join(args.data_dir, "adult.data"))
    test = load(os.path.join(args.data_dir, "adult.test"))
    model = build_estimator(args.model_dir, args.seed)
    logged = []

    def formatter(values):
        logged.append({k: float(v) for k, v in values.items()})
        return ", ".join(f"{k} = {v}" for k, v in sorted(values.items()))

    hook = tf.train.LoggingTensorHook(
        {"average_loss": "head/truediv", "loss": "head/weighted_loss/Sum"},
        every_n_iter=100,
        formatter=formatter,
    )
    model.train(
        input_fn=input_fn(train, None, True, args.batch_size),
        steps=args.train_steps,
        hooks=[hook],
    )
    results = model.evaluate(input_fn=input_fn(test, 1, False, 1000))
    print_result(start, results, ("accuracy", "auc"), logged=logged)


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run(main)
