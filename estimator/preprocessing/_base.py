"""The op protocol of the host phase, its registry, and raw-input checks."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

import numpy as np

from estimator.io._specs import STRING, FixedLenFeature, VarLenFeature, _as_list
from estimator.preprocessing._fingerprint import fingerprint64

_MAX_ID = 2**31 - 1  # ids are int32 on the device
_INT64_MAX = 2**63 - 1


def _require(features: Mapping, key: str, who: str) -> Any:
    if key not in features:
        present = ", ".join(repr(k) for k in sorted(features, key=str)) or "none"
        raise ValueError(
            f"Feature {key} is not in features dictionary (needed by {who}). Keys present: "
            f"{present}. Return it from input_fn under that key."
        )
    return features[key]


def _batch_size(features: Mapping, who: str) -> int:
    for value in features.values():
        shape = np.shape(value)
        if shape:
            return int(shape[0])
    raise ValueError(
        f"{who}: cannot tell the batch size: the features dict has no array with a batch dimension."
    )


def _categorical_input(
    features: Mapping, key: str, who: str, cache: dict | None = None
) -> tuple[np.ndarray, str]:
    """The raw feature as ``[batch_size, k]`` and its kind, ``"string"`` or ``"int"``.

    Strings come back as an array of ``str`` (dtype ``U``, or ``object`` holding ``str``;
    bytes decoded as UTF-8), integers as ``int64``. The common inputs (``U`` arrays, object
    arrays of ``str``, integer arrays) are checked with whole-array operations, without a
    Python step per element. With the batch's op ``cache``, a key read by several ops (a
    vocabulary and the crosses of the same feature) is converted once, and the distinct
    values that decoding fixed-width bytes found are kept as the key's
    :func:`string_factors`; callers do not modify the result.
    """
    if cache is None:
        return _classified(features, key, who)[:2]
    memo = ("_categorical_input", key)
    if memo not in cache:
        x, kind, factors = _classified(features, key, who)
        cache[memo] = (x, kind)
        if factors is not None:
            cache[("string_factors", key)] = factors
    return cache[memo]


def _classified(features: Mapping, key: str, who: str) -> tuple[np.ndarray, str, tuple | None]:
    """``(x, kind, factors)`` of :func:`_categorical_input` (``factors``: see
    :func:`_strings_or_ints`)."""
    x = _batch_2d(features, key, who)
    found = _strings_or_ints(x, key, who)
    if found is None:
        raise ValueError(
            f"{who}: feature {key!r} has dtype {x.dtype}; expected strings or integers (a "
            "categorical feature). Convert it in input_fn, e.g. x.astype(np.int64) for integral "
            "floats or x.astype(str)."
        )
    return found


def _batch_2d(features: Mapping, key: str, who: str) -> np.ndarray:
    """Raw feature ``key`` as an array ``[batch_size, k]`` (a sparse value densified)."""
    x = _require(features, key, who)
    if all(hasattr(x, a) for a in ("indices", "values", "dense_shape")):
        x = _densified(x, key, who)
    x = np.asarray(x)
    if x.ndim == 0:
        raise ValueError(
            f"{who}: feature {key!r} is a scalar; expected a batch of shape [batch_size] or "
            "[batch_size, k]."
        )
    return x.reshape(x.shape[0], math.prod(x.shape[1:]))


def _strings_or_ints(
    x: np.ndarray, key: str, who: str
) -> tuple[np.ndarray, str, tuple | None] | None:
    """``(x, kind, factors)`` of :func:`_categorical_input` by ``x``'s dtype; None for a
    dtype that holds neither strings nor integers. ``factors``: fixed-width bytes'
    :func:`string_factors` (their decoding finds the distinct values), else None."""
    if x.dtype.kind == "U":
        return x, STRING, None
    if x.dtype.kind == "S":  # fixed-width bytes (the TFRecord reader's for the host phase)
        texts, codes = _decoded_fixed(x, key, who)
        return np.asarray(texts or [""], dtype=str)[codes], STRING, (texts, codes)
    if x.dtype.kind in "iu":
        if x.dtype == np.uint64 and x.size and x.max() > _INT64_MAX:
            raise _int64_overflow(key, who, x.max())
        return x.astype(np.int64, copy=False), "int", None
    if x.dtype.kind == "O":
        found = _objects(x, key, who)
        return None if found is None else (*found, None)
    return None


def _objects(x: np.ndarray, key: str, who: str) -> tuple[np.ndarray, str] | None:
    """An object array of ``str`` (bytes decoded as UTF-8) or of Python ``int`` (checked to
    fit int64) as ``(x, kind)``; None for other values."""
    flat = x.ravel().tolist()
    types = set(map(type, flat))
    if types <= {str}:
        return x, STRING
    if types <= {str, bytes}:
        return _decoded(x, flat, key, who), STRING
    if all(issubclass(t, int) and not issubclass(t, bool) for t in types):
        low, high = min(flat, default=0), max(flat, default=0)
        for v in (low, high):
            if not -_INT64_MAX - 1 <= v <= _INT64_MAX:
                raise _int64_overflow(key, who, v)
        return x.astype(np.int64), "int"
    return None


def string_factors(x: np.ndarray, key: str, cache: dict | None) -> tuple[list[str], np.ndarray]:
    """The distinct strings of ``x`` (from :func:`_categorical_input`) and, for each value,
    its index among them (int64, ``x``'s shape): the ops that look strings up or hash them
    do it once per distinct value. Computed once per batch."""
    memo = ("string_factors", key)
    if cache is not None and memo in cache:
        return cache[memo]
    if x.dtype.kind == "U":  # sorted in C
        distinct, codes = np.unique(x, return_inverse=True)
        found = (distinct.tolist(), codes.reshape(x.shape))
    else:
        index: dict[str, int] = {}
        codes = np.fromiter(
            (index.setdefault(v, len(index)) for v in x.ravel().tolist()), np.int64, x.size
        )
        found = (list(index), codes.reshape(x.shape))
    if cache is not None:
        cache[memo] = found
    return found


def string_fingerprints(x: np.ndarray, key: str, cache: dict) -> np.ndarray:
    """``Fingerprint64`` (uint64, ``x``'s shape) of the strings ``x`` of raw feature ``key``
    (from :func:`_categorical_input`), computed once per batch and distinct value for the
    ops that hash them (a hash bucket and the crosses of the same feature)."""
    memo = ("string_fingerprints", key)
    if memo not in cache:
        texts, codes = string_factors(x, key, cache)
        cache[memo] = fingerprint64(texts)[codes] if texts else np.zeros(x.shape, np.uint64)
    return cache[memo]


def _decoded_fixed(x: np.ndarray, key: str, who: str) -> tuple[list[str], np.ndarray]:
    """The distinct values of fixed-width bytes ``x`` decoded as UTF-8 (each once; sorted
    and compared in C, in code point order as UTF-8 sorts) and each value's index among
    them (int64, ``x``'s shape): :func:`string_factors` of the decoded ``x``."""
    distinct, codes = np.unique(x, return_inverse=True)
    try:
        texts = [v.decode("utf-8") for v in distinct.tolist()]
    except UnicodeDecodeError:
        _decoded(x.astype(object), x.ravel().tolist(), key, who)  # raises, naming the value
        raise
    return texts, codes.reshape(x.shape)


def _densified(sparse, key: str, who: str) -> np.ndarray:
    """A 2-D sparse value (``parse_example``'s ``VarLenFeature``: ``estimator.io.SparseValue``,
    or a ``tf.SparseTensor`` value) as TF's dense categorical input ``[batch_size, k]``,
    padded with ``""`` (strings) or ``-1`` (integers), which mean "no value"."""
    indices = np.asarray(sparse.indices, np.int64)
    values = np.asarray(sparse.values)
    shape = [int(d) for d in np.asarray(sparse.dense_shape).ravel()]
    if len(shape) != 2 or indices.ndim != 2 or indices.shape[1] != 2:
        raise ValueError(
            f"{who}: feature {key!r} is a sparse value of dense_shape {shape}; expected a 2-D "
            "[batch_size, k] one (what parse_example gives for a VarLenFeature)."
        )
    strings = values.dtype.kind in "OUS"
    if values.dtype.kind == "S":  # fixed-width bytes (the parser's for the host phase)
        dtype, missing = values.dtype, b""
    else:
        dtype, missing = (object, "") if strings else (np.int64, -1)
    out = np.full((shape[0], max(shape[1], 1)), missing, dtype=dtype)
    if len(indices):
        out[indices[:, 0], indices[:, 1]] = values
    return out


def _decoded(x: np.ndarray, flat: list, key: str, who: str) -> np.ndarray:
    """``x`` (object, ``str`` and ``bytes``) with the bytes decoded as UTF-8.

    All-bytes input (what ``parse_example`` gives) is decoded in one call: joined with NUL
    separators, decoded, split (~5× faster than a ``decode`` per value), unless a value
    holds a NUL itself."""
    try:
        joined = b"\0".join(flat)
    except TypeError:  # str among the bytes
        joined = None
    try:
        if joined is not None and joined.count(0) == len(flat) - 1:  # no NUL in a value
            strings = joined.decode("utf-8").split("\0")
        else:
            strings = [v.decode("utf-8") if isinstance(v, bytes) else v for v in flat]
    except UnicodeDecodeError:
        index, bad = next(
            (i, v) for i, v in enumerate(flat) if isinstance(v, bytes) and not _utf8(v)
        )
        raise ValueError(
            f"{who}: feature {key!r} holds bytes that are not UTF-8 text ({bad!r} at "
            f"flat index {index}). String features are read as UTF-8 (TF would take "
            "the raw bytes); decode them in input_fn (e.g. v.decode('latin-1')) or "
            "send binary ids as hex."
        ) from None
    out = np.empty(len(strings), dtype=object)
    out[:] = strings
    return out.reshape(x.shape)


def _utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _int64_overflow(key: str, who: str, value) -> ValueError:
    return ValueError(
        f"{who}: feature {key!r} holds the integer {value}, which does not fit int64 (TF's "
        "integer type for categorical features). Pass ids within int64, or hash them as "
        "strings (categorical_column_with_hash_bucket on str(value))."
    )


def _check_kind(dtype: str, kind: str, x: np.ndarray, key: str, who: str) -> None:
    if (dtype == STRING) != (kind == STRING):
        want = "strings" if dtype == STRING else "integers"
        raise ValueError(
            f"Column dtype and input dtype must be compatible. key: {key}, column dtype: "
            f"{dtype}, input dtype: {x.dtype} ({who}). Pass {want} for this feature, or "
            "create the column with a matching dtype."
        )


class CategoricalIds(NamedTuple):
    """Output of a categorical op: ids and optional weights."""

    ids: np.ndarray  # shape=[batch_size, k], dtype=int32; -1 = no id
    weights: np.ndarray | None  # shape=[batch_size, k], dtype=float32, or None (all 1)


_OPS: dict[str, type[Op]] = {}


def register_op(cls: type[Op]) -> type[Op]:
    """Class decorator: makes an :class:`Op` subclass known to :func:`op_from_config`."""
    _OPS[cls.__name__] = cls
    return cls


def op_from_config(
    config: Mapping[str, Any], *, assets_dir: str | None = None, _memo: dict | None = None
) -> Op:
    """Rebuilds an op from its ``to_config()``.

    Args:
      config: ``{"class_name": ..., "config": {...}}``.
      assets_dir: if given, vocabulary files are read from
        ``os.path.join(assets_dir, basename(vocabulary_file))`` (an exported model's
        ``assets/`` directory) instead of their original path.

    Raises:
      ValueError: for an unknown ``class_name`` (the message lists the known ones).
    """
    name = config.get("class_name")
    if name not in _OPS:
        raise ValueError(
            f"Unknown preprocessing op {name!r}. Known ops: {', '.join(sorted(_OPS))}. Custom "
            "ops must be registered with estimator.preprocessing.register_op."
        )
    memo = {} if _memo is None else _memo
    key = json.dumps(config, sort_keys=True)
    if key not in memo:  # equal sub-ops become one object, computed once per batch
        memo[key] = _OPS[name]._from_config(dict(config["config"]), assets_dir, memo)
    return memo[key]


class Op:
    """Base class of host ops: a pure function of the raw features of a batch.

    Subclasses are frozen dataclasses implementing ``_compute``; ``categorical`` tells
    whether they return :class:`CategoricalIds` or a dense ``float32`` array.
    """

    categorical: ClassVar[bool] = True
    #: Each output row depends on the same input row only, with shapes independent of the
    #: batch: the op may run once over a whole in-memory dataset instead of batch by batch
    #: (``estimator.inputs.Batches.map_rows``). False for ops that pad to a batch's longest
    #: sequence, and for ops registered by users unless they say so.
    row_wise: ClassVar[bool] = False

    def apply(self, features: Mapping[str, Any], cache: dict | None = None):
        """Computes the op on a batch of raw features.

        Args:
          features: raw features, ``{key: array}``.
          cache: results of ops already computed on this batch (keyed by op identity), so
            that a shared sub-op (a vocabulary inside a cross) runs once.

        Returns:
          :class:`CategoricalIds` for categorical ops, a ``float32`` array otherwise.
        """
        if cache is None:
            return self._compute(features, {})
        if id(self) not in cache:
            cache[id(self)] = (self, self._compute(features, cache))
        return cache[id(self)][1]

    def _compute(self, features: Mapping[str, Any], cache: dict):
        raise NotImplementedError

    def input_spec(self) -> dict[str, FixedLenFeature | VarLenFeature]:
        """The raw features this op reads, as parsing specs."""
        raise NotImplementedError

    def assets(self) -> tuple[str, ...]:
        """Files this op reads (vocabulary files)."""
        return ()

    def describe(self) -> str:
        key = getattr(self, "key", None)
        return f"{type(self).__name__}({key!r})" if key is not None else type(self).__name__

    def to_config(self) -> dict[str, Any]:
        """JSON-able ``{"class_name": ..., "config": {...}}``; see :func:`op_from_config`."""
        return {"class_name": type(self).__name__, "config": self._config()}

    def _config(self) -> dict[str, Any]:
        return {f.name: _as_list(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def _from_config(cls, config: dict, assets_dir: str | None, memo: dict) -> Op:
        return cls(**config)

    from_config = staticmethod(op_from_config)


def _check_buckets(op: Op, n: int) -> None:
    if n > _MAX_ID:
        raise ValueError(
            f"{op.describe()}: {n} ids do not fit int32 ids on the device (at most {_MAX_ID})."
        )
