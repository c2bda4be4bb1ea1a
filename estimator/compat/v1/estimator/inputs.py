"""``tf.estimator.inputs``: ``numpy_input_fn`` (``estimator.inputs``)."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.inputs import numpy_input_fn as numpy_input_fn

__all__ = ["numpy_input_fn"]

__getattr__ = module_getattr("tf.estimator.inputs", __name__)
