"""``tf.io`` (TF 1.15): ``decode_csv`` and ``gfile``."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1 import gfile as gfile
from estimator.compat.v1.data._readers import decode_csv as decode_csv

__all__ = ["decode_csv", "gfile"]

__getattr__ = module_getattr("tf.io", __name__)
