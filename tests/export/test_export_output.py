"""Tests for ``estimator/export_output.py``.

Messages are TF 2.15's ``tensorflow/python/saved_model/model_utils/export_output.py``
(checked with tensorflow 2.15.1: e.g. ``PredictOutput({1: t})`` raises "Prediction output key
must be a string; got 1.").
"""

import jax.numpy as jnp
import numpy as np
import pytest

import estimator as est
from estimator.model.export_output import (
    CLASSIFY_METHOD,
    DEFAULT_SERVING_SIGNATURE_DEF_KEY,
    PREDICT_METHOD,
    REGRESS_METHOD,
    get_export_outputs,
)

SCORES = jnp.array([[0.2, 0.8]], jnp.float32)


def test_default_key_and_method_names():
    assert DEFAULT_SERVING_SIGNATURE_DEF_KEY == "serving_default"
    assert est.PredictOutput.method_name == PREDICT_METHOD == "tensorflow/serving/predict"
    assert est.ClassificationOutput.method_name == CLASSIFY_METHOD == "tensorflow/serving/classify"
    assert est.RegressionOutput.method_name == REGRESS_METHOD == "tensorflow/serving/regress"


def test_base_class_outputs_is_abstract():
    with pytest.raises(NotImplementedError):
        est.ExportOutput().outputs  # noqa: B018


# --- PredictOutput ------------------------------------------------------------------------


def test_predict_output_dict_is_copied():
    given = {"a": SCORES, "b": np.zeros(3)}
    out = est.PredictOutput(given)
    assert out.outputs == given
    out.outputs["c"] = SCORES  # callers cannot mutate the stored outputs
    given["d"] = SCORES
    assert sorted(out.outputs) == ["a", "b"]


def test_predict_output_single_array_is_named_output():
    assert est.PredictOutput(SCORES).outputs == {"output": SCORES}


def test_predict_output_tuple_keys_are_joined_with_slash():
    # TF's multi-head keys: ('head', 'probabilities') -> 'head/probabilities'.
    assert list(est.PredictOutput({("head", "probabilities"): SCORES}).outputs) == [
        "head/probabilities"
    ]


def test_predict_output_key_must_be_string():
    with pytest.raises(ValueError, match=r"^Prediction output key must be a string; got 1\.$"):
        est.PredictOutput({1: SCORES})


def test_predict_output_value_must_be_array():
    with pytest.raises(ValueError, match=r"^Prediction output value must be a Tensor; got 1\.$"):
        est.PredictOutput({"a": 1})
    with pytest.raises(ValueError, match=r"^Prediction output value must be a Tensor; got x\.$"):
        est.PredictOutput("x")


def test_predict_output_accepts_index_to_string():
    classes = est.index_to_string(jnp.array([1]), ["a", "b"])
    assert est.PredictOutput({"classes": classes}).outputs["classes"] is classes


# --- ClassificationOutput -----------------------------------------------------------------


def test_classification_output_fields_and_outputs():
    classes = est.index_to_string(jnp.array([[0, 1]]), ["neg", "pos"])
    out = est.ClassificationOutput(scores=SCORES, classes=classes)
    assert out.scores is SCORES and out.classes is classes
    assert out.outputs == {"classes": classes, "scores": SCORES}
    assert est.ClassificationOutput(scores=SCORES).outputs == {"scores": SCORES}
    assert list(est.ClassificationOutput(classes=classes).outputs) == ["classes"]


def test_classification_output_needs_one_argument():
    with pytest.raises(
        ValueError,
        match=r"^Cannot create a ClassificationOutput with empty arguments\. At least one of "
        r"`scores` and `classes` must be defined\.$",
    ):
        est.ClassificationOutput()


@pytest.mark.parametrize("scores", [jnp.array([1, 2]), [0.5], 0.5])
def test_classification_scores_must_be_float_arrays(scores):
    with pytest.raises(ValueError, match=r"^Classification scores must be a float32 Tensor; got "):
        est.ClassificationOutput(scores=scores)


def test_classification_scores_of_other_float_dtypes_accepted():
    # TF checks dtype.is_floating (float16 passes in TF 2.15.1 too).
    output = est.ClassificationOutput(scores=jnp.array([0.5], jnp.float16))
    assert output.scores.dtype == jnp.float16


def test_classification_classes_must_be_strings():
    with pytest.raises(
        ValueError,
        match=r"^Classification classes must be a string Tensor; got \[1 2\]\. In JAX, pass "
        r"estimator\.index_to_string\(class_ids, vocabulary\)\.$",
    ):
        est.ClassificationOutput(classes=np.array([1, 2]))


def test_classification_scores_checked_before_classes():
    # TF order: scores, classes, then the empty check.
    with pytest.raises(ValueError, match="scores must be"):
        est.ClassificationOutput(scores=np.array([1]), classes=np.array([1]))


# --- RegressionOutput ---------------------------------------------------------------------


def test_regression_output():
    value = jnp.array([[1.5]], jnp.float32)
    out = est.RegressionOutput(value)
    assert out.value is value
    assert out.outputs == {"outputs": value}  # TF's signature output key


@pytest.mark.parametrize("value", [jnp.array([1]), 1.5, None])
def test_regression_value_must_be_float_array(value):
    with pytest.raises(ValueError, match=r"^Regression output value must be a float32 Tensor; got"):
        est.RegressionOutput(value)


# --- get_export_outputs -------------------------------------------------------------------


def test_get_export_outputs_rules():
    preds = {"p": SCORES}
    default = get_export_outputs(None, preds)
    assert list(default) == ["serving_default"]
    assert default["serving_default"].outputs == preds

    reg = est.RegressionOutput(SCORES)
    aliased = get_export_outputs({"regression": reg}, preds)
    assert aliased == {"regression": reg, "serving_default": reg}

    only_default = {"serving_default": reg}
    assert get_export_outputs(only_default, preds) == {"serving_default": reg}

    with pytest.raises(ValueError, match="Multiple `export_outputs`"):
        get_export_outputs({"a": reg, "b": reg}, preds)


def test_outputs_is_a_dict_property_as_tf():
    # TF 2.15: PredictOutput(...).outputs is a dict (a property), not a method.
    assert isinstance(est.PredictOutput({"a": SCORES}).outputs, dict)
    assert isinstance(type(est.PredictOutput({"a": SCORES})).outputs, property)


def test_eval_output_keys_as_tf():
    # TF 2.15's EvalOutput: 'loss', 'predictions/<key>' (or 'predictions'),
    # 'metrics/<name>/value'; method tensorflow/supervised/eval.
    metric = est.metrics.mean(jnp.array([1.0, 3.0]))
    out = est.export.EvalOutput(
        loss=jnp.float32(0.5), predictions={"p": SCORES}, metrics={"m": metric}
    )
    assert est.export.EvalOutput.method_name == "tensorflow/supervised/eval"
    assert sorted(out.outputs) == ["loss", "metrics/m/value", "predictions/p"]
    assert float(out.outputs["metrics/m/value"]) == 2.0  # (1 + 3) / 2
    assert sorted(est.export.EvalOutput(predictions=SCORES).outputs) == ["predictions"]
