"""``tf.estimator.export``: serving receivers and export outputs (``estimator.export``).

A ``serving_input_receiver_fn`` written for TF 1 builds its inputs with ``tf.placeholder``
(here a ``jax.ShapeDtypeStruct``, which ``ServingInputReceiver`` accepts) and may compute
its features from them with ops (``tf.expand_dims``, ``tf.cast``, ``/``, ...): the
receivers here turn such features into a function of the receiver tensors, which the
export traces with the model (``estimator.compat.v1._placeholders``).
"""

from __future__ import annotations

from estimator import export as _export
from estimator.compat._unsupported import module_getattr
from estimator.compat.v1._placeholders import receiver_function
from estimator.export import ClassificationOutput as ClassificationOutput
from estimator.export import EvalOutput as EvalOutput
from estimator.export import ExportOutput as ExportOutput
from estimator.export import PredictOutput as PredictOutput
from estimator.export import RegressionOutput as RegressionOutput
from estimator.export import (
    build_parsing_serving_input_receiver_fn as build_parsing_serving_input_receiver_fn,
)
from estimator.export import (
    build_raw_serving_input_receiver_fn as build_raw_serving_input_receiver_fn,
)

__all__ = [
    "ClassificationOutput",
    "EvalOutput",
    "ExportOutput",
    "PredictOutput",
    "RegressionOutput",
    "ServingInputReceiver",
    "TensorServingInputReceiver",
    "build_parsing_serving_input_receiver_fn",
    "build_raw_serving_input_receiver_fn",
]

__getattr__ = module_getattr("tf.estimator.export", __name__)


class ServingInputReceiver(_export.ServingInputReceiver):
    """``tf.estimator.export.ServingInputReceiver`` (``estimator.export``'s), whose
    features may be computed from the placeholders of ``receiver_tensors`` with ops."""

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        features = receiver_function(features, receiver_tensors)
        return super().__new__(cls, features, receiver_tensors, receiver_tensors_alternatives)


class TensorServingInputReceiver(_export.TensorServingInputReceiver):
    """``tf.estimator.export.TensorServingInputReceiver``, whose feature may be computed
    from the placeholders of ``receiver_tensors`` with ops."""

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        features = receiver_function(features, receiver_tensors)
        return super().__new__(cls, features, receiver_tensors, receiver_tensors_alternatives)
