"""canned.head.RegressionHead: TF 2.15's loss, predictions, metrics, exports and messages."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import canned
import estimator as est
from canned import head as head_lib

# Two examples, label_dimension 2; squared errors [[1, 0], [0, 4]].
LOGITS = np.array([[1.0, 2.0], [3.0, 5.0]], np.float32)
LABELS = np.array([[0.0, 2.0], [3.0, 3.0]], np.float32)


def jit_metrics(head, labels, logits, features=None, regularization_losses=None):
    @jax.jit
    def run(labels, logits, features, regularization_losses):
        m = head.eval_metrics(labels, logits, features, regularization_losses)
        return {k: v.compute() for k, v in m.items()}

    return {k: float(v) for k, v in run(labels, logits, features, regularization_losses).items()}


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"label_dimension": 0}, ValueError, r"Invalid label_dimension 0\."),
        ({"label_dimension": -1}, ValueError, r"Invalid label_dimension -1\."),
        ({"label_dimension": 1.5}, ValueError, r"Invalid label_dimension 1\.5\."),
        ({"loss_reduction": "none"}, ValueError, r"Invalid loss_reduction: none"),
        ({"weight_column": ["w"]}, TypeError, r"Weight column must be a string"),
    ],
)
def test_constructor_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        head_lib.RegressionHead(**kwargs)


@pytest.mark.parametrize(
    "reduction, expected",
    [("sum_over_batch_size", 5 / 4), ("sum", 5.0)],  # (1 + 0 + 0 + 4) over B·D = 4
)
def test_loss_by_hand(reduction, expected):
    head = head_lib.RegressionHead(label_dimension=2, loss_reduction=reduction)
    assert head.logits_dimension == 2
    np.testing.assert_allclose(head.loss(LABELS, LOGITS), expected, rtol=1e-6)  # TF: 1.25


def test_weights_per_example_and_per_target():
    head = head_lib.RegressionHead(label_dimension=2, weight_column="w")
    # Per target [[1, 2], [3, 0]]: 1·1 + 2·0 + 3·0 + 0·4 = 1, over B·D = 4. TF 2.15.1: 0.25
    per_target = {"w": np.array([[1.0, 2.0], [3.0, 0.0]], np.float32)}
    np.testing.assert_allclose(head.loss(LABELS, LOGITS, per_target), 1 / 4, rtol=1e-6)
    m = jit_metrics(head, LABELS, LOGITS, per_target)
    assert set(m) == {"average_loss", "label/mean", "prediction/mean"}
    np.testing.assert_allclose(m["average_loss"], 1 / 6, rtol=1e-6)  # Σw = 6
    np.testing.assert_allclose(m["label/mean"], (0 * 1 + 2 * 2 + 3 * 3 + 3 * 0) / 6, rtol=1e-6)
    np.testing.assert_allclose(m["prediction/mean"], (1 * 1 + 2 * 2 + 3 * 3 + 5 * 0) / 6, rtol=1e-6)
    # Per example [1, 3] (shape [B]): 1·(1 + 0) + 3·(0 + 4) = 13, over 4; mean over Σw = 8.
    per_example = {"w": np.array([1.0, 3.0], np.float32)}
    np.testing.assert_allclose(head.loss(LABELS, LOGITS, per_example), 13 / 4, rtol=1e-6)
    m = jit_metrics(head, LABELS, LOGITS, per_example)
    np.testing.assert_allclose(m["average_loss"], 13 / 8, rtol=1e-6)
    with pytest.raises(
        ValueError,
        match=r"weights shape must be \[D0, D1, \.\.\. DN\], \[D0, D1, \.\.\. DN, 1\] or "
        r"\[D0, D1, \.\.\. DN, logits_dimension\], logits_shape: \(2, 2\)\. weights_shape: "
        r"\(2, 3\)\.",
    ):
        head.loss(LABELS, LOGITS, {"w": np.ones((2, 3))})


def test_unweighted_metrics_and_regularization():
    head = head_lib.RegressionHead(label_dimension=2)
    m = jit_metrics(head, LABELS, LOGITS, regularization_losses=[0.5])
    np.testing.assert_allclose(m["average_loss"], 5 / 4, rtol=1e-6)
    np.testing.assert_allclose(m["label/mean"], (0 + 2 + 3 + 3) / 4, rtol=1e-6)  # 2.0
    np.testing.assert_allclose(m["prediction/mean"], (1 + 2 + 3 + 5) / 4, rtol=1e-6)  # 2.75
    np.testing.assert_allclose(m["regularization_loss"], 0.5)
    np.testing.assert_allclose(head.loss(LABELS, LOGITS, regularization_losses=[0.5]), 1.75)


def test_inverse_link_fn():
    head = head_lib.RegressionHead(label_dimension=2, inverse_link_fn=jnp.exp, name="r")
    p = head.predictions(LOGITS)
    assert set(p) == {"predictions", "logits"}
    np.testing.assert_allclose(p["predictions"], np.exp(LOGITS), rtol=1e-6)
    np.testing.assert_allclose(p["logits"], LOGITS)
    # The loss compares labels with the logits, not the predictions (as TF): still 5/4.
    np.testing.assert_allclose(head.loss(LABELS, LOGITS), 1.25, rtol=1e-6)
    m = jit_metrics(head, LABELS, LOGITS)
    assert set(m) == {"average_loss/r", "label/mean/r", "prediction/mean/r"}
    # (e + e² + e³ + e⁵) / 4 = 44.651508; TF 2.15.1: 44.65150833129883
    expected = (math.e + math.e**2 + math.e**3 + math.e**5) / 4
    np.testing.assert_allclose(m["prediction/mean/r"], expected, rtol=1e-6)


def test_predictions_without_link():
    head = head_lib.RegressionHead()
    logits = np.array([[1.5], [-2.0]], np.float32)
    p = head.predictions(logits)
    assert set(p) == {"predictions"}
    np.testing.assert_allclose(p["predictions"], logits)
    with pytest.raises(
        ValueError, match=r"given: logits\.Valid prediction keys include \['predictions'\]"
    ):
        head.predictions(logits, keys=["logits"])
    # Labels [B] work for label_dimension 1: (1.5 - 1)² + (-2 - 0)² = 4.25, over 2.
    np.testing.assert_allclose(head.loss(np.array([1.0, 0.0]), logits), 4.25 / 2, rtol=1e-6)


def test_prepare_labels_and_label_errors():
    head = head_lib.RegressionHead()
    out = head.prepare_labels(np.array([1, 2, 3]))
    assert out.dtype == np.float32 and out.shape == (3, 1)
    head2 = head_lib.RegressionHead(label_dimension=2)
    np.testing.assert_array_equal(head2.prepare_labels(LABELS.astype(np.float64)), LABELS)
    with pytest.raises(ValueError, match=r"Expected labels dimension=2\.  Received 1\."):
        head2.prepare_labels(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"Expected labels dimension=2\.  Received 3\."):
        head2.prepare_labels(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"Labels dtype should be numeric.*Instead got <U1"):
        head.prepare_labels(np.array(["1"]))
    with pytest.raises(ValueError, match=r"Expected labels dimension=2\.  Received 1\."):
        head2.loss(np.array([1.0, 2.0]), LOGITS)
    with pytest.raises(
        ValueError,
        match=r"labels shape must be \[D0, D1, \.\.\. DN, 2\].*expected_labels_shape: \(2, 2\)\. "
        r"labels_shape: \(3, 2\)\.",
    ):
        head2.loss(np.zeros((3, 2)), LOGITS)


def test_custom_loss_fn_shape_rule():
    head = head_lib.RegressionHead(label_dimension=2, loss_fn=lambda labels, logits: logits)
    np.testing.assert_allclose(head.loss(LABELS, LOGITS), (1 + 2 + 3 + 5) / 4, rtol=1e-6)
    bad = head_lib.RegressionHead(label_dimension=2, loss_fn=lambda labels, logits: logits[:, :1])
    with pytest.raises(ValueError, match=r"must return Tensor of shape \[D0, D1, \.\.\. DN, 2\]"):
        bad.loss(LABELS, LOGITS)


def test_export_outputs_and_spec_under_jit():
    head = head_lib.RegressionHead(label_dimension=2, inverse_link_fn=jnp.exp)
    spec = head.create_estimator_spec({}, est.ModeKeys.PREDICT, LOGITS)
    assert set(spec.export_outputs) == {"serving_default", "regression", "predict"}
    reg = spec.export_outputs["regression"]
    assert spec.export_outputs["serving_default"] is reg
    assert isinstance(reg, est.RegressionOutput)
    np.testing.assert_allclose(reg.value, np.exp(LOGITS), rtol=1e-6)
    assert set(spec.export_outputs["predict"].outputs) == {"predictions", "logits"}

    @jax.jit
    def eval_step(logits, labels):
        spec = head.create_estimator_spec({}, est.ModeKeys.EVAL, logits, labels)
        return spec.loss, {k: m.compute() for k, m in spec.eval_metric_ops.items()}

    loss, m = eval_step(LOGITS, LABELS)
    np.testing.assert_allclose(loss, 1.25, rtol=1e-6)
    assert set(m) == {"average_loss", "label/mean", "prediction/mean"}


def test_poisson_and_logistic_regression_heads_match_tf():
    # From TF 2.15.1: tf.estimator.PoissonRegressionHead(compute_full_loss=...).loss and
    # LogisticRegressionHead().loss on these labels and logits (sum_over_batch_size), and
    # their predictions (exp / sigmoid of the logits).
    labels = jnp.array([[1.0], [3.0], [0.0], [2.5]])
    logits = jnp.array([[0.5], [1.0], [-0.3], [0.9]])
    full = canned.head.PoissonRegressionHead()
    partial = canned.head.PoissonRegressionHead(compute_full_loss=False)
    assert abs(float(full.loss(labels, logits, features={})) - 1.1873291730880737) < 1e-6
    assert abs(float(partial.loss(labels, logits, features={})) - 0.4543560743331909) < 1e-6
    np.testing.assert_allclose(
        full.predictions(logits)["predictions"].ravel(),
        [1.6487212181091309, 2.7182817459106445, 0.740818202495575, 2.4596030712127686],
        rtol=1e-6,
    )
    logistic = canned.head.LogisticRegressionHead()
    labels = jnp.array([[0.0], [1.0], [0.3], [1.0]])
    logits = jnp.array([[0.5], [-1.0], [2.0], [0.1]])
    assert abs(float(logistic.loss(labels, logits, features={})) - 1.1146658658981323) < 1e-6
    np.testing.assert_allclose(
        logistic.predictions(logits)["predictions"].ravel(),
        [0.622459352016449, 0.2689414322376251, 0.8807970881462097, 0.5249791741371155],
        rtol=1e-6,
    )
    # TF's check and message, for 1.5 and for -0.5.
    for bad in (1.5, -0.5):
        with pytest.raises(ValueError, match=r"^Labels must be in range \[0, 1\]$"):
            logistic.prepare_labels(np.array([[bad]], np.float32))


def test_poisson_head_trains_a_linear_estimator(tmp_path):
    # Counts y ~ exp(x): the learned log-rate weight moves toward 1 from 0.
    x = np.linspace(-1, 1, 64).astype(np.float32)[:, None]
    y = np.round(np.exp(x)).astype(np.float32)
    model = canned.LinearEstimator(
        canned.head.PoissonRegressionHead(),
        [canned.feature_column.numeric_column("x")],
        str(tmp_path),
    )
    model.train(lambda: ({"x": x}, y), steps=50)
    assert 0.3 < float(model.get_variable_value("linear/linear_model/x/weights")[0, 0]) < 1.5
