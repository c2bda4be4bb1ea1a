"""What JAX itself does with the MNIST-style conv net of ``tests/compat/programs/``: a
hand-written JAX program against the Estimator (the one-line port) and TF 2.15, end to end.

``compat_programs.py`` times the four TF 1 programs; for the conv net, the targets
(TF's time at 1,000 steps, a third of it at 10,000) are not met. This script asks whether
any JAX program could meet them on this machine. Every run is a fresh process with no
compilation cache, timed from data generation to evaluation, as ``compat_programs.py``
times ``main``:

* **hand**: the same model written directly in JAX, the way a JAX user would: the same
  data (the program's own ``make_digits``), layers, initializers (glorot uniform, zero
  biases), dropout, SGD at 0.1 and batch 50, one ``jax.jit`` step (donated parameters,
  NumPy batches passed straight in), accuracy over the evaluation set at the end. It runs
  twice: with ``lax.conv_general_dilated`` and ``lax.reduce_window`` ("lax conv"), and
  with ``estimator.layers.convolution.conv`` and ``max_pool`` ("ours conv": the Estimator's
  layout for XLA's CPU backend);
* **ours**: ``compat_programs.py``'s run of the ported program;
* **TF**: TensorFlow 2.15 running the unchanged program (``--tf-python``).

It also prints the training step's matrix products (its floating-point work): their time
at the rate of a large product on this CPU (``jnp.dot`` of 1024 x 1024 float32 matrices),
and their time as XLA runs each of them alone at its own shape. The second is what a step
built from XLA's products cannot go below, whatever else it does: at 10,000 steps it alone
decides whether a third of TF's time is reachable.

Usage::

    python benchmarks/conv_floor.py [--tf-python /work/venvs/tf215/bin/python]
        [--steps 1000 10000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(os.path.dirname(HERE), "tests", "compat", "programs", "mnist_conv.py")
sys.path.insert(0, HERE)

import compat_programs  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from estimator.layers import convolution  # noqa: E402

BATCH, EVAL_BATCH, LEARNING_RATE, DROPOUT = 50, 128, 0.1, 0.4


def _program_data():
    """``make_digits`` and ``SIZE`` of the conv-net program, without its TF import."""
    with open(PROGRAM) as f:
        source = f.read().replace(compat_programs.TF_IMPORT, "tf = None", 1)
    scope: dict = {"__name__": "mnist_conv_data"}
    exec(compile(source, PROGRAM, "exec"), scope)
    return scope["make_digits"], scope["SIZE"]


def products(size: int) -> list[tuple[str, int, int, int]]:
    """The training step's matrix products at batch 50, ``(what, M, K, N)`` for an
    ``[M, K] @ [K, N]`` product: each convolution as a patch matrix (SAME padding, every
    window offset, as XLA computes it) forward, kernel gradient and (not the first layer's,
    whose input is data) input gradient; the dense layers' forward and both gradients."""
    rows1, rows2 = BATCH * size * size, BATCH * (size // 2) ** 2
    flat = (size // 4) ** 2 * 16
    return [
        ("conv1 forward", rows1, 25, 8),
        ("conv1 kernel gradient", 25, rows1, 8),
        ("conv2 forward", rows2, 25 * 8, 16),
        ("conv2 kernel gradient", 25 * 8, rows2, 16),
        ("conv2 input gradient", rows2, 16, 25 * 8),
        ("dense forward", BATCH, flat, 64),
        ("dense input gradient", BATCH, 64, flat),
        ("dense kernel gradient", flat, BATCH, 64),
        ("logits forward", BATCH, 64, 10),
        ("logits input gradient", BATCH, 10, 64),
        ("logits kernel gradient", 64, BATCH, 10),
    ]


def _seconds_per_call(function, *args, seconds: float) -> float:
    jax.block_until_ready(function(*args))
    best = float("inf")
    for _ in range(3):
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds / 3:
            out = function(*args)
            count += 1
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - start) / count)
    return best


def matmul_gflops(n: int = 1024) -> float:
    """GFLOP/s of XLA's ``[n, n] @ [n, n]`` float32 product on this machine."""
    a = jnp.ones((n, n), jnp.float32)
    return 2 * n**3 / _seconds_per_call(jax.jit(jnp.dot), a, a, seconds=1.5) / 1e9


def products_seconds(size: int) -> float:
    """The step's matrix products (:func:`products`), each timed alone as XLA runs it (a
    jitted ``jnp.dot`` at that shape, best of three, less the time of a call of a 1 x 1
    product: what calling costs), added up: seconds a step."""
    one = jnp.ones((1, 1), jnp.float32)
    call = _seconds_per_call(jax.jit(jnp.dot), one, one, seconds=0.3)
    total = 0.0
    for _, m, k, n in products(size):
        a, b = jnp.ones((m, k), jnp.float32), jnp.ones((k, n), jnp.float32)
        total += _seconds_per_call(jax.jit(jnp.dot), a, b, seconds=0.3) - call
    return total


def hand_written(steps: int, conv_kind: str, seed: int = 1) -> dict:
    """The conv net as a plain JAX program (see the module doc); times in seconds."""
    start = time.time()
    make_digits, size = _program_data()
    train_x, train_y = make_digits(3000, seed=0)
    eval_x, eval_y = make_digits(1000, seed=1)

    if conv_kind == "ours":

        def conv(x, w):
            return convolution.conv(x, w, (1, 1), "SAME")

        def pool(x):
            return convolution.max_pool(x, (2, 2), (2, 2), "VALID")
    else:

        def conv(x, w):
            return jax.lax.conv_general_dilated(
                x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
            )

        def pool(x):
            return jax.lax.reduce_window(
                x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"
            )

    def init(key):
        glorot = jax.nn.initializers.glorot_uniform()
        shapes = [(5, 5, 1, 8), (5, 5, 8, 16), ((size // 4) ** 2 * 16, 64), (64, 10)]
        keys = jax.random.split(key, len(shapes))
        return [
            (glorot(k, s, jnp.float32), jnp.zeros(s[-1])) for k, s in zip(keys, shapes, strict=True)
        ]

    def logits_of(params, x, key):
        (w1, b1), (w2, b2), (w3, b3), (w4, b4) = params
        h = x.reshape(-1, size, size, 1)
        h = pool(jax.nn.relu(conv(h, w1) + b1))
        h = pool(jax.nn.relu(conv(h, w2) + b2))
        h = jax.nn.relu(h.reshape(h.shape[0], -1) @ w3 + b3)
        if key is not None:
            keep = jax.random.bernoulli(key, 1.0 - DROPOUT, h.shape)
            h = jnp.where(keep, h / (1.0 - DROPOUT), 0.0)
        return h @ w4 + b4

    optimizer = optax.sgd(LEARNING_RATE)

    def loss_fn(params, x, y, key):
        logits = logits_of(params, x, key)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    def train_step(params, opt_state, x, y, key, step):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y, jax.random.fold_in(key, step))
        updates, opt_state = optimizer.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    @jax.jit
    def correct(params, x, y):
        return jnp.sum(jnp.argmax(logits_of(params, x, None), -1) == y)

    key = jax.random.key(seed)
    params = jax.jit(init)(key)
    opt_state = optimizer.init(params)
    train = jax.jit(train_step, donate_argnums=(0, 1))
    compile_start = time.time()
    train = train.lower(params, opt_state, train_x[:BATCH], train_y[:BATCH], key, 0).compile()
    compile_seconds = time.time() - compile_start

    rng = np.random.default_rng(seed)
    order, position = rng.permutation(len(train_x)), 0
    loop_start = time.time()
    for step in range(steps):
        if position + BATCH > len(order):
            order, position = rng.permutation(len(train_x)), 0
        rows = order[position : position + BATCH]
        position += BATCH
        params, opt_state, loss = train(params, opt_state, train_x[rows], train_y[rows], key, step)
    loss.block_until_ready()
    loop_seconds = time.time() - loop_start
    hits = sum(
        int(correct(params, eval_x[i : i + EVAL_BATCH], eval_y[i : i + EVAL_BATCH]))
        for i in range(0, len(eval_x), EVAL_BATCH)
    )
    return {
        "accuracy": hits / len(eval_x),
        "seconds": time.time() - start,
        "compile_seconds": compile_seconds,
        "step_ms": 1e3 * loop_seconds / steps,
    }


def _hand_process(steps: int, conv_kind: str) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--run-hand", conv_kind, str(steps)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return compat_programs._result(done.stdout)


def _port_process(steps: int, env: dict) -> dict:
    return compat_programs.ours("mnist_conv", steps, None, False, env)[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    tf_default = compat_programs.DEFAULT_TF
    parser.add_argument("--tf-python", default=tf_default if os.path.exists(tf_default) else None)
    parser.add_argument("--steps", nargs="+", type=int, default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)

    _, size = _program_data()
    flops = sum(2 * m * k * n for _, m, k, n in products(size))
    gflops = matmul_gflops()
    alone = products_seconds(size)
    print(
        f"training step: {flops / 1e6:.1f} MFLOP of matrix products at batch {BATCH}; "
        f"at this CPU's 1024x1024 float32 rate ({gflops:.0f} GFLOP/s) {flops / gflops / 1e6:.2f}"
        f" ms; the step's {len(products(size))} products timed alone at their shapes: "
        f"{alone * 1e3:.2f} ms ({flops / alone / 1e9:.0f} GFLOP/s)"
    )
    header = (
        f"{'run':<16} {'steps':>6} {'main s':>7} {'TF/run':>7} {'compile s':>9} "
        f"{'step ms':>7}  accuracy"
    )
    print(header)
    print("-" * len(header))
    pycache = tempfile.TemporaryDirectory()
    env = compat_programs.bytecode_env(pycache.name)

    def best(run, *run_args) -> dict:
        return compat_programs._best([run(*run_args) for _ in range(args.repeat)])

    for steps in args.steps:
        runs = {f"hand, {kind} conv": best(_hand_process, steps, kind) for kind in ("lax", "ours")}
        runs["Estimator port"] = best(_port_process, steps, env)
        tf = None
        if args.tf_python:
            tf = runs["TF 2.15"] = best(
                compat_programs.theirs, args.tf_python, "mnist_conv", steps, None
            )
        for name, run in runs.items():
            ratio = f"{tf['seconds'] / run['seconds']:.2f}" if tf else "-"
            compile_s = f"{run['compile_seconds']:.2f}" if "compile_seconds" in run else "-"
            step = f"{run['step_ms']:.2f}" if "step_ms" in run else "-"
            print(
                f"{name:<16} {steps:>6} {run['seconds']:>7.2f} {ratio:>7} {compile_s:>9} "
                f"{step:>7}  {run['accuracy']:.3f}",
                flush=True,
            )
        if tf:
            print(
                f"{'(targets)':<16} {steps:>6} "
                f"{tf['seconds'] / (1 if steps <= 1000 else 3):>7.2f}   "
                f""
            )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--run-hand":
        print("RESULT " + json.dumps(hand_written(int(sys.argv[3]), sys.argv[2])))
    else:
        main()
