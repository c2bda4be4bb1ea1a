"""Threefry random bits lowered unrolled on the CPU: the same bits, compiled 3x faster.

JAX lowers its ``threefry2x32`` primitive (every ``jax.random`` draw with the default
key) on the CPU as a ``while`` loop over the hash's five groups of four rounds, and on
other platforms as the unrolled twenty rounds. On this XLA CPU backend the rolled form is
the slow one to compile and to run (measured, jax 0.10.2, 2-core EPYC: a dropout mask of
[50, 64] compiles in 0.21 s rolled and 0.07 s unrolled and draws in 50 vs 25 µs; four
glorot-uniform kernels' initial values compile in 1.6 vs 0.3 s): a small model's first
step program spent a quarter of its compile time on its dropout's random bits.

:func:`unroll` registers JAX's own unrolled lowering for the CPU. Both compute the same
Threefry-2x32 hash (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011),
so every key and random value is bit-for-bit what JAX draws otherwise. Like the
compilation cache, the setting is process-wide (JAX's lowering rules are global): an
Estimator makes it when it is built. The rule's name is JAX's internal one; when a JAX
version lacks it, nothing changes but compile time.
"""

from __future__ import annotations

import logging

__all__ = ["unroll"]

logger = logging.getLogger("estimator")
_done = False


def unroll() -> bool:
    """Registers JAX's unrolled Threefry lowering for the CPU (once per process).

    Returns:
      Whether the unrolled lowering is registered (False when this JAX version lacks it).
    """
    global _done
    if _done:
        return True
    try:
        from jax._src.random import threefry2x32 as threefry  # JAX's internal module
        from jax.interpreters import mlir

        rule = threefry._threefry2x32_lowering_rule  # the unrolled one (non-CPU default)
        mlir.register_lowering(threefry.threefry2x32_p, rule, platform="cpu")
    except Exception as err:  # noqa: BLE001 - another JAX: only compile time differs
        logger.debug("Threefry stays rolled on the CPU: %s", err)
        return False
    _done = True
    return True
