"""CSV records to columns on the host: TF's ``decode_csv`` (``tf.io.decode_csv``).

Used by ``tf.decode_csv`` in ``estimator.compat`` input pipelines and by exported models
whose serving receiver takes CSV lines (``estimator.export``'s CSV columns): the records are
parsed into one array per column, typed by ``record_defaults`` as TF's (a float default
gives float32, an int int32 unless ``jax_enable_x64``, a string bytes).

An array of many records is parsed at once by pyarrow's CSV reader (C++; the ``compat``
extra installs it), which reads TF's ``tf.data`` text pipelines at TF's speed
(``benchmarks/text_pipeline.py``). Where its reading could differ from Python's ``csv``
module and ``int``/``float`` (a record with the wrong number of fields, an empty record, a
missing required value, a number Python would read otherwise, boolean columns,
``select_cols``), the records are parsed with those instead, which also give TF's error
messages.
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


#: Arrays of at least this many records are parsed by pyarrow (one call's fixed cost is
#: that of a few records parsed in Python).
_VECTORIZED_FROM = 32


def _arrow_types(types: list) -> list | None:
    import pyarrow as pa

    arrow = {bytes: pa.binary(), int: pa.int64(), float: pa.float64()}
    if any(kind not in arrow for kind, _ in types):
        return None
    return [arrow[kind] for kind, _ in types]


def _joined(flat: list, types: list) -> bytes | None:
    """The records as lines of one buffer, or None where pyarrow's reading of them could
    differ from the per-record parser's."""
    try:
        data = b"\n".join(flat)
    except TypeError:  # str among the records
        data = b"\n".join(r if isinstance(r, bytes) else str(r).encode() for r in flat)
    if data.count(b"\n") != len(flat) - 1 or b"\r" in data:
        return None  # a record holding a line break: not one row per record
    if not data or data.startswith(b"\n") or data.endswith(b"\n") or b"\n\n" in data:
        return None  # an empty record (pyarrow reads it as missing values)
    if int in (kind for kind, _ in types) and (b"0x" in data or b"0X" in data):
        return None  # pyarrow reads hexadecimal integers, int() does not
    return data


def _arrow_table(data: bytes, kinds: list, delim: str, quoted: bool, na_value: str):
    import pyarrow as pa
    import pyarrow.csv as pcsv

    names = [f"c{i}" for i in range(len(kinds))]
    try:
        return pcsv.read_csv(
            pa.py_buffer(data),
            read_options=pcsv.ReadOptions(
                column_names=names, use_threads=False, block_size=max(len(data) + 1, 1 << 20)
            ),
            parse_options=pcsv.ParseOptions(
                delimiter=delim, quote_char='"' if quoted else False, ignore_empty_lines=False
            ),
            convert_options=pcsv.ConvertOptions(
                column_types=dict(zip(names, kinds, strict=True)),
                null_values=sorted({"", na_value}),
                strings_can_be_null=True,
                quoted_strings_can_be_null=True,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _arrow_column(column, kind: type, default, record_default) -> np.ndarray | None:
    """A pyarrow column as the per-record parser's array, or None where that raises."""
    import pyarrow.compute as pc

    if column.null_count:
        if default is None:
            return None  # a required value missing: the per-record parser says where
        column = pc.fill_null(column, default)
    values = column.to_numpy(zero_copy_only=False)
    if kind is bytes:
        return values
    dtype = column_dtype(record_default)
    if kind is int and len(values):
        info = np.iinfo(dtype)
        if values.min() < info.min or values.max() > info.max:
            return None  # out of the column's range: an error there
    return values.astype(dtype)


def _vectorized(flat: list, types: list, defaults, delim, quoted, na_value) -> list | None:
    """The columns of ``flat`` (bytes or str records) parsed by pyarrow, or None where its
    reading could differ from the per-record parser's (see the module docstring)."""
    try:
        kinds = _arrow_types(types)
    except ImportError:
        return None
    data = None if kinds is None else _joined(flat, types)
    table = None if data is None else _arrow_table(data, kinds, delim, quoted, na_value)
    if table is None or table.num_rows != len(flat):
        return None
    columns = []
    for column, (kind, default), record_default in zip(table.columns, types, defaults, strict=True):
        values = _arrow_column(column, kind, default, record_default)
        if values is None:
            return None
        columns.append(values)
    return columns


def _fields(record: str, reader_options: dict, n_types: int, select_cols) -> list[str]:
    """The fields of one record (TF's errors for a wrong number of them)."""
    fields = next(csv.reader(io.StringIO(record), **reader_options), [""])
    if select_cols is not None:
        n_fields = max(select_cols) + 1
        if len(fields) < n_fields:
            raise ValueError(
                f"Expect {n_fields} fields but have {len(fields)} in record {record!r}"
            )
        fields = [fields[c] for c in select_cols]
    if len(fields) != n_types:
        raise ValueError(f"Expect {n_types} fields but have {len(fields)} in record {record!r}")
    return fields


def _value(field: str, kind: type, default, i: int, record: str, na_value: str):
    if field == "" or field == na_value:
        if default is None:
            raise ValueError(f"Field {i} is required but missing in record {record!r}!")
        return default
    if kind is bytes:
        return field.encode()
    if kind is bool:
        return field.strip().lower() in ("1", "true")
    return kind(field.strip())


def _per_record(flat: list, types: list, delim, quoted, na_value, select_cols) -> list[list]:
    """The columns of ``flat``, parsed a record at a time with Python's ``csv``."""
    options = {"delimiter": delim, "quoting": csv.QUOTE_MINIMAL if quoted else csv.QUOTE_NONE}
    columns: list[list] = [[] for _ in types]
    for raw in flat:
        record = raw.decode() if isinstance(raw, bytes) else str(raw)
        fields = _fields(record, options, len(types), select_cols)
        for i, (field, (kind, default)) in enumerate(zip(fields, types, strict=True)):
            columns[i].append(_value(field, kind, default, i, record, na_value))
    return columns


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
    types = [_typed(d) for d in record_defaults]
    flat = array.ravel().tolist()
    options = (field_delim, use_quote_delim, na_value)
    if len(flat) >= _VECTORIZED_FROM and select_cols is None:
        columns = _vectorized(flat, types, record_defaults, *options)
        if columns is not None:
            return [c.reshape(array.shape) for c in columns]
    columns = _per_record(flat, types, *options, select_cols)
    return [
        np.asarray(col, dtype=column_dtype(default)).reshape(array.shape)
        for col, default in zip(columns, record_defaults, strict=True)
    ]
