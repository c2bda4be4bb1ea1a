"""CSV records to columns on the host: TF's ``decode_csv`` (``tf.io.decode_csv``).

Used by ``tf.decode_csv`` in ``estimator.compat`` input pipelines and by exported models
whose serving receiver takes CSV lines (``estimator.export``'s CSV columns): the records are
parsed with Python's ``csv`` module into one array per column, typed by ``record_defaults``
as TF's (a float default gives float32, an int int32 unless ``jax_enable_x64``, a string
bytes).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

__all__ = ["decode_csv", "column_dtype", "defaults_to_config", "defaults_from_config"]


def _typed(default: Sequence) -> tuple[type, object]:
    if len(default) == 0:
        return str, None
    value = default[0]
    if isinstance(value, (bytes, str, np.bytes_, np.str_)):
        return bytes, value.encode() if isinstance(value, str) else bytes(value)
    if isinstance(value, (bool, np.bool_)):
        return bool, bool(value)
    if isinstance(value, (int, np.integer)):
        return int, int(value)
    return float, float(value)


_DTYPES = {float: np.float32, int: np.int64, bool: np.bool_, bytes: object, str: object}


def column_dtype(default: Sequence) -> np.dtype:
    """The dtype of the column a ``record_defaults`` entry gives (see the module docstring)."""
    return np.dtype(jax.dtypes.canonicalize_dtype(_DTYPES[_typed(default)[0]]))


def defaults_to_config(record_defaults: Sequence[Sequence]) -> list[list]:
    """``record_defaults`` as JSON values (bytes as text)."""
    out = []
    for default in record_defaults:
        kind, value = _typed(default)
        if value is None:
            out.append([])
        elif kind is bytes:
            out.append([value.decode()])
        else:
            out.append([value])
    return out


def defaults_from_config(config: Sequence[Sequence]) -> list[list]:
    """The inverse of :func:`defaults_to_config`."""
    return [[v.encode() if isinstance(v, str) else v for v in entry] for entry in config]


def decode_csv(
    records: Any,
    record_defaults: Sequence[Sequence],
    field_delim: str = ",",
    use_quote_delim: bool = True,
    na_value: str = "",
    select_cols: Sequence[int] | None = None,
) -> list[np.ndarray]:
    """TF's ``decode_csv``: one array per column, each of the records' shape.

    Args:
      records: a string (bytes or str) or an array of them.
      record_defaults: one list per column: ``[default]`` (its type gives the column's), or
        ``[]`` for a required column.
      field_delim, use_quote_delim, na_value, select_cols: TF's meaning.

    Returns:
      ``[array]`` per selected column: float32, int32 (int64 with ``jax_enable_x64``),
      bool or bytes (object) values.

    Raises:
      ValueError: a record with the wrong number of fields, or a missing value in a
        required column (TF's messages).
    """
    array = np.asarray(records, dtype=object)
    flat = [r.decode() if isinstance(r, bytes) else str(r) for r in array.ravel()]
    types = [_typed(d) for d in record_defaults]
    n_fields = len(types) if select_cols is None else max(select_cols) + 1
    columns: list[list] = [[] for _ in types]
    quoting = csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE
    for record in flat:
        fields = next(csv.reader(io.StringIO(record), delimiter=field_delim, quoting=quoting), [""])
        if select_cols is not None:
            if len(fields) < n_fields:
                raise ValueError(
                    f"Expect {n_fields} fields but have {len(fields)} in record {record!r}"
                )
            fields = [fields[c] for c in select_cols]
        if len(fields) != len(types):
            raise ValueError(
                f"Expect {len(types)} fields but have {len(fields)} in record {record!r}"
            )
        for i, (field, (kind, default)) in enumerate(zip(fields, types, strict=True)):
            if field == "" or field == na_value:
                if default is None:
                    raise ValueError(f"Field {i} is required but missing in record {record!r}!")
                columns[i].append(default)
            elif kind is bytes:
                columns[i].append(field.encode())
            elif kind is bool:
                columns[i].append(field.strip().lower() in ("1", "true"))
            else:
                columns[i].append(kind(field.strip()))
    return [
        np.asarray(col, dtype=column_dtype(default)).reshape(array.shape)
        for col, default in zip(columns, record_defaults, strict=True)
    ]
