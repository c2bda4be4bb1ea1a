"""``tf.contrib.lookup`` (TF 1.15): vocabulary tables, on the host.

From ``tensorflow/python/ops/lookup_ops.py`` (which ``tf.contrib.lookup`` re-exports at
r1.15):

* ``index_table_from_tensor(vocabulary_list, num_oov_buckets=0, default_value=-1)`` /
  ``index_table_from_file(vocabulary_file, ...)``: ``table.lookup(keys)`` gives each key's
  position in the vocabulary (int64); a key outside it gets ``default_value``, or with
  ``num_oov_buckets`` the id ``vocab_size + Fingerprint64(key) % num_oov_buckets`` (TF's
  ``FastHashSpec``; integer keys are hashed as their decimal strings, as TF's);
* ``index_to_string_table_from_tensor(vocabulary_list, default_value="UNK")`` /
  ``index_to_string_table_from_file``: ``table.lookup(ids)`` gives the strings (bytes);
* ``HashTable(KeyValueTensorInitializer(keys, values), default_value)``.

Strings are bytes, as in TF (a ``str`` key or vocabulary entry is encoded as UTF-8), so
``lookup`` of the bytes ``tf.decode_csv`` returns finds a vocabulary given as ``str``.

Where tables run: strings never enter traced code, so looking up strings works on host
values — in an ``input_fn`` or a ``tf.data`` ``map`` (TF programs' usual place). Inside
``model_fn`` (traced), ``index_to_string`` tables turn ids into predictions of strings
(``estimator.IndexToString``, as the canned heads' ``classes``), and integer-keyed tables
look up traced integer keys; a string lookup there raises an error saying to move it into
the input pipeline. Tables need no initialisation: ``table.init``,
``table.initializer`` and ``tf.tables_initializer()`` are no-ops.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1._base import tf_strings
from estimator.compat.v1.train._train_op import NoOp
from estimator.model.strings import IndexToString
from estimator.preprocessing import fingerprint64

__all__ = [
    "index_table_from_tensor",
    "index_table_from_file",
    "index_to_string_table_from_tensor",
    "index_to_string_table_from_file",
    "HashTable",
    "KeyValueTensorInitializer",
    "TextFileIndex",
]

__getattr__ = module_getattr("tf.contrib.lookup", __name__)


class TextFileIndex:
    """``tf.lookup.TextFileIndex``: the whole line (-2) or its number (-1) as key or value."""

    WHOLE_LINE = -2
    LINE_NUMBER = -1


def _as_keys(values: Any) -> list:
    """Vocabulary entries as TF holds them: bytes for strings, ints for integers."""
    flat = np.ravel(tf_strings(np.asarray(values, dtype=object)))
    return [v if isinstance(v, bytes) else int(v) for v in flat]


class KeyValueTensorInitializer:
    """``tf.lookup.KeyValueTensorInitializer(keys, values)``: a table's contents."""

    def __init__(self, keys, values, key_dtype=None, value_dtype=None, name=None) -> None:
        self.keys = _as_keys(keys)
        self.values = list(np.ravel(tf_strings(np.asarray(values, dtype=object))))
        if len(self.keys) != len(self.values):
            raise ValueError(
                f"keys and values must have the same number of elements: {len(self.keys)} "
                f"keys, {len(self.values)} values."
            )


class _Table:
    """A static table: ``lookup(keys)``, ``size()``, no-op ``init``."""

    def __init__(self, keys, values, default_value, num_oov_buckets: int = 0) -> None:
        self._mapping: dict = {}
        for key, value in zip(keys, values, strict=True):
            if key in self._mapping and self._mapping[key] != value:
                raise ValueError(f"HashTable has different value for same key. Key {key!r}")
            self._mapping[key] = value
        self._values = list(values)
        self._default = (
            tf_strings(default_value)[()] if isinstance(default_value, str) else (default_value)
        )
        self._oov = int(num_oov_buckets)

    @property
    def init(self) -> NoOp:
        """A no-op: the table is filled when made."""
        return NoOp()

    initializer = init

    def size(self, name=None) -> np.ndarray:
        """The number of entries plus the OOV buckets (TF's ``IdTableWithHashBuckets``)."""
        return np.asarray(len(self._mapping) + self._oov, np.int64)

    def _refuse_traced(self) -> None:
        raise TypeError(
            "table.lookup of strings cannot run inside model_fn: strings never enter the "
            "compiled step. Look them up in the input pipeline (input_fn, or "
            "dataset.map(lambda features, labels: (features, table.lookup(labels)))), or use "
            "feature columns (tf.feature_column.categorical_column_with_vocabulary_list)."
        )

    def lookup(self, keys, name=None):
        """The value of each key (see the module docstring for defaults and OOV ids).

        Raises:
          TypeError: string keys inside ``model_fn``.
        """
        if isinstance(keys, jax.core.Tracer) or isinstance(keys, jax.Array):
            return self._lookup_traced(keys)
        array = tf_strings(np.asarray(keys))
        array = np.asarray(array, dtype=object) if array.dtype.kind == "O" else array
        out = [self._one(k) for k in array.ravel().tolist()]
        dtype = object if isinstance(self._default, bytes) else np.int64
        result = np.empty(len(out), dtype=dtype)
        result[:] = out
        return result.reshape(array.shape)

    def _one(self, key):
        value = self._mapping.get(key)
        if value is not None:
            return value
        if self._oov:
            text = key if isinstance(key, bytes) else str(key).encode()
            bucket = int(fingerprint64([text])[0] % np.uint64(self._oov))
            return len(self._mapping) + bucket
        return self._default

    def _lookup_traced(self, keys):
        if not all(isinstance(k, int) for k in self._mapping):
            self._refuse_traced()
        if self._oov:
            raise TypeError(
                "table.lookup with num_oov_buckets inside model_fn hashes the keys' strings, "
                "which cannot be traced: look the keys up in the input pipeline instead."
            )
        if isinstance(self._default, bytes):
            raise TypeError("A table of strings cannot give values inside model_fn.")
        table_keys = jnp.asarray(sorted(self._mapping))
        table_values = jnp.asarray([self._mapping[k] for k in sorted(self._mapping)])
        keys = jnp.asarray(keys)
        pos = jnp.clip(jnp.searchsorted(table_keys, keys), 0, len(table_keys) - 1)
        found = table_keys[pos] == keys
        return jnp.where(found, table_values[pos], self._default)


class HashTable(_Table):
    """``tf.contrib.lookup.HashTable(initializer, default_value)``."""

    def __init__(self, initializer: KeyValueTensorInitializer, default_value, name=None) -> None:
        super().__init__(initializer.keys, initializer.values, default_value)


class _IndexToString(_Table):
    """ids -> strings; inside ``model_fn``, an ``estimator.IndexToString``."""

    def __init__(self, vocabulary: list[bytes], default_value) -> None:
        super().__init__(list(range(len(vocabulary))), vocabulary, tf_strings(default_value)[()])
        self._vocabulary = vocabulary

    def lookup(self, keys, name=None):
        """The string of each id (``default_value`` outside the vocabulary)."""
        if isinstance(keys, jax.core.Tracer) or isinstance(keys, jax.Array):
            return IndexToString(
                keys, [v.decode() for v in self._vocabulary], self._default.decode()
            )
        return super().lookup(np.asarray(keys).astype(np.int64))


def _check_oov(num_oov_buckets: int) -> None:
    if num_oov_buckets < 0:
        raise ValueError(f"num_oov_buckets must be greater or equal than 0, got {num_oov_buckets}.")


def index_table_from_tensor(
    vocabulary_list,
    num_oov_buckets: int = 0,
    default_value: int = -1,
    hasher_spec=None,
    dtype=None,
    name=None,
) -> _Table:
    """``tf.contrib.lookup.index_table_from_tensor``: keys -> their position in
    ``vocabulary_list`` (see the module docstring).

    Raises:
      ValueError: no vocabulary, a negative ``num_oov_buckets``, a duplicate entry (TF's
        messages).
    """
    del hasher_spec, dtype, name
    if vocabulary_list is None:
        raise ValueError("vocabulary_list must be specified.")
    _check_oov(num_oov_buckets)
    keys = _as_keys(vocabulary_list)
    return _Table(keys, list(range(len(keys))), default_value, num_oov_buckets)


def _read_vocabulary(
    vocabulary_file, vocab_size, key_column_index, value_column_index, delimiter
) -> list:
    if vocabulary_file is None or (isinstance(vocabulary_file, str) and not vocabulary_file):
        raise ValueError("vocabulary_file must be specified and must not be empty.")
    if vocab_size is not None and vocab_size < 1:
        raise ValueError(
            f"vocab_size must be greater than 0, got {vocab_size}. vocabulary_file: "
            f"{vocabulary_file}"
        )
    with open(os.fspath(vocabulary_file), "rb") as f:
        lines = [line.rstrip(b"\r\n") for line in f]
    if vocab_size is not None:
        if len(lines) < vocab_size:
            raise ValueError(
                f"Invalid vocab_size > size in file: {vocab_size} > {len(lines)} "
                f"({vocabulary_file})"
            )
        lines = lines[:vocab_size]
    out = []
    for number, line in enumerate(lines):
        fields = line.split(delimiter.encode())
        out.append(
            (
                _column(key_column_index, number, line, fields),
                _column(value_column_index, number, line, fields),
            )
        )
    return out


def _column(index: int, number: int, line: bytes, fields: list[bytes]):
    """A vocabulary file's key or value: the line, its number or one of its fields."""
    if index == TextFileIndex.WHOLE_LINE:
        return line
    if index == TextFileIndex.LINE_NUMBER:
        return number
    return fields[index]


def index_table_from_file(
    vocabulary_file=None,
    num_oov_buckets: int = 0,
    vocab_size: int | None = None,
    default_value: int = -1,
    hasher_spec=None,
    key_dtype=None,
    name=None,
    key_column_index: int = TextFileIndex.WHOLE_LINE,
    value_column_index: int = TextFileIndex.LINE_NUMBER,
    delimiter: str = "\t",
) -> _Table:
    """``tf.contrib.lookup.index_table_from_file``: keys -> their line in the file (the
    first ``vocab_size`` lines).

    Raises:
      ValueError: no file, a bad ``vocab_size`` or ``num_oov_buckets`` (TF's messages).
    """
    del hasher_spec, key_dtype, name
    _check_oov(num_oov_buckets)
    pairs = _read_vocabulary(
        vocabulary_file, vocab_size, key_column_index, value_column_index, delimiter
    )
    return _Table([k for k, _ in pairs], [int(v) for _, v in pairs], default_value, num_oov_buckets)


def index_to_string_table_from_tensor(
    vocabulary_list: Sequence, default_value="UNK", name=None
) -> _IndexToString:
    """``tf.contrib.lookup.index_to_string_table_from_tensor``: ids -> strings.

    Raises:
      ValueError: no vocabulary (TF's message).
    """
    del name
    if vocabulary_list is None:
        raise ValueError("vocabulary_list must be specified.")
    return _IndexToString([tf_strings(v)[()] for v in np.ravel(vocabulary_list)], default_value)


def index_to_string_table_from_file(
    vocabulary_file,
    vocab_size: int | None = None,
    default_value="UNK",
    name=None,
    key_column_index: int = TextFileIndex.LINE_NUMBER,
    value_column_index: int = TextFileIndex.WHOLE_LINE,
    delimiter: str = "\t",
) -> _IndexToString:
    """``tf.contrib.lookup.index_to_string_table_from_file``: ids -> the file's lines.

    Raises:
      ValueError: no file or a bad ``vocab_size`` (TF's messages).
    """
    del name
    pairs = _read_vocabulary(
        vocabulary_file, vocab_size, key_column_index, value_column_index, delimiter
    )
    return _IndexToString([bytes(v) for _, v in sorted(pairs)], default_value)
