"""What checkpoint checksums cost: a 1 GiB train state saved and restored through
``estimator.checkpoint`` (orbax), with the CRC32C of every array computed at save and
checked at restore (``estimator.checkpoint.checksums``), and those two steps timed alone on the same
arrays in the same run.

The overhead is the checksum time over the rest of the save (or restore): what the same
save would take without checksums. Usage::

    python benchmarks/checkpoint_integrity.py [--gib 1] [--repeat 3] [--dir /path]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import jax
import numpy as np

from estimator import checkpoint as ckpt
from estimator.checkpoint import checksums
from estimator.engine.steps import TrainState


def _state(gib: float) -> TrainState:
    """Eight float32 tables of ``gib / 8`` GiB each (rows of 1,024), plus small arrays."""
    rng = np.random.default_rng(0)
    rows = int(gib * (1 << 30) / 8 / 4 / 1024)
    tables = {
        f"table_{i}/embedding_weights": jax.device_put(
            rng.standard_normal((rows, 1024), dtype=np.float32)
        )
        for i in range(8)
    }
    dense = {f"dense_{i}/kernel": jax.device_put(rng.standard_normal((256, 256))) for i in range(4)}
    return TrainState({**tables, **dense}, {}, None, np.int32(0), np.int32(-1), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()
    state = _state(args.gib)
    size = sum(x.nbytes for x in jax.tree.leaves(state.trainable))
    variables = {"trainable": state.trainable, "non_trainable": state.non_trainable}
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype), state)
    print(f"jax {jax.__version__}, {size / (1 << 30):.2f} GiB of variables, {os.cpu_count()} CPUs")
    print(
        f"{'run':>3} {'save s':>8} {'crc s':>7} {'save +%':>8} {'restore s':>10} "
        f"{'verify s':>9} {'restore +%':>11}"
    )
    for run in range(args.repeat):
        directory = tempfile.mkdtemp(prefix="ckpt_bench_", dir=args.dir)
        try:
            saver = ckpt.Checkpointer(directory, async_save=False)
            start = time.perf_counter()
            saver.save(1, state, with_opt_state=False)
            saver.wait()
            save = time.perf_counter() - start
            start = time.perf_counter()
            records = checksums.compute(variables, prefix="variables")
            crc = time.perf_counter() - start
            start = time.perf_counter()
            restored = ckpt.restore(ckpt.step_dir(directory, 1), abstract, with_opt_state=False)
            jax.block_until_ready(restored)
            restore = time.perf_counter() - start
            start = time.perf_counter()
            problems = checksums.verify(
                {"trainable": restored[0], "non_trainable": restored[1]}, records, "variables"
            )
            verify = time.perf_counter() - start
            assert problems == []
            saver.close()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        print(
            f"{run:>3} {save:8.2f} {crc:7.3f} {100 * crc / (save - crc):7.1f}% {restore:10.2f} "
            f"{verify:9.3f} {100 * verify / (restore - verify):10.1f}%"
        )


if __name__ == "__main__":
    main()
