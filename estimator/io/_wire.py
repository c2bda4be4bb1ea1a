"""Reading the columns of a batch of serialized ``tf.Example``s without protobuf objects
(internal).

Python's protobuf builds a message object per record and per feature, which dominates the
cost of reading a batch. This reader walks the protobuf wire format of the whole batch in
compiled loops instead (``estimator.io._kernels``, numba; ``benchmarks/tfrecord_input.py``
measures the whole path), then cuts the values into columns with a few NumPy operations per
key. The layout
it follows:

1. ``Example``: one field 1 (``features``, length-delimited) spanning the record;
2. ``Features``: entries of field 1 (the map);
3. each map entry: field 1 (the key), then field 2 (the ``Feature``), nothing else;
4. ``Feature``: one of fields 1, 2, 3 (``bytes_list``, ``float_list``, ``int64_list``);
5. the list: packed floats (little-endian float32 bytes), packed varints, or repeated
   length-delimited bytes.

Every record whose bytes leave this layout (an unknown or repeated field, unpacked
numbers, a key repeated in the map, a varint or length that runs past its message) is
handed to protobuf (``_columns.collect_protobuf``), which defines the semantics; records
that are not ``Example``s at all raise there. Both readers agree on every record the fast
one accepts (``tests/io/test_io_wire.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from estimator.io._columns import (
    BYTES,
    FLOAT,
    INT64,
    Column,
    RecordError,
    _bytes_array,
    collect_protobuf,
)
from estimator.io._records import Records


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices ``starts[i] + k`` for ``k < lengths[i]``, concatenated."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
    return offsets + np.arange(total, dtype=np.int64)


class _Batch:
    """The records' bytes as one array (the reader's own buffer for :class:`Records`)."""

    def __init__(self, records: Sequence[bytes] | Records) -> None:
        if not isinstance(records, Records):
            records = Records.from_list(records)
        self.arr = records.data
        self.starts = records.starts
        self.ends = records.starts + records.lengths


def _strings(batch: _Batch, start: np.ndarray, stop: np.ndarray, fixed: bool = False):
    """The bytes ``[start, stop)`` of the batch as an object array of ``bytes``. Short
    strings that do not end with a zero byte (NumPy's fixed-width ``S`` strings drop those)
    are cut into one ``[n, width]`` array and converted in C; others are sliced one by
    one. With ``fixed`` such short strings stay a fixed-width ``S`` array (no Python object
    per string: for a consumer that reads them as arrays, the feature columns' host
    phase)."""
    from estimator.io import _kernels  # loaded by collect

    lengths = stop - start
    if not len(lengths):
        return _bytes_array([])
    width = int(lengths.max())
    if 0 < width <= 64 and not (batch.arr[stop[lengths > 0] - 1] == 0).any():
        cut = _kernels.padded(batch.arr, start, stop, width).view(f"S{width}").ravel()
        return cut if fixed else cut.astype(object)
    arr = batch.arr
    pieces = [arr[x:y].tobytes() for x, y in zip(start.tolist(), stop.tolist(), strict=True)]
    return _bytes_array(pieces)


def _key_table(keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The keys' UTF-8 bytes concatenated, with each one's start and length."""
    encoded = [key.encode() for key in keys]
    lengths = np.array([len(key) for key in encoded], np.int64)
    data = np.frombuffer(b"".join(encoded) + b"\0", np.uint8)
    return data, np.cumsum(lengths) - lengths, lengths


def collect(
    records: Sequence[bytes] | Records, keys: Sequence[str], fixed_strings: bool = False
) -> dict[str, Column]:
    """The columns of ``keys`` over ``records`` (see ``_columns``; ``fixed_strings``: see
    :func:`_strings`)."""
    n = len(records)
    if n == 0 or not keys:
        return collect_protobuf(records, keys)
    # Deferred: importing numba takes ~0.3 s, which only parsing needs.
    from estimator.io import _kernels

    batch = _Batch(records)
    kinds, counts, lo, hi, bad = _kernels.scan(
        batch.arr, batch.starts, batch.ends, *_key_table(keys)
    )
    offsets, floats, ints, string_starts, string_stops = _kernels.gather(
        batch.arr, kinds, counts, lo, hi, bad
    )
    values = {
        BYTES: _strings(batch, string_starts, string_stops, fixed_strings),
        FLOAT: floats.view("<f4"),
        INT64: ints,
    }
    kinds[:, bad] = 0
    counts = np.where(kinds > 0, counts, 0)
    columns = {}
    for k, key in enumerate(keys):
        flat = [
            values[kind][offsets[kind, k] : offsets[kind, k + 1]] for kind in (BYTES, FLOAT, INT64)
        ]
        columns[key] = Column(kinds[k], counts[k], *flat)
    slow = np.flatnonzero(bad)
    if not len(slow):
        return columns
    try:
        read = collect_protobuf([records[i] for i in slow.tolist()], keys)
    except RecordError as err:
        raise RecordError(int(slow[err.index]), err.record) from None
    return {key: _merge(columns[key], read[key], slow) for key in keys}


def _merge(fast: Column, slow: Column, bad: np.ndarray) -> Column:
    """The fast column with the declined records' rows taken from ``slow`` (in ``bad``'s
    order)."""
    n = len(fast.kinds)
    kinds = fast.kinds.copy()
    counts = fast.counts.copy()
    kinds[bad] = slow.kinds
    counts[bad] = slow.counts
    from_slow = np.zeros(n, bool)
    from_slow[bad] = True
    merged = []
    for kind in (BYTES, FLOAT, INT64):
        fast_counts = np.where((fast.kinds == kind) & ~from_slow, fast.counts, 0)
        slow_counts = np.zeros(n, np.int64)
        slow_counts[bad] = np.where(slow.kinds == kind, slow.counts, 0)
        both = np.concatenate([fast.values(kind), slow.values(kind)])
        fast_offsets = np.cumsum(fast_counts) - fast_counts
        slow_offsets = np.cumsum(slow_counts) - slow_counts + len(fast.values(kind))
        starts = np.where(from_slow, slow_offsets, fast_offsets)
        lengths = np.where(from_slow, slow_counts, fast_counts)
        merged.append(both[_ranges(starts, lengths)])
    return Column(kinds, counts, *merged)
