"""Dense numeric features and their bucketization."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from estimator.io._specs import FixedLenFeature, _as_tuple, dtype_name
from estimator.preprocessing._base import (
    CategoricalIds,
    Op,
    _batch_size,
    _require,
    op_from_config,
    register_op,
)


@register_op
@dataclass(frozen=True)
class Numeric(Op):
    """A dense numeric feature (host part of ``numeric_column``).

    Output: ``float32 [batch_size, *shape]``. The input may have any numeric (or bool) dtype
    and any shape holding ``batch_size * prod(shape)`` values. When ``default_value`` is
    given, a feature absent from the batch takes it, and so do NaN entries (missing values
    of a float input; TF would keep the NaN).

    Args:
      key: the feature's key.
      shape: shape of one example's value.
      default_value: None, a number, or nested values of shape ``shape``.
      dtype: the dtype the feature is parsed as (``parse_example`` spec only).

    Raises:
      ValueError: when the feature is missing without a default, is not numeric, or has
        the wrong number of values per example.
    """

    row_wise: ClassVar[bool] = True

    categorical: ClassVar[bool] = False

    key: str
    shape: tuple[int, ...] = (1,)
    default_value: Any = None
    dtype: str = "float32"

    def __post_init__(self):
        shape = (self.shape,) if isinstance(self.shape, int) else tuple(self.shape)
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        object.__setattr__(self, "dtype", dtype_name(self.dtype, what=self.describe()))
        if self.default_value is not None:
            default = np.broadcast_to(np.asarray(self.default_value), self.shape)
            object.__setattr__(self, "default_value", _as_tuple(default))

    def _compute(self, features, cache) -> np.ndarray:
        who = self.describe()
        if self.key not in features and self.default_value is not None:
            batch = _batch_size(features, who)
            return np.broadcast_to(self._default, (batch, *self.shape)).copy()
        x = np.asarray(_require(features, self.key, who))
        try:
            if x.dtype.kind in "USV":
                raise ValueError
            x = x.astype(np.float32)
        except (ValueError, TypeError):
            raise ValueError(
                f"{who}: feature {self.key!r} has dtype {x.dtype}; expected numbers (int or "
                "float). Convert strings to numbers in input_fn, or use a categorical column."
            ) from None
        per_example = math.prod(self.shape)
        if x.ndim == 0 or x.size != x.shape[0] * per_example:
            raise ValueError(
                f"{who}: feature {self.key!r} has shape {x.shape}; expected "
                f"[batch_size, {', '.join(map(str, self.shape))}] ({per_example} value(s) per "
                "example). Fix the column's shape or the input."
            )
        x = x.reshape(x.shape[0], *self.shape)
        if self.default_value is not None:
            x = np.where(np.isnan(x), self._default, x)
        return x

    @functools.cached_property
    def _default(self) -> np.ndarray:
        return np.asarray(self.default_value, dtype=np.float32)

    def input_spec(self):
        return {self.key: FixedLenFeature(self.shape, self.dtype, self.default_value)}


@register_op
@dataclass(frozen=True)
class Bucketize(Op):
    """Bucket ids of a 1-D numeric feature (``bucketized_column``).

    For element ``i`` of a ``[batch_size, d]`` source, ``id = bucket + (len(boundaries) +
    1) * i`` where ``bucket`` counts the boundaries ``<= value`` (a value equal to a
    boundary goes to the upper bucket; boundaries compared as ``float32``, as TF's kernel).
    Output ids: ``int32 [batch_size, d]``.
    """

    row_wise: ClassVar[bool] = True

    source: Numeric
    boundaries: tuple[float, ...]

    def __post_init__(self):
        object.__setattr__(self, "boundaries", tuple(float(b) for b in self.boundaries))
        if len(self.source.shape) != 1:
            raise ValueError(
                f"{self.describe()}: the source must be one-dimensional; got shape "
                f"{self.source.shape}."
            )

    def describe(self) -> str:
        return f"Bucketize({self.source.key!r})"

    def _compute(self, features, cache) -> CategoricalIds:
        x = self.source.apply(features, cache)
        buckets = np.searchsorted(np.asarray(self.boundaries, np.float32), x, side="right")
        offsets = (len(self.boundaries) + 1) * np.arange(x.shape[1])
        return CategoricalIds((buckets + offsets).astype(np.int32), None)

    def input_spec(self):
        return self.source.input_spec()

    def _config(self):
        return {"source": self.source.to_config(), "boundaries": list(self.boundaries)}

    @classmethod
    def _from_config(cls, config, assets_dir, memo):
        source = op_from_config(config["source"], assets_dir=assets_dir, _memo=memo)
        return cls(source, config["boundaries"])


@register_op
@dataclass(frozen=True)
class BatchSize(Op):
    """``float32 [batch_size, 0]``: no values, only the batch size, for a model that reads
    no feature (TF's baseline estimators size their output by the first feature's batch
    dimension). Reads any feature; fails only for a batch with no array at all."""

    row_wise: ClassVar[bool] = True

    categorical: ClassVar[bool] = False

    def _compute(self, features, cache) -> np.ndarray:
        return np.zeros((_batch_size(features, self.describe()), 0), np.float32)

    def input_spec(self):
        return {}
