"""``parse_example`` and ``parse_single_example`` without TensorFlow (``tf.io``).

The semantics are TF 2.15's fast example parser's
(``tensorflow/core/util/example_proto_fast_parsing.cc``), checked against TF 2.15.1 in
``tests/io/test_io_parse.py``:

* ``FixedLenFeature``: an example without the feature (or with an empty ``Feature``) takes
  ``default_value``, or is an error when there is none; a present list must hold exactly
  ``prod(shape)`` values of the spec's type (an empty list is an error even with a
  default).
* ``VarLenFeature``: a :class:`~estimator.io.SparseValue` ``[batch_size, max_count]``.
* ``SparseFeature``: a :class:`~estimator.io.SparseValue` ``[batch_size, *size]`` from the
  index and value features (indices sorted within each example unless
  ``already_sorted``; like TF, indices are not checked against ``size``).
* ``RaggedFeature``: a :class:`~estimator.io.RaggedValue` ``[batch_size, (partitions)...,
  (values)]``.
* ``FixedLenSequenceFeature`` (``allow_missing=True``): ``[batch_size, max_steps, *shape]``
  padded with ``default_value`` (``0`` / ``b""``).

dtypes are float32, int64 and strings (``bytes`` in ``object`` arrays), as TF's. Errors are
``ValueError``s whose message starts with TF's text (``"Name: <unknown>, Key: age, Index:
3.  Data types don't match. ..."``) and adds how to fix it. Where several examples are
wrong, the first one (then the first key in sorted order) is reported; a missing required
feature is reported after wrong types and lengths, as TF checks it last.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from estimator.io import _columns, _wire
from estimator.io._columns import ABSENT, BYTES, FLOAT, INT64, KIND_NAMES, Column
from estimator.io._records import Records
from estimator.io._specs import (
    FixedLenFeature,
    FixedLenSequenceFeature,
    RaggedFeature,
    SparseFeature,
    VarLenFeature,
)
from estimator.io._values import RaggedValue, SparseValue

__all__ = ["parse_example", "parse_single_example"]

_KIND_OF_DTYPE = {np.dtype(object): BYTES, np.dtype(np.float32): FLOAT, np.dtype(np.int64): INT64}
_SPECS = (FixedLenFeature, VarLenFeature, SparseFeature, RaggedFeature, FixedLenSequenceFeature)


def as_records(serialized: Any, what: str = "serialized") -> list[bytes]:
    """A batch of serialized protos as a list of ``bytes``.

    Raises:
      ValueError: not a 1-D batch of bytes strings.
    """
    if isinstance(serialized, bytes | str):
        raise ValueError(
            f"{what} must be a 1-D batch (a list or array) of serialized tf.Example bytes; got "
            "a single string. Use parse_single_example for one example, or wrap it in a list."
        )
    if isinstance(serialized, Records):
        return serialized  # the TFRecord reader's records, in its buffer
    if type(serialized) is list and set(map(type, serialized)) <= {bytes}:
        return serialized  # the common case (a batch of records), checked in one pass
    array = np.asarray(serialized, dtype=object)
    if array.ndim != 1:
        raise ValueError(
            f"{what} must be a 1-D batch of serialized tf.Example bytes; got shape "
            f"{list(array.shape)}. Flatten it (np.ravel) or parse row by row."
        )
    records = array.tolist()
    for i, record in enumerate(records):
        if not isinstance(record, bytes):
            if isinstance(record, str):
                raise ValueError(
                    f"{what}[{i}] is a str; expected bytes (a serialized tf.Example). Pass "
                    "the bytes the writer produced (example.SerializeToString())."
                )
            raise ValueError(
                f"{what}[{i}] is a {type(record).__name__}; expected bytes (a serialized "
                "tf.Example)."
            )
    return records


class _Where:
    """Formats TF's error prefixes: ``Name: <unknown>, Key: k, Index: i.`` in a batch, ``Key:
    k.`` for a single example."""

    def __init__(self, names: Sequence[str] | None, single: bool) -> None:
        self.names = names
        self.single = single

    def name(self, i: int) -> str:
        return "<unknown>" if self.names is None else str(self.names[i])

    def key(self, key: str, i: int) -> str:
        if self.single:
            return f"Key: {key}."
        return f"Name: {self.name(i)}, Key: {key}, Index: {i}."

    def feature(self, i: int) -> str:
        return "" if self.single else f"Name: {self.name(i)}, "


def _kind(spec, key: str) -> int:
    kind = _KIND_OF_DTYPE.get(np.dtype(spec.dtype))
    if kind is None:
        raise ValueError(
            f"features[{key!r}] has dtype {np.dtype(spec.dtype).name}; tf.Example features are "
            "float32, int64 or strings (TF: \"Value for attr 'Tdense' of "
            f"{np.dtype(spec.dtype).name} is not in the list of allowed values: float, int64, "
            'string"). Parse as float32/int64 and cast the result.'
        )
    return kind


def check_specs(features: Mapping[str, Any]) -> None:
    """Raises ``ValueError``/``TypeError`` for a spec dict ``parse_example`` cannot use."""
    if not isinstance(features, Mapping) or not features:
        raise ValueError(
            "features must be a non-empty dict {key: FixedLenFeature | VarLenFeature | "
            f"SparseFeature | RaggedFeature | FixedLenSequenceFeature}}; got {features!r}."
        )
    for key, spec in features.items():
        if not isinstance(spec, _SPECS):
            raise TypeError(
                f"features[{key!r}] is {spec!r}; expected a FixedLenFeature, VarLenFeature, "
                "SparseFeature, RaggedFeature or FixedLenSequenceFeature (estimator.io or "
                "tf.io's names in estimator.compat.v1)."
            )
        _kind(spec, key)
        if isinstance(spec, FixedLenSequenceFeature) and not spec.allow_missing:
            raise ValueError(
                "Unsupported: FixedLenSequenceFeature requires allow_missing to be True. "
                f"(features[{key!r}]: pass allow_missing=True.)"
            )
        if isinstance(spec, FixedLenFeature) and spec.default_value is not None:
            _default(spec, key)


def _default(spec: FixedLenFeature, key: str) -> np.ndarray:
    size = math.prod(spec.shape)
    try:
        default = np.asarray(spec.default_value, dtype=spec.dtype)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"FixedLenFeature {key!r}: default_value {spec.default_value!r} cannot be read as "
            f"{np.dtype(spec.dtype).name} ({err})."
        ) from None
    if default.size != size:
        raise ValueError(
            f"FixedLenFeature {key!r}: default_value has {default.size} values but shape "
            f'{list(spec.shape)} needs {size} (TF: "Input to reshape is a tensor with '
            f'{default.size} values, but the requested shape has {size}"). Give a '
            f"default_value of shape {list(spec.shape)}."
        )
    if default.dtype == object:
        default = np.asarray([v.encode() if isinstance(v, str) else v for v in default.ravel()])
        default = default.astype(object)
    return default.reshape(size)


def _keys_needed(features: Mapping[str, Any]) -> list[str]:
    keys = []
    for key, spec in features.items():
        if isinstance(spec, SparseFeature):
            index = [spec.index_key] if isinstance(spec.index_key, str) else spec.index_key
            keys += [*index, spec.value_key]
        elif isinstance(spec, RaggedFeature):
            keys.append(spec.value_key or key)
            keys += [p.key for p in spec.partitions if hasattr(p, "key")]
        else:
            keys.append(key)
    return list(dict.fromkeys(keys))


class _Errors:
    """The first error of a batch: ``(example index, rank, key, message)``, smallest first."""

    def __init__(self) -> None:
        self.found: list[tuple[int, int, str, str]] = []

    def add(self, index: int, rank: int, key: str, message: str) -> None:
        self.found.append((index, rank, key, message))

    def raise_first(self) -> None:
        if self.found:
            raise ValueError(min(self.found)[3])


def _check_type(
    column: Column, kind: int, key: str, where: _Where, errors: _Errors, dense: bool
) -> bool:
    """Records a type error (the first example whose list is of another kind); True when
    the column is of the spec's kind throughout."""
    wrong = np.flatnonzero((column.kinds != ABSENT) & (column.kinds != kind))
    if not len(wrong):
        return True
    i = int(wrong[0])
    actual = KIND_NAMES[int(column.kinds[i])]
    expected = KIND_NAMES[kind]
    if dense:
        text = f"Data types don't match. Data type: {actual} but expected type: {expected}"
    else:
        text = f"Data types don't match. Expected type: {expected}, Actual type: {actual}"
    errors.add(
        i,
        0,
        key,
        f"{where.key(key, i)}  {text}. The example holds a {actual} list under {key!r}; write "
        f"the feature as a {expected} list, or declare its spec with dtype {actual}.",
    )
    return False


def _offsets(counts: np.ndarray) -> np.ndarray:
    starts = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    return starts


def _fixed(column, spec, key, where, errors, missing) -> np.ndarray | None:
    kind = _kind(spec, key)
    if not _check_type(column, kind, key, where, errors, dense=True):
        return None
    size = math.prod(spec.shape)
    n = len(column.kinds)
    present = column.kinds == kind
    wrong = np.flatnonzero(present & (column.counts != size))
    if len(wrong):
        i = int(wrong[0])
        detail = (
            f"Number of {KIND_NAMES[kind]} values != expected.  Values size: "
            f"{int(column.counts[i])} but output shape: [{','.join(map(str, spec.shape))}]"
        )
        if where.single:
            detail = f"Can't parse serialized Example. ({detail}.)"
        errors.add(
            i,
            0,
            key,
            f"{where.key(key, i)}  {detail}. A FixedLenFeature needs exactly {size} values in "
            "every example that has it; use VarLenFeature or RaggedFeature for lists of varying "
            "length.",
        )
        return None
    absent = np.flatnonzero(column.kinds == ABSENT)
    if len(absent) and spec.default_value is None:
        i = int(absent[0])
        missing.add(
            i,
            1,
            key,
            f"{where.feature(i)}Feature: {key} (data type: {KIND_NAMES[kind]}) is required but "
            "could not be found. Write it in every example, or give the FixedLenFeature a "
            "default_value.",
        )
        return None
    values = column.values(kind)
    if not len(absent):
        out = values.reshape(n, size)
    else:
        out = np.empty((n, size), dtype=spec.dtype)
        out[present] = values.reshape(-1, size)
        out[~present] = _default(spec, key)
    return out.reshape((n, *spec.shape))


def _varlen(column, spec, key, where, errors) -> SparseValue:
    kind = _kind(spec, key)
    _check_type(column, kind, key, where, errors, dense=False)
    counts = np.where(column.kinds == kind, column.counts, 0)
    n = len(counts)
    rows = np.repeat(np.arange(n, dtype=np.int64), counts)
    starts = _offsets(counts)
    cols = np.arange(len(rows), dtype=np.int64) - np.repeat(starts[:-1], counts)
    width = int(counts.max()) if n else 0
    return SparseValue(
        np.stack([rows, cols], axis=1).reshape(-1, 2),
        column.values(kind),
        np.asarray([n, width], np.int64),
    )


def _sparse(columns, spec: SparseFeature, key, where, errors) -> SparseValue | None:
    index_keys = [spec.index_key] if isinstance(spec.index_key, str) else list(spec.index_key)
    sizes = [spec.size] if isinstance(spec.size, int) else list(spec.size)
    if len(sizes) != len(index_keys):
        raise ValueError(
            f"SparseFeature {key!r}: {len(index_keys)} index keys but size has {len(sizes)} "
            "entries; give one size per index key."
        )
    value = _varlen(columns[spec.value_key], spec, spec.value_key, where, errors)
    int_spec = VarLenFeature(np.int64)
    indices = [_varlen(columns[k], int_spec, k, where, errors) for k in index_keys]
    value_counts = np.bincount(value.indices[:, 0], minlength=len(columns[spec.value_key].kinds))
    for k, index in zip(index_keys, indices, strict=True):
        counts = np.bincount(index.indices[:, 0], minlength=len(value_counts))
        wrong = np.flatnonzero(counts != value_counts)
        if len(wrong):
            i = int(wrong[0])
            errors.add(
                i,
                0,
                key,
                f"{where.key(spec.value_key, i)}  SparseFeature {key!r}: the example has "
                f"{int(value_counts[i])} values under {spec.value_key!r} but "
                f"{int(counts[i])} indices under {k!r}; write one index per value.",
            )
            return None
    rows = value.indices[:, 0]
    coords = [index.values for index in indices]
    if not spec.already_sorted and len(rows):
        order = np.lexsort([*reversed(coords), rows])
        rows = rows[order]
        coords = [c[order] for c in coords]
        values = value.values[order]
    else:
        values = value.values
    n = len(value_counts)
    return SparseValue(
        np.stack([rows, *coords], axis=1).reshape(-1, 1 + len(coords)).astype(np.int64),
        values,
        np.asarray([n, *sizes], np.int64),
    )


def _partition_lengths(partition, values: np.ndarray, inner: int, where, key, i) -> np.ndarray:
    """One example's partition as the lengths of its rows over ``inner`` items."""
    if isinstance(partition, RaggedFeature.UniformRowLength):
        length = int(partition.length)
        if length <= 0 or inner % length:
            raise ValueError(
                f"{where.key(key, i)}  UniformRowLength({length}) does not divide the {inner} "
                "items of the example."
            )
        return np.full(inner // length, length, np.int64)
    kind = type(partition).__name__
    v = np.asarray(values, np.int64)
    if kind == "RowSplits":
        lengths = np.diff(v)
        ok = len(v) >= 1 and v[0] == 0 and v[-1] == inner
    elif kind == "RowLengths":
        lengths = v
        ok = v.sum() == inner
    elif kind == "RowStarts":
        lengths = np.diff(np.append(v, inner))
        ok = len(v) == 0 or v[0] == 0
    elif kind == "RowLimits":
        lengths = np.diff(np.concatenate([[0], v]))
        ok = (len(v) == 0 and inner == 0) or (len(v) and v[-1] == inner)
    else:  # ValueRowIds
        ok = len(v) == inner and bool(np.all(np.diff(v) >= 0)) and (not len(v) or v[0] >= 0)
        lengths = np.bincount(v, minlength=int(v.max()) + 1 if len(v) else 0) if ok else v
    if not ok or (len(lengths) and lengths.min() < 0):
        raise ValueError(
            f"{where.key(partition.key, i)}  RaggedFeature {key!r}: partition {kind} "
            f"{v.tolist()} does not partition the example's {inner} items. Write a valid "
            f"{kind} feature (TF's RaggedTensor rules)."
        )
    return lengths


def _ragged(columns, spec: RaggedFeature, key, where, errors) -> RaggedValue:
    value_key = spec.value_key or key
    values = _varlen(columns[value_key], spec, value_key, where, errors)
    counts = np.bincount(values.indices[:, 0], minlength=len(columns[value_key].kinds))
    levels = [counts]
    if spec.partitions:
        parts = {
            p.key: _varlen(columns[p.key], VarLenFeature(np.int64), p.key, where, errors)
            for p in spec.partitions
            if hasattr(p, "key")
        }
        errors.raise_first()
        per_level: list[list[np.ndarray]] = [[] for _ in spec.partitions]
        outer = np.zeros(len(counts), np.int64)
        for i, inner in enumerate(counts.tolist()):
            size = inner
            for depth in reversed(range(len(spec.partitions))):
                partition = spec.partitions[depth]
                v = None
                if hasattr(partition, "key"):
                    sp = parts[partition.key]
                    v = sp.values[sp.indices[:, 0] == i]
                lengths = _partition_lengths(partition, v, size, where, key, i)
                per_level[depth].append(lengths)
                size = len(lengths)
            outer[i] = size
        levels = [outer] + [np.concatenate(x) if x else np.zeros(0, np.int64) for x in per_level]
    splits = tuple(_offsets(lengths).astype(spec.row_splits_dtype) for lengths in levels)
    return RaggedValue(values.values, splits)


def _sequence(column, spec: FixedLenSequenceFeature, key, where, errors) -> np.ndarray | None:
    kind = _kind(spec, key)
    if not _check_type(column, kind, key, where, errors, dense=True):
        return None
    stride = math.prod(spec.shape)
    counts = np.where(column.kinds == kind, column.counts, 0)
    wrong = np.flatnonzero(counts % max(stride, 1) != 0) if stride else np.zeros(0)
    if len(wrong):
        i = int(wrong[0])
        errors.add(
            i,
            0,
            key,
            f"{where.key(key, i)}  Number of {KIND_NAMES[kind]} values is not a multiple of "
            f"stride length. Saw {int(counts[i])} values but output shape is: "
            f"[?,{','.join(str(d) for d in spec.shape)}]. Each step needs {stride} values.",
        )
        return None
    steps = counts // max(stride, 1)
    n = len(counts)
    width = int(steps.max()) if n else 0
    default = spec.default_value
    if default is None:
        default = b"" if kind == BYTES else 0
    elif isinstance(default, str):
        default = default.encode()
    out = np.full((n, width * stride), default, dtype=spec.dtype)
    rows = np.repeat(np.arange(n), counts)
    cols = np.arange(len(rows)) - np.repeat(_offsets(counts)[:-1], counts)
    out[rows, cols] = column.values(kind)
    return out.reshape((n, width, *spec.shape))


def parse_columns(columns: Mapping[str, Column], features, where: _Where) -> dict[str, Any]:
    """The specs' outputs from the batch's columns (shared with ``parse_sequence_example``'s
    context)."""
    errors, missing = _Errors(), _Errors()
    out: dict[str, Any] = {}
    for key in sorted(features):
        spec = features[key]
        if isinstance(spec, FixedLenFeature):
            out[key] = _fixed(columns[key], spec, key, where, errors, missing)
        elif isinstance(spec, VarLenFeature):
            out[key] = _varlen(columns[key], spec, key, where, errors)
        elif isinstance(spec, SparseFeature):
            out[key] = _sparse(columns, spec, key, where, errors)
        elif isinstance(spec, RaggedFeature):
            out[key] = _ragged(columns, spec, key, where, errors)
        else:
            out[key] = _sequence(columns[key], spec, key, where, errors)
    errors.raise_first()
    missing.raise_first()
    return {key: out[key] for key in features}


def collect(
    records: list[bytes], keys: list[str], where: _Where, fixed_strings: bool = False
) -> dict[str, Column]:
    """The columns of ``keys``: the NumPy wire reader for the records it accepts, protobuf
    for the rest; a record that is not an ``Example`` raises TF's error."""
    try:
        return _wire.collect(records, keys, fixed_strings)
    except _columns.RecordError as err:
        shown = err.record[:64] if isinstance(err.record, bytes) else err.record
        raise ValueError(
            f"{where.feature(err.index)}Could not parse example input, value: {shown!r} (record "
            f"{err.index} of the batch is not a serialized tf.Example: truncated, corrupt, or "
            "another message). Check that the records are tf.Example protos "
            "(example.SerializeToString()) and that the file was read with the right "
            "compression_type."
        ) from None


def parse_example(
    serialized: Any,
    features: Mapping[str, Any],
    example_names: Sequence[str] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Parses a batch of serialized ``tf.Example`` protos (``tf.io.parse_example``).

    Args:
      serialized: a 1-D batch of ``bytes`` (a list or an object array), e.g. a batch of
        TFRecord records.
      features: ``{key: spec}``: :class:`FixedLenFeature`, :class:`VarLenFeature`,
        :class:`SparseFeature`, :class:`RaggedFeature` or
        :class:`FixedLenSequenceFeature` (``allow_missing=True``), e.g. from
        ``canned.feature_column.make_parse_example_spec(columns)``.
      example_names: names of the examples for error messages (default ``<unknown>``).
      name: accepted for TF compatibility.

    Returns:
      ``{key: value}``: dense NumPy arrays ``[batch_size, *shape]`` (float32, int64, or
      object arrays of ``bytes``), :class:`SparseValue` and :class:`RaggedValue` (see the
      module docstring).

    Raises:
      ValueError: a record that is not a ``tf.Example``; a feature of the wrong type or
        length; a required feature missing (TF's messages, with the example's index and the
        key); a bad spec.
      TypeError: a spec that is not one of the classes above.
    """
    del name
    check_specs(features)
    records = as_records(serialized)
    if example_names is not None and len(example_names) != len(records):
        raise ValueError(
            f"example_names has {len(example_names)} names for {len(records)} examples; give "
            "one name per example (or None)."
        )
    where = _Where(example_names, single=False)
    columns = collect(records, _keys_needed(features), where)
    return parse_columns(columns, features, where)


def parse_for_host_phase(records, features: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`parse_example` for a reader whose strings go to the feature columns' host
    phase: short strings come as fixed-width ``S`` arrays instead of ``bytes`` objects
    (``estimator.preprocessing`` reads both; ``tfrecord_input_fn`` with ``map_rows``)."""
    check_specs(features)
    records = as_records(records)
    where = _Where(None, single=False)
    columns = collect(records, _keys_needed(features), where, fixed_strings=True)
    return parse_columns(columns, features, where)


def _unbatch(value: Any) -> Any:
    if isinstance(value, SparseValue):
        return SparseValue(value.indices[:, 1:], value.values, value.dense_shape[1:])
    if isinstance(value, RaggedValue):
        if len(value.nested_row_splits) == 1:
            return value.values
        return RaggedValue(value.values, value.nested_row_splits[1:])
    return value[0]


def parse_single_example(
    serialized: bytes,
    features: Mapping[str, Any],
    example_names: Any = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Parses one serialized ``tf.Example`` (``tf.io.parse_single_example``).

    Args:
      serialized: one serialized example (``bytes``).
      features: as :func:`parse_example`.
      example_names, name: accepted for TF compatibility.

    Returns:
      As :func:`parse_example` without the batch dimension: ``[*shape]`` arrays,
      :class:`SparseValue` ``[max_count]``, a flat array for a :class:`RaggedFeature`
      without partitions (TF's 1-D ragged value is its values) or a :class:`RaggedValue`.

    Raises:
      ValueError, TypeError: as :func:`parse_example`, with TF's single-example messages
        (``"Key: age.  Data types don't match. ..."``).
    """
    del example_names, name
    if not isinstance(serialized, bytes):
        raise ValueError(
            f"serialized must be one serialized tf.Example (bytes); got "
            f"{type(serialized).__name__}. Use parse_example for a batch."
        )
    check_specs(features)
    where = _Where(None, single=True)
    columns = collect([serialized], _keys_needed(features), where)
    parsed = parse_columns(columns, features, where)
    return {key: _unbatch(value) for key, value in parsed.items()}
