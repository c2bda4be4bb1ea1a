"""Lookups giving categorical ids: vocabulary (list, file), hash bucket, identity."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from estimator.io._specs import STRING, VarLenFeature, _as_tuple, dtype_name
from estimator.preprocessing._base import (
    CategoricalIds,
    Op,
    _categorical_input,
    _check_buckets,
    _check_kind,
    register_op,
    string_factors,
    string_fingerprints,
)
from estimator.preprocessing._fingerprint import fingerprint64


class _Ids(dict):
    """A vocabulary's ``{value: id}``; a missing value reads as -2 (not stored), so a batch
    is looked up with ``map(table.__getitem__, values)``: no Python step per value."""

    def __missing__(self, key) -> int:
        return -2


class _VocabularyLookup(Op):
    """Shared lookup of :class:`VocabularyList` and :class:`VocabularyFile`."""

    row_wise: ClassVar[bool] = True

    def _vocabulary(self) -> tuple:
        raise NotImplementedError

    @functools.cached_property
    def _table(self) -> _Ids:
        return _Ids((v, i) for i, v in enumerate(self._vocabulary()))

    def _ids(self, keys: list, missing: np.ndarray, texts: list[str]) -> np.ndarray:
        table = self._table
        ids = np.fromiter(map(table.__getitem__, keys), dtype=np.int64, count=len(keys))
        oov = (ids == -2) & ~missing
        if oov.any():
            if self.num_oov_buckets:
                where = np.flatnonzero(oov)
                buckets = fingerprint64([texts[i] for i in where]) % np.uint64(self.num_oov_buckets)
                ids[where] = len(table) + buckets.astype(np.int64)
            else:
                ids[oov] = self.default_value
        ids[missing] = -1
        return ids

    def _compute(self, features, cache) -> CategoricalIds:
        who = self.describe()
        x, kind = _categorical_input(features, self.key, who, cache)
        _check_kind(self.dtype, kind, x, self.key, who)
        if kind == STRING:  # each distinct string looked up once
            texts, codes = string_factors(x, self.key, cache)
            ids = self._ids(texts, np.array([t == "" for t in texts], bool), texts)
            return CategoricalIds(ids[codes].astype(np.int32), None)
        uniq, inverse = np.unique(x, return_inverse=True)
        keys = uniq.tolist()
        # TF hashes OOV integers as their decimal strings.
        ids = self._ids(keys, uniq == -1, [str(k) for k in keys])
        return CategoricalIds(ids[inverse.reshape(x.shape)].astype(np.int32), None)

    def input_spec(self):
        return {self.key: VarLenFeature(self.dtype)}


@register_op
@dataclass(frozen=True)
class VocabularyList(_VocabularyLookup):
    """Vocabulary lookup from an in-memory list (``categorical_column_with_vocabulary_list``).

    A value's id is its index in ``vocabulary_list``. Out-of-vocabulary values go to
    ``len(vocabulary_list) + Fingerprint64(value) % num_oov_buckets`` (integers hashed as
    their decimal string), or get ``default_value`` (-1: dropped) without OOV buckets.
    Missing values (``""``, ``-1``) give -1.

    Args:
      key: the feature's key.
      vocabulary_list: strings or integers.
      dtype: ``"string"`` or an integer dtype; the input must match.
      default_value: id of OOV values when ``num_oov_buckets`` is 0.
      num_oov_buckets: number of hash buckets for OOV values.
    """

    key: str
    vocabulary_list: tuple
    dtype: str = STRING
    default_value: int = -1
    num_oov_buckets: int = 0

    def __post_init__(self):
        object.__setattr__(self, "dtype", dtype_name(self.dtype, what=self.describe()))
        convert = str if self.dtype == STRING else int
        object.__setattr__(
            self, "vocabulary_list", tuple(convert(v) for v in _as_tuple(self.vocabulary_list))
        )
        _check_buckets(self, len(self.vocabulary_list) + self.num_oov_buckets)

    def _vocabulary(self) -> tuple:
        return self.vocabulary_list


@register_op
@dataclass(frozen=True)
class VocabularyFile(_VocabularyLookup):
    """Vocabulary lookup from a text file, one value per line
    (``categorical_column_with_vocabulary_file``).

    Line ``i`` (0-based, trailing ``\\n``/``\\r\\n`` removed) has id ``i``; only the first
    ``vocabulary_size`` lines are used. OOV and missing values as :class:`VocabularyList`.
    The file is read on first use; it is an asset an exporter copies
    (:meth:`InputTransform.assets`).

    Raises:
      ValueError: (on first use) if the file is missing, has fewer than
        ``vocabulary_size`` lines, repeats a value, or (integer dtype) has a non-integer.
    """

    key: str
    vocabulary_file: str
    vocabulary_size: int | None = None
    dtype: str = STRING
    default_value: int = -1
    num_oov_buckets: int = 0

    def __post_init__(self):
        object.__setattr__(self, "dtype", dtype_name(self.dtype, what=self.describe()))
        object.__setattr__(self, "vocabulary_file", os.fspath(self.vocabulary_file))

    def _vocabulary(self) -> tuple:
        return self._loaded

    @functools.cached_property
    def _loaded(self) -> tuple:
        path = self.vocabulary_file
        if not os.path.exists(path):
            raise ValueError(
                f"{self.describe()}: vocabulary_file {path} does not exist. Give the path of "
                "a text file with one vocabulary entry per line."
            )
        with open(path, "rb") as f:
            lines = [line.rstrip(b"\n").rstrip(b"\r") for line in f]
        size = len(lines) if self.vocabulary_size is None else self.vocabulary_size
        if size > len(lines):
            raise ValueError(
                f"{self.describe()}: vocabulary_size is {size} but vocabulary_file {path} has "
                f"only {len(lines)} lines. Pass vocabulary_size=None to use the whole file."
            )
        values = [line.decode("utf-8") for line in lines[:size]]
        if self.dtype != STRING:
            try:
                values = [int(v) for v in values]
            except ValueError as e:
                raise ValueError(
                    f"{self.describe()}: vocabulary_file {path} has a line that is not an "
                    f"integer ({e}), but the column's dtype is {self.dtype}."
                ) from None
        if len(set(values)) != len(values):
            dup = next(v for i, v in enumerate(values) if v in values[:i])
            raise ValueError(
                f"{self.describe()}: vocabulary_file {path} lists {dup!r} more than once; "
                "each vocabulary entry must be unique."
            )
        _check_buckets(self, len(values) + self.num_oov_buckets)
        return tuple(values)

    def assets(self) -> tuple[str, ...]:
        return (self.vocabulary_file,)

    @classmethod
    def _from_config(cls, config, assets_dir, memo):
        if assets_dir is not None:
            name = os.path.basename(config["vocabulary_file"])
            config["vocabulary_file"] = os.path.join(assets_dir, name)
        return cls(**config)


@register_op
@dataclass(frozen=True)
class HashBucket(Op):
    """Hashes values into buckets (``categorical_column_with_hash_bucket``).

    ``id = Fingerprint64(value) % hash_bucket_size`` (``tf.strings.to_hash_bucket_fast``);
    integers are hashed as their decimal string, as TF does. Missing values give -1.
    """

    row_wise: ClassVar[bool] = True

    key: str
    hash_bucket_size: int
    dtype: str = STRING

    def __post_init__(self):
        object.__setattr__(self, "dtype", dtype_name(self.dtype, what=self.describe()))
        _check_buckets(self, self.hash_bucket_size)

    def _compute(self, features, cache) -> CategoricalIds:
        who = self.describe()
        x, kind = _categorical_input(features, self.key, who, cache)
        _check_kind(self.dtype, kind, x, self.key, who)
        if kind == STRING:
            ids = string_fingerprints(x, self.key, cache) % np.uint64(self.hash_bucket_size)
            ids = ids.astype(np.int64)
            ids[x == ""] = -1
            return CategoricalIds(ids.astype(np.int32), None)
        uniq, inverse = np.unique(x, return_inverse=True)
        ids = self._string_ids([str(k) for k in uniq.tolist()])  # decimal strings, as TF
        ids[uniq == -1] = -1
        return CategoricalIds(ids[inverse.reshape(x.shape)].astype(np.int32), None)

    def _string_ids(self, strings: list[str]) -> np.ndarray:
        return (fingerprint64(strings) % np.uint64(self.hash_bucket_size)).astype(np.int64)

    def input_spec(self):
        return {self.key: VarLenFeature(self.dtype)}


@register_op
@dataclass(frozen=True)
class Identity(Op):
    """Integer inputs used as ids (``categorical_column_with_identity``).

    ``-1`` is missing. Other values outside ``[0, num_buckets)`` take ``default_value``
    when it is set; without it, negative values are dropped and values ``>= num_buckets``
    raise, as in TF.

    Raises:
      ValueError: for non-integer input, or a value ``>= num_buckets`` without default.
    """

    row_wise: ClassVar[bool] = True

    key: str
    num_buckets: int
    default_value: int | None = None

    def __post_init__(self):
        _check_buckets(self, self.num_buckets)

    def _compute(self, features, cache) -> CategoricalIds:
        who = self.describe()
        x, kind = _categorical_input(features, self.key, who, cache)
        if kind != "int":
            raise ValueError(
                f"Invalid input, not integer. key: {self.key} dtype: {x.dtype} ({who}). Pass "
                "integer ids in [0, num_buckets)."
            )
        missing = x == -1
        out_of_range = ((x < 0) | (x >= self.num_buckets)) & ~missing
        ids = x.copy()
        if self.default_value is not None:
            ids[out_of_range] = self.default_value
        else:
            too_big = x >= self.num_buckets
            if too_big.any():
                raise ValueError(
                    f"{who}: value {int(x[too_big][0])} of feature {self.key!r} is out of "
                    f"range [0, {self.num_buckets}). Increase num_buckets, or set "
                    "default_value to map out-of-range values to one id."
                )
            ids[out_of_range] = -1
        ids[missing] = -1
        return CategoricalIds(ids.astype(np.int32), None)

    def input_spec(self):
        return {self.key: VarLenFeature(np.int64)}
