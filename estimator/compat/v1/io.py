"""``tf.io`` (TF 1.15): ``decode_csv``, ``gfile``, ``tf.Example`` parsing and TFRecord files.

``parse_example`` and friends are ``estimator.io``'s (TF's semantics and messages): a
``VarLenFeature`` or ``SparseFeature`` gives an ``estimator.io.SparseValue`` (indices,
values, dense_shape: TF's ``SparseTensorValue``), which feature columns read as TF's
``SparseTensor``; a ``RaggedFeature`` gives an ``estimator.io.RaggedValue``. In a
``tf.data`` pipeline, parse batches (``dataset.batch(n).map(parse_example)``, TF's
recommended order) or parse each record and batch after (``batch`` joins the sparse values
of ``VarLenFeature``s as TF's batches ``SparseTensor``s; ragged values are not batched).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from estimator import io as _io
from estimator.compat._unsupported import module_getattr
from estimator.compat.v1 import gfile as gfile
from estimator.compat.v1.data._readers import decode_csv as decode_csv
from estimator.io import FixedLenFeature as FixedLenFeature
from estimator.io import FixedLenSequenceFeature as FixedLenSequenceFeature
from estimator.io import RaggedFeature as RaggedFeature
from estimator.io import SparseFeature as SparseFeature
from estimator.io import VarLenFeature as VarLenFeature
from estimator.io.tfrecord import TFRecordOptions as TFRecordOptions
from estimator.io.tfrecord import TFRecordWriter as TFRecordWriter

__all__ = [
    "FixedLenFeature",
    "FixedLenSequenceFeature",
    "RaggedFeature",
    "SparseFeature",
    "TFRecordCompressionType",
    "TFRecordOptions",
    "TFRecordWriter",
    "VarLenFeature",
    "decode_csv",
    "gfile",
    "parse_example",
    "parse_sequence_example",
    "parse_single_example",
    "parse_single_sequence_example",
    "tf_record_iterator",
]

__getattr__ = module_getattr("tf.io", __name__)


class TFRecordCompressionType:
    """``tf.io.TFRecordCompressionType``: ``NONE``, ``ZLIB``, ``GZIP``."""

    NONE = ""
    ZLIB = "ZLIB"
    GZIP = "GZIP"


def _scalar(serialized: Any) -> Any:
    """A 0-d array (a ``tf.data`` element) as its bytes."""
    if isinstance(serialized, np.ndarray) and serialized.ndim == 0:
        return serialized.item()
    return serialized


def parse_example(serialized, features, name=None, example_names=None) -> dict:
    """``tf.io.parse_example`` (TF 1's argument order: ``name`` before
    ``example_names``); see ``estimator.io.parse_example``."""
    return _io.parse_example(serialized, features, example_names)


def parse_single_example(serialized, features, name=None, example_names=None) -> dict:
    """``tf.io.parse_single_example``; see ``estimator.io.parse_single_example``."""
    return _io.parse_single_example(_scalar(serialized), features)


def parse_sequence_example(
    serialized, context_features=None, sequence_features=None, example_names=None, name=None
):
    """``tf.io.parse_sequence_example``: ``(context, feature_lists, lengths)``."""
    return _io.parse_sequence_example(
        serialized, context_features, sequence_features, example_names
    )


def parse_single_sequence_example(
    serialized,
    context_features=None,
    sequence_features=None,
    example_name=None,
    name=None,
):
    """``tf.io.parse_single_sequence_example``: ``(context, feature_lists)``."""
    return _io.parse_single_sequence_example(
        _scalar(serialized), context_features, sequence_features, example_name
    )


def tf_record_iterator(path, options=None):
    """``tf.io.tf_record_iterator``: the records of one TFRecord file."""
    return _io.tfrecord.tf_record_iterator(path, options)
