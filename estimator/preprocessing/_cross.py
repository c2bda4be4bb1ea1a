"""Feature crosses and weighted categorical ids."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import jax
import numpy as np

from estimator.io._specs import VarLenFeature, dtype_name
from estimator.preprocessing._base import (
    CategoricalIds,
    Op,
    _categorical_input,
    _check_buckets,
    _require,
    op_from_config,
    register_op,
    string_fingerprints,
)
from estimator.preprocessing._fingerprint import fingerprint_cat64
from estimator.preprocessing._specs import _merge_specs

#: ``hash_key`` TF's ``sparse_cross_hashed`` uses when none is given (``crossed_column``).
DEFAULT_CROSS_HASH_KEY = 0xDECAFCAFFE


@register_op
@dataclass(frozen=True)
class Cross(Op):
    """Hashed feature cross (``crossed_column``; TF's ``sparse_cross_hashed``).

    Each key is a raw feature key (strings hashed with ``Fingerprint64``, integers used as
    their own 64-bit value, floats truncated to integers as TF's ``sparse_cross`` casts
    them) or a categorical op (its ids used as values). For every
    combination of one present value per key — the cartesian product in row-major order,
    the last key varying fastest — ``h = hash_key``, then ``h = FingerprintCat64(h, v)``
    for each value, and ``id = h % hash_bucket_size`` (unsigned). Missing values (``""``,
    ``-1``, or ids of -1) take no part; a row with a key without values gets no id.

    Output ids: ``int32 [batch_size, k_1 * k_2 * ...]`` (-1 where a combination had a
    missing value).
    """

    row_wise: ClassVar[bool] = True

    keys: tuple[str | Op, ...]
    hash_bucket_size: int
    hash_key: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "keys", tuple(self.keys))
        _check_buckets(self, self.hash_bucket_size)
        for key in self.keys:
            if isinstance(key, Op) and (not key.categorical or isinstance(key, Weighted)):
                raise ValueError(
                    f"Cross: key {key.describe()} must be a raw feature key or an unweighted "
                    "categorical op."
                )

    def describe(self) -> str:
        names = [k if isinstance(k, str) else k.describe() for k in self.keys]
        return f"Cross({', '.join(names)})"

    def _values(self, key, features, cache) -> tuple[np.ndarray, np.ndarray]:
        """``(uint64 values, present)``, both ``[batch_size, k]``, for one key."""
        if not isinstance(key, str):
            ids = key.apply(features, cache).ids
            return ids.astype(np.int64).view(np.uint64), ids >= 0
        memo = ("Cross._values", key)  # crosses of one batch share a raw key's fingerprints
        raw = _require(features, key, self.describe())
        dense_float = isinstance(raw, (np.ndarray, jax.Array)) and raw.dtype.kind == "f"
        if memo not in cache and dense_float and raw.ndim > 0:
            # TF's sparse_cross casts a float feature to int64 (truncating), every value
            # present: crossed_column(["age", "sex"]) crosses the whole years.
            x = np.asarray(raw)
            x = np.trunc(x.reshape(x.shape[0], -1)).astype(np.int64)
            cache[memo] = (x.view(np.uint64), np.ones(x.shape, bool))
        if memo not in cache:
            x, kind = _categorical_input(features, key, self.describe(), cache)
            if kind == "int":
                cache[memo] = (x.view(np.uint64), x != -1)
            else:
                cache[memo] = (string_fingerprints(x, key, cache), x != "")
        return cache[memo]

    def _compute(self, features, cache) -> CategoricalIds:
        hash_key = DEFAULT_CROSS_HASH_KEY if self.hash_key is None else self.hash_key
        parts = [self._values(key, features, cache) for key in self.keys]
        batch = {values.shape[0] for values, _ in parts}
        if len(batch) != 1:
            raise ValueError(
                f"{self.describe()}: the crossed features have different batch sizes "
                f"{sorted(batch)}."
            )
        (batch,) = batch
        hashed = np.full((batch, 1), np.uint64(hash_key), dtype=np.uint64)
        valid = np.ones((batch, 1), dtype=bool)
        for values, present in parts:
            hashed = fingerprint_cat64(hashed[:, :, None], values[:, None, :]).reshape(batch, -1)
            valid = (valid[:, :, None] & present[:, None, :]).reshape(batch, -1)
        ids = (hashed % np.uint64(self.hash_bucket_size)).astype(np.int64)
        return CategoricalIds(np.where(valid, ids, -1).astype(np.int32), None)

    def input_spec(self):
        spec: dict = {}
        for key in self.keys:
            part = {key: VarLenFeature(str)} if isinstance(key, str) else key.input_spec()
            _merge_specs(spec, part)
        return spec

    def assets(self):
        return tuple(a for k in self.keys if isinstance(k, Op) for a in k.assets())

    def _config(self):
        keys = [k if isinstance(k, str) else k.to_config() for k in self.keys]
        return {"keys": keys, "hash_bucket_size": self.hash_bucket_size, "hash_key": self.hash_key}

    @classmethod
    def _from_config(cls, config, assets_dir, memo):
        keys = [
            k if isinstance(k, str) else op_from_config(k, assets_dir=assets_dir, _memo=memo)
            for k in config["keys"]
        ]
        return cls(keys, config["hash_bucket_size"], config["hash_key"])


@register_op
@dataclass(frozen=True)
class Weighted(Op):
    """Ids of a categorical op with per-value weights (``weighted_categorical_column``).

    The weight feature has the shape of the id feature (``[batch_size, k]``); its values
    pass through as ``float32`` (0 where the id is -1).

    Raises:
      ValueError: if the weight feature is missing, not numeric, or shaped unlike the ids.
    """

    row_wise: ClassVar[bool] = True

    categorical_op: Op
    weight_feature_key: str
    dtype: str = "float32"

    def __post_init__(self):
        object.__setattr__(self, "dtype", dtype_name(self.dtype, what=self.describe()))
        if not self.categorical_op.categorical:
            raise ValueError(f"{self.describe()}: categorical_op must be a categorical op.")

    def describe(self) -> str:
        return f"Weighted({self.categorical_op.describe()}, {self.weight_feature_key!r})"

    def _compute(self, features, cache) -> CategoricalIds:
        who = self.describe()
        ids = self.categorical_op.apply(features, cache).ids
        w = np.asarray(_require(features, self.weight_feature_key, who))
        if w.dtype.kind not in "biuf":
            raise ValueError(
                f"{who}: weight feature {self.weight_feature_key!r} has dtype {w.dtype}; "
                "expected numbers (float or int)."
            )
        if w.ndim == 0 or w.size != ids.size or w.shape[0] != ids.shape[0]:
            raise ValueError(
                f"{who}: weight feature {self.weight_feature_key!r} has shape {w.shape} but "
                f"the ids have shape {ids.shape}; give one weight per categorical value."
            )
        w = w.reshape(ids.shape).astype(np.float32)
        return CategoricalIds(ids, np.where(ids >= 0, w, np.float32(0)))

    def input_spec(self):
        spec = dict(self.categorical_op.input_spec())
        if self.weight_feature_key in spec:
            raise ValueError(
                f"Parse config {spec[self.weight_feature_key]} already exists for "
                f"{self.weight_feature_key}."
            )
        spec[self.weight_feature_key] = VarLenFeature(self.dtype)
        return spec

    def assets(self):
        return self.categorical_op.assets()

    def _config(self):
        return {
            "categorical_op": self.categorical_op.to_config(),
            "weight_feature_key": self.weight_feature_key,
            "dtype": self.dtype,
        }

    @classmethod
    def _from_config(cls, config, assets_dir, memo):
        op = op_from_config(config["categorical_op"], assets_dir=assets_dir, _memo=memo)
        return cls(op, config["weight_feature_key"], config["dtype"])
