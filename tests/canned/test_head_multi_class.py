"""canned.head.MultiClassHead: TF 2.15's loss, predictions, metrics, exports and messages."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import estimator as est
from canned import head as head_lib
from estimator.model.strings import to_host

# Three examples, three classes.
LOGITS = np.array([[10.0, 0.0, 0.0], [0.0, 10.0, 0.0], [1.0, 2.0, 3.0]], np.float32)
LABELS = np.array([[1], [1], [2]])
# Per-example softmax cross-entropy = logsumexp(logits) - logits[label]:
CE = [
    10 + math.log1p(2 * math.exp(-10)),  # log(e^10 + 2) - 0 = 10.0000908
    math.log1p(2 * math.exp(-10)),  # log(e^10 + 2) - 10 = 0.0000908
    math.log(math.exp(-2) + math.exp(-1) + 1),  # log(e + e^2 + e^3) - 3 = 0.4076059
]


def jit_metrics(head, labels, logits, features=None, regularization_losses=None):
    @jax.jit
    def run(labels, logits, features, regularization_losses):
        m = head.eval_metrics(labels, logits, features, regularization_losses)
        return {k: v.compute() for k, v in m.items()}

    return {k: float(v) for k, v in run(labels, logits, features, regularization_losses).items()}


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((None,), {}, r"^n_classes cannot be None$"),
        ((2,), {}, r"n_classes must be > 2: 2\."),
        ((3.5,), {}, r"n_classes must be an integer > 2; got 3\.5"),
        ((3,), {"label_vocabulary": "abc"}, r"label_vocabulary should be a list or a tuple"),
        (
            (3,),
            {"label_vocabulary": ["a", "b"]},
            r'"label_vocabulary" does not have "n_classes" items\. len\(label_vocabulary\)=2, '
            r"n_classes=3, label_vocabulary=\['a', 'b'\]",
        ),
        ((3,), {"label_vocabulary": ["a", "b", "a"]}, r"duplicate entries \['a'\]"),
        ((3,), {"loss_reduction": "none"}, r"Invalid loss_reduction: none"),
        ((3,), {"loss_fn": lambda logits: 0}, r"loss_fn must contain argument: labels"),
    ],
)
def test_constructor_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        head_lib.MultiClassHead(*args, **kwargs)


def test_loss_by_hand():
    head = head_lib.MultiClassHead(3)
    assert head.logits_dimension == 3
    for labels in (LABELS, LABELS[:, 0], LABELS.astype(np.int32)):
        # (10.0000908 + 0.0000908 + 0.4076059) / 3 = 3.4692625; TF 2.15.1: 3.4692623615264893
        np.testing.assert_allclose(head.loss(labels, LOGITS), sum(CE) / 3, rtol=1e-6)


def test_weighted_sum_loss_and_metrics_with_regularization():
    head = head_lib.MultiClassHead(3, weight_column="w", loss_reduction="sum")
    feats = {"w": np.array([[1.0], [2.0], [0.5]], np.float32)}
    weighted = 1 * CE[0] + 2 * CE[1] + 0.5 * CE[2]  # 10.2040754
    loss = head.loss(LABELS, LOGITS, feats, regularization_losses=[1.0])
    np.testing.assert_allclose(loss, weighted + 1.0, rtol=1e-6)  # TF 2.15.1: 11.20407485961914
    m = jit_metrics(head, LABELS, LOGITS, feats, [1.0])
    assert set(m) == {"accuracy", "average_loss", "regularization_loss"}
    np.testing.assert_allclose(m["average_loss"], weighted / 3.5, rtol=1e-6)  # Σw = 3.5
    # class_ids [0, 1, 2] vs labels [1, 1, 2]: examples 2 and 3 right, weight 2 + 0.5.
    np.testing.assert_allclose(m["accuracy"], 2.5 / 3.5, rtol=1e-6)
    np.testing.assert_allclose(m["regularization_loss"], 1.0)


def test_unweighted_metrics_and_name():
    m = jit_metrics(head_lib.MultiClassHead(3, name="m"), LABELS, LOGITS)
    assert set(m) == {"accuracy/m", "average_loss/m"}
    np.testing.assert_allclose(m["accuracy/m"], 2 / 3, rtol=1e-6)
    np.testing.assert_allclose(m["average_loss/m"], sum(CE) / 3, rtol=1e-6)


def test_predictions_by_hand():
    head = head_lib.MultiClassHead(3, label_vocabulary=["a", "b", "c"])
    logits = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 0.0]], np.float32)
    p = head.predictions(logits)
    assert list(p) == [
        "logits", "probabilities", "class_ids", "classes", "all_class_ids", "all_classes",
    ]  # fmt: skip
    z = math.e + math.e**2 + math.e**3
    np.testing.assert_allclose(
        p["probabilities"],
        [[math.e / z, math.e**2 / z, math.e**3 / z], [math.e / (2 * math.e + 1)] * 2
         + [1 / (2 * math.e + 1)]],
        rtol=1e-6,
    )  # fmt: skip
    # argmax; a tie between classes 0 and 1 takes class 0.
    assert p["class_ids"].dtype == jnp.int32
    np.testing.assert_array_equal(p["class_ids"], [[2], [0]])
    np.testing.assert_array_equal(p["all_class_ids"], [[0, 1, 2]] * 2)
    host = to_host(p)
    np.testing.assert_array_equal(host["classes"], [[b"c"], [b"a"]])
    np.testing.assert_array_equal(host["all_classes"], [[b"a", b"b", b"c"]] * 2)
    host = to_host(head_lib.MultiClassHead(3).predictions(logits))
    np.testing.assert_array_equal(host["classes"], [[b"2"], [b"0"]])  # as_string(class_ids)
    with pytest.raises(ValueError, match=r"Prediction key must be in PredictionKeys, given: "):
        head.predictions(logits, keys=["logistic"])


def test_prepare_labels():
    head = head_lib.MultiClassHead(3, label_vocabulary=["a", "b", "c"])
    out = head.prepare_labels(np.array(["c", "a", "b", "c"]))
    assert out.dtype == np.int32 and out.shape == (4, 1)
    np.testing.assert_array_equal(out[:, 0], [2, 0, 1, 2])
    with pytest.raises(ValueError, match=r"got unknown labels \['d'\]"):
        head.prepare_labels(["a", "d"])
    head = head_lib.MultiClassHead(3)
    np.testing.assert_array_equal(head.prepare_labels(np.array([2, 0], np.int64)), [[2], [0]])
    with pytest.raises(ValueError, match=r"Labels must be <= 3 - 1; got \[3, 7\]"):
        head.prepare_labels([0, 3, 7])
    with pytest.raises(ValueError, match=r"Labels must be >= 0; got \[-1\]"):
        head.prepare_labels([[0], [-1]])
    with pytest.raises(
        ValueError, match=r"Labels dtype should be integer\. Instead got float64\..*astype"
    ):
        head.prepare_labels(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"Labels dtype should be integer\. Instead got <U1"):
        head.prepare_labels(np.array(["a"]))


def test_device_label_checks():
    head = head_lib.MultiClassHead(3)
    with pytest.raises(ValueError, match=r"Labels dtype should be integer\. Instead got float32"):
        head.loss(jnp.array([1.0, 1.0, 2.0]), LOGITS)
    with pytest.raises(ValueError, match=r"Labels must be <= 3 - 1; got \[3\]"):
        head.loss(np.array([1, 3, 2]), LOGITS)
    with pytest.raises(ValueError, match=r"Mismatched label shape\. Expected labels dimension=1"):
        head.loss(np.zeros((3, 3), np.int32), LOGITS)
    with pytest.raises(ValueError, match=r"logits shape must be .* got \(3, 2\)"):
        head.loss(LABELS, LOGITS[:, :2])
    # An id out of range inside jit cannot be checked: its loss is NaN, which the
    # Estimator's NaN guard catches.
    assert np.isnan(jax.jit(head.loss)(jnp.array([1, 3, 2]), LOGITS))


def test_custom_loss_fn_gets_integer_ids():
    def loss_fn(labels, logits):
        assert labels.shape == (3, 1) and jnp.issubdtype(labels.dtype, jnp.integer)
        return labels.astype(jnp.float32) * 2.0

    head = head_lib.MultiClassHead(3, loss_fn=loss_fn)
    np.testing.assert_allclose(head.loss(LABELS, LOGITS), (2 + 2 + 4) / 3, rtol=1e-6)


def test_export_outputs_and_spec_under_jit():
    head = head_lib.MultiClassHead(3)
    spec = head.create_estimator_spec({}, est.ModeKeys.PREDICT, LOGITS)
    assert set(spec.export_outputs) == {"serving_default", "classification", "predict"}
    cls = spec.export_outputs["serving_default"]
    assert cls is spec.export_outputs["classification"]
    assert isinstance(cls, est.ClassificationOutput)
    np.testing.assert_array_equal(cls.classes.to_numpy(), [[b"0", b"1", b"2"]] * 3)
    np.testing.assert_allclose(cls.scores, spec.predictions["probabilities"])
    assert set(spec.export_outputs["predict"].outputs) == set(spec.predictions)

    @jax.jit
    def eval_step(logits, labels):
        spec = head.create_estimator_spec({}, est.ModeKeys.EVAL, logits, labels)
        return spec.loss, {k: m.compute() for k, m in spec.eval_metric_ops.items()}

    loss, m = eval_step(LOGITS, LABELS.astype(np.int32))
    np.testing.assert_allclose(loss, sum(CE) / 3, rtol=1e-6)
    assert set(m) == {"accuracy", "average_loss"}
