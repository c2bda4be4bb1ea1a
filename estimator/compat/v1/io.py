"""``tf.io`` (TF 1.15): ``decode_csv``, ``gfile``, ``tf.Example`` parsing and TFRecord files.

``parse_example`` and friends are ``estimator.io``'s (TF's semantics and messages): a
``VarLenFeature`` or ``SparseFeature`` gives an ``estimator.io.SparseValue`` (indices,
values, dense_shape: TF's ``SparseTensorValue``), which feature columns read as TF's
``SparseTensor``; a ``RaggedFeature`` gives an ``estimator.io.RaggedValue``. In a
``tf.data`` pipeline, parse batches (``dataset.batch(n).map(parse_example)``, TF's
recommended order) or parse each record and batch after (``batch`` joins the sparse values
of ``VarLenFeature``s as TF's batches ``SparseTensor``s; ragged values are not batched).

Errors are TF's classes (``errors``): a bad value in the data (a wrong type or length, a
missing required feature, bytes that are not an ``Example``, a CSV field that does not
parse) raises ``tf.errors.InvalidArgumentError`` (also a ``ValueError``, the native
class), a damaged TFRecord ``tf.errors.DataLossError`` (also an
``estimator.io.CorruptRecordError``), a missing file ``tf.errors.NotFoundError`` (also a
``FileNotFoundError``). A bad spec is a ``ValueError``/``TypeError`` raised before any data
is read, as TF 1 raises it while building the graph.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from estimator import io as _io
from estimator.compat._unsupported import module_getattr
from estimator.compat.v1 import gfile as gfile
from estimator.compat.v1.data import _readers
from estimator.compat.v1.errors import (
    InvalidArgumentError,
    raising_tf_errors,
    tf_error,
    with_tf_errors,
)
from estimator.io import FixedLenFeature as FixedLenFeature
from estimator.io import FixedLenSequenceFeature as FixedLenSequenceFeature
from estimator.io import RaggedFeature as RaggedFeature
from estimator.io import SparseFeature as SparseFeature
from estimator.io import VarLenFeature as VarLenFeature
from estimator.io._parse import check_specs
from estimator.io.tfrecord import TFRecordOptions as TFRecordOptions
from estimator.io.tfrecord import TFRecordWriter as _TFRecordWriter

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


decode_csv = with_tf_errors(_readers.decode_csv, InvalidArgumentError)
decode_csv.__doc__ = f"""{_readers.decode_csv.__doc__}
    A record that does not parse raises ``tf.errors.InvalidArgumentError`` (TF's class;
    also a ``ValueError``).
"""


class TFRecordWriter(_TFRecordWriter):
    """``tf.io.TFRecordWriter`` (``estimator.io.TFRecordWriter``); a directory that does not
    exist raises ``tf.errors.NotFoundError`` (also a ``FileNotFoundError``), as TF's."""

    def __init__(self, path, options=None) -> None:
        with raising_tf_errors():
            super().__init__(path, options)


def parse_example(serialized, features, name=None, example_names=None) -> dict:
    """``tf.io.parse_example`` (TF 1's argument order: ``name`` before
    ``example_names``); see ``estimator.io.parse_example``.

    Raises:
      ValueError, TypeError: a bad spec (before reading the data, as TF 1's graph).
      tf.errors.InvalidArgumentError: a bad example (TF's message first).
    """
    check_specs(features)
    _check_batch(serialized)
    with raising_tf_errors(InvalidArgumentError):
        return _io.parse_example(serialized, features, example_names)


def _check_batch(serialized) -> None:
    """TF's error for ``serialized`` of rank > 1, with the native message after it."""
    shape = np.shape(serialized) if not isinstance(serialized, bytes | str) else ()
    if len(shape) > 1:
        try:
            _io.parse_example(serialized, {"_": _io.VarLenFeature(np.int64)})
        except ValueError as error:
            dims = ",".join(map(str, shape))
            message = f"Expected serialized to be a scalar or vector, got shape: [{dims}]"
            raise tf_error(error, InvalidArgumentError, message) from None


def parse_single_example(serialized, features, name=None, example_names=None) -> dict:
    """``tf.io.parse_single_example``; see ``estimator.io.parse_single_example``.

    Raises:
      ValueError, TypeError: a bad spec, or ``serialized`` not one string.
      tf.errors.InvalidArgumentError: a bad example (TF's message first).
    """
    check_specs(features)
    serialized = _scalar(serialized)
    if not isinstance(serialized, bytes):
        return _io.parse_single_example(serialized, features)  # its ValueError, as TF's
    with raising_tf_errors(InvalidArgumentError):
        return _io.parse_single_example(serialized, features)


def parse_sequence_example(
    serialized, context_features=None, sequence_features=None, example_names=None, name=None
):
    """``tf.io.parse_sequence_example``: ``(context, feature_lists, lengths)``.

    Raises:
      ValueError, TypeError: a bad spec.
      tf.errors.InvalidArgumentError: a bad example (TF's message first).
    """
    _check_sequence_specs(context_features, sequence_features)
    with raising_tf_errors(InvalidArgumentError):
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
    """``tf.io.parse_single_sequence_example``: ``(context, feature_lists)``.

    Raises:
      ValueError, TypeError: a bad spec, or ``serialized`` not one string.
      tf.errors.InvalidArgumentError: a bad example (TF's message first).
    """
    _check_sequence_specs(context_features, sequence_features)
    serialized = _scalar(serialized)
    if not isinstance(serialized, bytes):
        return _io.parse_single_sequence_example(serialized, context_features, sequence_features)
    with raising_tf_errors(InvalidArgumentError):
        return _io.parse_single_sequence_example(
            serialized, context_features, sequence_features, example_name
        )


def _check_sequence_specs(context_features, sequence_features) -> None:
    """The spec errors of ``parse_sequence_example`` (``ValueError``/``TypeError``), raised
    by parsing no record."""
    _io.parse_sequence_example([], context_features, sequence_features)


def tf_record_iterator(path, options=None):
    """``tf.io.tf_record_iterator``: the records of one TFRecord file.

    Raises:
      tf.errors.NotFoundError: no such file (when iterated).
      tf.errors.DataLossError: a truncated or corrupt record, after the good ones before it.
    """
    with raising_tf_errors():
        yield from _io.tfrecord.tf_record_iterator(path, options)
