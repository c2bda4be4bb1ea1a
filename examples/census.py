"""Census income (UCI Adult) with canned estimators: TF's wide & deep tutorial.

Trains ``canned.LinearClassifier`` on the wide columns of TF's census tutorial
(tensorflow/models ``official/r1/wide_deep/census_dataset.py``: vocabulary columns,
a hashed occupation, bucketized age and two crosses) with TF 2.15's defaults (FTRL at
learning rate 0.2), evaluates on ``adult.test``, exports the model for serving, reloads the
export and scores raw rows of ``adult.test`` from their strings, and prints the metrics.
``--model dnn`` trains the tutorial's ``DNNClassifier`` on its deep columns (numeric,
indicator and embedding columns; hidden units [100, 75, 50, 25]), ``--model wide_deep``
its ``DNNLinearCombinedClassifier`` (wide columns in the linear part, deep columns in the
DNN), ``--model all`` the three side by side.

Usage::

    python examples/census.py [--data-dir DIR] [--model-dir runs/census] [--epochs 5]
                              [--batch-size 256] [--model linear|dnn|wide_deep|all]
                              [--input memory|tfrecord]

``--input tfrecord`` first writes both files as GZIP TFRecords of ``tf.Example`` (one per
row, the label under ``income_bracket``, as TFX and Beam write them) and trains and
evaluates from those files with ``est.inputs.tfrecord_input_fn``: the columns' parsing spec
(``classifier_parse_example_spec``) parses them, and the parsed features go through the
same columns.

The data is, in order: ``--data-dir``, ``$ADULT_DATA_DIR``, or the copy in the repository
(``data/adult``: UCI's files, gzipped; its README gives the source and licence). A
directory may hold ``adult.data``/``adult.test`` or their ``.gz``.

The results stay in ``--model-dir`` (default ``runs/census``, under the current directory):
the checkpoints, the TensorBoard events (``eval/`` for the evaluation), and the export in
``export/<version>``, which ``python -m estimator.serve --model_name census
--model_base_path runs/census/export`` serves. A run replaces the default directory's
previous contents; a ``--model-dir`` of your own that holds a checkpoint resumes from it, as
TF's Estimator does. With ``--model all`` each model has its own subdirectory.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import logging
import os
import shutil
import sys
import tempfile
import time

import numpy as np

import canned
import estimator as est
from canned import feature_column as fc

# The repository's copy of UCI Adult (data/adult/README.md).
DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "data", "adult")
MODEL_DIR = os.path.join("runs", "census")
COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "gender",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income_bracket",
]
NUMERIC = {"age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"}
LABELS = ["<=50K", ">50K"]


def data_dir(argument: str | None = None) -> str:
    """The directory holding adult.data and adult.test: ``argument``, else
    ``$ADULT_DATA_DIR``, else the repository's ``data/adult``."""
    return argument or os.environ.get("ADULT_DATA_DIR") or os.path.normpath(DATA_DIR)


def load(path: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Features and labels of an Adult file, handling its quirks.

    Fields after the first start with a space; adult.test starts with a
    ``|1x3 Cross validator`` line and its labels end with a period; both files end with
    an empty line; missing values are ``?`` (kept as a category, as TF's tutorial does).
    ``path`` may name the file or, when it is not there, its gzipped copy ``path + ".gz"``.

    Returns:
      ``({column: array}, labels)``: numeric columns as float32 (``int64`` for counts),
      the others as ``object`` arrays of ``str``; labels as ``str`` (``<=50K``/``>50K``).
    """
    rows = []
    opened = open(path, newline="") if os.path.exists(path) else gzip.open(path + ".gz", "rt")
    with opened as f:
        for row in csv.reader(f, skipinitialspace=True):
            if len(row) != len(COLUMNS):  # the test file's header line, empty lines
                continue
            rows.append(row)
    table = list(zip(*rows, strict=True))
    features = {}
    for name, values in zip(COLUMNS[:-1], table[:-1], strict=True):
        if name in NUMERIC:
            features[name] = np.asarray(values, dtype=np.float32)
        else:
            features[name] = np.asarray(values, dtype=object)
    labels = np.asarray([v.rstrip(".") for v in table[-1]], dtype=object)
    return features, labels


MODELS = {
    "linear": "LinearClassifier on the wide columns",
    "dnn": "DNNClassifier on the deep columns",
    "wide_deep": "DNNLinearCombinedClassifier: wide + deep",
}
HIDDEN_UNITS = [100, 75, 50, 25]  # the tutorial's


def wide_columns() -> list:
    """The wide columns of TF's census tutorial (``build_model_columns``)."""
    age = fc.numeric_column("age")
    education = fc.categorical_column_with_vocabulary_list(
        "education",
        [
            "Bachelors",
            "HS-grad",
            "11th",
            "Masters",
            "9th",
            "Some-college",
            "Assoc-acdm",
            "Assoc-voc",
            "7th-8th",
            "Doctorate",
            "Prof-school",
            "5th-6th",
            "10th",
            "1st-4th",
            "Preschool",
            "12th",
        ],
    )
    marital_status = fc.categorical_column_with_vocabulary_list(
        "marital_status",
        [
            "Married-civ-spouse",
            "Divorced",
            "Married-spouse-absent",
            "Never-married",
            "Separated",
            "Married-AF-spouse",
            "Widowed",
        ],
    )
    relationship = fc.categorical_column_with_vocabulary_list(
        "relationship",
        ["Husband", "Not-in-family", "Wife", "Own-child", "Unmarried", "Other-relative"],
    )
    workclass = fc.categorical_column_with_vocabulary_list(
        "workclass",
        [
            "Self-emp-not-inc",
            "Private",
            "State-gov",
            "Federal-gov",
            "Local-gov",
            "?",
            "Self-emp-inc",
            "Without-pay",
            "Never-worked",
        ],
    )
    occupation = fc.categorical_column_with_hash_bucket("occupation", hash_bucket_size=1000)
    age_buckets = fc.bucketized_column(age, boundaries=[18, 25, 30, 35, 40, 45, 50, 55, 60, 65])
    base = [education, marital_status, relationship, workclass, occupation, age_buckets]
    crossed = [
        fc.crossed_column(["education", "occupation"], hash_bucket_size=1000),
        fc.crossed_column([age_buckets, "education", "occupation"], hash_bucket_size=1000),
    ]
    return base + crossed


class Progress(est.SessionRunHook):
    """Prints the training progress every ``every`` steps (loss and examples/s)."""

    def __init__(self, total_steps: int, batch_size: int, every: int = 100) -> None:
        self.total, self.batch, self.every = total_steps, batch_size, every
        self.start = time.time()

    def before_run(self, run_context):
        if run_context.session.global_step % self.every == 0:
            return est.SessionRunArgs("loss")
        return None

    def after_run(self, run_context, run_values):
        if run_values.results is not None:
            step = run_context.session.global_step
            rate = step * self.batch / max(time.time() - self.start, 1e-9)
            print(
                f"  step {step:5d}/{self.total}  loss {float(run_values.results):.4f}  "
                f"{rate:,.0f} examples/s",
                flush=True,
            )


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", help="default: $ADULT_DATA_DIR, else data/adult")
    parser.add_argument(
        "--model-dir",
        help=f"checkpoints, events and export (default: {MODEL_DIR}, replaced at each run)",
    )
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--model",
        choices=[*MODELS, "all"],
        default="linear",
        help="linear (default), dnn, wide_deep, or all three side by side",
    )
    parser.add_argument(
        "--input",
        choices=["memory", "tfrecord"],
        default="memory",
        help="memory (default): numpy_input_fn over the loaded rows; tfrecord: write GZIP "
        "TFRecords of tf.Example first and train from the files",
    )
    args = parser.parse_args(argv)
    logging.getLogger("estimator").setLevel(logging.WARNING)

    directory = data_dir(args.data_dir)
    train_x, train_y = load(os.path.join(directory, "adult.data"))
    test_x, test_y = load(os.path.join(directory, "adult.test"))
    print(
        f"UCI Adult: {len(train_y)} training and {len(test_y)} test examples "
        f"({np.mean(train_y == '>50K'):.2%} / {np.mean(test_y == '>50K'):.2%} positive)"
    )

    if args.input == "tfrecord":
        files = tempfile.mkdtemp(prefix="census_tfrecord_")
        args.train_files, args.test_files = write_tfrecords(files, train_x, train_y, test_x, test_y)
        print(f"Wrote {args.train_files} and {args.test_files}")

    kinds = list(MODELS) if args.model == "all" else [args.model]
    root = args.model_dir or MODEL_DIR
    if args.model_dir is None and os.path.isdir(root):
        shutil.rmtree(root)  # the default directory holds the previous run's results only
    all_results = {}
    for kind in kinds:
        model_dir = os.path.join(root, kind) if len(kinds) > 1 else root
        print(f"\n== {kind} ({MODELS[kind]}) ==  model_dir: {model_dir}")
        all_results[kind] = _train_evaluate_export(
            kind, args, model_dir, train_x, train_y, test_x, test_y
        )
    if args.input == "tfrecord":
        shutil.rmtree(files, ignore_errors=True)
    if len(kinds) > 1:
        print("\nOn adult.test:")
        keys = ["accuracy", "auc", "auc_precision_recall", "average_loss"]
        print(f"  {'model':10s} " + " ".join(f"{k:>20s}" for k in keys))
        for kind, results in all_results.items():
            print(f"  {kind:10s} " + " ".join(f"{results[k]:20.4f}" for k in keys))
    export_base = os.path.join(root, kinds[0] if len(kinds) > 1 else "", "export")
    print(
        f"\nResults in {root}: checkpoints, TensorBoard events (tensorboard --logdir {root}) "
        f"and the export. Serve it with\n  python -m estimator.serve --model_name census "
        f"--model_base_path {os.path.normpath(export_base)} --rest_api_port 8501"
    )
    return all_results[kinds[-1]] if len(kinds) == 1 else all_results


def make_model(kind: str, model_dir: str, seed: int, stats: dict):
    config = est.RunConfig(tf_random_seed=seed)
    # The tutorial's DNN learning rate (TF 1's default, 0.05): TF 2.15's V2 default (0.001)
    # barely moves in 5 epochs.
    dnn_optimizer = canned.get_optimizer_instance("Adagrad", learning_rate=0.05)
    if kind == "linear":
        return canned.LinearClassifier(
            feature_columns=wide_columns(),
            model_dir=model_dir,
            label_vocabulary=LABELS,
            config=config,
        )
    if kind == "dnn":
        return canned.DNNClassifier(
            hidden_units=HIDDEN_UNITS,
            feature_columns=deep_columns(stats),
            model_dir=model_dir,
            label_vocabulary=LABELS,
            optimizer=dnn_optimizer,
            config=config,
        )
    return canned.DNNLinearCombinedClassifier(
        model_dir=model_dir,
        linear_feature_columns=wide_columns(),
        dnn_feature_columns=deep_columns(stats),
        dnn_hidden_units=HIDDEN_UNITS,
        dnn_optimizer=dnn_optimizer,
        label_vocabulary=LABELS,
        config=config,
    )


def _train_evaluate_export(kind, args, model_dir, train_x, train_y, test_x, test_y) -> dict:
    stats = numeric_stats(train_x)
    model = make_model(kind, model_dir, args.seed, stats)
    columns = {
        "linear": wide_columns(),
        "dnn": deep_columns(stats),
        "wide_deep": wide_columns() + deep_columns(stats),
    }[kind]
    steps = -(-len(train_y) * args.epochs // args.batch_size)
    print(f"Training {args.epochs} epochs, batch {args.batch_size} (~{steps} steps) ...")
    start = time.time()
    if getattr(args, "input", "memory") == "tfrecord":
        train_input, eval_input = tfrecord_inputs(columns, args)
    else:
        train_input = est.inputs.numpy_input_fn(
            train_x, train_y, batch_size=args.batch_size, num_epochs=args.epochs, shuffle=True
        )
        eval_input = est.inputs.numpy_input_fn(test_x, test_y, batch_size=1024, shuffle=False)
    model.train(train_input, hooks=[Progress(steps, args.batch_size)])
    print(f"Trained in {time.time() - start:.1f} s")

    results = model.evaluate(eval_input)
    print("\nEvaluation on adult.test")
    print(f"  {'metric':22s} value")
    for key in sorted(results):
        print(
            f"  {key:22s} {results[key]:.4f}"
            if isinstance(results[key], float)
            else f"  {key:22s} {results[key]}"
        )

    export_base = os.path.join(model_dir, "export")
    receiver = est.export.build_parsing_serving_input_receiver_fn(
        fc.make_parse_example_spec(columns)
    )
    export_dir = model.export_saved_model(export_base, receiver).decode()
    print(f"\nExported to {export_dir}")
    served = est.export.load(export_dir)
    signature = served.signatures["serving_default"]
    rows = slice(0, 5)
    raw = {name: test_x[name][rows].tolist() for name in signature.inputs}
    scores = signature(**raw)["scores"][:, 1]
    predicted = np.array(
        [
            p["probabilities"][1]
            for p in model.predict(
                est.inputs.numpy_input_fn({k: v[rows] for k, v in test_x.items()}, shuffle=False)
            )
        ]
    )
    print("Scoring raw adult.test rows with the reloaded export (no model code):")
    for i in range(len(scores)):
        print(
            f"  {raw['education'][i]:>12s} {raw['occupation'][i]:>18s} age "
            f"{raw['age'][i]:4.0f}: P(>50K) = {scores[i]:.4f}  (predict(): {predicted[i]:.4f},"
            f" label {test_y[rows][i]})"
        )
    if not np.allclose(scores, predicted, atol=1e-6):
        raise RuntimeError("The export disagrees with predict().")
    return results


LABEL_KEY = "income_bracket"


def write_tfrecords(directory, train_x, train_y, test_x, test_y) -> tuple[str, str]:
    """Writes the training and test rows as GZIP TFRecords of ``tf.Example`` (features and
    the label under ``income_bracket``); returns the two paths."""
    paths = []
    for name, features, labels in (("train", train_x, train_y), ("test", test_x, test_y)):
        path = os.path.join(directory, f"adult-{name}.tfrecord.gz")
        est.io.write_examples(path, {**features, LABEL_KEY: labels}, compression_type="GZIP")
        paths.append(path)
    return paths[0], paths[1]


def tfrecord_inputs(columns: list, args) -> tuple:
    """Training and evaluation input functions reading the TFRecord files."""
    spec = canned.classifier_parse_example_spec(columns, LABEL_KEY, label_dtype=str)
    train = est.inputs.tfrecord_input_fn(
        args.train_files,
        spec,
        label_key=LABEL_KEY,
        batch_size=args.batch_size,
        num_epochs=args.epochs,
        shuffle=True,
        compression_type="GZIP",
    )
    evaluate = est.inputs.tfrecord_input_fn(
        args.test_files, spec, LABEL_KEY, batch_size=1024, shuffle=False, compression_type="GZIP"
    )
    return train, evaluate


def deep_columns(stats: dict[str, tuple[float, float]]) -> list:
    """The deep columns of TF's census tutorial (``build_model_columns``): the numeric
    columns, indicator columns of the vocabularies and an 8-dimensional embedding of the
    hashed occupation. Unlike the tutorial, the numeric columns are standardized with the
    training set's ``(mean, std)`` from ``stats`` (``capital_gain`` reaches 99999: raw, it
    swamps the first layer; TF 2.15 trains the raw columns to 0.76-0.80 accuracy)."""
    by_name = {c.name: c for c in wide_columns()}
    numeric = [
        fc.numeric_column(k, normalizer_fn=lambda x, m=stats[k][0], s=stats[k][1]: (x - m) / s)
        for k in ("age", "education_num", "capital_gain", "capital_loss", "hours_per_week")
    ]
    return numeric + [
        fc.indicator_column(by_name["workclass"]),
        fc.indicator_column(by_name["education"]),
        fc.indicator_column(by_name["marital_status"]),
        fc.indicator_column(by_name["relationship"]),
        fc.embedding_column(by_name["occupation"], dimension=8),
    ]


def numeric_stats(features: dict) -> dict[str, tuple[float, float]]:
    """``{key: (mean, std)}`` of the numeric training features."""
    return {k: (float(np.mean(v)), float(np.std(v))) for k, v in features.items() if k in NUMERIC}


if __name__ == "__main__":
    results = main()
    if "accuracy" not in results:  # --model all: every model must pass
        results = {k: min(r[k] for r in results.values()) for k in ("accuracy", "auc")}
    sys.exit(0 if results["accuracy"] >= 0.82 and results["auc"] >= 0.87 else 1)
