"""A convolution's SGD step at a program's top level and inside a ``lax.fori_loop`` (how an
Estimator runs ``steps_per_execution`` steps per call), with JAX's own CPU lowering and
with ``estimator.config.platform``'s canonical-layout lowering (``canonical_convolutions``).

XLA's CPU backend transposes a convolution into its canonical layout (``NHWC`` input,
``HWIO`` kernel) only at a program's top level; in a loop body the kernel gradient keeps
its own layout and runs slower. The step: a [batch, 16, 16, 3] NHWC image batch through a
3x3x3x16 ``lax.conv_general_dilated`` (SAME), ReLU, mean of squares, SGD at 0.01. Each
figure is the best of ``--repeats`` timings of ``--steps`` steps (after a compiling call),
in milliseconds per step. The first two lines run before the lowering is registered, the
last two after it, on new ``jax.jit`` functions (so nothing compiled before is reused); the
values of the two loops are compared at the end.

Usage: ``python benchmarks/conv_layout.py [--batch 128] [--steps 192] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from estimator.config import platform


def programs():
    """New ``(top-level step, loop of n steps)`` jitted functions."""

    def loss(w, x):
        y = jax.lax.conv_general_dilated(
            x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        return jnp.mean(jax.nn.relu(y) ** 2)

    def step(w, x):
        return w - 0.01 * jax.grad(loss)(w, x)

    def loop(w, x, n):
        return jax.lax.fori_loop(0, n, lambda i, w: step(w, x), w)

    return jax.jit(step), jax.jit(loop, static_argnums=2)


def best_ms(run, w, steps: int, repeats: int) -> float:
    jax.block_until_ready(run(w))  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(run(w))
        times.append((time.perf_counter() - start) / steps * 1e3)
    return min(times)


def measure(x, w, steps: int, repeats: int) -> tuple[float, float, np.ndarray]:
    step, loop = programs()

    def top(w):
        for _ in range(steps):
            w = step(w, x)
        return w

    top_ms = best_ms(top, w, steps, repeats)
    loop_ms = best_ms(lambda w: loop(w, x, steps), w, steps, repeats)
    return top_ms, loop_ms, np.asarray(loop(w, x, 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=192)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.random((args.batch, 16, 16, 3)), jnp.float32)
    w = jnp.asarray(rng.random((3, 3, 3, 16)) * 0.1, jnp.float32)
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, batch {args.batch}")
    top, loop, before = measure(x, w, args.steps, args.repeats)
    print(f"JAX's lowering      top level {top:7.2f} ms/step   in fori_loop {loop:7.2f} ms/step")
    if not platform.canonical_convolutions():
        print("this JAX's internals differ: the canonical-layout lowering is not registered")
        return
    top, loop, after = measure(x, w, args.steps, args.repeats)
    print(f"canonical layouts   top level {top:7.2f} ms/step   in fori_loop {loop:7.2f} ms/step")
    print(f"largest difference of the kernels after 3 looped steps: {np.abs(after - before).max()}")


if __name__ == "__main__":
    main()
