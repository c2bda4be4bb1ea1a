"""``tf.strings`` (TF 1.15): the string ops Estimator input pipelines use, on the host.

Strings never enter traced code (jax arrays hold numbers), so these run with NumPy on host
values, in an ``input_fn`` or a ``tf.data`` ``map``. A TF string is bytes: every op takes
``str`` or ``bytes`` (a ``str`` is encoded as UTF-8, as TF converts it to a ``tf.string``)
and returns ``bytes`` in ``object`` arrays, as TF's ``numpy()`` does.

* ``to_hash_bucket_fast(s, n)``: FarmHash ``Fingerprint64(s) mod n`` (TF's kernel;
  ``estimator.preprocessing.fingerprint64``), the hash of
  ``categorical_column_with_hash_bucket``;
* ``strip``, ``lower``, ``upper`` (ASCII, as TF's default ``encoding=''``), ``length``
  (bytes, TF's default ``unit='BYTE'``), ``join``, ``regex_full_match`` (Python's ``re``
  on bytes; TF uses RE2, whose syntax agrees for ordinary patterns), ``to_number``,
  ``as_string``;
* ``split`` (``tf.strings.split``) and TF 1's ``tf.string_split``: the tokens of each
  string of a 1-D batch as TF's ``SparseTensor`` (``estimator.io.SparseValue``: indices,
  values, dense_shape) or, with ``result_type="RaggedTensor"``, a
  ``estimator.io.RaggedValue``.

Others (``substr``, ``unicode_*``, the keyed ``to_hash_bucket_strong`` and the legacy
``to_hash_bucket``) are refused with the replacement named.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1._base import dtype as _dtype
from estimator.compat.v1._base import tf_strings
from estimator.io import RaggedValue, SparseValue
from estimator.preprocessing import fingerprint64

__all__ = [
    "to_hash_bucket_fast",
    "strip",
    "lower",
    "upper",
    "length",
    "join",
    "regex_full_match",
    "to_number",
    "as_string",
    "split",
    "string_split",
]

__getattr__ = module_getattr("tf.strings", __name__)


def _strings(value: Any, what: str) -> np.ndarray:
    if isinstance(value, list | tuple):  # [line]: a list of a dataset's 0-d elements
        value = [v.item() if isinstance(v, np.ndarray) and v.ndim == 0 else v for v in value]
    array = tf_strings(value if isinstance(value, np.ndarray) else np.asarray(value, object))
    array = np.asarray(array, dtype=object)
    bad = [e for e in array.ravel() if not isinstance(e, bytes)]
    if bad:
        raise TypeError(
            f"{what} takes strings (str or bytes); got {type(bad[0]).__name__} {bad[0]!r}. "
            "Convert numbers with tf.as_string first."
        )
    return array


def _map(function: Callable[[bytes], Any], value: Any, what: str, dtype=object) -> np.ndarray:
    array = _strings(value, what)
    out = np.empty(array.shape, dtype=dtype)
    out.ravel()[:] = [function(e) for e in array.ravel()]
    return out


def to_hash_bucket_fast(input: Any, num_buckets: int, name: str | None = None) -> np.ndarray:  # noqa: A002
    """``tf.strings.to_hash_bucket_fast``: ``Fingerprint64(s) mod num_buckets`` per string.

    Returns:
      int64 array of the input's shape, values in ``[0, num_buckets)``.

    Raises:
      ValueError: ``num_buckets`` < 1.
    """
    del name
    if int(num_buckets) < 1:
        raise ValueError(f"num_buckets must be >= 1, got {num_buckets}.")
    array = _strings(input, "to_hash_bucket_fast")
    buckets = fingerprint64(array.ravel().tolist()) % np.uint64(num_buckets)
    return buckets.astype(np.int64).reshape(array.shape)


def strip(input: Any, name: str | None = None) -> np.ndarray:  # noqa: A002
    """``tf.strings.strip``: leading and trailing ASCII whitespace removed."""
    del name
    return _map(bytes.strip, input, "strip")


def lower(input: Any, encoding: str = "", name: str | None = None) -> np.ndarray:  # noqa: A002
    """``tf.strings.lower`` (ASCII letters, TF's default ``encoding=''``)."""
    del name
    if encoding == "utf-8":
        return _map(lambda s: s.decode().lower().encode(), input, "lower")
    return _map(bytes.lower, input, "lower")


def upper(input: Any, encoding: str = "", name: str | None = None) -> np.ndarray:  # noqa: A002
    """``tf.strings.upper`` (ASCII letters, TF's default ``encoding=''``)."""
    del name
    if encoding == "utf-8":
        return _map(lambda s: s.decode().upper().encode(), input, "upper")
    return _map(bytes.upper, input, "upper")


def length(input: Any, name: str | None = None, unit: str = "BYTE") -> np.ndarray:  # noqa: A002
    """``tf.strings.length``: bytes per string (``unit='UTF8_CHAR'``: characters), int32.

    Raises:
      ValueError: another ``unit``.
    """
    del name
    if unit not in ("BYTE", "UTF8_CHAR"):
        raise ValueError(f"unit must be 'BYTE' or 'UTF8_CHAR', got {unit!r}.")
    count = len if unit == "BYTE" else (lambda s: len(s.decode()))
    return _map(count, input, "length", np.int32)


def join(inputs: Sequence[Any], separator: str = "", name: str | None = None) -> np.ndarray:
    """``tf.strings.join``: the strings of ``inputs`` joined element by element (scalars
    broadcast), with ``separator`` between them."""
    del name
    arrays = np.broadcast_arrays(*[_strings(v, "join") for v in inputs])
    sep = tf_strings(separator)[()]
    out = np.empty(arrays[0].shape, dtype=object)
    out.ravel()[:] = [sep.join(parts) for parts in zip(*(a.ravel() for a in arrays), strict=True)]
    return out


def regex_full_match(input: Any, pattern: str, name: str | None = None) -> np.ndarray:  # noqa: A002
    """``tf.strings.regex_full_match``: whether each whole string matches ``pattern``."""
    del name
    compiled = re.compile(tf_strings(pattern)[()])
    return _map(lambda s: compiled.fullmatch(s) is not None, input, "regex_full_match", bool)


def to_number(string_tensor: Any, out_type=np.float32, name: str | None = None) -> np.ndarray:
    """``tf.strings.to_number``: each string parsed as ``out_type`` (float32 by default).

    Raises:
      ValueError: a string that is not a number (TF's message).
    """
    del name
    dt = _dtype(out_type)
    parse = int if np.issubdtype(dt, np.integer) else float

    def convert(s: bytes):
        try:
            return parse(s.decode())
        except ValueError:
            raise ValueError(
                f"StringToNumberOp could not correctly convert string: {s.decode()}"
            ) from None

    return _map(convert, string_tensor, "to_number").astype(dt)


def as_string(
    input: Any,  # noqa: A002
    precision: int = -1,
    scientific: bool = False,
    shortest: bool = False,
    width: int = -1,
    fill: str = "",
    name: str | None = None,
) -> np.ndarray:
    """``tf.strings.as_string``: numbers formatted as TF's kernel does (C's ``%f`` for
    floats, 6 decimals by default; ``%e`` with ``scientific``, ``%g`` with ``shortest``),
    booleans as ``true``/``false``."""
    del name
    array = np.asarray(input)
    flag = "0" if fill == "0" else ""
    size = str(width) if width > -1 else ""
    if array.dtype.kind == "b":
        text = "%" + flag + size + "s"
        items = [text % ("true" if v else "false") for v in array.ravel()]
    elif array.dtype.kind in "iu":
        text = "%" + flag + size + "d"
        items = [text % int(v) for v in array.ravel()]
    else:
        kind = "g" if shortest else ("e" if scientific else "f")
        digits = f".{precision}" if precision > -1 else ""
        text = "%" + flag + size + digits + kind
        items = [text % float(v) for v in array.ravel()]
    out = np.empty(array.shape, dtype=object)
    out.ravel()[:] = [item.encode() for item in items]
    return out


def _tokens(source: Any, split: Callable[[bytes], list], what: str) -> list[list[bytes]]:
    array = _strings(source, what)
    if array.ndim != 1:
        raise ValueError(
            f"{what} takes a 1-D batch of strings (TF's source must be a vector); got shape "
            f"{list(array.shape)}. Reshape it with tf.reshape(source, [-1])."
        )
    return [split(s) for s in array.tolist()]


def _split_result(rows: list[list[bytes]], result_type: str) -> SparseValue | RaggedValue:
    counts = np.asarray([len(r) for r in rows], np.int64)
    values = np.empty(int(counts.sum()), dtype=object)
    values[:] = [t for r in rows for t in r]
    if result_type == "RaggedTensor":
        return RaggedValue(values, (np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),))
    if result_type != "SparseTensor":
        raise ValueError(
            f"result_type must be 'SparseTensor' or 'RaggedTensor'; got {result_type!r}."
        )
    row = np.repeat(np.arange(len(rows), dtype=np.int64), counts)
    column = np.concatenate([np.arange(c, dtype=np.int64) for c in counts] or [[]])
    shape = np.asarray([len(rows), int(counts.max()) if len(rows) else 0], np.int64)
    return SparseValue(np.stack([row, column.astype(np.int64)], 1).reshape(-1, 2), values, shape)


def string_split(source, delimiter=" ", skip_empty=True, result_type="SparseTensor", sep=None):
    """``tf.string_split`` (TF 1): splits each string of the 1-D ``source`` on any of the
    characters (bytes) of ``delimiter``; an empty ``delimiter`` splits into single bytes.

    Args:
      source: a 1-D batch of strings.
      delimiter: the delimiter characters (``sep`` is its newer name).
      skip_empty: drop empty tokens (default, as TF).
      result_type: ``"SparseTensor"`` (a ``SparseValue`` ``[batch, max tokens]``) or
        ``"RaggedTensor"`` (a ``RaggedValue``).

    Returns:
      The tokens (``bytes``) of row ``i`` at indices ``[i, 0..k)``.

    Raises:
      ValueError: ``source`` not 1-D, or an unknown ``result_type``.
    """
    delimiter = sep if sep is not None else delimiter
    delims = delimiter.encode() if isinstance(delimiter, str) else bytes(delimiter)

    def split(text: bytes) -> list[bytes]:
        if not delims:
            return [text[i : i + 1] for i in range(len(text))]
        tokens = re.split(b"[" + re.escape(delims) + b"]", text)
        return [t for t in tokens if t] if skip_empty else tokens

    return _split_result(_tokens(source, split, "tf.string_split"), result_type)


def split(input=None, sep=None, maxsplit=-1, result_type="SparseTensor", source=None, name=None):  # noqa: A002
    """``tf.strings.split`` (TF 1.15's ``tf.compat.v1.strings.split``): splits each string
    of a 1-D batch on ``sep`` (a whole string; None: on runs of whitespace, dropping empty
    tokens, as Python's ``bytes.split()``), at most ``maxsplit`` times (-1: no limit).

    Returns:
      A ``SparseValue`` (default) or, with ``result_type="RaggedTensor"``, a
      ``RaggedValue``.

    Raises:
      ValueError: a 1-D batch was not given, or an empty ``sep``.
    """
    del name
    value = input if input is not None else source
    if sep is not None and not sep:
        raise ValueError("sep must not be empty (TF: an empty separator is not allowed).")
    sep_bytes = None if sep is None else sep.encode() if isinstance(sep, str) else bytes(sep)
    rows = _tokens(value, lambda s: s.split(sep_bytes, maxsplit), "tf.strings.split")
    return _split_result(rows, result_type)
