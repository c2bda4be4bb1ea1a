"""``parse_sequence_example`` and ``parse_single_sequence_example`` without TensorFlow
(``tf.io``), with TF 2.15's semantics (checked against TF 2.15.1 in
``tests/io/test_io_parse.py``).

A ``tf.SequenceExample`` has ``context`` features (parsed as ``parse_example`` parses an
example's) and ``feature_lists``: per key, one ``Feature`` per step. Sequence specs:

* ``FixedLenSequenceFeature``: ``[batch_size, max_steps, *shape]``, zero-padded; every step
  holds ``prod(shape)`` values; its length per example goes to the third result. With
  ``allow_missing=False`` an example without the list is an error; with True it has no
  steps. (TF refuses a ``default_value`` here.)
* ``VarLenFeature``: a :class:`~estimator.io.SparseValue` ``[batch_size, max_steps,
  max_values]``.
* ``RaggedFeature`` (no partitions): a :class:`~estimator.io.RaggedValue` ``[batch_size,
  (steps), (values)]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from estimator.io import protos
from estimator.io._columns import BYTES, FLOAT, INT64, KIND_NAMES, collect_protobuf_maps
from estimator.io._parse import (
    _KIND_OF_DTYPE,
    _keys_needed,
    _unbatch,
    _Where,
    as_records,
    check_specs,
    parse_columns,
)
from estimator.io._specs import FixedLenSequenceFeature, RaggedFeature, VarLenFeature
from estimator.io._values import RaggedValue, SparseValue

__all__ = ["parse_sequence_example", "parse_single_sequence_example"]

_LISTS = {"bytes_list": BYTES, "float_list": FLOAT, "int64_list": INT64}


def _check_sequence_specs(features: Mapping[str, Any]) -> None:
    for key, spec in features.items():
        if not isinstance(spec, FixedLenSequenceFeature | VarLenFeature | RaggedFeature):
            raise TypeError(
                f"sequence_features[{key!r}] is {spec!r}; expected a FixedLenSequenceFeature, "
                "VarLenFeature or RaggedFeature."
            )
        if _KIND_OF_DTYPE.get(np.dtype(spec.dtype)) is None:
            raise ValueError(
                f"sequence_features[{key!r}] has dtype {np.dtype(spec.dtype).name}; tf.Example "
                "features are float32, int64 or strings."
            )
        if isinstance(spec, FixedLenSequenceFeature) and spec.default_value is not None:
            raise ValueError(
                f"Value feature_list.dense_defaults[{key}] must be None (TF's rule: a "
                "sequence's steps are padded with zeros). Drop default_value."
            )
        if isinstance(spec, RaggedFeature) and spec.partitions:
            raise ValueError(
                f"sequence_features[{key!r}]: a RaggedFeature with partitions is not supported "
                "in a SequenceExample here; read the steps as RaggedFeature(dtype) and "
                "partition the values after parsing."
            )


class _Steps:
    """One sequence key over the batch: per example, per step, the kind and values."""

    def __init__(self, n: int) -> None:
        self.present = np.zeros(n, bool)
        self.steps: list[list[tuple[int, Any]]] = [[] for _ in range(n)]


def _read(records: list[bytes], context_keys, sequence_keys, where: _Where):
    contexts, steps = [], {key: _Steps(len(records)) for key in sequence_keys}
    for i, record in enumerate(records):
        try:
            example = protos.SequenceExample.FromString(record)
        except Exception:
            raise ValueError(
                f"Invalid protocol message input, example id: {where.name(i)} (record {i} of "
                f"the batch, {record[:64]!r}, is not a serialized tf.SequenceExample). Check "
                "the records' message type and the file's compression_type."
            ) from None
        contexts.append(example.context.feature)
        lists = example.feature_lists.feature_list
        for key, column in steps.items():
            if key in lists:
                column.present[i] = True
                for feature in lists[key].feature:
                    which = feature.WhichOneof("kind")
                    kind = 0 if which is None else _LISTS[which]
                    values = [] if which is None else getattr(feature, which).value
                    column.steps[i].append((kind, values))
    return collect_protobuf_maps(contexts, context_keys), steps


def _step_error(where: _Where, key: str, i: int, expected: int, actual: int) -> ValueError:
    return ValueError(
        f"{where.feature(i)}Feature list: {key}, Index: {i}.  Data types don't match. Expected "
        f"type: {KIND_NAMES[expected]}, Actual type: {KIND_NAMES[actual]}. Write every step of "
        f"{key!r} as a {KIND_NAMES[expected]} list, or declare the spec with that dtype."
    )


def _flat(column: _Steps, spec, key: str, where: _Where):
    """Per example the step counts, and all values (checked for type) concatenated."""
    kind = _KIND_OF_DTYPE[np.dtype(spec.dtype)]
    per_step, values = [], []
    for i, steps in enumerate(column.steps):
        for step_kind, step_values in steps:
            if step_kind and step_kind != kind:
                raise _step_error(where, key, i, kind, step_kind)
            per_step.append(len(step_values))
            values.extend(step_values)
    n_steps = np.asarray([len(s) for s in column.steps], np.int64)
    out = np.empty(len(values), dtype=spec.dtype)
    out[:] = values
    return n_steps, np.asarray(per_step, np.int64), out


def _fixed_sequence(column: _Steps, spec, key: str, where: _Where):
    if not spec.allow_missing:
        absent = np.flatnonzero(~column.present)
        if len(absent):
            i = int(absent[0])
            raise ValueError(
                f"{where.feature(i)}Feature list '{key}' is required but could not be found.  "
                "Did you mean to include it in feature_list_dense_missing_assumed_empty or "
                "feature_list_dense_defaults? (Write the list in every example, or declare the "
                "FixedLenSequenceFeature with allow_missing=True.)"
            )
    n_steps, per_step, values = _flat(column, spec, key, where)
    stride = math.prod(spec.shape)
    if np.any(per_step != stride):
        total = int(per_step.sum())
        raise ValueError(
            f"Feature list '{key}' has an unexpected number of values.  Total values size: "
            f"{total} is not consistent with output shape: "
            f"[?,{','.join(str(d) for d in spec.shape)}]. Every step needs exactly {stride} "
            "values; use VarLenFeature or RaggedFeature for steps of varying length."
        )
    n = len(n_steps)
    width = int(n_steps.max()) if n else 0
    out = np.zeros((n, width * stride), dtype=spec.dtype)
    if out.dtype == object:
        out[:] = b""
    counts = n_steps * stride
    rows = np.repeat(np.arange(n), counts)
    starts = np.concatenate([[0], np.cumsum(counts)])
    cols = np.arange(len(rows)) - np.repeat(starts[:-1], counts)
    out[rows, cols] = values
    return out.reshape((n, width, *spec.shape)), n_steps


def _varlen_sequence(column: _Steps, spec, key: str, where: _Where) -> SparseValue:
    n_steps, per_step, values = _flat(column, spec, key, where)
    n = len(n_steps)
    example = np.repeat(np.repeat(np.arange(n), n_steps), per_step)
    step_starts = np.concatenate([[0], np.cumsum(n_steps)])
    step_of = np.repeat(np.arange(len(per_step)) - np.repeat(step_starts[:-1], n_steps), per_step)
    value_starts = np.concatenate([[0], np.cumsum(per_step)])
    position = np.arange(len(values)) - np.repeat(value_starts[:-1], per_step)
    shape = [n, int(n_steps.max()) if n else 0, int(per_step.max()) if len(per_step) else 0]
    indices = np.stack([example, step_of, position], axis=1).reshape(-1, 3).astype(np.int64)
    return SparseValue(indices, values, np.asarray(shape, np.int64))


def _ragged_sequence(column: _Steps, spec, key: str, where: _Where) -> RaggedValue:
    n_steps, per_step, values = _flat(column, spec, key, where)
    splits = [
        np.concatenate([[0], np.cumsum(c)]).astype(spec.row_splits_dtype)
        for c in (n_steps, per_step)
    ]
    return RaggedValue(values, tuple(splits))


def parse_sequence_example(
    serialized: Any,
    context_features: Mapping[str, Any] | None = None,
    sequence_features: Mapping[str, Any] | None = None,
    example_names: Sequence[str] | None = None,
    name: str | None = None,
) -> tuple[dict, dict, dict]:
    """Parses a batch of serialized ``tf.SequenceExample`` protos
    (``tf.io.parse_sequence_example``).

    Args:
      serialized: a 1-D batch of ``bytes``.
      context_features: ``{key: spec}`` for the context, as ``parse_example``'s.
      sequence_features: ``{key: FixedLenSequenceFeature | VarLenFeature | RaggedFeature}``
        for the feature lists.
      example_names: names for error messages.
      name: accepted for TF compatibility.

    Returns:
      ``(context, feature_lists, lengths)``: the context's outputs, the sequences' (see the
      module docstring), and for each ``FixedLenSequenceFeature`` the number of steps of
      each example (int64 ``[batch_size]``).

    Raises:
      ValueError: a record that is not a ``SequenceExample``, a missing required list, a
        step of the wrong type or size (TF's messages), a bad spec.
      TypeError: a spec of the wrong class.
    """
    del name
    context_features = dict(context_features or {})
    sequence_features = dict(sequence_features or {})
    if not context_features and not sequence_features:
        raise ValueError(
            "Missing features: give context_features and/or sequence_features (dicts of specs)."
        )
    if context_features:
        check_specs(context_features)
    _check_sequence_specs(sequence_features)
    records = as_records(serialized)
    where = _Where(example_names, single=False)
    columns, steps = _read(records, _keys_needed(context_features), list(sequence_features), where)
    context = parse_columns(columns, context_features, where) if context_features else {}
    sequences, lengths = {}, {}
    for key, spec in sequence_features.items():
        if isinstance(spec, FixedLenSequenceFeature):
            sequences[key], lengths[key] = _fixed_sequence(steps[key], spec, key, where)
        elif isinstance(spec, VarLenFeature):
            sequences[key] = _varlen_sequence(steps[key], spec, key, where)
        else:
            sequences[key] = _ragged_sequence(steps[key], spec, key, where)
    return context, sequences, lengths


def parse_single_sequence_example(
    serialized: bytes,
    context_features: Mapping[str, Any] | None = None,
    sequence_features: Mapping[str, Any] | None = None,
    example_name: str | None = None,
    name: str | None = None,
) -> tuple[dict, dict]:
    """Parses one serialized ``tf.SequenceExample``
    (``tf.io.parse_single_sequence_example``).

    Returns:
      ``(context, feature_lists)`` without the batch dimension.

    Raises:
      ValueError, TypeError: as :func:`parse_sequence_example`.
    """
    del name
    if not isinstance(serialized, bytes):
        raise ValueError(
            f"serialized must be one serialized tf.SequenceExample (bytes); got "
            f"{type(serialized).__name__}. Use parse_sequence_example for a batch."
        )
    names = None if example_name is None else [example_name]
    context, sequences, _ = parse_sequence_example(
        [serialized], context_features, sequence_features, names
    )
    return (
        {k: _unbatch(v) for k, v in context.items()},
        {k: _unbatch(v) for k, v in sequences.items()},
    )
