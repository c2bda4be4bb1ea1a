"""XLA's two CPU loop emitters on both sides of the compile policy's ``SMALL_ARRAY_MAX``:
compile seconds and run time of the same programs with each.

XLA's CPU backend emits loop fusions with its MLIR fusion emitters by default, or with its
older LLVM IR emitters (``xla_cpu_use_fusion_emitters=False``). ``estimator.engine.
compile_policy`` compiles a program run many times with the older ones when none of its
arrays holds more than ``SMALL_ARRAY_MAX`` values. This prints, in one process, with
each emitter (alternating, ``--rounds`` rounds, medians):

* kernels: an FTRL update (the canned linear models' optimizer, elementwise) of 1,024 to
  65,536 values, and a dense layer with a ReLU (``[256, k] @ [k, n] + b``): compile
  milliseconds and microseconds per run (the best of several timed runs);
* the census models of ``examples/census.py`` (UCI Adult, batch 256, default
  ``RunConfig``): a fresh Estimator's first ``train()`` of one epoch (its programs
  compiled, the persistent compilation cache off), the longest XLA compile in it (JAX's
  own record: the train step), and the steady examples/s of a later call (a call of
  ``1 + --extra-epochs`` epochs minus a call of one, so per-call costs cancel). The policy
  is forced each way by setting ``SMALL_ARRAY_MAX`` (0: the fusion emitters for every
  program run many times; 2**40: the older ones).

Usage: ``python benchmarks/loop_emitters.py [--rounds 3] [--extra-epochs 5]``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import statistics
import tempfile
import time

import census_throughput
import jax
import jax.numpy as jnp
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EMITTERS = {
    "fusion": {"xla_cpu_use_fusion_emitters": True},
    "older": {"xla_cpu_use_fusion_emitters": False},
}
# The policy's constant for each emitter: every program run many times gets that emitter.
POLICY = {"fusion": 0, "older": 1 << 40}
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
BATCH = 256


def ftrl_update(w, accumulator, linear, g):
    """FTRL-Proximal (McMahan et al., 2013) as the canned optimizer updates one table:
    learning rate 0.2, l1 0.1, l2 0.01, learning-rate power -0.5."""
    new_accumulator = accumulator + g * g
    sigma = (jnp.sqrt(new_accumulator) - jnp.sqrt(accumulator)) / 0.2
    new_linear = linear + g - sigma * w
    quadratic = jnp.sqrt(new_accumulator) / 0.2 + 2 * 0.01
    new_w = jnp.where(
        jnp.abs(new_linear) > 0.1, (jnp.sign(new_linear) * 0.1 - new_linear) / quadratic, 0.0
    )
    return new_w, new_accumulator, new_linear


def dense_relu(x, w, b):
    return jax.nn.relu(x @ w + b)


def kernels() -> list[tuple[str, object, tuple]]:
    rng = np.random.default_rng(0)
    cases = []
    for n in (1024, 4096, 8192, 16384, 65536):
        v = rng.random(n, dtype=np.float32)
        cases.append((f"FTRL update, {n:,} values", ftrl_update, (v, v + 0.1, v, v)))
    for k, n in ((57, 8), (57, 100), (100, 75)):
        args = (rng.random((BATCH, k), np.float32), rng.random((k, n), np.float32))
        cases.append(
            (f"dense + ReLU, {BATCH}x{k} @ {k}x{n}", dense_relu, (*args, np.zeros(n, np.float32)))
        )
    return cases


def time_kernel(function, args, emitter: str) -> tuple[float, float]:
    """(compile ms, best µs per run) of ``function`` compiled with ``emitter`` (JAX's
    in-memory caches cleared first: a compile each time)."""
    jax.clear_caches()
    lowered = jax.jit(function).lower(*args)
    start = time.perf_counter()
    executable = lowered.compile(compiler_options=EMITTERS[emitter])
    compile_ms = (time.perf_counter() - start) * 1e3
    placed = jax.device_put(args)
    repeats = max(20, int(2e7 / sum(np.size(a) for a in args)))
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            out = executable(*placed)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - start) / repeats)
    return compile_ms, best * 1e6


@contextlib.contextmanager
def policy(emitter: str):
    from estimator.engine import compile_policy

    kept = compile_policy.SMALL_ARRAY_MAX
    compile_policy.SMALL_ARRAY_MAX = POLICY[emitter]
    try:
        yield
    finally:
        compile_policy.SMALL_ARRAY_MAX = kept


def time_census(census, data, kind: str, emitter: str, extra: int) -> tuple[float, float, float]:
    """(first train() s, longest compile s in it, steady examples/s) of a fresh Estimator."""
    import estimator as est

    x, y, stats = data
    compiles: list[float] = []

    def record(event: str, seconds: float, **_) -> None:
        if event == COMPILE_EVENT:
            compiles.append(seconds)

    def epochs(n: int):
        return est.inputs.numpy_input_fn(x, y, batch_size=BATCH, num_epochs=n, shuffle=True)

    jax.clear_caches()
    with policy(emitter), tempfile.TemporaryDirectory() as model_dir:
        model = census.make_model(kind, model_dir, 0, stats)
        jax.monitoring.register_event_duration_secs_listener(record)
        start = time.perf_counter()
        model.train(epochs(1))
        first = time.perf_counter() - start
        jax.monitoring.unregister_event_duration_listener(record)
        start = time.perf_counter()
        model.train(epochs(1))
        short = time.perf_counter() - start
        start = time.perf_counter()
        model.train(epochs(1 + extra))
        long = time.perf_counter() - start
    return first, max(compiles), extra * len(y) / (long - short)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--extra-epochs", type=int, default=5)
    args = parser.parse_args()
    logging.getLogger("estimator").setLevel(logging.WARNING)
    jax.config.update("jax_enable_compilation_cache", False)
    from estimator.engine.compile_policy import SMALL_ARRAY_MAX

    print(
        f"jax {jax.__version__}, backend {jax.default_backend()}, {os.cpu_count()} CPUs, "
        f"{args.rounds} rounds (medians); SMALL_ARRAY_MAX = {SMALL_ARRAY_MAX:,}"
    )
    print(f"\n{'kernel':34} {'fusion emitters':>22} {'older emitters':>22}")
    for name, function, kernel_args in kernels():
        results = {e: [] for e in EMITTERS}
        for _ in range(args.rounds):
            for emitter in EMITTERS:
                results[emitter].append(time_kernel(function, kernel_args, emitter))
        cells = []
        for emitter in EMITTERS:
            compile_ms = statistics.median(r[0] for r in results[emitter])
            run_us = statistics.median(r[1] for r in results[emitter])
            cells.append(f"{compile_ms:5.1f} ms {run_us:9.2f} µs")
        print(f"{name:34} {cells[0]:>22} {cells[1]:>22}")

    census = census_throughput.load_census_module()
    x, y = census.load(os.path.join(ROOT, "data", "adult", "adult.data"))
    data = (x, y, census.numeric_stats(x))
    print(
        f"\ncensus train(): first call (1 epoch, compiles included), its longest compile, "
        f"steady examples/s (1 + {args.extra_epochs} epochs minus 1)"
    )
    for kind in ("linear", "dnn", "wide_deep"):
        results = {e: [] for e in EMITTERS}
        for _ in range(args.rounds):
            for emitter in EMITTERS:
                results[emitter].append(time_census(census, data, kind, emitter, args.extra_epochs))
        for emitter in EMITTERS:
            first, longest, steady = (
                statistics.median(r[i] for r in results[emitter]) for i in range(3)
            )
            print(
                f"  {kind:9} {emitter:6} emitters: first call {first:5.2f} s, "
                f"longest compile {longest:5.2f} s, steady {steady:11,.0f} examples/s"
            )


if __name__ == "__main__":
    main()
