"""TF 1's canned estimators from ``estimator.compat.v1`` (``estimator.compat.v1._canned``):
the wide & deep ones train, and hooks fetch the tensors TF 2.15's graph names.

Parity (as ``tests/canned/test_dnn.py``): both frameworks start from the same weights, written as
a checkpoint and given as ``warm_start_from`` (TF: a ``tf.compat.v1.train.Saver`` checkpoint
and ``WarmStartSettings(ckpt, vars_to_warm_start=".*")``), and train 5 steps on the same 8
examples (TF: ``Dataset.from_tensors((features, labels)).repeat()``) with TF 1's defaults
(``tf.compat.v1.estimator.*``: FTRL at ``min(0.005, 1/sqrt(n))`` on ``linear/``, Adagrad at
0.001 on ``dnn/``, ``loss_reduction=SUM``). TF's numbers come from TensorFlow 2.15.1 +
tensorflow-estimator 2.15.0 running that procedure.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import estimator as est
import estimator.compat.v1 as tf
from estimator.engine.steps import TrainState

X = np.array(
    [[0.5, -1.0], [1.5, 0.3], [-0.7, 0.8], [0.1, 0.1], [2.0, -0.5], [-1.2, -0.9], [0.9, 1.1],
     [-0.3, 0.4]],
    np.float32,
)  # fmt: skip
C = np.array([["a"], ["b"], ["c"], ["a"], ["b"], ["b"], ["c"], ["a"]], object)
Y = np.array([0, 1, 1, 0, 1, 0, 1, 0])
YR = np.array([[0.5], [1.2], [-0.3], [0.0], [2.0], [-1.0], [0.7], [0.1]], np.float32)
FEATURES = {"x": X, "c": C}
WD_SHAPES = {
    "dnn/hiddenlayer_0/kernel": (2, 3),
    "dnn/hiddenlayer_0/bias": (3,),
    "dnn/logits/kernel": (3, 1),
    "dnn/logits/bias": (1,),
    "linear/linear_model/c/weights": (3, 1),
    "linear/linear_model/bias_weights": (1,),
}

# TF 2.15.1, tf.compat.v1.estimator.DNNLinearCombined{Classifier,Regressor}: variables after
# 5 steps (the procedure in the module docstring).
TF_V1_WIDE_DEEP = {
    "classifier": {
        "linear/linear_model/c/weights": [0.1706697642803192, -0.18579433858394623,
                                          0.2486722320318222],
        "linear/linear_model/bias_weights": [-0.04045889899134636],
        "dnn/logits/kernel": [0.312872052192688, -0.4945700168609619, 0.3597780168056488],
        "dnn/hiddenlayer_0/bias": [0.13395141065120697, -0.2331085503101349,
                                   -0.4564181864261627],
    },
    "regressor": {
        "linear/linear_model/c/weights": [0.06032349914312363, -0.2923666834831238,
                                          0.18409588932991028],
        "linear/linear_model/bias_weights": [-0.42309078574180603],
        "dnn/logits/kernel": [0.3127213716506958, -0.49406230449676514, 0.3606092929840088],
        "dnn/hiddenlayer_0/bias": [0.13393636047840118, -0.23343321681022644,
                                   -0.455830454826355],
    },
}  # fmt: skip


def init_checkpoint(path, shapes) -> str:
    """A checkpoint of uniform(-0.5, 0.5) values drawn in sorted-name order (seed 0)."""
    rng = np.random.default_rng(0)
    values = {
        name: jnp.asarray(rng.uniform(-0.5, 0.5, size=shape).astype(np.float32))
        for name, shape in sorted(shapes.items())
    }
    state = TrainState(values, {}, None, jnp.zeros((), jnp.int32), jnp.full((), -1, jnp.int32))
    saver = est.Checkpointer(str(path))
    saver.save(0, state, with_opt_state=False)
    saver.wait()
    saver.close()
    return str(path)


def _wide_deep(kind, tmp_path):
    cls = {
        "classifier": tf.estimator.DNNLinearCombinedClassifier,
        "regressor": tf.estimator.DNNLinearCombinedRegressor,
    }[kind]
    return cls(
        model_dir=str(tmp_path / kind),
        linear_feature_columns=[
            tf.feature_column.categorical_column_with_vocabulary_list("c", ["a", "b", "c"])
        ],
        dnn_feature_columns=[tf.feature_column.numeric_column("x", shape=(2,))],
        dnn_hidden_units=[3],
        warm_start_from=tf.estimator.WarmStartSettings(
            init_checkpoint(tmp_path / f"init_{kind}", WD_SHAPES), vars_to_warm_start=".*"
        ),
    )


@pytest.mark.slow
def test_tf1_wide_and_deep_estimators_train_and_match_tf(tmp_path):
    # Both used to crash at their first step (a TF 1 optimizer under optax's mask).
    for kind, labels in (("classifier", Y), ("regressor", YR)):
        model = _wide_deep(kind, tmp_path)
        model.train(lambda labels=labels: (FEATURES, labels), steps=5)
        for name, tf_value in TF_V1_WIDE_DEEP[kind].items():
            np.testing.assert_allclose(
                np.ravel(model.get_variable_value(name)), tf_value, atol=1e-6, err_msg=name
            )


class _Fetch(tf.train.SessionRunHook):
    """Fetches ``names`` at the first step (as a LoggingTensorHook does)."""

    def __init__(self, names):
        self.names = names
        self.values = None

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(self.names)

    def after_run(self, run_context, run_values):
        if self.values is None:
            self.values = run_values.results


def _first_step_values(model, names, labels=Y):
    hook = _Fetch(names)
    model.train(lambda: ({"x": X}, labels), steps=1, hooks=[hook])
    return hook.values


@pytest.mark.slow
def test_hooks_fetch_tf1_canned_head_tensors_by_tf_graph_names(tmp_path):
    # Names read from TF 2.15.1's graph of tf.compat.v1.estimator.* (see
    # canned/head/_graph_names.py). Linear weights start at 0, so at the first step the
    # logits are 0: per-example loss log 2, loss (SUM) 8 log 2 = 5.545, average log 2.
    x = tf.feature_column.numeric_column("x", shape=(2,))
    log2 = np.log(2.0)
    values = _first_step_values(
        tf.estimator.LinearClassifier([x], model_dir=str(tmp_path / "linear")),
        {
            "loss": "linear/head/weighted_loss/Sum",
            "average_loss": "linear/head/truediv",
            "weights": "linear/head/Sum",
            "per_example": "linear/head/logistic_loss",
            "labels": "linear/head/labels",
            "probabilities": "linear/head/predictions/probabilities",
            "logits": "linear/linear_model/linear_model/linear_model/weighted_sum",
        },
    )
    np.testing.assert_allclose(values["loss"], 8 * log2, rtol=1e-6)
    np.testing.assert_allclose(values["average_loss"], log2, rtol=1e-6)
    assert values["weights"] == 8.0
    np.testing.assert_allclose(values["per_example"], np.full((8, 1), log2), rtol=1e-6)
    np.testing.assert_array_equal(values["labels"], Y[:, None])
    np.testing.assert_allclose(values["probabilities"], np.full((8, 2), 0.5))
    np.testing.assert_array_equal(values["logits"], np.zeros((8, 1)))
    # The DNN's and wide & deep's names (values depend on the random initial weights):
    # average = loss / 8, the logits feed the probabilities.
    for model, prefix, logits in (
        (
            tf.estimator.DNNClassifier([3], [x], str(tmp_path / "dnn")),
            "dnn/head",
            "dnn/logits/BiasAdd",
        ),
        (
            tf.estimator.DNNLinearCombinedClassifier(
                str(tmp_path / "wd"), [x], dnn_feature_columns=[x], dnn_hidden_units=[3]
            ),
            "head",
            "add",
        ),
    ):
        names = {
            "loss": f"{prefix}/weighted_loss/Sum",
            "average_loss": f"{prefix}/truediv",
            "logistic": f"{prefix}/predictions/logistic",
            "logits": logits,
        }
        values = _first_step_values(model, names)
        np.testing.assert_allclose(values["average_loss"], values["loss"] / 8, rtol=1e-6)
        np.testing.assert_allclose(
            values["logistic"], 1 / (1 + np.exp(-values["logits"])), rtol=1e-5
        )


def test_tf2_canned_heads_use_tf2_graph_names(tmp_path):
    # TF 2.15.1's tf.estimator.LinearRegressor: loss SUM_OVER_BATCH_SIZE at
    # head/losses/weighted_loss/value. Zero weights: loss = mean(y²).
    import canned

    x = canned.feature_column.numeric_column("x", shape=(2,))
    values = _first_step_values(
        canned.LinearRegressor([x], model_dir=str(tmp_path)),
        {
            "loss": "head/losses/weighted_loss/value",
            "sum": "head/losses/weighted_loss/Sum",
            "squares": "head/losses/mean_squared_error/SquaredDifference",
            "logits": "linear/linear_model/linear/linear_model/linear/linear_model/weighted_sum",
        },
        labels=YR,
    )
    np.testing.assert_allclose(values["loss"], np.mean(YR**2), rtol=1e-6)
    np.testing.assert_allclose(values["sum"], np.sum(YR**2), rtol=1e-6)
    np.testing.assert_allclose(values["squares"], YR**2, rtol=1e-6)
    np.testing.assert_array_equal(values["logits"], np.zeros((8, 1)))


def test_a_crossed_column_of_a_float_feature_truncates_it_as_tf():
    # TF's "linear model" tutorial crosses the raw float 'age' with 'sex': sparse_cross casts
    # floats to int64. TF 2.15.1's ids (input_layer of an indicator of the cross):
    # [4, 38, 54, 36] for ages 22.0, 38.5, 0.0, -1.7.
    from estimator.preprocessing import Cross

    cross = Cross(keys=("age", "sex"), hash_bucket_size=100)
    ids = cross.apply(
        {
            "age": np.array([[22.0], [38.5], [0.0], [-1.7]]),
            "sex": np.array([["male"], ["female"], ["male"], ["female"]]),
        }
    ).ids
    assert ids.ravel().tolist() == [4, 38, 54, 36]
