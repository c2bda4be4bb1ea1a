"""Parsing specs (``tf.io.FixedLenFeature``, ``VarLenFeature``, ``SparseFeature``,
``RaggedFeature``, ``FixedLenSequenceFeature``) and dtype names.

The specs say how ``parse_example`` reads a feature of a ``tf.Example`` (TF 2.15's
``tensorflow/python/ops/parsing_config.py``: same names, fields, argument order and
defaults). They are frozen dataclasses; dtypes are stored as ``np.dtype`` (strings as
``np.dtype(object)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

STRING = "string"


def dtype_name(dtype: Any, *, what: str = "dtype") -> str:
    """Canonical dtype name: ``"string"`` for strings, else NumPy's (``"int64"``).

    Accepts NumPy dtypes and scalar types, ``str``/``bytes``/``object`` (strings), their
    names, and objects with ``as_numpy_dtype`` (a ``tf.DType``; TensorFlow is not imported).

    Raises:
      TypeError: if ``dtype`` is not a dtype.
    """
    if isinstance(dtype, str) and dtype.lower() in ("string", "str", "bytes", "object"):
        return STRING
    dtype = getattr(dtype, "as_numpy_dtype", dtype)
    if dtype is object or (isinstance(dtype, type) and issubclass(dtype, (str, bytes))):
        return STRING
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        raise TypeError(
            f"{what}: {dtype!r} is not a dtype. Use a NumPy dtype (np.float32, np.int64) or "
            "str for strings."
        ) from None
    return STRING if resolved.kind in "OUS" else resolved.name


def _as_tuple(value: Any) -> Any:
    """Lists (nested) to tuples, NumPy scalars to Python numbers."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return tuple(_as_tuple(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _as_list(value: Any) -> Any:
    """Tuples (nested) to lists, for JSON."""
    if isinstance(value, tuple | list):
        return [_as_list(v) for v in value]
    return value


@dataclass(frozen=True)
class FixedLenFeature:
    """A dense feature of fixed shape per example (``tf.io.FixedLenFeature``).

    Args:
      shape: shape of one example's value (``()`` for a scalar, ``(1,)``, ``(3, 2)``).
      dtype: a NumPy dtype (``np.float32``, ``np.int64``) or ``str`` for strings; stored as
        ``np.dtype`` (strings as ``np.dtype(object)``).
      default_value: value used when an example lacks the feature; None means required.
    """

    shape: tuple[int, ...]
    dtype: Any
    default_value: Any = None

    def __post_init__(self):
        shape = (self.shape,) if isinstance(self.shape, int) else tuple(self.shape)
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        name = dtype_name(self.dtype, what="FixedLenFeature")
        object.__setattr__(self, "dtype", np.dtype(object if name == STRING else name))
        object.__setattr__(self, "default_value", _as_tuple(self.default_value))

    def to_config(self) -> dict[str, Any]:
        """JSON-able description; :func:`feature_from_config` inverts it."""
        return {
            "type": "FixedLenFeature",
            "shape": list(self.shape),
            "dtype": dtype_name(self.dtype),
            "default_value": _as_list(self.default_value),
        }


@dataclass(frozen=True)
class VarLenFeature:
    """A variable number of values per example (``tf.io.VarLenFeature``).

    In NumPy batches such a feature is ``[batch_size, k]``, padded with ``""`` (strings) or
    ``-1`` (integers).

    Args:
      dtype: a NumPy dtype or ``str`` for strings; stored as ``np.dtype`` (strings as
        ``np.dtype(object)``).
    """

    dtype: Any

    def __post_init__(self):
        name = dtype_name(self.dtype, what="VarLenFeature")
        object.__setattr__(self, "dtype", np.dtype(object if name == STRING else name))

    def to_config(self) -> dict[str, Any]:
        """JSON-able description; :func:`feature_from_config` inverts it."""
        return {"type": "VarLenFeature", "dtype": dtype_name(self.dtype)}


def _dtype(dtype: Any, what: str) -> np.dtype:
    name = dtype_name(dtype, what=what)
    return np.dtype(object if name == STRING else name)


def _shape(shape: Any) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return tuple(int(d) for d in shape)


@dataclass(frozen=True)
class SparseFeature:
    """A sparse feature built from an index feature and a value feature
    (``tf.io.SparseFeature``).

    Each example holds the indices in ``index_key`` (int64 lists) and the values in
    ``value_key`` (lists of ``dtype``), of equal lengths; ``parse_example`` gives a
    :class:`~estimator.io.SparseValue` of dense shape ``[batch_size, *size]``.

    Args:
      index_key: the index feature's key, or a list of keys (one per dimension of
        ``size``).
      value_key: the value feature's key.
      dtype: the values' dtype (float32, int64 or ``str``).
      size: the dense size of each example's values: an int, or a list (one per
        ``index_key``).
      already_sorted: whether the indices are sorted within each example (TF sorts them
        otherwise).
    """

    index_key: Any
    value_key: str
    dtype: Any
    size: Any
    already_sorted: bool = False

    def __post_init__(self):
        index = self.index_key
        index = index if isinstance(index, str) else tuple(index)
        object.__setattr__(self, "index_key", index)
        size = self.size
        object.__setattr__(self, "size", int(size) if isinstance(size, int) else _shape(size))
        object.__setattr__(self, "dtype", _dtype(self.dtype, "SparseFeature"))


@dataclass(frozen=True)
class FixedLenSequenceFeature:
    """A sequence of values of fixed shape per step (``tf.io.FixedLenSequenceFeature``).

    ``parse_example`` reads an example's list as ``[steps, *shape]`` and pads the batch to
    its longest sequence with ``default_value`` (``0`` / ``""`` when None).

    Args:
      shape: the shape of one step's values.
      dtype: float32, int64 or ``str``.
      allow_missing: must be True for ``parse_example`` (TF's rule): an example without the
        feature is an empty sequence.
      default_value: the padding value (a scalar).
    """

    shape: tuple[int, ...]
    dtype: Any
    allow_missing: bool = False
    default_value: Any = None

    def __post_init__(self):
        object.__setattr__(self, "shape", _shape(self.shape))
        object.__setattr__(self, "dtype", _dtype(self.dtype, "FixedLenSequenceFeature"))
        object.__setattr__(self, "default_value", _as_tuple(self.default_value))


@dataclass(frozen=True)
class _Partition:
    key: Any


class RaggedFeature:
    """A ragged feature (``tf.io.RaggedFeature``): each example's values, optionally split
    into nested rows by partition features.

    ``parse_example`` gives a :class:`~estimator.io.RaggedValue` ``[batch_size, (rows)...,
    (values)]``: the outermost partition is the batch, then one level per partition, in
    order (outermost first), each read from the example's own features.

    Args:
      dtype: float32, int64 or ``str``.
      value_key: the feature holding the values (default: the key of the spec).
      partitions: ``RaggedFeature.RowSplits(key)``, ``RowLengths(key)``,
        ``RowStarts(key)``, ``RowLimits(key)``, ``ValueRowIds(key)`` or
        ``UniformRowLength(length)``.
      row_splits_dtype: int32 (default) or int64.
      validate: check the partitions (they are always checked here).
    """

    @dataclass(frozen=True)
    class RowSplits(_Partition):
        """Row splits of the values, from the int64 feature ``key``."""

    @dataclass(frozen=True)
    class RowLengths(_Partition):
        """Row lengths, from the int64 feature ``key``."""

    @dataclass(frozen=True)
    class RowStarts(_Partition):
        """Row starts, from the int64 feature ``key``."""

    @dataclass(frozen=True)
    class RowLimits(_Partition):
        """Row limits, from the int64 feature ``key``."""

    @dataclass(frozen=True)
    class ValueRowIds(_Partition):
        """The row of each value, from the int64 feature ``key``."""

    @dataclass(frozen=True)
    class UniformRowLength:
        """Rows of ``length`` values each."""

        length: int

    def __init__(
        self,
        dtype: Any,
        value_key: str | None = None,
        partitions: tuple = (),
        row_splits_dtype: Any = np.int32,
        validate: bool = False,
    ) -> None:
        self.dtype = _dtype(dtype, "RaggedFeature")
        self.value_key = value_key
        self.partitions = tuple(partitions)
        kinds = (
            RaggedFeature.RowSplits,
            RaggedFeature.RowLengths,
            RaggedFeature.RowStarts,
            RaggedFeature.RowLimits,
            RaggedFeature.ValueRowIds,
            RaggedFeature.UniformRowLength,
        )
        for partition in self.partitions:
            if not isinstance(partition, kinds):
                raise TypeError(
                    f"RaggedFeature partitions must be RaggedFeature.RowSplits, RowLengths, "
                    f"RowStarts, RowLimits, ValueRowIds or UniformRowLength; got {partition!r}."
                )
        self.row_splits_dtype = np.dtype(row_splits_dtype)
        if self.row_splits_dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise ValueError(
                f"RaggedFeature row_splits_dtype must be int32 or int64; got "
                f"{self.row_splits_dtype}."
            )
        self.validate = bool(validate)

    def _key(self) -> tuple:
        return (self.dtype, self.value_key, self.partitions, self.row_splits_dtype)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RaggedFeature) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"RaggedFeature(dtype={self.dtype}, value_key={self.value_key!r}, "
            f"partitions={self.partitions!r}, row_splits_dtype={self.row_splits_dtype})"
        )


def feature_from_config(config: Mapping[str, Any]) -> FixedLenFeature | VarLenFeature:
    """Rebuilds a :class:`FixedLenFeature` or :class:`VarLenFeature` from ``to_config()``.

    Raises:
      ValueError: for an unknown ``type``.
    """
    kind = config.get("type")
    if kind == "FixedLenFeature":
        return FixedLenFeature(config["shape"], config["dtype"], config.get("default_value"))
    if kind == "VarLenFeature":
        return VarLenFeature(config["dtype"])
    raise ValueError(
        f"Unknown feature spec type {kind!r}; expected 'FixedLenFeature' or 'VarLenFeature'."
    )
