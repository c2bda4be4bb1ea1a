"""``tf.saved_model.signature_constants``: the keys of signatures and their inputs and
outputs, and the method names (TF Serving's), as TF 2.15 defines them."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.model.export_output import (
    CLASSIFY_METHOD,
    DEFAULT_SERVING_SIGNATURE_DEF_KEY,
    PREDICT_METHOD,
    REGRESS_METHOD,
)

__all__ = [
    "CLASSIFY_INPUTS",
    "CLASSIFY_METHOD_NAME",
    "CLASSIFY_OUTPUT_CLASSES",
    "CLASSIFY_OUTPUT_SCORES",
    "DEFAULT_SERVING_SIGNATURE_DEF_KEY",
    "PREDICT_INPUTS",
    "PREDICT_METHOD_NAME",
    "PREDICT_OUTPUTS",
    "REGRESS_INPUTS",
    "REGRESS_METHOD_NAME",
    "REGRESS_OUTPUTS",
]

__getattr__ = module_getattr("tf.saved_model.signature_constants", __name__)

CLASSIFY_INPUTS = "inputs"
CLASSIFY_METHOD_NAME = CLASSIFY_METHOD
CLASSIFY_OUTPUT_CLASSES = "classes"
CLASSIFY_OUTPUT_SCORES = "scores"
PREDICT_INPUTS = "inputs"
PREDICT_METHOD_NAME = PREDICT_METHOD
PREDICT_OUTPUTS = "outputs"
REGRESS_INPUTS = "inputs"
REGRESS_METHOD_NAME = REGRESS_METHOD
REGRESS_OUTPUTS = "outputs"
