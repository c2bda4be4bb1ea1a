"""Checksums of the arrays in a checkpoint: CRC32C, as TF's tensor bundles carry per tensor.

orbax writes array bytes through TensorStore with no checksum over the data (only the OCDBT
index is checked): a flipped bit in an array file loaded silently as a different model. Here
every array saved gets a record, kept in the checkpoint's metadata, and every array read
back is checked against it before anything uses it::

    records = checksums.compute(tree, prefix="variables")   # at save (collective)
    problems = checksums.verify(restored, records, prefix="variables")  # at restore

A record is ``{"shape", "dtype", "regions": [{"index", "crc32c"}]}``: an array held whole
by this process (on one device, or replicated) has one region, ``index`` None; an array
sharded over the processes of a job has a region per shard, ``index`` its
``[[start, stop], ...]``, each checksummed by the process that holds it. ``crc32c`` lists
the CRC32C (Castagnoli; the ``crc32c`` package, hardware-accelerated) of each
``PIECE_BYTES`` piece of the region's C-order bytes, so pieces are checked in parallel
threads (the package releases the GIL) and a mismatch says where it is.

Reading back verifies every region some device of the job holds whole (each process checks
its own; every region when a single process reads). A region no device holds whole (a
checkpoint read onto a finer sharding than it was saved with) is checked from the gathered
array. The functions that gather (:func:`compute`, :func:`verify` for arrays spanning
processes) are collective: every process of a job calls them in the same order.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Iterable
from typing import Any

import crc32c
import jax
import numpy as np
from jax.experimental import multihost_utils

from estimator.checkpoint import tree_form

__all__ = ["ALGORITHM", "PIECE_BYTES", "compute", "leaves", "verify"]

ALGORITHM = "crc32c"
#: Bytes per checksum: pieces are checked in parallel and a mismatch is located within one.
PIECE_BYTES = 64 << 20

_POOL = concurrent.futures.ThreadPoolExecutor(
    max_workers=max(1, min(8, os.cpu_count() or 1)), thread_name_prefix="crc32c"
)


def leaves(tree, prefix: str) -> list[tuple[str, Any]]:
    """``[(key, leaf)]`` of a pytree, keyed ``prefix`` + the leaf's path
    (``variables/trainable/dense/kernel``, ``opt_state/0/mu/dense/kernel``)."""
    return [
        ("/".join((prefix, *tree_form.parts(path))), leaf)
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
    ]


def _bytes(x) -> memoryview:
    """The C-order bytes of a host array, without a copy when it is contiguous."""
    x = np.asarray(x)
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):  # typed keys: their data
        x = np.asarray(jax.random.key_data(x))
    return memoryview(np.ascontiguousarray(x).reshape(-1).view(np.uint8))


def _pieces(data: memoryview) -> list[memoryview]:
    return [data[i : i + PIECE_BYTES] for i in range(0, len(data), PIECE_BYTES)] or [data]


def _checksum_all(buffers: list[memoryview]) -> list[list[int]]:
    """The CRC32C of each piece of each buffer, computed in parallel threads."""
    futures = [[_POOL.submit(crc32c.crc32c, p) for p in _pieces(b)] for b in buffers]
    return [[f.result() for f in row] for row in futures]


def _index_json(index: tuple, shape: tuple) -> list[list[int]]:
    return [list(s.indices(n)[:2]) for s, n in zip(index, shape, strict=True)]


def _index_slices(index: list[list[int]]) -> tuple[slice, ...]:
    return tuple(slice(a, b) for a, b in index)


def _spans_processes(x) -> bool:
    return isinstance(x, jax.Array) and not x.is_fully_addressable and not x.is_fully_replicated


def _local_whole(x) -> np.ndarray:
    """The whole array on this process (a replicated array: this process's copy)."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return np.asarray(x.addressable_data(0))
    return np.asarray(x)


def _regions(x) -> list[tuple[list[list[int]], Any]]:
    """``[(index, device)]``: the distinct shards of an array spanning processes, in a
    fixed order (the same on every process), with the device holding its first replica."""
    by_index: dict = {}
    for device, index in x.sharding.devices_indices_map(x.shape).items():
        key = tuple(map(tuple, _index_json(index, x.shape)))
        by_index.setdefault(key, device)
    return [(list(map(list, k)), by_index[k]) for k in sorted(by_index)]


def compute(tree, prefix: str) -> dict[str, dict]:
    """Checksum records of every array in ``tree`` (see the module docstring).

    Collective in a job: an array sharded over processes is checksummed shard by shard,
    each by its holder, and the checksums are gathered so every process returns the same
    records.

    Args:
      tree: a pytree of arrays (NumPy, jax arrays of any sharding).
      prefix: the name of the tree (a checkpoint item: ``variables``, ``opt_state``).

    Returns:
      ``{key: record}`` with keys from :func:`leaves`.
    """
    records: dict[str, dict] = {}
    buffers: list[memoryview] = []
    owners: list[tuple[str, int]] = []
    shared: list[tuple[str, int, int]] = []  # (key, region, pieces) of shards to gather
    mine: list[bool] = []
    for key, x in leaves(tree, prefix):
        record = {"shape": [int(d) for d in np.shape(x)], "dtype": _dtype_name(x), "regions": []}
        records[key] = record
        if not _spans_processes(x):
            record["regions"].append({"index": None, "crc32c": None})
            buffers.append(_bytes(_local_whole(x)))
            owners.append((key, 0))
            continue
        local = {d: s for s in x.addressable_shards for d in [s.device]}
        for number, (index, device) in enumerate(_regions(x)):
            record["regions"].append({"index": index, "crc32c": None})
            size = int(np.prod([b - a for a, b in index])) * np.dtype(x.dtype).itemsize
            shared.append((key, number, max(1, -(-size // PIECE_BYTES))))
            held = local.get(device)
            mine.append(held is not None)
            if held is not None:
                buffers.append(_bytes(held.data))
                owners.append((key, number))
    for (key, number), crcs in zip(owners, _checksum_all(buffers), strict=True):
        records[key]["regions"][number]["crc32c"] = crcs
    if shared:
        _gather(records, shared, mine)
    return records


def _gather(records: dict, shared: list[tuple[str, int, int]], mine: list[bool]) -> None:
    """Fills in the checksums of the shards other processes hold (a collective)."""
    flat = np.zeros(sum(n for _, _, n in shared), np.uint64)
    offset = 0
    for (key, number, count), own in zip(shared, mine, strict=True):
        if own:
            flat[offset : offset + count] = records[key]["regions"][number]["crc32c"]
        offset += count
    # Each shard is checksummed by one process (the holder of its first replica); the
    # others contribute zeros, so the sum over processes is the checksum.
    total = np.asarray(multihost_utils.process_allgather(flat)).reshape(-1, flat.size).sum(0)
    offset = 0
    for key, number, count in shared:
        records[key]["regions"][number]["crc32c"] = [int(v) for v in total[offset : offset + count]]
        offset += count


def _dtype_name(x) -> str:
    dtype = x.dtype
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return str(dtype)
    return np.dtype(dtype).name


def _covering(x, index: list[list[int]] | None):
    """A shard of ``x`` on this process holding region ``index`` whole, as
    ``(host array, offsets)``, or None."""
    want = index or [[0, n] for n in x.shape]
    for shard in x.addressable_shards:
        have = _index_json(shard.index, x.shape)
        if all(a <= w0 and w1 <= b for (a, b), (w0, w1) in zip(have, want, strict=True)):
            return np.asarray(shard.data), [a for a, _ in have]
    return None


def _held_somewhere(x, index: list[list[int]] | None) -> bool:
    want = index or [[0, n] for n in x.shape]
    for region in x.sharding.devices_indices_map(x.shape).values():
        have = _index_json(region, x.shape)
        if all(a <= w0 and w1 <= b for (a, b), (w0, w1) in zip(have, want, strict=True)):
            return True
    return False


def _mismatch(key: str, x, record: dict | None) -> str | None:
    """The problem with ``x`` before its bytes are read: no record, or another shape or
    dtype than recorded."""
    if record is None:
        return f"{key}: no checksum recorded for it"
    shape, dtype = [int(d) for d in np.shape(x)], _dtype_name(x)
    if (shape, dtype) != (record["shape"], record["dtype"]):
        return f"{key}: recorded as {record['dtype']} {record['shape']}, read as {dtype} {shape}"
    return None


def _region(x, index, gathered: list):
    """The bytes of region ``index`` (None: all) of ``x`` this process checks, or None when
    another process holds it. ``gathered`` holds the whole array once gathered (a
    collective, decided alike on every process)."""
    if isinstance(x, jax.Array) and _spans_processes(x):
        found = _covering(x, index)
        if found is None:
            if _held_somewhere(x, index):
                return None  # the process holding it checks it
            if not gathered:
                gathered.append(np.asarray(multihost_utils.process_allgather(x, tiled=True)))
            found = gathered[0], [0] * np.ndim(x)
        data, offsets = found
    else:
        data, offsets = _local_whole(x), [0] * np.ndim(x)
    if index is not None:
        data = data[
            _index_slices([[a - o, b - o] for (a, b), o in zip(index, offsets, strict=True)])
        ]
    return _bytes(data)


def _compared(jobs: list[tuple[str, list[int], memoryview]]) -> list[str]:
    """The CRC32C mismatches of ``(where, recorded, bytes)`` jobs, one line each."""
    problems = []
    for (where, expected, data), got in zip(
        jobs, _checksum_all([data for _, _, data in jobs]), strict=True
    ):
        bad = [i for i, (e, g) in enumerate(zip(expected, got, strict=False)) if e != g]
        if len(expected) != len(got):
            problems.append(f"{where}: {len(got)} checksum pieces read, {len(expected)} recorded")
        elif bad:
            first, size = bad[0], len(data)
            problems.append(
                f"{where}: CRC32C mismatch in bytes {first * PIECE_BYTES}.."
                f"{min(size, (first + 1) * PIECE_BYTES)} of {size} (recorded "
                f"{expected[first]}, read {got[first]})"
            )
    return problems


def verify(tree, records: dict[str, dict], prefix: str) -> list[str]:
    """Checks the arrays of ``tree`` against their records.

    Collective in a job when an array spans processes (see the module docstring); every
    process returns the problems any process found.

    Args:
      tree: the restored pytree (NumPy or jax arrays).
      records: ``{key: record}`` from :func:`compute` at save time.
      prefix: the name ``tree`` was checksummed under.

    Returns:
      One line per problem (``"<key>: ..."``); empty when every array matches.
    """
    problems: list[str] = []
    jobs: list[tuple[str, list[int], memoryview]] = []
    for key, x in leaves(tree, prefix):
        record = records.get(key)
        problem = _mismatch(key, x, record)
        if problem is not None:
            problems.append(problem)
            continue
        gathered: list = []
        for region in record["regions"]:
            index = region["index"]
            data = _region(x, index, gathered)
            if data is not None:
                where = key if index is None else f"{key}[{_index_text(index)}]"
                jobs.append((where, region["crc32c"], data))
    problems += _compared(jobs)
    if any(_spans_processes(x) for _, x in leaves(tree, prefix)):
        problems = _agree(problems)
    return problems


def _agree(problems: list[str]) -> list[str]:
    """Every process returns a problem if any process found one (a collective)."""
    counts = np.asarray(multihost_utils.process_allgather(np.int32(len(problems))))
    if problems or not counts.any():
        return problems
    return [f"another process of the job found {int(counts.sum())} damaged array(s)"]


def _index_text(index: Iterable) -> str:
    return ", ".join(f"{a}:{b}" for a, b in index)
