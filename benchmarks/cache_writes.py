"""The cost of writing a new program to JAX's persistent compilation cache, with JAX's own
size cap on (``jax_compilation_cache_max_size``: every write lists the directory and reads
each entry's access-time file under a lock, ``jax/_src/lru_cache.py``) and off, as
``estimator.config.platform`` leaves it (the directory pruned once per process instead:
``platform.prune_compilation_cache``), at several numbers of entries already in the cache.

Each directory is filled with entries of 20 kB (the size of a small test program's
executable here) and their access-time files, then ``--writes`` new entries are written
through JAX's ``LRUCache`` in each mode (a directory each), alternating; the median write
is printed, and the time of one prune of a directory (nothing to delete: it only lists).

Usage: ``python benchmarks/cache_writes.py [--entries 500,2500,10000] [--writes 20]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import jax
from jax._src.lru_cache import LRUCache  # JAX's cache class (what jax.jit writes through)

from estimator.config import platform

ENTRY = os.urandom(20_000)


def fill(directory: str, entries: int) -> None:
    stamp = time.time_ns().to_bytes(8, "little")
    for i in range(entries):
        with open(os.path.join(directory, f"old{i:06d}-cache"), "wb") as f:
            f.write(ENTRY)
        with open(os.path.join(directory, f"old{i:06d}-atime"), "wb") as f:
            f.write(stamp)


def write_times(directories: tuple[str, str], writes: int) -> tuple[list[float], list[float]]:
    """Seconds per write with JAX's size cap on (in ``directories[0]``) and off (in
    ``directories[1]``; a capped cache cannot share it: its scan reads an access-time file
    that uncapped writes do not make, jax-ml/jax#39880)."""
    caches = (LRUCache(directories[0], max_size=2 << 30), LRUCache(directories[1], max_size=-1))
    times = ([], [])
    for i in range(writes):
        for side, cache in enumerate(caches):
            start = time.perf_counter()
            cache.put(f"new{i:04d}", ENTRY)
            times[side].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", default="500,2500,10000")
    parser.add_argument("--writes", type=int, default=20)
    args = parser.parse_args()
    print(f"jax {jax.__version__}; median seconds per write of a 20 kB entry")
    print(f"{'entries':>8s} {'JAX size cap':>13s} {'no cap':>8s} {'one prune':>10s}")
    for entries in (int(n) for n in args.entries.split(",")):
        with tempfile.TemporaryDirectory(prefix="bench_cache_") as root:
            directories = (os.path.join(root, "capped"), os.path.join(root, "uncapped"))
            for directory in directories:
                os.makedirs(directory)
                fill(directory, entries)
            capped, uncapped = write_times(directories, args.writes)
            start = time.perf_counter()
            platform.prune_compilation_cache(directories[1])
            prune = time.perf_counter() - start
        print(
            f"{entries:8d} {statistics.median(capped):13.4f} "
            f"{statistics.median(uncapped):8.4f} {prune:10.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
