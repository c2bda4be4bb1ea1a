"""canned.head: the shared Head machinery and BinaryClassHead (TF 2.15's numbers and messages).

Multi-class and regression heads: test_head_multi_class.py, test_head_regression.py.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import estimator as est
from canned import head as head_lib
from canned.head import MetricKeys, PredictionKeys, Reduction
from estimator.model.strings import IndexToString, to_host
from estimator.model.variables import INIT, Frame, transform_context

LN3 = math.log(3.0)


def sp(x: float) -> float:
    """softplus: log(1 + e^x), the sigmoid cross-entropy of logit -x with label 1."""
    return math.log1p(math.exp(x))


def jit_metrics(head, labels, logits, features=None, regularization_losses=None):
    """``head.eval_metrics`` computed inside one ``jax.jit`` (one compile: fast tests)."""

    @jax.jit
    def run(labels, logits, features, regularization_losses):
        m = head.eval_metrics(labels, logits, features, regularization_losses)
        return {k: v.compute() for k, v in m.items()}

    return {k: float(v) for k, v in run(labels, logits, features, regularization_losses).items()}


def in_frame(fn):
    frame = Frame(INIT, jax.random.key(0), jnp.int32(0))
    with transform_context(frame):
        out = fn()
    return out, frame


# Four examples used throughout: logits and labels [B, 1].
LOGITS = np.array([[-1.0], [1.0], [2.0], [-2.0]], np.float32)
LABELS = np.array([[0], [0], [1], [1]])
WEIGHTS = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
# Per-example sigmoid cross-entropies: label 0 -> softplus(x), label 1 -> softplus(-x).
CE = [sp(-1.0), sp(1.0), sp(-2.0), sp(2.0)]  # 0.31326, 1.31326, 0.12693, 2.12693


# ---------------------------------------------------------------------------- construction
@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"label_vocabulary": "ab"}, ValueError, r"label_vocabulary should be a list or a tuple"),
        ({"thresholds": [0.0]}, ValueError, r"thresholds not in \(0, 1\): \(\(0.0,\),\)\."),
        ({"thresholds": [0.5, 1.0]}, ValueError, r"thresholds not in \(0, 1\)"),
        ({"loss_reduction": "none"}, ValueError, r"Invalid loss_reduction: none\. See"),
        ({"loss_reduction": "mean"}, ValueError, r"Invalid loss_reduction: mean\. See"),
        (
            {"loss_fn": lambda labels, foo: 0},
            ValueError,
            r"loss_fn must contain argument: logits\. Given arguments: \('labels', 'foo'\)",
        ),
        (
            {"loss_fn": lambda logits: 0},
            ValueError,
            r"loss_fn must contain argument: labels\.",
        ),
        (
            {"loss_fn": lambda labels, logits, mode: 0},
            ValueError,
            r"loss_fn has unexpected args: \['mode'\]",
        ),
        ({"weight_column": 3}, TypeError, r"Weight column must be a string.*<class 'int'>"),
        ({"label_vocabulary": ["a", "b", "c"]}, ValueError, r"needs exactly 2 class names"),
        ({"label_vocabulary": ["a", "a"]}, ValueError, r"duplicate entries \['a'\]"),
        ({"label_vocabulary": ["a", 1]}, ValueError, r"label_vocabulary must hold strings"),
    ],
)
def test_binary_constructor_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        head_lib.BinaryClassHead(**kwargs)


def test_reduction_constants_match_tf():
    assert Reduction.all() == ("auto", "none", "sum", "sum_over_batch_size")
    assert head_lib.BinaryClassHead().loss_reduction == Reduction.SUM_OVER_BATCH_SIZE
    assert head_lib.BinaryClassHead().logits_dimension == 1
    assert head_lib.BinaryClassHead(name="h").name == "h"


# ------------------------------------------------------------------------------------ loss
def test_binary_loss_by_hand():
    head = head_lib.BinaryClassHead()
    # logits [0, 1], labels [0, 1]: CE = log(1 + e^0) + log(1 + e^-1), over batch 2.
    expected = (math.log(2.0) + math.log1p(math.exp(-1.0))) / 2  # 0.50320
    logits = np.array([[0.0], [1.0]], np.float32)
    for labels in (np.array([[0], [1]]), np.array([0, 1]), np.array([0.0, 1.0], np.float32)):
        np.testing.assert_allclose(head.loss(labels, logits), expected, rtol=1e-6)


def test_binary_loss_large_logits_are_stable():
    # TF's docstring example: CE(45, label 1) = log(1 + e^-45) ~ 0, CE(-41, 1) ~ 41.
    head = head_lib.BinaryClassHead()
    loss = head.loss(np.array([[1], [1]]), np.array([[45.0], [-41.0]], np.float32))
    np.testing.assert_allclose(loss, 41.0 / 2, rtol=1e-6)  # 20.5


@pytest.mark.parametrize(
    "reduction, expected",
    [
        # Σ w·CE = 1·0.31326 + 2·1.31326 + 3·0.12693 + 4·2.12693 = 11.82829
        ("sum", 1 * CE[0] + 2 * CE[1] + 3 * CE[2] + 4 * CE[3]),
        # divided by the batch size 4 (not by Σw = 10): 2.95707, TF 2.15.1: 2.9570703506469727
        ("sum_over_batch_size", (1 * CE[0] + 2 * CE[1] + 3 * CE[2] + 4 * CE[3]) / 4),
        ("auto", (1 * CE[0] + 2 * CE[1] + 3 * CE[2] + 4 * CE[3]) / 4),  # TF: AUTO = SUM_OVER_...
    ],
)
def test_binary_weighted_loss_reductions(reduction, expected):
    head = head_lib.BinaryClassHead(weight_column="w", loss_reduction=reduction)
    for w in (WEIGHTS, WEIGHTS[:, None]):  # [B] and [B, 1]
        loss = head.loss(LABELS, LOGITS, features={"w": w})
        np.testing.assert_allclose(loss, expected, rtol=1e-6)


def test_binary_loss_adds_regularization():
    head = head_lib.BinaryClassHead()
    # mean CE = (0.31326 + 1.31326 + 0.12693 + 2.12693) / 4 = 0.97009; + 0.5 + 0.25
    loss = head.loss(LABELS, LOGITS, regularization_losses=[0.5, jnp.array([0.25])])
    np.testing.assert_allclose(loss, sum(CE) / 4 + 0.75, rtol=1e-6)
    with pytest.raises(ValueError, match=r"regularization_losses must be scalars.*\(2,\)"):
        head.loss(LABELS, LOGITS, regularization_losses=[jnp.ones(2)])
    with pytest.raises(ValueError, match=r"regularization_losses should be a list or a tuple"):
        head.loss(LABELS, LOGITS, regularization_losses=jnp.float32(1.0))


def test_custom_loss_fn_gets_float_labels_and_features():
    seen = {}

    def loss_fn(labels, logits, features, loss_reduction):
        seen.update(dtype=labels.dtype, shape=labels.shape, reduction=loss_reduction)
        return jnp.abs(logits - labels) * features["scale"]

    head = head_lib.BinaryClassHead(loss_fn=loss_fn)
    # |[-1, 1, 2, -2] - [0, 0, 1, 1]| · 2 = [2, 2, 2, 6], mean 3
    loss = head.loss(np.array([0, 0, 1, 1]), LOGITS, features={"scale": 2.0})
    np.testing.assert_allclose(loss, 3.0, rtol=1e-6)
    assert seen == {"dtype": jnp.float32, "shape": (4, 1), "reduction": "sum_over_batch_size"}
    bad = head_lib.BinaryClassHead(loss_fn=lambda labels, logits: (logits - labels)[:, 0])
    with pytest.raises(
        ValueError,
        match=r"loss_fn must return Tensor of shape \[D0, D1, \.\.\. DN, 1\]\. logits_shape: "
        r"\(4, 1\) loss_shape: \(4,\)",
    ):
        bad.loss(LABELS, LOGITS)


# --------------------------------------------------------------- device-side input checks
def test_label_logits_and_weight_shape_errors():
    head = head_lib.BinaryClassHead(weight_column="w")
    feats = {"w": WEIGHTS}
    with pytest.raises(ValueError, match=r"You must provide a labels Tensor\. Given: None\."):
        head.loss(None, LOGITS, feats)
    with pytest.raises(ValueError, match=r"labels reached the head as strings.*prepare_labels"):
        head.loss(np.array(["a", "b", "a", "b"]), LOGITS, feats)
    with pytest.raises(ValueError, match=r"Mismatched label shape\. Expected labels dimension=1"):
        head.loss(np.zeros((4, 2)), LOGITS, feats)
    with pytest.raises(ValueError, match=r"labels must be an array, got a dict with keys \['y'\]"):
        head.loss({"y": LABELS}, LOGITS, feats)
    with pytest.raises(ValueError, match=r"labels must have rank at least 2\.  Received rank 0"):
        head.loss(np.float32(1.0), LOGITS, feats)
    with pytest.raises(
        ValueError,
        match=r"labels shape must be \[D0, D1, \.\.\. DN, 1\].*expected_labels_shape: \(4, 1\)\. "
        r"labels_shape: \(3, 1\)\.",
    ):
        head.loss(np.zeros((3, 1)), LOGITS, feats)
    with pytest.raises(ValueError, match=r"logits must have rank at least 2\.  Received rank 1"):
        head.loss(LABELS, LOGITS[:, 0], feats)
    with pytest.raises(
        ValueError, match=r"logits shape must be \[D0, D1, \.\.\. DN, logits_dimension\], got"
    ):
        head.loss(LABELS, np.zeros((4, 2), np.float32), feats)
    with pytest.raises(ValueError, match=r"Feature w is not in features dictionary\."):
        head.loss(LABELS, LOGITS, {})
    with pytest.raises(ValueError, match=r"Weight column should be castable to float"):
        head.loss(LABELS, LOGITS, {"w": np.array(["a"] * 4)})
    with pytest.raises(
        ValueError,
        match=r"weights shape must be \[D0, D1, \.\.\. DN\] or \[D0, D1, \.\.\. DN, 1\], "
        r"logits_shape: \(4, 1\)\. weights_shape: \(2,\)\.",
    ):
        head.loss(LABELS, LOGITS, {"w": np.ones(2)})
    with pytest.raises(ValueError, match=r"weights_shape: \(4, 2\)"):
        head.loss(LABELS, LOGITS, {"w": np.ones((4, 2))})


def test_labels_out_of_range_raise_when_concrete_and_give_nan_when_traced():
    head = head_lib.BinaryClassHead()
    with pytest.raises(ValueError, match=r"Labels must be <= 2 - 1; got \[2\.0\]"):
        head.loss(np.array([0, 2, 1, 1]), LOGITS)
    with pytest.raises(ValueError, match=r"Labels must be >= 0; got \[-1\.0\]"):
        head.loss(np.array([0, -1, 1, 1]), LOGITS)
    # Traced labels cannot be checked without a host sync: out-of-range labels become NaN,
    # so the loss is NaN and the Estimator's NaN guard reports it.
    assert np.isnan(jax.jit(head.loss)(jnp.array([0, 2, 1, 1]), LOGITS))
    np.testing.assert_allclose(jax.jit(head.loss)(LABELS, LOGITS), sum(CE) / 4, rtol=1e-6)


# ----------------------------------------------------------------------------- prepare_labels
def test_binary_prepare_labels_vocabulary():
    head = head_lib.BinaryClassHead(label_vocabulary=["neg", "pos"])
    expected = np.array([[1.0], [0.0], [1.0]], np.float32)
    for labels in (
        ["pos", "neg", "pos"],
        np.array(["pos", "neg", "pos"]),
        np.array([b"pos", b"neg", b"pos"]),
        np.array([["pos"], ["neg"], ["pos"]], dtype=object),
    ):
        out = head.prepare_labels(labels)
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out, expected)
    with pytest.raises(
        ValueError,
        match=r"Labels must be in label_vocabulary \['neg', 'pos'\]; got unknown labels "
        r"\['maybe', 'no'\]",
    ):
        head.prepare_labels(np.array(["pos", "no", "maybe", "no"]))
    with pytest.raises(
        ValueError, match=r"Labels dtype should be string if there is a vocabulary\. Instead got"
    ):
        head.prepare_labels(np.array([0, 1]))


def test_binary_prepare_labels_numbers():
    head = head_lib.BinaryClassHead()
    np.testing.assert_array_equal(head.prepare_labels([0, 1, 1]), [[0.0], [1.0], [1.0]])
    np.testing.assert_array_equal(head.prepare_labels([True, False]), [[1.0], [0.0]])
    # Soft labels in [0, 1] pass, as in TF (its range check is 0 <= label <= 1).
    np.testing.assert_allclose(head.prepare_labels(np.array([0.25, 1.0])), [[0.25], [1.0]])
    with pytest.raises(ValueError, match=r"Labels must be <= 2 - 1; got \[2, 5\]"):
        head.prepare_labels(np.array([0, 5, 2, 5]))
    with pytest.raises(ValueError, match=r"Labels must be <= 2 - 1; got \[nan\]"):
        head.prepare_labels(np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match=r"Labels must be >= 0; got \[-3, -1\]"):
        head.prepare_labels(np.array([-1, 0, -3]))
    with pytest.raises(
        ValueError,
        match=r"Labels dtype should be integer or float\. Instead got <U3\..*label_vocabulary",
    ):
        head.prepare_labels(np.array(["yes", "no"]))
    with pytest.raises(ValueError, match=r"labels must have rank at least 2\.  Received rank 0"):
        head.prepare_labels(np.int64(1))
    with pytest.raises(ValueError, match=r"Expected labels dimension=1\.  Received 2\."):
        head.prepare_labels(np.zeros((3, 2), np.int64))
    with pytest.raises(ValueError, match=r"You must provide a labels Tensor"):
        head.prepare_labels(None)


# ----------------------------------------------------------------------------- predictions
def test_binary_predictions_by_hand():
    head = head_lib.BinaryClassHead(label_vocabulary=["neg", "pos"])
    logits = np.array([[0.0], [LN3], [-LN3]], np.float32)
    p = head.predictions(logits)
    assert list(p) == [
        "logits", "logistic", "probabilities", "class_ids", "classes", "all_class_ids",
        "all_classes",
    ]  # fmt: skip
    # sigmoid(0) = 1/2, sigmoid(ln 3) = 3 / (3 + 1) = 3/4, sigmoid(-ln 3) = 1/4
    np.testing.assert_allclose(p["logistic"], [[0.5], [0.75], [0.25]], rtol=1e-6)
    # softmax([0, x]) = [1 - sigmoid(x), sigmoid(x)]
    np.testing.assert_allclose(
        p["probabilities"], [[0.5, 0.5], [0.25, 0.75], [0.75, 0.25]], rtol=1e-6
    )
    # argmax([0, x]): 1 iff x > 0; a tie (x = 0) takes the first, class 0.
    assert p["class_ids"].dtype == jnp.int32 and p["class_ids"].shape == (3, 1)
    np.testing.assert_array_equal(p["class_ids"], [[0], [1], [0]])
    np.testing.assert_array_equal(p["all_class_ids"], [[0, 1]] * 3)
    host = to_host(p)
    np.testing.assert_array_equal(host["classes"], [[b"neg"], [b"pos"], [b"neg"]])
    np.testing.assert_array_equal(host["all_classes"], [[b"neg", b"pos"]] * 3)
    np.testing.assert_array_equal(host["logits"], logits)
    # Without a vocabulary: TF's as_string of the ids.
    host = to_host(head_lib.BinaryClassHead().predictions(logits))
    np.testing.assert_array_equal(host["classes"], [[b"0"], [b"1"], [b"0"]])
    np.testing.assert_array_equal(host["all_classes"], [[b"0", b"1"]] * 3)


def test_predictions_keys_subset_and_unknown_key():
    head = head_lib.BinaryClassHead()
    p = head.predictions(LOGITS, keys=[PredictionKeys.CLASSES, PredictionKeys.LOGISTIC])
    assert set(p) == {"classes", "logistic"}
    assert isinstance(p["classes"], IndexToString)
    with pytest.raises(
        ValueError,
        match=r"Prediction key must be in PredictionKeys, given: predictions\.Valid prediction "
        r"keys include \['logits', 'logistic'",
    ):
        head.predictions(LOGITS, keys=["predictions"])


# --------------------------------------------------------------------------------- metrics
BINARY_KEYS = {
    "accuracy", "accuracy_baseline", "auc", "auc_precision_recall", "average_loss",
    "label/mean", "prediction/mean", "precision", "recall",
}  # fmt: skip


def test_binary_metrics_by_hand():
    head = head_lib.BinaryClassHead(thresholds=[0.5, 0.8])
    m = jit_metrics(head, LABELS, LOGITS)
    assert set(m) == BINARY_KEYS | {
        f"{name}/positive_threshold_{t}"
        for name in ("accuracy", "precision", "recall")
        for t in ("0.5", "0.8")
    }
    # logistic = [σ(-1), σ(1), σ(2), σ(-2)] = [0.269, 0.731, 0.881, 0.119]; class_ids
    # [0, 1, 1, 0] against labels [0, 0, 1, 1]: right, wrong (fp), right (tp), wrong (fn).
    expected = {
        "accuracy": 2 / 4,
        "precision": 1 / (1 + 1),  # tp / (tp + fp)
        "recall": 1 / (1 + 1),  # tp / (tp + fn)
        "label/mean": 2 / 4,
        "accuracy_baseline": max(0.5, 1 - 0.5),
        "prediction/mean": 2 / 4,  # σ(x) + σ(-x) = 1 for each pair
        "average_loss": sum(CE) / 4,  # 0.970095, TF 2.15.1: 0.9700949192047119
        # ROC: P(score_pos > score_neg) over the 4 pairs: 0.881 beats both negatives,
        # 0.119 beats neither: 2/4. Every score sits alone between two of the 200
        # thresholds, so the trapezoids are exact.
        "auc": 2 / 4,
        # PR (Davis-Goadrich interpolation, 2 positives). Lowering the threshold, (tp, P =
        # tp + fp) goes (0,0) -> (1,1) -> (1,2) -> (1,3) -> (2,4). Area per step where tp
        # grows: slope·(Δtp + intercept·ln(P_A/P_B)) / 2 with slope = Δtp/ΔP and
        # intercept = tp_B - slope·P_B: (0,0)->(1,1): 1·1/2 (P_B = 0: log term 0) = 0.5;
        # (1,3)->(2,4): 1·(1 - 2·ln(4/3))/2 = 0.212318. Total 0.712318.
        "auc_precision_recall": 0.5 + (1 - 2 * math.log(4 / 3)) / 2,
        # Threshold 0.5 equals class_ids.
        "accuracy/positive_threshold_0.5": 0.5,
        "precision/positive_threshold_0.5": 0.5,
        "recall/positive_threshold_0.5": 0.5,
        # Threshold 0.8: only 0.881 is positive -> [0, 0, 1, 0] vs [0, 0, 1, 1].
        "accuracy/positive_threshold_0.8": 3 / 4,
        "precision/positive_threshold_0.8": 1 / 1,
        "recall/positive_threshold_0.8": 1 / 2,
    }
    for key, value in expected.items():
        np.testing.assert_allclose(m[key], value, rtol=1e-5, atol=1e-7, err_msg=key)


def test_binary_weighted_metrics_by_hand_and_tf():
    head = head_lib.BinaryClassHead(weight_column="w", thresholds=[0.8])
    m = jit_metrics(head, LABELS, LOGITS, {"w": WEIGHTS})
    s = [1 / (1 + math.exp(-x)) for x in (-1.0, 1.0, 2.0, -2.0)]
    expected = {
        "average_loss": (1 * CE[0] + 2 * CE[1] + 3 * CE[2] + 4 * CE[3]) / 10,  # Σw = 10
        "accuracy": (1 + 3) / 10,  # examples 1 and 3 are right
        "precision": 3 / (3 + 2),  # tp weight 3 (ex. 3), fp weight 2 (ex. 2)
        "recall": 3 / (3 + 4),  # fn weight 4 (ex. 4)
        "label/mean": (3 + 4) / 10,
        "accuracy_baseline": 0.7,  # max(0.7, 0.3)
        "prediction/mean": (1 * s[0] + 2 * s[1] + 3 * s[2] + 4 * s[3]) / 10,  # 0.485026
        # Weighted pairs pos>neg / (Σw_pos · Σw_neg) = (3·1 + 3·2) / (7 · 3) = 9/21
        "auc": 9 / 21,
        # PR, 7 positive weight. (tp, P): (0,0) -> (3,3) -> (3,5) -> (3,6) -> (7,10):
        # 1·3/7 + 1·(4 - 3·ln(10/6))/7 = 0.428571 + 0.352503. TF 2.15.1: 0.7810747623443604
        "auc_precision_recall": 3 / 7 + (4 - 3 * math.log(10 / 6)) / 7,
        "accuracy/positive_threshold_0.8": (1 + 2 + 3) / 10,
        "precision/positive_threshold_0.8": 1.0,
        "recall/positive_threshold_0.8": 3 / 7,
    }
    for key, value in expected.items():
        np.testing.assert_allclose(m[key], value, rtol=1e-5, err_msg=key)
    np.testing.assert_allclose(m["auc_precision_recall"], 0.7810747623443604, rtol=1e-6)


def test_binary_metrics_random_batch_against_numpy_and_tf():
    rng = np.random.default_rng(0)  # the same stream was fed to TF 2.15.1's BinaryClassHead
    logits = rng.normal(size=(50, 1)).astype(np.float32) * 2
    labels = (rng.uniform(size=(50, 1)) < 0.4).astype(np.int64)
    w = rng.uniform(0, 2, size=(50,)).astype(np.float32)
    head = head_lib.BinaryClassHead(weight_column="w")
    m = jit_metrics(head, labels, logits, {"w": w})
    x, y, w1 = logits[:, 0].astype(np.float64), labels[:, 0], w.astype(np.float64)
    ce = np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))
    pred = (x > 0).astype(int)
    tp, fp, fn = (w1 * (pred & y)).sum(), (w1 * (pred & (1 - y))).sum(), (w1 * (1 - pred) * y).sum()
    np.testing.assert_allclose(m["average_loss"], (w1 * ce).sum() / w1.sum(), rtol=1e-5)
    np.testing.assert_allclose(m["accuracy"], (w1 * (pred == y)).sum() / w1.sum(), rtol=1e-5)
    np.testing.assert_allclose(m["precision"], tp / (tp + fp), rtol=1e-5)
    np.testing.assert_allclose(m["recall"], tp / (tp + fn), rtol=1e-5)
    np.testing.assert_allclose(m["label/mean"], (w1 * y).sum() / w1.sum(), rtol=1e-5)
    np.testing.assert_allclose(
        m["prediction/mean"], (w1 / (1 + np.exp(-x))).sum() / w1.sum(), rtol=1e-5
    )
    np.testing.assert_allclose(m["auc"], 0.41939371824264526, rtol=1e-5)  # from TF 2.15.1
    np.testing.assert_allclose(m["auc_precision_recall"], 0.25864526629447937, rtol=1e-5)  # TF
    np.testing.assert_allclose(
        head.loss(labels, logits, {"w": w}), (w1 * ce).sum() / 50, rtol=1e-5
    )  # TF 2.15.1: 1.3117268085479736


def test_binary_metrics_named_head_and_regularization():
    head = head_lib.BinaryClassHead(name="h")
    m = jit_metrics(head, LABELS, LOGITS, regularization_losses=[0.5, 0.25])
    assert set(m) == {f"{k}/h" for k in BINARY_KEYS | {"regularization_loss"}}
    np.testing.assert_allclose(m["regularization_loss/h"], 0.75)  # add_n([0.5, 0.25])
    np.testing.assert_allclose(m["accuracy/h"], 0.5)


def test_metrics_merge_across_batches_like_one_batch():
    head = head_lib.BinaryClassHead(weight_column="w")

    @jax.jit
    def merged_halves(labels, logits, w):
        a = head.eval_metrics(labels[:2], logits[:2], {"w": w[:2]})
        b = head.eval_metrics(labels[2:], logits[2:], {"w": w[2:]})
        whole = head.eval_metrics(labels, logits, {"w": w})
        return {k: (a[k].merge(b[k]).compute(), whole[k].compute()) for k in a}

    for key, (merged, whole) in merged_halves(LABELS, LOGITS, WEIGHTS).items():
        np.testing.assert_allclose(merged, whole, rtol=1e-6, err_msg=key)


# ------------------------------------------------------------------------ export outputs
def test_binary_export_outputs():
    head = head_lib.BinaryClassHead(label_vocabulary=["neg", "pos"])
    spec = head.create_estimator_spec({}, est.ModeKeys.PREDICT, LOGITS)
    out = spec.export_outputs
    assert set(out) == {"serving_default", "classification", "regression", "predict"}
    assert out["serving_default"] is out["classification"]
    cls = out["classification"]
    assert isinstance(cls, est.ClassificationOutput)
    np.testing.assert_allclose(cls.scores, spec.predictions["probabilities"])
    assert cls.classes.shape == (4, 2)
    np.testing.assert_array_equal(cls.classes.to_numpy(), [[b"neg", b"pos"]] * 4)
    assert isinstance(out["regression"], est.RegressionOutput)
    np.testing.assert_allclose(out["regression"].value, spec.predictions["logistic"])
    assert isinstance(out["predict"], est.PredictOutput)
    assert set(out["predict"].outputs) == set(spec.predictions)


# --------------------------------------------------------------------- create_estimator_spec
def test_create_estimator_spec_train_eval_predict_in_frame():
    head = head_lib.BinaryClassHead()
    opt = optax.sgd(0.1)
    reg = [jnp.float32(0.25)]
    spec, frame = in_frame(
        lambda: head.create_estimator_spec(
            {}, est.ModeKeys.TRAIN, LOGITS, LABELS, optimizer=opt, regularization_losses=reg
        )
    )
    assert spec.train_op is opt
    np.testing.assert_allclose(spec.loss, sum(CE) / 4 + 0.25, rtol=1e-6)
    # TF's summaries: the regularized loss and the regularization loss.
    assert set(frame.summaries) == {"loss", "regularization_loss"}
    np.testing.assert_allclose(frame.summaries["regularization_loss"], 0.25)
    spec, _ = in_frame(lambda: head.create_estimator_spec({}, "eval", LOGITS, LABELS))
    np.testing.assert_allclose(spec.loss, sum(CE) / 4, rtol=1e-6)
    assert set(spec.eval_metric_ops) == BINARY_KEYS
    assert spec.train_op is None
    spec, _ = in_frame(lambda: head.create_estimator_spec({}, "infer", LOGITS))
    assert spec.loss is None and set(spec.predictions) == {
        "logits", "logistic", "probabilities", "class_ids", "classes", "all_class_ids",
        "all_classes",
    }  # fmt: skip


def test_create_estimator_spec_under_jit_compiles_once():
    head = head_lib.BinaryClassHead(weight_column="w", label_vocabulary=["n", "p"])
    traces = []

    @jax.jit
    def eval_step(logits, labels, w):
        traces.append(1)
        spec = head.create_estimator_spec({"w": w}, "eval", logits, labels)
        return spec.loss, {k: m.compute() for k, m in spec.eval_metric_ops.items()}

    labels = head.prepare_labels(np.array(["n", "n", "p", "p"]))
    loss, m = eval_step(LOGITS, labels, WEIGHTS)
    loss2, _ = eval_step(LOGITS + 1, labels, WEIGHTS)
    assert len(traces) == 1
    np.testing.assert_allclose(loss, (1 * CE[0] + 2 * CE[1] + 3 * CE[2] + 4 * CE[3]) / 4, 1e-6)
    np.testing.assert_allclose(m["accuracy"], 0.4, rtol=1e-6)

    @jax.jit
    def predict_step(logits):
        return head.create_estimator_spec({}, "infer", logits).predictions

    host = to_host(predict_step(LOGITS))
    np.testing.assert_array_equal(host["classes"], [[b"n"], [b"p"], [b"p"], [b"n"]])

    @jax.jit
    def train_loss(logits, labels, w):
        spec, _ = in_frame(
            lambda: head.create_estimator_spec(
                {"w": w}, "train", logits, labels, train_op_fn=lambda loss: optax.sgd(1.0)
            )
        )
        return spec.loss

    np.testing.assert_allclose(train_loss(LOGITS, labels, WEIGHTS), loss, rtol=1e-6)


def test_create_estimator_spec_errors():
    head = head_lib.BinaryClassHead()

    def train(**kwargs):
        return in_frame(lambda: head.create_estimator_spec({}, "train", LOGITS, LABELS, **kwargs))

    with pytest.raises(ValueError, match=r"^train_op_fn and optimizer cannot both be set\.$"):
        train(optimizer=optax.sgd(1.0), train_op_fn=lambda loss: optax.sgd(1.0))
    with pytest.raises(ValueError, match=r"^train_op_fn and optimizer cannot both be None\.$"):
        train()
    with pytest.raises(
        ValueError, match=r"The given optimizer is not an optax\.GradientTransformation"
    ):
        train(optimizer="Adagrad")
    with pytest.raises(
        ValueError, match=r"trainable_variables should be a list or a tuple\. Given type"
    ):
        train(optimizer=optax.sgd(1.0), trainable_variables="dense/kernel")
    with pytest.raises(ValueError, match=r"trainable_variables must hold variable names"):
        train(optimizer=optax.sgd(1.0), trainable_variables=[jnp.ones(2)])
    with pytest.raises(ValueError, match=r"update_ops should be a list or a tuple\. Given type"):
        train(optimizer=optax.sgd(1.0), update_ops=jnp.ones(2))
    with pytest.raises(ValueError, match=r"mode must be one of ModeKeys\.TRAIN"):
        head.create_estimator_spec({}, "training", LOGITS, LABELS)
    with pytest.raises(ValueError, match=r"You must provide a labels Tensor"):
        head.create_estimator_spec({}, "eval", LOGITS)


def test_trainable_variables_restricts_the_optimizer():
    head = head_lib.BinaryClassHead()
    spec, _ = in_frame(
        lambda: head.create_estimator_spec(
            {}, "train", LOGITS, LABELS, optimizer=optax.sgd(0.5), trainable_variables=["a"],
            update_ops=[],
        )
    )  # fmt: skip
    params = {"a": jnp.ones(2), "b": jnp.ones(2)}
    grads = {"a": jnp.array([1.0, 2.0]), "b": jnp.array([3.0, 4.0])}
    updates, _ = spec.train_op.update(grads, spec.train_op.init(params), params)
    np.testing.assert_allclose(updates["a"], [-0.5, -1.0])  # -lr · g
    np.testing.assert_allclose(updates["b"], [0.0, 0.0])  # frozen
    with pytest.raises(ValueError, match=r"names variables that do not exist: \['a'\]"):
        spec.train_op.init({"b": jnp.ones(2)})


# ------------------------------------------------------------------------------- end to end
def test_estimator_with_binary_head_end_to_end(tmp_path):
    head = head_lib.BinaryClassHead(label_vocabulary=["no", "yes"])
    x = np.linspace(-1, 1, 32, dtype=np.float32)[:, None]
    raw_labels = np.where(x[:, 0] > 0.1, "yes", "no")
    labels = head.prepare_labels(raw_labels)  # host side, before the input pipeline

    def model_fn(features, labels, mode):
        logits = est.layers.dense(features["x"], head.logits_dimension, name="logits")
        return head.create_estimator_spec(
            features=features, mode=mode, logits=logits, labels=labels,
            optimizer=optax.sgd(1.0),
        )  # fmt: skip

    e = est.Estimator(model_fn, str(tmp_path), config=est.RunConfig(tf_random_seed=0))
    e.train(
        est.inputs.numpy_input_fn({"x": x}, labels, batch_size=8, num_epochs=None, shuffle=True),
        steps=40,
    )
    results = e.evaluate(est.inputs.numpy_input_fn({"x": x}, labels, batch_size=16, shuffle=False))
    assert set(results) == BINARY_KEYS | {"loss", "global_step"}
    assert results["global_step"] == 40
    assert results["accuracy"] >= 0.9 and results["auc"] >= 0.95
    np.testing.assert_allclose(results["label/mean"], np.mean(labels), rtol=1e-6)
    preds = list(e.predict(est.inputs.numpy_input_fn({"x": x[:3]}, shuffle=False)))
    assert [p["classes"][0] for p in preds] == [b"no", b"no", b"no"]
    assert preds[0]["all_classes"].tolist() == [b"no", b"yes"]


def test_metric_keys_constants():
    assert MetricKeys.ACCURACY_AT_THRESHOLD % 0.5 == "accuracy/positive_threshold_0.5"
    assert (MetricKeys.LOSS, MetricKeys.LOSS_MEAN) == ("loss", "average_loss")
