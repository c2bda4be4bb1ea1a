"""Models and the TensorFlow side of ``test_tf_saved_model.py``.

Imported by the test (no TensorFlow) to train and export the two models; run as
``python tests/jobs/tf_saved_model_job.py ARGS_JSON`` (a process with TensorFlow and this
package) to write their TF SavedModels: the census model's export through the command line
``python -m estimator.export to_tf_saved_model``, the other model through
``Estimator.export_saved_model(..., format="tf_saved_model")``, a custom model_fn's
raw-receiver export through ``estimator.export.to_tf_saved_model``.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

import numpy as np

import canned
import estimator as est
from canned import feature_column as fc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COUNTRIES = ["United-States", "Mexico", "Philippines", "Germany", "Canada", "India"]


def census_module():
    """``examples/census.py`` (its data loader, wide columns and labels)."""
    if os.path.join(ROOT, "examples") not in sys.path:
        sys.path.insert(0, os.path.join(ROOT, "examples"))
    return importlib.import_module("census")


def every_op_columns(vocabulary_file: str) -> list:
    """One column per kind of host op (the census columns have the others): OOV buckets,
    a vocabulary file, integer vocabulary, identity with default, hashed integers, a numeric
    default, a device-side normalizer, a cross of a raw key and two categorical columns, weights."""
    age = fc.numeric_column("age")
    hours = fc.numeric_column("hours_per_week", normalizer_fn=lambda x: (x - 40.0) / 12.0)
    gain = fc.numeric_column("capital_gain", default_value=0.0)
    age_buckets = fc.bucketized_column(age, [25.0, 35.0, 45.0, 55.0])
    race = fc.categorical_column_with_vocabulary_list(
        "race", ["White", "Black", "Asian-Pac-Islander"], num_oov_buckets=2
    )
    country = fc.categorical_column_with_vocabulary_file(
        "native_country", vocabulary_file, default_value=0
    )
    years = fc.categorical_column_with_vocabulary_list(
        "education_years", [9, 10, 13, 14], dtype=np.int64, num_oov_buckets=3
    )
    level = fc.categorical_column_with_identity("education_level", 12, default_value=11)
    hours_hashed = fc.categorical_column_with_hash_bucket("hours", 20, dtype=np.int64)
    gender = fc.weighted_categorical_column(
        fc.categorical_column_with_vocabulary_list("gender", ["Male", "Female"]), "gender_weight"
    )
    cross = fc.crossed_column([age_buckets, level, "workclass"], 50)
    return [hours, gain, age_buckets, race, country, years, level, hours_hashed, gender, cross]


def every_op_features(x: dict) -> dict:
    """The every-op model's raw features from ``census.load`` columns."""
    return {
        "age": x["age"],
        "hours_per_week": x["hours_per_week"],
        "capital_gain": x["capital_gain"],
        "race": x["race"],
        "native_country": x["native_country"],
        "education_years": x["education_num"].astype(np.int64),
        "education_level": x["education_num"].astype(np.int64),
        "hours": x["hours_per_week"].astype(np.int64),
        "gender": x["gender"],
        "gender_weight": (x["fnlwgt"] / 1e5).astype(np.float32),
        "workclass": x["workclass"],
    }


def columns(kind: str, root: str) -> list:
    """The feature columns of ``kind`` ("census" or "every_op"); files under ``root``."""
    if kind == "census":
        return census_module().wide_columns()
    vocabulary = os.path.join(root, "countries.txt")
    if not os.path.exists(vocabulary):
        with open(vocabulary, "w") as f:
            f.write("\n".join(COUNTRIES) + "\n")
    return every_op_columns(vocabulary)


def make(kind: str, root: str):
    """The estimator of ``kind`` under ``root``: the census tutorial's LinearClassifier, or
    a LinearRegressor on the every-op columns."""
    config = est.RunConfig(tf_random_seed=0)
    model_dir = os.path.join(root, kind)
    if kind == "census":
        labels = census_module().LABELS
        return canned.LinearClassifier(
            columns(kind, root), model_dir=model_dir, label_vocabulary=labels, config=config
        )
    return canned.LinearRegressor(columns(kind, root), model_dir=model_dir, config=config)


def raw_model_fn(features, labels, mode):
    """A custom model_fn on two float features, exported with a raw receiver."""
    import jax
    import jax.numpy as jnp
    import optax

    x = jnp.stack([features["a"], features["b"]], -1)
    logits = est.layers.dense(x, 3, name="logits")
    predictions = {"class_ids": jnp.argmax(logits, -1), "probabilities": jax.nn.softmax(logits)}
    if mode == est.ModeKeys.PREDICT:
        outputs = {
            "serving_default": est.export.ClassificationOutput(scores=predictions["probabilities"]),
            "predict": est.export.PredictOutput(predictions),
        }
        return est.EstimatorSpec(mode, predictions=predictions, export_outputs=outputs)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1), predictions=predictions)


def raw_receiver():
    import jax

    spec = jax.ShapeDtypeStruct((None,), np.float32)
    return est.export.build_raw_serving_input_receiver_fn({"a": spec, "b": spec})


def receiver(kind: str, root: str):
    """The parsing receiver of ``kind``'s columns (serialized tf.Example in TF)."""
    return est.export.build_parsing_serving_input_receiver_fn(
        fc.make_parse_example_spec(columns(kind, root))
    )


def main(args: dict) -> None:
    from estimator.export.__main__ import main as cli

    assert cli(["to_tf_saved_model", args["census_export"], args["census_saved_model"]]) == 0
    model = make("every_op", args["root"])
    path = model.export_saved_model(
        args["every_op_base"], receiver("every_op", args["root"]), format="tf_saved_model"
    )
    est.export.to_tf_saved_model(args["raw_export"], args["raw_saved_model"])
    print(json.dumps({"every_op_saved_model": path.decode()}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
