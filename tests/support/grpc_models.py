"""The four models ``test_serve_grpc.py`` serves, and what both its processes share.

Imported by the test (which trains and exports them, without TensorFlow) and by
``grpc_client_job.py`` (TensorFlow, TF Serving's client). Each model is trained for a few
steps of adult.data and exported with a parsing receiver, as TF Serving clients expect:

* ``census``: the census tutorial's ``LinearClassifier`` (wide columns);
* ``wide_deep``: ``DNNLinearCombinedClassifier`` (wide + deep columns, small layers);
* ``regressor``: a custom ``model_fn`` (one dense layer over two numeric features) whose
  export output is a ``RegressionOutput``;
* ``multi_head``: a ``LinearEstimator`` with ``MultiHead([BinaryClassHead('income'),
  RegressionHead('hours')])``.
"""

from __future__ import annotations

import importlib
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("ADULT_DATA_DIR") or os.path.join(ROOT, "..", "shared", "data", "adult")
MODELS = ("census", "wide_deep", "regressor", "multi_head")
N_ROWS = 8


def census_module():
    """``examples/census.py`` (its data loader, columns and labels)."""
    if os.path.join(ROOT, "examples") not in sys.path:
        sys.path.insert(0, os.path.join(ROOT, "examples"))
    return importlib.import_module("census")


def _regressor_fn(features, labels, mode):
    import jax.numpy as jnp
    import optax

    import estimator as est

    # [batch] in training (numpy_input_fn), [batch, 1] when served (numeric_column's spec).
    age = jnp.reshape(features["age"], (-1, 1)) / 50.0
    x = jnp.concatenate([age, jnp.reshape(features["hours_per_week"], (-1, 1)) / 40.0], axis=-1)
    value = est.layers.dense(x, 1, name="value")
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(
            mode,
            predictions={"value": value},
            export_outputs={"serving_default": est.export.RegressionOutput(value)},
        )
    loss = jnp.mean((value[:, 0] - labels) ** 2)
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.01))


def build(name: str, root: str, train_x: dict, train_y: np.ndarray) -> str:
    """Trains ``name`` for a few steps and exports it; returns the export directory."""
    import canned
    import estimator as est
    from canned import feature_column as fc

    census = census_module()
    config = est.RunConfig(tf_random_seed=0)
    model_dir = os.path.join(root, "train", name)
    labels, features = train_y, train_x
    if name == "census":
        columns = census.wide_columns()
        model = canned.LinearClassifier(
            columns, model_dir=model_dir, label_vocabulary=census.LABELS, config=config
        )
    elif name == "wide_deep":
        columns = census.wide_columns()
        deep = census.deep_columns(census.numeric_stats(train_x))
        model = canned.DNNLinearCombinedClassifier(
            model_dir=model_dir,
            linear_feature_columns=columns,
            dnn_feature_columns=deep,
            dnn_hidden_units=[8, 4],
            label_vocabulary=census.LABELS,
            config=config,
        )
        columns = columns + deep
    elif name == "regressor":
        columns = [fc.numeric_column("age"), fc.numeric_column("hours_per_week")]
        model = est.Estimator(_regressor_fn, model_dir=model_dir, config=config)
        labels = train_x["education_num"]
        features = {k: train_x[k] for k in ("age", "hours_per_week")}
    else:
        columns = census.wide_columns()
        head = canned.MultiHead(
            [canned.BinaryClassHead(name="income"), canned.RegressionHead(name="hours")]
        )
        model = canned.LinearEstimator(head, columns, model_dir=model_dir, config=config)
        labels = {
            "income": (train_y == ">50K").astype(np.float32)[:, None],
            "hours": (train_x["hours_per_week"] / 40.0).astype(np.float32)[:, None],
        }
    model.train(est.inputs.numpy_input_fn(features, labels, batch_size=128, shuffle=False), steps=5)
    receiver = est.export.build_parsing_serving_input_receiver_fn(
        fc.make_parse_example_spec(columns)
    )
    return model.export_saved_model(os.path.join(root, "models", name), receiver).decode()


def rows(test_x: dict, keys) -> list[dict]:
    """The first ``N_ROWS`` adult.test rows as ``{feature: value}`` (str or float)."""
    return [
        {k: test_x[k][i] if isinstance(test_x[k][i], str) else float(test_x[k][i]) for k in keys}
        for i in range(N_ROWS)
    ]
