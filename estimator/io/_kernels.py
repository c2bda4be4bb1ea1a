"""The compiled loops of ``estimator.io`` (internal): TFRecord framing, the protobuf wire
format of ``tf.Example``s, and the shuffle buffer's draws.

numba compiles them (``nogil``: they run beside the training step in the input pipeline's
threads without holding Python's lock; ``cache``: compiled once per installation, ~10 s,
then loaded in ~0.5 s; where numba has nowhere to keep the cache, once per process). Each
takes NumPy arrays over a buffer of bytes and returns arrays, so a record costs no Python
operation:

* :func:`frames` cuts a buffer of TFRecord frames (``estimator.io.tfrecord``);
* :func:`scan` walks every record (``Example`` → ``Features`` → map entries → ``Feature``
  → list) and notes, for each requested key and record, the list's kind, its number of
  values and where its payload lies. A record whose bytes leave the common layout (see
  ``estimator.io._wire``) is marked bad; protobuf reads those.
* :func:`gather` copies the values out: float32 bytes, decoded int64 varints, and the
  ``[start, stop)`` of every string, key by key and record by record; :func:`padded` cuts
  short strings into one array that NumPy turns into ``bytes`` objects in C.
* :func:`record_crcs` checksums records (CRC32C) and :func:`copy_records` gathers them into
  a new buffer (``estimator.io._records``);
* :func:`shuffle_draws` runs TF's shuffle buffer over indices (``estimator.inputs.engine``).

The wire layout is ``example.proto`` / ``feature.proto``'s (TF): ``Example.features`` =
field 1; ``Features.feature`` = field 1, map entries of key (field 1) and ``Feature``
(field 2); ``Feature`` = one of ``bytes_list`` (1), ``float_list`` (2), ``int64_list``
(3), each a ``value`` field 1 (floats and int64s packed).
"""

from __future__ import annotations

import logging
import platform

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

ABSENT, BYTES, FLOAT, INT64 = 0, 1, 2, 3
_LEN = 0x0A  # field 1, length-delimited: every field this reader follows but two
_FEATURE = 0x12  # a map entry's field 2
_FLOAT_LIST, _INT64_LIST = 0x12, 0x1A  # Feature's fields 2 and 3 (field 1 is _LEN)

logger = logging.getLogger("estimator")


def _probe() -> int:
    return 0


def _can_cache() -> bool:
    """Whether numba has somewhere to keep this file's compiled code (a writable
    ``__pycache__`` beside it, its per-user cache, or ``NUMBA_CACHE_DIR``). Without one,
    ``cache=True`` would make this module fail to import (a read-only installation with
    no writable home, as some containers have); it compiles in each process instead."""
    try:
        numba.njit(cache=True)(_probe)  # decorating looks for a cache location
    except RuntimeError as err:
        logger.warning(
            "numba cannot cache the TFRecord reader's compiled code (%s): every process "
            "will compile it (~10 s at its first read). Set NUMBA_CACHE_DIR to a writable "
            "folder to keep it.",
            err,
        )
        return False
    return True


_CACHE = _can_cache()
_jit = numba.njit(nogil=True, cache=_CACHE)
_inline = numba.njit(nogil=True, cache=_CACHE, inline="always")


def _has_sse42() -> bool:
    """Whether the CPU has SSE 4.2's CRC32C instruction (x86); elsewhere the tables serve."""
    import llvmlite.binding as llvm

    return platform.machine().lower() in ("x86_64", "amd64") and bool(
        llvm.get_host_cpu_features().get("sse4.2", False)
    )


_SSE42 = _has_sse42()


@intrinsic
def _load64(typingctx, arr, pos):
    """The 8 bytes of ``arr`` (uint8) at ``pos`` as a little-endian uint64 (an unaligned
    load)."""

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        pointer = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        value = builder.load(pointer)
        value.align = 1
        return value

    return types.uint64(arr, types.int64), codegen


@intrinsic
def _crc32c_step64(typingctx, crc, value):
    """SSE 4.2's ``crc32`` instruction on 8 bytes (CRC32C)."""

    def codegen(context, builder, signature, args):
        kind = ir.FunctionType(ir.IntType(64), [ir.IntType(64), ir.IntType(64)])
        step = cgutils.get_or_insert_function(builder.module, kind, "llvm.x86.sse42.crc32.64.64")
        return builder.call(step, args)

    return types.uint64(types.uint64, types.uint64), codegen


@intrinsic
def _crc32c_step8(typingctx, crc, value):
    """SSE 4.2's ``crc32`` instruction on one byte (CRC32C)."""

    def codegen(context, builder, signature, args):
        kind = ir.FunctionType(ir.IntType(32), [ir.IntType(32), ir.IntType(8)])
        step = cgutils.get_or_insert_function(builder.module, kind, "llvm.x86.sse42.crc32.32.8")
        return builder.call(step, args)

    return types.uint32(types.uint32, types.uint8), codegen


@intrinsic
def _memcpy(typingctx, target, target_pos, source, source_pos, count):
    """Copies ``count`` bytes of ``source`` (uint8) from ``source_pos`` to ``target``
    (uint8) at ``target_pos`` (LLVM's ``memcpy``)."""

    def codegen(context, builder, signature, args):
        into = context.make_array(signature.args[0])(context, builder, args[0]).data
        out_of = context.make_array(signature.args[2])(context, builder, args[2]).data
        cgutils.raw_memcpy(
            builder, builder.gep(into, [args[1]]), builder.gep(out_of, [args[3]]), args[4], 1
        )
        return context.get_dummy_value()

    return types.void(target, types.int64, source, types.int64, types.int64), codegen


@_inline
def _varint(arr, pos, end):
    """The varint at ``pos``: ``(value as uint64, position after it)``; position -1 when it
    runs past ``end`` or over 10 bytes."""
    value = np.uint64(0)
    shift = np.uint64(0)
    for _ in range(10):
        if pos >= end:
            return np.uint64(0), -1
        byte = arr[pos]
        pos += 1
        value |= np.uint64(byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += np.uint64(7)
    return np.uint64(0), -1


@_inline
def _field(arr, pos, end, tag):
    """The length-delimited field whose one-byte ``tag`` is at ``pos``: ``(start, stop)`` of
    its payload, or ``(-1, -1)`` when the tag differs or the field runs past ``end``."""
    if pos >= end or arr[pos] != tag:
        return -1, -1
    length, start = _varint(arr, pos + 1, end)
    if start < 0 or length > np.uint64(end - start):
        return -1, -1
    return start, start + np.int64(length)


@_inline
def _key_index(arr, start, stop, key_data, key_starts, key_lens, after):
    """The requested key equal to ``arr[start:stop]``, or -1; the search starts after the
    previous record entry's key (map entries come in the same order record after record)."""
    count = len(key_lens)
    length = stop - start
    candidate = after
    for _ in range(count):
        candidate += 1
        if candidate == count:
            candidate = 0
        if key_lens[candidate] != length:
            continue
        offset = key_starts[candidate]
        same = True
        for t in range(length):
            if arr[start + t] != key_data[offset + t]:
                same = False
                break
        if same:
            return candidate
    return -1


@_inline
def _packed_varint_count(arr, start, stop):
    """The number of varints in ``arr[start:stop]``, or -1 if one is over 10 bytes or the
    last one is cut off."""
    count = 0
    run = 0
    for t in range(start, stop):
        if arr[t] < 0x80:
            count += 1
            run = 0
        else:
            run += 1
            if run >= 10:
                return -1
    if run:
        return -1
    return count


@_jit
def scan(arr, starts, ends, key_data, key_starts, key_lens):
    """Where each requested key's list lies in each record.

    Args:
      arr: uint8 [bytes]: the records, concatenated.
      starts, ends: int64 [n]: each record's ``[start, end)`` in ``arr``.
      key_data: uint8: the requested keys' UTF-8 bytes, concatenated; ``key_starts``,
        ``key_lens`` (int64 [K]) cut it.

    Returns:
      ``(kinds, counts, lo, hi, bad)``: int8 / int64 / int64 / int64 [K, n] — the kind
      (ABSENT, BYTES, FLOAT, INT64), number of values and payload ``[lo, hi)`` of key k in
      record r — and bool [n], the records protobuf must read: an unknown or repeated field,
      a key repeated in the map, unpacked numbers, a field that runs past its message.

    Written as one loop on purpose, as is :func:`gather`: split into inlined helpers (for a
    lower McCabe count) both ran slower per record, ``gather`` several times slower
    (``benchmarks/tfrecord_input.py``'s "per record ... parse" line measures them).
    """
    n = len(starts)
    keys = len(key_lens)
    kinds = np.zeros((keys, n), np.int8)
    counts = np.zeros((keys, n), np.int64)
    lo = np.zeros((keys, n), np.int64)
    hi = np.zeros((keys, n), np.int64)
    bad = np.zeros(n, np.bool_)
    seen = np.full(keys, -1, np.int64)  # the last record each key was met in
    for r in range(n):
        end = ends[r]
        if starts[r] == end:
            continue  # an empty Example
        pos, features_end = _field(arr, starts[r], end, _LEN)
        if pos < 0 or features_end != end:  # one ``features`` field, spanning the record
            bad[r] = True
            continue
        previous = -1
        while pos < end:
            entry, entry_end = _field(arr, pos, end, _LEN)
            key, key_end = _field(arr, entry, entry_end, _LEN)
            value, value_end = _field(arr, key_end, entry_end, _FEATURE)
            if entry < 0 or key < 0 or value < 0 or value_end != entry_end:
                bad[r] = True
                break
            pos = entry_end
            k = _key_index(arr, key, key_end, key_data, key_starts, key_lens, previous)
            if k < 0:
                continue
            previous = k
            if seen[k] == r:  # protobuf keeps the last; let it decide
                bad[r] = True
                break
            seen[k] = r
            if value == value_end:
                continue  # an empty Feature: absent
            tag = arr[value]
            payload, payload_end = _field(arr, value, value_end, tag)
            if payload < 0 or payload_end != value_end:
                bad[r] = True
                break
            if tag == _FLOAT_LIST or tag == _INT64_LIST:
                packed, packed_end = payload, payload
                if payload < payload_end:
                    packed, packed_end = _field(arr, payload, payload_end, _LEN)
                    if packed < 0 or packed_end != payload_end:
                        bad[r] = True
                        break
                if tag == _FLOAT_LIST:
                    count = (packed_end - packed) // 4
                    if (packed_end - packed) % 4:
                        count = -1
                    kind = FLOAT
                else:
                    count = _packed_varint_count(arr, packed, packed_end)
                    kind = INT64
                payload, payload_end = packed, packed_end
            elif tag == _LEN:
                count = 0
                item = payload
                while item < payload_end:
                    start, item = _field(arr, item, payload_end, _LEN)
                    if start < 0:
                        count = -1
                        break
                    count += 1
                kind = BYTES
            else:
                count = -1
                kind = ABSENT
            if count < 0:
                bad[r] = True
                break
            kinds[k, r] = kind
            counts[k, r] = count
            lo[k, r] = payload
            hi[k, r] = payload_end
    return kinds, counts, lo, hi, bad


@_jit
def gather(arr, kinds, counts, lo, hi, bad):
    """The values :func:`scan` found, skipping the bad records.

    Returns:
      ``(offsets, floats, ints, string_starts, string_stops)``: int64 [4, K + 1], where
      ``offsets[kind, k]`` is where key k's values of that kind begin; uint8 [4 × floats]
      (little-endian float32 bytes); int64 [ints]; int64 [strings] twice, each string's
      ``[start, stop)`` in ``arr``. Values are in key order, then record order.
    """
    keys, n = kinds.shape
    totals = np.zeros(4, np.int64)
    offsets = np.zeros((4, keys + 1), np.int64)
    for k in range(keys):
        for r in range(n):
            if not bad[r]:
                totals[kinds[k, r]] += counts[k, r]
        for kind in range(4):
            offsets[kind, k + 1] = totals[kind]
    floats = np.empty(4 * totals[FLOAT], np.uint8)
    ints = np.empty(totals[INT64], np.int64)
    string_starts = np.empty(totals[BYTES], np.int64)
    string_stops = np.empty(totals[BYTES], np.int64)
    f = i = s = 0
    for k in range(keys):
        for r in range(n):
            kind = kinds[k, r]
            if bad[r] or kind == ABSENT:
                continue
            pos, stop = lo[k, r], hi[k, r]
            if kind == FLOAT:
                for t in range(pos, stop):
                    floats[f] = arr[t]
                    f += 1
            elif kind == INT64:
                while pos < stop:
                    value, pos = _varint(arr, pos, stop)
                    ints[i] = np.int64(value)
                    i += 1
            else:
                while pos < stop:
                    string_starts[s], string_stops[s] = _field(arr, pos, stop, _LEN)
                    pos = string_stops[s]
                    s += 1
    return offsets, floats, ints, string_starts, string_stops


@_jit
def padded(arr, starts, stops, width):
    """The strings ``arr[starts[i]:stops[i]]`` as rows of a zero-padded uint8 [n, width]
    array (a NumPy ``S{width}`` array once viewed so)."""
    out = np.zeros((len(starts), width), np.uint8)
    for i in range(len(starts)):
        for t in range(starts[i], stops[i]):
            out[i, t - starts[i]] = arr[t]
    return out


@_inline
def _uint32(arr, pos):
    return (
        np.uint32(arr[pos])
        | np.uint32(arr[pos + 1]) << np.uint32(8)
        | np.uint32(arr[pos + 2]) << np.uint32(16)
        | np.uint32(arr[pos + 3]) << np.uint32(24)
    )


@_jit
def frames(arr):
    """The complete TFRecord frames at the start of ``arr`` (uint8), back to back.

    Returns:
      ``(starts, lengths, length_crcs, data_crcs, stop)``: int64 [m] — where each record's
      data begins and its length — uint32 [m] twice, the masked CRCs stored after the
      length and after the data, and where the first incomplete frame begins (``len(arr)``
      when none is). The CRCs are checked by the caller.
    """
    end = len(arr)
    most = end // 16 + 1
    starts = np.empty(most, np.int64)
    lengths = np.empty(most, np.int64)
    length_crcs = np.empty(most, np.uint32)
    data_crcs = np.empty(most, np.uint32)
    m = 0
    pos = 0
    while end - pos >= 16:
        length = np.uint64(0)
        for t in range(8):
            length |= np.uint64(arr[pos + t]) << np.uint64(8 * t)
        if length > np.uint64(end - pos - 16):
            break
        size = np.int64(length)
        starts[m] = pos + 12
        lengths[m] = size
        length_crcs[m] = _uint32(arr, pos + 8)
        data_crcs[m] = _uint32(arr, pos + 12 + size)
        m += 1
        pos += 16 + size
    return starts[:m], lengths[:m], length_crcs[:m], data_crcs[:m], pos


def _crc32c_tables() -> np.ndarray:
    """CRC32C's (Castagnoli, reflected polynomial 0x82F63B78) tables for slicing by 8:
    table k maps a byte to its CRC contribution k bytes ahead."""
    tables = np.zeros((8, 256), np.uint32)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        tables[0, i] = crc
    for k in range(1, 8):
        tables[k] = (tables[k - 1] >> 8) ^ tables[0, tables[k - 1] & 0xFF]
    return tables


_CRC_TABLES = _crc32c_tables()


@_inline
def _crc32c(arr, pos, stop, tables):
    """The CRC32C of ``arr[pos:stop]`` (eight bytes a step, Intel's slicing-by-8)."""
    crc = np.uint32(0xFFFFFFFF)
    while stop - pos >= 8:
        crc ^= _uint32(arr, pos)
        crc = (
            tables[7, crc & 0xFF]
            ^ tables[6, (crc >> 8) & 0xFF]
            ^ tables[5, (crc >> 16) & 0xFF]
            ^ tables[4, crc >> 24]
            ^ tables[3, arr[pos + 4]]
            ^ tables[2, arr[pos + 5]]
            ^ tables[1, arr[pos + 6]]
            ^ tables[0, arr[pos + 7]]
        )
        pos += 8
    while pos < stop:
        crc = tables[0, (crc ^ arr[pos]) & 0xFF] ^ (crc >> 8)
        pos += 1
    return crc ^ np.uint32(0xFFFFFFFF)


@_inline
def _crc32c_sse42(arr, pos, stop):
    """The CRC32C of ``arr[pos:stop]`` with SSE 4.2's instruction, eight bytes a step."""
    crc = np.uint64(0xFFFFFFFF)
    while stop - pos >= 8:
        crc = _crc32c_step64(crc, _load64(arr, pos))
        pos += 8
    crc32 = np.uint32(crc)
    while pos < stop:
        crc32 = _crc32c_step8(crc32, arr[pos])
        pos += 1
    return crc32 ^ np.uint32(0xFFFFFFFF)


@_jit
def _record_crcs_sse42(arr, starts, lengths):
    out = np.empty(len(starts), np.uint32)
    for i in range(len(starts)):
        out[i] = _crc32c_sse42(arr, starts[i], starts[i] + lengths[i])
    return out


@_jit
def _record_crcs_tables(arr, starts, lengths):
    out = np.empty(len(starts), np.uint32)
    for i in range(len(starts)):
        out[i] = _crc32c(arr, starts[i], starts[i] + lengths[i], _CRC_TABLES)
    return out


#: The CRC32C (unmasked) of each record ``arr[starts[i] : starts[i] + lengths[i]]``:
#: uint32 [n], computed without Python's lock (the CPU's instruction where it has one).
record_crcs = _record_crcs_sse42 if _SSE42 else _record_crcs_tables


@_jit
def copy_records(source, starts, lengths, target, target_starts):
    """Copies record ``i`` of ``source`` (``starts[i]``, ``lengths[i]``) to
    ``target[target_starts[i]:]`` (``memcpy``; the caller checks the bounds)."""
    for i in range(len(starts)):
        _memcpy(target, target_starts[i], source, starts[i], lengths[i])


@_jit
def shuffle_draws(slots, first, draws):
    """TF's shuffle buffer (``Dataset.shuffle``) over indices, for a full buffer: incoming
    record ``i`` (index ``first + i``) takes slot ``draws[i]``, whose index goes out.
    ``slots`` (int64 [buffer size]) is updated in place; returns the outgoing indices in
    order (int64 [len(draws)])."""
    out = np.empty(len(draws), np.int64)
    for i in range(len(draws)):
        j = draws[i]
        out[i] = slots[j]
        slots[j] = first + i
    return out


def warm() -> None:
    """Loads (or, on a fresh installation, compiles) every loop now, with the argument types
    the reader and parser use, so that the first read or parse does not wait for it
    (``python -m estimator.serve`` calls this when it loads a model that takes
    ``tf.Example``s)."""
    data = np.frombuffer(bytes(16), np.uint8)  # read-only, as buffers of bytes are
    none = np.zeros(0, np.int64)
    frames(data)
    found = scan(data, none, none, data[:1], np.zeros(1, np.int64), np.ones(1, np.int64))
    gather(data, *found)
    padded(data, none, none, 1)
    shuffle_draws(np.arange(1), 1, none)
    record_crcs(data, none, none)
    copy_records(data, none, none, np.zeros(1, np.uint8), none)
