"""``tf.python_io`` (TF 1.x): TFRecord files."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1.io import TFRecordCompressionType as TFRecordCompressionType
from estimator.compat.v1.io import TFRecordOptions as TFRecordOptions
from estimator.compat.v1.io import TFRecordWriter as TFRecordWriter
from estimator.compat.v1.io import tf_record_iterator as tf_record_iterator

__all__ = ["TFRecordCompressionType", "TFRecordOptions", "TFRecordWriter", "tf_record_iterator"]

__getattr__ = module_getattr("tf.python_io", __name__)
