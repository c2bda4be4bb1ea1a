"""``tf.estimator.export``: serving receivers and export outputs (``estimator.export``).

A ``serving_input_receiver_fn`` written for TF 1 builds its inputs with ``tf.placeholder``
(here a ``jax.ShapeDtypeStruct``, which ``ServingInputReceiver`` accepts).
"""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.export import ClassificationOutput as ClassificationOutput
from estimator.export import EvalOutput as EvalOutput
from estimator.export import ExportOutput as ExportOutput
from estimator.export import PredictOutput as PredictOutput
from estimator.export import RegressionOutput as RegressionOutput
from estimator.export import ServingInputReceiver as ServingInputReceiver
from estimator.export import TensorServingInputReceiver as TensorServingInputReceiver
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
