"""Writing ``tf.Example`` files from columns: a dict of NumPy arrays or a pandas DataFrame
becomes one ``tf.Example`` per row, in TFRecord files that TF's ``TFRecordDataset`` +
``tf.io.parse_example`` and :func:`estimator.inputs.tfrecord_input_fn` read.

Each column becomes a feature of the same name: floats as a ``float_list`` (float32),
integers and booleans as an ``int64_list``, strings (``str`` as UTF-8, ``bytes`` as
they are) as a ``bytes_list``. A 1-D column gives one value per row, a ``[n, k]`` column
``k`` values per row, an object column of lists (or arrays) each row's own list; ``None``
in an object column leaves the feature out of that row (a missing value, read back as
the spec's ``default_value``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from estimator.io import protos
from estimator.io.tfrecord import TFRecordWriter

__all__ = ["serialize_examples", "write_examples"]

_FLOAT, _INT, _BYTES = "float_list", "int64_list", "bytes_list"


def _columns(data: Any) -> dict[str, np.ndarray]:
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a pandas DataFrame
        data = {str(c): data[c].to_numpy() for c in data.columns}
    if not isinstance(data, Mapping) or not data:
        raise ValueError(
            "data must be a non-empty dict of columns {name: array [n, ...]} or a pandas "
            f"DataFrame; got {type(data).__name__}."
        )
    columns = {}
    for name, values in data.items():
        if not isinstance(name, str):
            raise ValueError(f"Column names must be strings (feature keys); got {name!r}.")
        array = values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)
        if array.dtype == object and all(
            isinstance(v, int | float | np.number) and not isinstance(v, bool)
            for v in array.ravel().tolist()
        ):
            array = np.asarray(array.tolist())
        if array.ndim == 0:
            raise ValueError(f"Column {name!r} is a scalar; expected one value (or list) per row.")
        columns[name] = array
    lengths = {k: len(v) for k, v in columns.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"Columns have different lengths: {lengths}. Give one entry per row.")
    return columns


def _kind(values: np.ndarray, name: str) -> str | None:
    """The list kind of a typed column (None: an object column, decided per value)."""
    kind = values.dtype.kind
    if kind == "f":
        return _FLOAT
    if kind in "iub":
        if values.dtype == np.uint64 and values.size and values.max() > np.iinfo(np.int64).max:
            raise ValueError(f"Column {name!r} holds values over int64's range.")
        return _INT
    if kind in "US":
        return _BYTES
    if kind == "O":
        return None
    raise ValueError(
        f"Column {name!r} has dtype {values.dtype}; tf.Example holds floats, integers and "
        "strings. Convert it (e.g. datetimes to int64 seconds)."
    )


def _value_kind(value: Any, name: str, row: int) -> str:
    flat = np.asarray(value, dtype=object).ravel().tolist()
    if all(isinstance(v, str | bytes) for v in flat):
        return _BYTES
    if all(isinstance(v, bool | int | np.integer) for v in flat):
        return _INT
    if all(isinstance(v, float | int | np.number) for v in flat):
        return _FLOAT
    raise ValueError(
        f"Column {name!r}, row {row}: {value!r} mixes types or holds a "
        f"{type(flat[0]).__name__ if flat else 'nothing'}; expected numbers or strings."
    )


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def _object_kind(rows: list, name: str) -> str:
    """The one list kind of an object column's values (all rows together; integers among
    floats are floats); a column of only empty lists is written as ``bytes_list``."""
    kinds = {}
    for i, value in enumerate(rows):
        if not _missing(value) and np.size(np.asarray(value, dtype=object)):
            kinds.setdefault(_value_kind(value, name, i), i)
    if set(kinds) == {_INT, _FLOAT}:
        return _FLOAT  # integers among floats are floats
    if len(kinds) > 1:
        (a, i), (b, j) = sorted(kinds.items(), key=lambda kv: kv[1])[:2]
        raise ValueError(
            f"Column {name!r} holds {a.split('_')[0]} values (row {i}) and {b.split('_')[0]} "
            f"values (row {j}); a feature has one type. Convert the column to one type."
        )
    return next(iter(kinds), _BYTES)


def _row_list(value: Any, kind: str) -> list:
    items = np.asarray(value, dtype=object).ravel().tolist()
    return _encode(items) if kind == _BYTES else items


def _encode(values) -> list:
    return [v.encode() if isinstance(v, str) else v for v in values]


def serialize_examples(data: Any) -> list[bytes]:
    """One serialized ``tf.Example`` per row of ``data`` (see the module docstring).

    Args:
      data: ``{name: array [n] or [n, k] or object array of lists}`` or a pandas
        DataFrame.

    Returns:
      ``n`` serialized examples.

    Raises:
      ValueError: columns of different lengths, unsupported dtypes, mixed types in an
        object column (the message names the column and row).
    """
    columns = _columns(data)
    n = len(next(iter(columns.values())))
    plan = []
    for name, values in columns.items():
        kind = _kind(values, name)
        if kind == _FLOAT:
            rows = values.astype(np.float32).reshape(n, -1).tolist()
        elif kind == _INT:
            rows = values.astype(np.int64).reshape(n, -1).tolist()
        elif kind == _BYTES:
            rows = [_encode(r) for r in values.reshape(n, -1).tolist()]
        else:
            rows = values.tolist() if values.ndim == 1 else values.reshape(n, -1).tolist()
            kind = _object_kind(rows, name)
            rows = [None if _missing(v) else _row_list(v, kind) for v in rows]
        plan.append((name, kind, rows))
    out = []
    for i in range(n):
        example = protos.Example()
        feature_map = example.features.feature
        for name, kind, rows in plan:
            value = rows[i]
            if value is not None:  # None: a missing value, the feature is left out
                getattr(feature_map[name], kind).value.extend(value)
        out.append(example.SerializeToString())
    return out


def write_examples(
    path: str, data: Any, compression_type: str | None = "GZIP", num_shards: int = 1
) -> list[str]:
    """Writes ``data`` as ``tf.Example`` TFRecord files (see the module docstring).

    Args:
      path: the file, or with ``num_shards > 1`` the prefix of the files
        ``{path}-00000-of-00004`` ... (Beam's and TF's shard names).
      data: ``{name: array}`` or a pandas DataFrame (one example per row).
      compression_type: ``"GZIP"`` (default, as TFX and Beam write), ``"ZLIB"`` or
        ``""``/None.
      num_shards: files to spread the rows over (contiguous parts, in order).

    Returns:
      The paths written. Each file appears complete or not at all.

    Raises:
      ValueError: as :func:`serialize_examples`; ``num_shards < 1``.
    """
    if int(num_shards) < 1:
        raise ValueError(f"num_shards must be >= 1; got {num_shards}.")
    records = serialize_examples(data)
    if num_shards == 1:
        names = [str(path)]
    else:
        names = [f"{path}-{i:05d}-of-{num_shards:05d}" for i in range(num_shards)]
    bounds = np.linspace(0, len(records), len(names) + 1).astype(int)
    for name, lo, hi in zip(names, bounds[:-1], bounds[1:], strict=True):
        with TFRecordWriter(name, compression_type) as writer:
            for record in records[lo:hi]:
                writer.write(record)
    return names
