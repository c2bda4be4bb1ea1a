"""``ExportOutput``s: what each serving signature returns (``tf.estimator.export``).

A ``model_fn`` in PREDICT mode may give ``EstimatorSpec(export_outputs={name: output})``;
each entry becomes one signature of an export. Messages and rules follow TF 2.15's
``tensorflow/python/saved_model/model_utils/export_output.py``. Differences: outputs are
JAX arrays; a classifier's string ``classes`` are an :class:`estimator.IndexToString`
(ids + vocabulary), since XLA has no strings.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from estimator.model.strings import IndexToString

__all__ = [
    "ExportOutput",
    "PredictOutput",
    "ClassificationOutput",
    "RegressionOutput",
    "EvalOutput",
    "DEFAULT_SERVING_SIGNATURE_DEF_KEY",
]

DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
PREDICT_METHOD = "tensorflow/serving/predict"
EVAL_METHOD = "tensorflow/supervised/eval"


def is_array(x) -> bool:
    """True for JAX arrays (tracers included) and NumPy arrays (internal)."""
    return isinstance(x, (jax.Array, np.ndarray))


class ExportOutput:
    """Base class: a named group of output arrays of one signature."""

    method_name: str = ""

    @property
    def outputs(self) -> dict:
        """The signature's outputs, ``{output_name: array}`` (a property, as TF's
        ``PredictOutput.outputs``)."""
        raise NotImplementedError


class PredictOutput(ExportOutput):
    """Any dict of arrays, returned as is (TF's ``PredictOutput``).

    Args:
      outputs: an array (named ``"output"``) or a dict ``{str: array}``.

    Raises:
      ValueError: for a non-string key or a non-array value (TF's messages).
    """

    method_name = PREDICT_METHOD

    def __init__(self, outputs):
        if not isinstance(outputs, dict):
            outputs = {"output": outputs}
        checked = {}
        for key, value in outputs.items():
            if isinstance(key, tuple):
                key = "/".join(key)
            if not isinstance(key, str):
                raise ValueError(f"Prediction output key must be a string; got {key}.")
            if not (is_array(value) or isinstance(value, IndexToString)):
                raise ValueError(f"Prediction output value must be a Tensor; got {value}.")
            checked[key] = value
        self._outputs = checked

    @property
    def outputs(self) -> dict:
        return dict(self._outputs)


class ClassificationOutput(ExportOutput):
    """Scores and/or class names of a classifier (TF's ``ClassificationOutput``).

    Args:
      scores: float array ``[batch_size, n]``: a score per class.
      classes: :class:`estimator.IndexToString` ``[batch_size, n]``: the class names (TF
        requires a string tensor; ids plus a vocabulary are the JAX equivalent).

    Raises:
      ValueError: if neither is set, scores are not floating point, or classes are not
        strings (TF's messages).
    """

    method_name = CLASSIFY_METHOD

    def __init__(self, scores=None, classes=None):
        if scores is not None and not (
            is_array(scores) and jnp.issubdtype(scores.dtype, jnp.floating)
        ):
            raise ValueError(f"Classification scores must be a float32 Tensor; got {scores}")
        if classes is not None and not isinstance(classes, IndexToString):
            raise ValueError(
                f"Classification classes must be a string Tensor; got {classes}. In JAX, pass "
                "estimator.index_to_string(class_ids, vocabulary)."
            )
        if scores is None and classes is None:
            raise ValueError(
                "Cannot create a ClassificationOutput with empty arguments. At least one of "
                "`scores` and `classes` must be defined."
            )
        self.scores = scores
        self.classes = classes

    @property
    def outputs(self) -> dict:
        out = {}
        if self.classes is not None:
            out["classes"] = self.classes
        if self.scores is not None:
            out["scores"] = self.scores
        return out


class RegressionOutput(ExportOutput):
    """The predicted value of a regressor (TF's ``RegressionOutput``).

    Args:
      value: float array ``[batch_size]`` or ``[batch_size, 1]``.

    Raises:
      ValueError: if ``value`` is not a floating-point array (TF's message).
    """

    method_name = REGRESS_METHOD

    def __init__(self, value):
        if not (is_array(value) and jnp.issubdtype(value.dtype, jnp.floating)):
            raise ValueError(f"Regression output value must be a float32 Tensor; got {value}")
        self.value = value

    @property
    def outputs(self) -> dict:
        return {"outputs": self.value}


class EvalOutput(ExportOutput):
    """The outputs of an evaluation signature (``tf.estimator.export.EvalOutput``):
    ``loss``, ``predictions`` (or ``predictions/<key>`` for a dict) and
    ``metrics/<name>/value`` for each metric, TF's key scheme.

    Args:
      loss: the loss, a scalar array, or None.
      predictions: an array or ``{key: array}``, or None.
      metrics: ``{name: metric}`` (``estimator.metrics`` objects: their value is
        ``compute()``), or None. TF also exports each metric's ``update_op``; a metric
        here is a value, merged by the caller, so there is none.
    """

    method_name = EVAL_METHOD

    def __init__(self, loss=None, predictions=None, metrics=None):
        self.loss = loss
        self.predictions = predictions
        self.metrics = dict(metrics or {})

    @property
    def outputs(self) -> dict:
        out = {} if self.loss is None else {"loss": self.loss}
        if isinstance(self.predictions, dict):
            out.update({f"predictions/{k}": v for k, v in self.predictions.items()})
        elif self.predictions is not None:
            out["predictions"] = self.predictions
        for name, metric in self.metrics.items():
            out[f"metrics/{name}/value"] = metric.compute()
        return out


def get_export_outputs(export_outputs, predictions) -> dict:
    """TF's defaulting and validation of ``EstimatorSpec.export_outputs`` (internal).

    None becomes ``{"serving_default": PredictOutput(predictions)}``; a single entry under
    another name is also made the default; several entries need a ``serving_default``.
    """
    if export_outputs is None:
        export_outputs = {DEFAULT_SERVING_SIGNATURE_DEF_KEY: PredictOutput(predictions)}
    if not isinstance(export_outputs, dict):
        raise TypeError(f"`export_outputs` must be dict, received: {export_outputs}.")
    for value in export_outputs.values():
        if not isinstance(value, ExportOutput):
            raise TypeError(
                "Values in `export_outputs` must be ExportOutput objects, received: "
                f"{export_outputs}."
            )
    export_outputs = dict(export_outputs)
    if len(export_outputs) == 1:
        ((key, value),) = export_outputs.items()
        if key != DEFAULT_SERVING_SIGNATURE_DEF_KEY:
            export_outputs[DEFAULT_SERVING_SIGNATURE_DEF_KEY] = value
    if len(export_outputs) > 1 and DEFAULT_SERVING_SIGNATURE_DEF_KEY not in export_outputs:
        raise ValueError(
            "Multiple `export_outputs` were provided, but none of them are specified as the "
            "default. Use `serving_default` (tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY) "
            "as one of the keys to specify a default."
        )
    return export_outputs
