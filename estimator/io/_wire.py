"""Reading the columns of a batch of serialized ``tf.Example``s with NumPy (internal).

Python's protobuf builds a message object per record and per feature; for a batch of census
rows that is ~100 µs a record. This reader decodes the protobuf wire format of the whole
batch at once instead, one level of the message at a time, with each level a few NumPy
operations over all records:

1. ``Example``: one field 1 (``features``, length-delimited) spanning the record;
2. ``Features``: entries of field 1 (the map), read in a loop whose length is the largest
   number of features in a record, each pass over all records at once;
3. each map entry: field 1 (the key), then field 2 (the ``Feature``), nothing else;
4. ``Feature``: one of fields 1, 2, 3 (``bytes_list``, ``float_list``, ``int64_list``);
5. the list: packed floats (little-endian float32 bytes), packed varints (decoded with
   cumulative sums over the bytes), or repeated length-delimited bytes.

Every record whose bytes leave this layout (an unknown or repeated field, unpacked
numbers, a key repeated in the map, a varint or length that runs past its message) is
handed to protobuf (``_columns.collect_protobuf``), which defines the semantics; records
that are not ``Example``s at all raise there. Both readers agree on every record the fast
one accepts (``tests/test_io_wire.py``).
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

_PAD = 64  # zero bytes after the batch: reads of a varint (10 bytes), a key code (8) or a
# short string (up to 64, see _strings) never run off the end
_SHIFTS = np.arange(0, 70, 7, dtype=np.uint64)
_LIST_TAGS = {0x0A: BYTES, 0x12: FLOAT, 0x1A: INT64}


def _varint(arr: np.ndarray, pos: np.ndarray):
    """The varints at ``pos``: ``(value, position after it, ok)``; ok is False for a varint
    longer than 10 bytes. Values are uint64 (int64 when every varint has one or two bytes,
    as lengths and tags mostly do)."""
    b0 = arr[pos]
    long0 = b0 >= 0x80
    if not long0.any():
        return b0.astype(np.int64), pos + 1, np.ones(len(pos), bool)
    b1 = arr[pos + 1]
    if not (long0 & (b1 >= 0x80)).any():
        value = np.where(long0, (b0 & 0x7F).astype(np.int64) | (b1.astype(np.int64) << 7), b0)
        return value, pos + 1 + long0, np.ones(len(pos), bool)
    window = arr[pos[:, None] + np.arange(10)]
    more = window >= 0x80
    size = np.argmin(more, axis=1) + 1
    ok = ~more.all(axis=1)
    used = np.arange(10) < size[:, None]
    parts = (window & 0x7F).astype(np.uint64) << _SHIFTS
    value = np.where(used, parts, np.uint64(0)).sum(axis=1, dtype=np.uint64)
    return value, pos + size, ok


def _length_delimited(arr, pos, end, tag):
    """Reads ``tag`` (one byte) and a length at ``pos``: ``(start, stop, ok)`` of the field's
    bytes; ok is False where the tag differs or the field runs past ``end``."""
    tag_ok = arr[pos] == tag
    length, start, ok = _varint(arr, pos + 1)
    length = length.astype(np.int64)
    stop = start + length
    ok &= tag_ok & (length >= 0) & (stop <= end)
    return start, stop, ok


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices ``starts[i] + k`` for ``k < lengths[i]``, concatenated."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
    return offsets + np.arange(total, dtype=np.int64)


def _words(data: bytes) -> np.ndarray:
    """The little-endian uint64 at every byte offset of ``data`` (an unaligned strided view,
    no copy)."""
    return np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, offset=0, strides=(1,))


class _Batch:
    """The records' bytes as one array, and which records the fast path declines."""

    def __init__(self, records: Sequence[bytes]) -> None:
        sizes = np.fromiter(map(len, records), np.int64, len(records))
        self.ends = np.cumsum(sizes)
        self.starts = self.ends - sizes
        self.data = b"".join(records) + bytes(_PAD)
        self.arr = np.frombuffer(self.data, np.uint8)
        self.words = _words(self.data)
        self.bad = np.zeros(len(records), bool)

    def decline(self, records: np.ndarray) -> None:
        self.bad[records] = True


def _entries(batch: _Batch):
    """The map entries of every record's ``Features``: ``(record, start, stop)``, in record
    order."""
    arr, n = batch.arr, len(batch.starts)
    records = np.arange(n)
    nonempty = batch.ends > batch.starts
    start, stop, ok = _length_delimited(arr, batch.starts, batch.ends, 0x0A)
    ok &= stop == batch.ends  # one ``features`` field, spanning the record
    batch.decline(records[nonempty & ~ok])
    live = nonempty & ok
    rec, pos, end = records[live], start[live], stop[live]
    found_rec, found_start, found_stop = [], [], []
    while len(rec):
        more = pos < end
        rec, pos, end = rec[more], pos[more], end[more]
        if not len(rec):
            break
        s, e, good = _length_delimited(arr, pos, end, 0x0A)
        batch.decline(rec[~good])
        found_rec.append(rec[good])
        found_start.append(s[good])
        found_stop.append(e[good])
        rec, pos, end = rec[good], e[good], end[good]
    if not found_rec:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    rec = np.concatenate(found_rec)
    order = np.argsort(rec, kind="stable")
    return rec[order], np.concatenate(found_start)[order], np.concatenate(found_stop)[order]


_HEAD_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], np.uint64)


def _key_codes(words: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Per key ``[length, first 8 bytes, last 8 bytes]`` as int64 (bytes past a key shorter
    than 8 zeroed; the tail 0 for such a key): equal codes mean equal keys for keys of up to
    16 bytes. ``words[i]`` is the little-endian uint64 at byte ``i`` of the batch."""
    codes = np.zeros((len(start), 3), np.int64)
    codes[:, 0] = length
    head = words[start] & _HEAD_MASKS[np.minimum(length, 8)]
    codes[:, 1] = head.view(np.int64)
    long = np.flatnonzero(length > 8)
    codes[long, 2] = words[start[long] + length[long] - 8].view(np.int64)
    return codes


def _key_matches(arr, key_start, key_len, codes, key: bytes) -> np.ndarray:
    """The entries whose key is ``key``."""
    want = _key_codes(_words(key + bytes(_PAD)), np.zeros(1, np.int64), np.asarray([len(key)]))[0]
    hits = np.flatnonzero(
        (codes[:, 0] == want[0]) & (codes[:, 1] == want[1]) & (codes[:, 2] == want[2])
    )
    if len(key) > 16 and len(hits):
        window = arr[key_start[hits, None] + np.arange(len(key))]
        hits = hits[(window == np.frombuffer(key, np.uint8)).all(axis=1)]
    return hits


def _packed_varints(arr, start, stop):
    """Decodes packed varint lists ``[start, stop)``: ``(values int64, counts, ok)``;
    ``values`` holds the lists that are ``ok`` (each ends a varint of at most 10 bytes), in
    order."""
    lengths = stop - start
    ok = np.ones(len(start), bool)
    has = np.flatnonzero(lengths > 0)
    if len(has):
        ok[has] = arr[stop[has] - 1] < 0x80  # each list ends a varint
    while True:
        sel = np.flatnonzero(ok)
        raw = arr[_ranges(start[sel], lengths[sel])]
        counts = np.zeros(len(start), np.int64)
        if not len(raw):
            return np.zeros(0, np.int64), counts, ok
        owner = np.repeat(sel, lengths[sel])
        last = raw < 0x80
        ends_at = np.flatnonzero(last)
        first_of = np.concatenate([[0], ends_at[:-1] + 1])
        sizes = ends_at - first_of + 1
        if (sizes <= 10).all():
            break
        ok[owner[ends_at[sizes > 10]]] = False  # a varint over 10 bytes: protobuf decides
    counts[sel] = np.bincount(owner[ends_at], minlength=len(start))[sel]
    position = np.arange(len(raw)) - np.repeat(first_of, sizes)
    parts = (raw & 0x7F).astype(np.uint64) << (position.astype(np.uint64) * np.uint64(7))
    return np.add.reduceat(parts, first_of).view(np.int64), counts, ok


def _lists(batch: _Batch, rec, start, stop):
    """Each ``Feature``'s kind, count and values, for the entries ``(rec, start, stop)`` (in
    the order given): ``(kinds, counts, decoded, values)``. ``decoded[kind]`` marks the
    entries whose values ``values[kind]`` holds, concatenated in entry order."""
    arr = batch.arr
    kinds = np.zeros(len(rec), np.int8)
    counts = np.zeros(len(rec), np.int64)
    nonempty = stop > start
    tag = arr[start]
    ls, le, ok = _varint_field(arr, start, stop)
    ok &= (le == stop) & np.isin(tag, list(_LIST_TAGS))  # one list field spans the Feature
    batch.decline(rec[nonempty & ~ok])
    live = nonempty & ok
    for code, kind in _LIST_TAGS.items():
        kinds[live & (tag == code)] = kind
    decoded = {kind: np.zeros(len(rec), bool) for kind in (BYTES, FLOAT, INT64)}
    values = {}
    # floats: one packed field 1 (tag 0x0A) of 4-byte values, or an empty list
    f = np.flatnonzero(kinds == FLOAT)
    s, e, good = _list_payload(arr, ls[f], le[f])
    good &= (e - s) % 4 == 0
    batch.decline(rec[f][~good])
    f, s, e = f[good], s[good], e[good]
    counts[f] = (e - s) // 4
    decoded[FLOAT][f] = True
    values[FLOAT] = arr[_ranges(s, e - s)].view("<f4")
    # int64s: one packed field 1 of varints
    i = np.flatnonzero(kinds == INT64)
    s, e, good = _list_payload(arr, ls[i], le[i])
    batch.decline(rec[i][~good])
    i, s, e = i[good], s[good], e[good]
    ints, int_counts, ok = _packed_varints(arr, s, e)
    batch.decline(rec[i][~ok])
    counts[i] = int_counts
    decoded[INT64][i[ok]] = True
    values[INT64] = ints
    # bytes: repeated field 1, length-delimited
    b = np.flatnonzero(kinds == BYTES)
    owner, vs, ve, good = _bytes_lists(batch, rec[b], ls[b], le[b])
    counts[b] = np.bincount(owner, minlength=len(b))
    decoded[BYTES][b[good]] = True
    keep = good[owner]
    values[BYTES] = _strings(batch, vs[keep], ve[keep])
    return kinds, counts, decoded, values


def _strings(batch: _Batch, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """The bytes ``[start, stop)`` of the batch as an object array of ``bytes``. Short
    strings that do not end with a zero byte (NumPy's fixed-width ``S`` strings drop those)
    are cut out as one ``[n, width]`` array and converted in C; others are sliced one by
    one."""
    lengths = stop - start
    if not len(lengths):
        return _bytes_array([])
    width = int(lengths.max())
    if 0 < width <= 64 and not (batch.arr[stop[lengths > 0] - 1] == 0).any():
        windows = np.lib.stride_tricks.sliding_window_view(batch.arr, width)
        cut = windows[start]  # [n, width] bytes in one gather (the padding covers the end)
        cut[np.arange(width) >= lengths[:, None]] = 0
        return cut.view(f"S{width}").ravel().astype(object)
    data = batch.data
    return _bytes_array([data[x:y] for x, y in zip(start.tolist(), stop.tolist(), strict=True)])


def _varint_field(arr, start, stop):
    """A ``Feature``'s field: after its one-byte tag, a length and the payload."""
    length, payload, ok = _varint(arr, start + 1)
    length = length.astype(np.int64)
    end = payload + length
    return payload, end, ok & (end <= stop)


def _list_payload(arr, start, stop):
    """A numeric list's packed field 1: ``(start, stop, ok)`` (empty lists have none)."""
    empty = stop == start
    s, e, ok = _length_delimited(arr, start, stop, 0x0A)
    ok &= e == stop
    s = np.where(empty, start, s)
    e = np.where(empty, start, e)
    return s, e, ok | empty


def _bytes_lists(batch, rec, start, stop):
    """The values of repeated-bytes lists: ``(owner, start, stop, good)`` per value, in
    list order (``owner`` indexes the lists), and which lists decoded."""
    arr = batch.arr
    alive = np.arange(len(rec))
    pos = start.copy()
    found_owner, found_s, found_e = [], [], []
    good = np.ones(len(rec), bool)
    while len(alive):
        alive = alive[pos[alive] < stop[alive]]
        if not len(alive):
            break
        s, e, ok = _length_delimited(arr, pos[alive], stop[alive], 0x0A)
        good[alive[~ok]] = False
        alive, s, e = alive[ok], s[ok], e[ok]
        found_owner.append(alive)
        found_s.append(s)
        found_e.append(e)
        pos[alive] = e
    batch.decline(rec[~good])
    if not found_owner:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, good
    owner = np.concatenate(found_owner)
    order = np.argsort(owner, kind="stable")
    return owner[order], np.concatenate(found_s)[order], np.concatenate(found_e)[order], good


def collect(records: list[bytes], keys: Sequence[str]) -> dict[str, Column]:
    """The columns of ``keys`` over ``records`` (see ``_columns``)."""
    n = len(records)
    if n == 0:
        return collect_protobuf(records, keys)
    batch = _Batch(records)
    arr = batch.arr
    rec, start, stop = _entries(batch)
    # Map entry: key (field 1), then value (field 2), ending the entry.
    ks, ke, ok = _length_delimited(arr, start, stop, 0x0A)
    vs, ve, ok2 = _length_delimited(arr, ke, stop, 0x12)
    ok &= ok2 & (ve == stop)
    batch.decline(rec[~ok])
    key_len = np.where(ok, ke - ks, -1)
    codes = _key_codes(batch.words, ks, np.maximum(key_len, 0))
    codes[:, 0] = key_len
    key_id = np.full(len(rec), -1, np.int64)
    for k, key in enumerate(keys):
        hits = _key_matches(arr, ks, key_len, codes, key.encode())
        batch.decline(rec[hits][np.flatnonzero(np.diff(rec[hits]) == 0)])  # a repeated key
        key_id[hits] = k
    chosen = np.flatnonzero(key_id >= 0)
    order = chosen[np.lexsort((rec[chosen], key_id[chosen]))]  # by key, then record
    kinds, counts, decoded, values = _lists(batch, rec[order], vs[order], ve[order])
    rows = rec[order]
    bounds = np.searchsorted(key_id[order], np.arange(len(keys) + 1))
    if batch.bad.any():  # drop the declined records' lists; protobuf reads those records
        kept = ~batch.bad[rows]
        for kind in (BYTES, FLOAT, INT64):
            lists = np.flatnonzero(decoded[kind])
            values[kind] = values[kind][np.repeat(kept[lists], counts[lists])]
            decoded[kind] &= kept
        kinds = np.where(kept, kinds, 0).astype(np.int8)
    offsets = {
        kind: np.concatenate([[0], np.cumsum(np.where(decoded[kind], counts, 0))])
        for kind in (BYTES, FLOAT, INT64)
    }
    columns = {}
    for k, key in enumerate(keys):
        lo, hi = bounds[k], bounds[k + 1]
        col_kinds = np.zeros(n, np.int8)
        col_counts = np.zeros(n, np.int64)
        col_kinds[rows[lo:hi]] = kinds[lo:hi]
        col_counts[rows[lo:hi]] = np.where(kinds[lo:hi] > 0, counts[lo:hi], 0)
        flat = [
            values[kind][offsets[kind][lo] : offsets[kind][hi]] for kind in (BYTES, FLOAT, INT64)
        ]
        columns[key] = Column(col_kinds, col_counts, *flat)
    bad = np.flatnonzero(batch.bad)
    if not len(bad):
        return columns
    try:
        slow = collect_protobuf([records[i] for i in bad.tolist()], keys)
    except RecordError as err:
        raise RecordError(int(bad[err.index]), err.record) from None
    return {key: _merge(columns[key], slow[key], bad) for key in keys}


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
