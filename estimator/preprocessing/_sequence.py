"""Sequence features: padded values and sequence lengths (host part of TF's ``sequence_*``
feature columns).

TF 2.15 reads a sequence feature as a ``SparseTensor`` ``[batch_size, max_length]`` (what
``tf.io.parse_example`` gives for a ``VarLenFeature``); an example's sequence length is the
index of its last present value plus one (divided by the values per step, rounded up), and
``SequenceFeatures`` pads the rest. Without sparse tensors, a batch of one sequence feature
may be given as:

* **padded dense**: ``[batch_size, T]`` (categorical; ``""`` / ``-1`` mark absent values,
  as TF's dense categorical input) or ``[batch_size, T, *shape]`` / ``[batch_size,
  T * prod(shape)]`` (numeric; ``NaN`` marks absent values). ``T`` is kept as given.
* **ragged**: a list (or 1-D object array) with one sequence per example — values, or for
  numeric features with ``shape=(d,)`` also ``[n, d]`` nested lists. Every given value is
  present.
* **sparse**: anything with ``indices`` ``[n, 2]``, ``values`` ``[n]`` and
  ``dense_shape`` ``[2]`` (a ``tf.SparseTensor`` value from a ``tf.data`` pipeline,
  ``tf.compat.v1.SparseTensorValue``): exactly TF's input.

Ragged and sparse batches are padded to the next power of two of their longest sequence (TF
pads to the longest), so that a stream of batches compiles a bounded number of shapes; the
sequence lengths, and so every model output, are the same as TF's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from estimator.io._specs import STRING, VarLenFeature, dtype_name
from estimator.preprocessing._base import (
    CategoricalIds,
    Op,
    _require,
    op_from_config,
    register_op,
)

_CATEGORICAL = "categorical"
_NUMERIC = "numeric"


def _is_sparse(value: Any) -> bool:
    return all(hasattr(value, a) for a in ("indices", "values", "dense_shape"))


def _is_ragged(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return True
    return (
        isinstance(value, np.ndarray)
        and value.dtype == object
        and value.ndim == 1
        and any(isinstance(v, list | tuple | np.ndarray) for v in value)
    )


def _padded_width(longest: int, per_step: int) -> int:
    """Width of a padded ragged/sparse batch: a power of two of steps, times ``per_step``."""
    steps = max(1, math.ceil(longest / per_step))
    return (1 << (steps - 1).bit_length()) * per_step


def _numeric_values(values: np.ndarray, who: str, key: str) -> np.ndarray:
    if values.dtype.kind in "OUSV":
        raise ValueError(
            f"{who}: feature {key!r} has values of dtype {values.dtype}; expected numbers. "
            "Convert strings to numbers in input_fn, or use a sequence categorical column."
        )
    return values.astype(np.float32)


def _categorical_values(values: np.ndarray, who: str, key: str) -> np.ndarray:
    if values.dtype.kind in "iu":
        return values.astype(np.int64)
    if values.dtype.kind in "US":
        return values.astype(object)
    if values.dtype.kind == "O" and all(isinstance(v, str | bytes | int) for v in values.flat):
        return values
    raise ValueError(
        f"{who}: feature {key!r} has values of dtype {values.dtype}; expected strings or "
        "integers (a categorical sequence). Convert them in input_fn."
    )


def sequence_input(
    features: Any, key: str, who: str, kind: str, per_step: int = 1, dtype: str = STRING
) -> tuple[np.ndarray, np.ndarray]:
    """A raw sequence feature as ``(values [batch_size, W], present [batch_size, W])``.

    ``W`` is a multiple of ``per_step`` (values per step). Absent entries of ``values``
    hold ``""`` / ``-1`` (categorical) or ``NaN`` (numeric). See the module docstring for
    the accepted forms. ``dtype`` (the column's) types a batch of empty sequences.

    Raises:
      ValueError: for a scalar, a sparse tensor that is not 2-D, a width that is not a
        multiple of ``per_step``, or values of the wrong kind (the message names the
        feature).
    """
    raw = _require(features, key, who)
    convert = _numeric_values if kind == _NUMERIC else _categorical_values
    if _is_sparse(raw):
        indices = np.asarray(raw.indices, np.int64)
        shape = [int(d) for d in np.asarray(raw.dense_shape).ravel()]
        if len(shape) != 2 or indices.ndim != 2 or indices.shape[1] != 2:
            raise ValueError(
                f"{who}: feature {key!r} is a sparse tensor of dense_shape {shape}; expected a "
                "2-D [batch_size, max_length] one (what parse_example gives for a "
                "VarLenFeature)."
            )
        values = convert(np.asarray(raw.values).ravel(), who, key)
        longest = int(indices[:, 1].max()) + 1 if len(indices) else 0
        width = _padded_width(longest, per_step)
        out, present = _empty(shape[0], width, values.dtype, kind)
        out[indices[:, 0], indices[:, 1]] = values
        present[indices[:, 0], indices[:, 1]] = True
        return out, present
    if _is_ragged(raw):
        rows = [np.asarray(r).ravel() for r in raw]
        empty = np.float32 if kind == _NUMERIC else object if dtype == STRING else np.int64
        filled = next((r for r in rows if r.size), np.zeros(0, empty))
        rows = [convert(r if r.size else filled[:0], who, key) for r in rows]
        dtype = np.float32 if kind == _NUMERIC else _row_dtype(rows)
        width = _padded_width(max((len(r) for r in rows), default=0), per_step)
        out, present = _empty(len(rows), width, dtype, kind)
        for b, row in enumerate(rows):
            out[b, : len(row)] = row
            present[b, : len(row)] = True
        return out, present
    x = np.asarray(raw)
    if x.ndim == 0:
        raise ValueError(
            f"{who}: feature {key!r} is a scalar; expected a batch of sequences "
            "([batch_size, T], a list of sequences, or a sparse tensor)."
        )
    x = convert(x.reshape(x.shape[0], -1), who, key)
    if x.shape[1] % per_step:
        raise ValueError(
            f"{who}: feature {key!r} has {x.shape[1]} values per example, not a multiple of "
            f"the {per_step} values of one step. Give [batch_size, T, *shape] values, padded "
            "with NaN."
        )
    if kind == _NUMERIC:
        present = ~np.isnan(x)
    elif x.dtype == object:
        present = np.array([v not in ("", b"") for v in x.flat], bool).reshape(x.shape)
    else:
        present = x != -1
    return x, present


def _row_dtype(rows: list[np.ndarray]) -> Any:
    return object if any(r.dtype == object for r in rows) else np.int64


def _empty(batch: int, width: int, dtype: Any, kind: str) -> tuple[np.ndarray, np.ndarray]:
    if kind == _NUMERIC:
        fill = np.nan
    else:
        fill = "" if np.dtype(dtype) == object else -1
    return np.full((batch, width), fill, dtype=dtype), np.zeros((batch, width), bool)


def sequence_length(present: np.ndarray, per_step: int) -> np.ndarray:
    """TF's ``sequence_length_from_sparse_tensor``: ``ceil((last present index + 1) /
    per_step)`` per example, 0 for an example with no value. ``int32 [batch_size]``."""
    width = present.shape[1]
    last = np.where(present.any(axis=1), width - np.argmax(present[:, ::-1], axis=1), 0)
    return (-(-last // per_step)).astype(np.int32)


@register_op
@dataclass(frozen=True)
class SequenceCategorical(Op):
    """Ids of a categorical sequence (host part of ``sequence_categorical_column_with_*``).

    The raw sequence (any form of the module docstring) is padded to ``[batch_size, T]``
    with ``""`` / ``-1`` and looked up by ``categorical``. Output ids: ``int32
    [batch_size, T]``, -1 where a step has no id.

    Args:
      categorical: the lookup op (:class:`VocabularyList`, :class:`VocabularyFile`,
        :class:`HashBucket` or :class:`Identity`).
    """

    categorical: Op

    def __post_init__(self):
        if not self.categorical.categorical or not hasattr(self.categorical, "key"):
            raise ValueError(
                f"SequenceCategorical: {self.categorical.describe()} is not a lookup of one "
                "raw feature (vocabulary, hash bucket or identity)."
            )

    @property
    def key(self) -> str:
        return self.categorical.key

    def describe(self) -> str:
        return f"SequenceCategorical({self.key!r})"

    def _compute(self, features, cache) -> CategoricalIds:
        dtype = dtype_name(self.categorical.input_spec()[self.key].dtype)
        values, _ = sequence_input(features, self.key, self.describe(), _CATEGORICAL, 1, dtype)
        # The lookup reads the padded values; it is called directly so that its cache entry
        # (the same op used on the raw feature elsewhere) is not shared.
        ids = self.categorical._compute({**features, self.key: values}, cache).ids
        return CategoricalIds(ids.reshape(values.shape), None)

    def input_spec(self):
        return self.categorical.input_spec()

    def assets(self) -> tuple[str, ...]:
        return self.categorical.assets()

    def _config(self):
        return {"categorical": self.categorical.to_config()}

    @classmethod
    def _from_config(cls, config, assets_dir, memo):
        return cls(op_from_config(config["categorical"], assets_dir=assets_dir, _memo=memo))


@register_op
@dataclass(frozen=True)
class SequenceNumeric(Op):
    """Values of a numeric sequence (host part of ``sequence_numeric_column``).

    Output: ``float32 [batch_size, T, *shape]``, ``NaN`` where a value is absent (padding
    included): the device phase fills in the column's ``default_value`` after its
    ``normalizer_fn``, which TF applies only to the values present.

    Raises:
      ValueError: when the feature is missing, not numeric, or its values per example are
        not a multiple of ``prod(shape)``.
    """

    categorical: ClassVar[bool] = False

    key: str
    shape: tuple[int, ...] = (1,)
    dtype: str = "float32"

    def __post_init__(self):
        shape = (self.shape,) if isinstance(self.shape, int) else tuple(self.shape)
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        object.__setattr__(self, "dtype", dtype_name(self.dtype, what=self.describe()))

    def _compute(self, features, cache) -> np.ndarray:
        per_step = math.prod(self.shape)
        values, present = sequence_input(
            features, self.key, self.describe(), _NUMERIC, per_step=per_step
        )
        values = np.where(present, values, np.float32(np.nan))
        return values.reshape(values.shape[0], -1, *self.shape)

    def input_spec(self):
        return {self.key: VarLenFeature(self.dtype)}


@register_op
@dataclass(frozen=True)
class SequenceLength(Op):
    """Sequence lengths of a raw sequence feature, ``int32 [batch_size]``: TF's
    ``sequence_length_from_sparse_tensor`` (last present value's index + 1, divided by
    ``per_step`` rounded up).

    Args:
      key: the feature's key.
      kind: ``"categorical"`` (``""`` / ``-1`` absent in dense input) or ``"numeric"``
        (``NaN`` absent).
      per_step: values per step (``prod(shape)`` of a numeric sequence, else 1).
      dtype: the dtype the feature is parsed as (``parse_example`` spec only).
    """

    categorical: ClassVar[bool] = False

    key: str
    kind: str = _CATEGORICAL
    per_step: int = 1
    dtype: str = STRING

    def __post_init__(self):
        if self.kind not in (_CATEGORICAL, _NUMERIC):
            raise ValueError(
                f"SequenceLength: kind must be 'categorical' or 'numeric'; got {self.kind!r}."
            )
        object.__setattr__(self, "dtype", dtype_name(self.dtype, what=self.describe()))

    def describe(self) -> str:
        return f"SequenceLength({self.key!r})"

    def _compute(self, features, cache) -> np.ndarray:
        _, present = sequence_input(
            features, self.key, self.describe(), self.kind, self.per_step, self.dtype
        )
        return sequence_length(present, self.per_step)

    def input_spec(self):
        return {self.key: VarLenFeature(self.dtype)}
