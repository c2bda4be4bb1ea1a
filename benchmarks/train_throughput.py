"""Training throughput: the Estimator (default RunConfig) vs. a hand-written JAX loop.

Both run in this process, on the same synthetic data fed the same way (contiguous NumPy
slices of pre-generated arrays), with the same optimizer:

* logistic regression, 100 features -> 1, plain SGD, batch 256;
* an MLP 100 -> 256 -> 256 -> 1 (ReLU), Adam, batch 256.

The Estimator runs with the default ``RunConfig`` (checkpoints at start/end and every 600
s, loss logging and the step counter every 100 steps, the NaN guard). Each ``train()``
call is timed whole (session set-up, checkpoint saves, hooks included) after a warm-up
call has compiled the step; the hand-written loop is a ``jax.jit`` step with donated
state. Runs alternate and the best of ``--repeats`` is reported for each side.

``--train-metrics`` instead measures what training metrics cost: the MLP's
Estimator without them and with ``RunConfig(train_metrics_steps=100)`` reporting accuracy
and AUC (200 thresholds) computed on every training batch, side by side in this process:
each one's first ``train()`` call (compiles included), then ``--repeats`` calls of
``--steps-mlp`` steps each, alternating, best and median.

``--input-check`` instead measures what the input shape check costs (issue 50: only the
batch dimension may vary between batches; ``estimator.engine.input_shapes``): its time per
batch alone, and the logistic Estimator fed the same slices from a generator (an input the
check reads; ``numpy_input_fn``'s batches cannot change shape and are not checked) with
the check and with it replaced by a no-op, alternating in this process, best and median.

Usage: ``python benchmarks/train_throughput.py [--steps-logistic N] [--steps-mlp N]
[--train-metrics | --input-check]``.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import estimator as est

BATCH = 256
N_BATCHES = 64  # distinct batches cycled through


def make_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(BATCH * N_BATCHES, 100)).astype(np.float32)
    w = rng.normal(size=(100,)).astype(np.float32)
    y = (x @ w + rng.normal(size=len(x)) > 0).astype(np.float32)
    return x, y


def logistic_logits(x):
    return est.layers.dense(x, 1)[:, 0]


def mlp_logits(x):
    h = est.layers.dense(x, 256, activation=jax.nn.relu)
    h = est.layers.dense(h, 256, activation=jax.nn.relu)
    return est.layers.dense(h, 1)[:, 0]


WORKLOADS = {
    "logistic": (logistic_logits, lambda: optax.sgd(0.1)),
    "mlp": (mlp_logits, lambda: optax.adam(1e-3)),
}


def make_model_fn(logits_fn, make_tx, metrics: bool = False):
    def model_fn(features, labels, mode):
        logits = logits_fn(features["x"])
        loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
        ops = None
        if metrics:
            p = jax.nn.sigmoid(logits)
            ops = {
                "accuracy": est.metrics.accuracy(labels, (p > 0.5).astype(jnp.float32)),
                "auc": est.metrics.auc(labels, p),
            }
        return est.EstimatorSpec(mode, loss=loss, train_op=make_tx(), eval_metric_ops=ops)

    return model_fn


def estimator_rate(logits_fn, make_tx, x, y, steps: int, repeats: int) -> list[float]:
    model_dir = tempfile.mkdtemp(prefix="bench_")
    estimator = est.Estimator(
        make_model_fn(logits_fn, make_tx), model_dir, config=est.RunConfig(tf_random_seed=0)
    )
    input_fn = est.inputs.numpy_input_fn(
        {"x": x}, y, batch_size=BATCH, num_epochs=None, shuffle=False
    )
    estimator.train(input_fn, steps=50)  # compile, first checkpoint
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        estimator.train(input_fn, steps=steps)
        rates.append(steps / (time.perf_counter() - start))
    return rates


def hand_written_rate(logits_fn, make_tx, x, y, steps: int, repeats: int) -> list[float]:
    from estimator.model.variables import INIT, Frame, transform_context

    frame = Frame(INIT, jax.random.key(0), jnp.zeros((), jnp.int32))
    with transform_context(frame):  # same initial parameters' shapes as the Estimator's
        logits_fn(jnp.zeros((BATCH, 100)))
    names = sorted(frame.trainable)
    layers = [(frame.trainable[n]) for n in names]
    tx = make_tx()

    def forward(params, xb):
        h = xb
        kernels = [p for n, p in zip(names, params, strict=True) if n.endswith("kernel")]
        biases = [p for n, p in zip(names, params, strict=True) if n.endswith("bias")]
        for i, (k, b) in enumerate(zip(kernels, biases, strict=True)):
            h = h @ k + b
            if i < len(kernels) - 1:
                h = jax.nn.relu(h)
        return h[:, 0]

    def loss_fn(params, xb, yb):
        return optax.sigmoid_binary_cross_entropy(forward(params, xb), yb).mean()

    @jax.jit
    def step(params, opt_state, xb, yb):
        loss, grads = jax.value_and_grad(loss_fn)(params, xb, yb)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    step = jax.jit(step.__wrapped__, donate_argnums=(0, 1))
    params = list(layers)
    opt_state = tx.init(params)
    rates = []
    k = 0

    def run(n):
        nonlocal params, opt_state, k
        loss = None
        for _ in range(n):
            lo = (k % N_BATCHES) * BATCH
            params, opt_state, loss = step(
                params, opt_state, x[lo : lo + BATCH], y[lo : lo + BATCH]
            )
            k += 1
        jax.block_until_ready((params, loss))

    run(50)
    for _ in range(repeats):
        start = time.perf_counter()
        run(steps)
        rates.append(steps / (time.perf_counter() - start))
    return rates


def train_metrics_overhead(x, y, steps: int, repeats: int) -> None:
    """The MLP without and with training metrics (accuracy + AUC), side by side: one
    Estimator each, a first ``train()`` call each (compiles included), then ``repeats``
    calls of ``steps`` steps each, alternating, best of them."""
    logits_fn, make_tx = WORKLOADS["mlp"]
    input_fn = est.inputs.numpy_input_fn(
        {"x": x}, y, batch_size=BATCH, num_epochs=None, shuffle=False
    )
    estimators, first, rates = {}, {}, {}
    for name, metrics in (("plain", False), ("metrics", True)):
        config = est.RunConfig(tf_random_seed=0, train_metrics_steps=100 if metrics else None)
        model_fn = make_model_fn(logits_fn, make_tx, metrics)
        estimators[name] = est.Estimator(model_fn, tempfile.mkdtemp(prefix="bench_"), config)
        start = time.perf_counter()
        estimators[name].train(input_fn, steps=50)
        first[name] = time.perf_counter() - start
        rates[name] = []
    for _ in range(repeats):  # alternate, so drifts in machine load hit both
        for name, estimator in estimators.items():
            start = time.perf_counter()
            estimator.train(input_fn, steps=steps)
            rates[name].append(steps / (time.perf_counter() - start))
    print(f"{'MLP':10s} {'steps/s (best)':>15s} {'median':>8s} {'first train(), 50 steps, s':>27s}")
    for name in estimators:
        print(
            f"{name:10s} {max(rates[name]):15.0f} {np.median(rates[name]):8.0f} {first[name]:27.2f}"
        )
    best = max(rates["plain"]) / max(rates["metrics"]) - 1
    median = np.median(rates["plain"]) / np.median(rates["metrics"]) - 1
    print(
        f"train(): overhead of accuracy + AUC on every step, reported every 100: "
        f"{best * 100:.1f}% (best), {median * 100:.1f}% (median)"
    )
    wall, cpu = _step_times(estimators, x, y, calls=max(40, repeats))
    for name in wall:
        print(
            f"{name:10s} {min(wall[name]) * 1e3 / 32:8.3f} ms/step wall, "
            f"{min(cpu[name]) * 1e3 / 32:8.3f} ms/step CPU (min over fused calls of 32 steps)"
        )
    print(
        "step: overhead of accuracy + AUC "
        f"{(min(wall['metrics']) / min(wall['plain']) - 1) * 100:.1f}% wall, "
        f"{(min(cpu['metrics']) / min(cpu['plain']) - 1) * 100:.1f}% CPU time"
    )


def input_check_overhead(x, y, steps: int, repeats: int) -> None:
    """The shape check's time per batch (a dict of one feature and a label, as here), and
    ``train()`` from a generator of this benchmark's batches with and without it."""
    import timeit

    from estimator.engine import input_shapes

    batch = ({"x": x[:BATCH]}, y[:BATCH])
    check = input_shapes.ShapeCheck(est.ModeKeys.TRAIN)
    check(batch)
    n = 100_000
    per_batch = min(timeit.repeat(lambda: check(batch), number=n, repeat=5)) / n
    print(f"shape check: {per_batch * 1e6:.2f} us per batch (best of 5 x {n:,})")

    def input_fn():
        k = 0
        while True:
            lo = (k % N_BATCHES) * BATCH
            yield {"x": x[lo : lo + BATCH]}, y[lo : lo + BATCH]
            k += 1

    logits_fn, make_tx = WORKLOADS["logistic"]
    estimator = est.Estimator(
        make_model_fn(logits_fn, make_tx),
        tempfile.mkdtemp(prefix="bench_"),
        config=est.RunConfig(tf_random_seed=0),
    )
    estimator.train(input_fn, steps=50)  # compile, first checkpoint
    checking = input_shapes.ShapeCheck.__call__
    rates = {"with check": [], "without": []}
    try:
        for _ in range(repeats):  # alternate, so drifts in machine load hit both
            for name in rates:
                input_shapes.ShapeCheck.__call__ = (
                    checking if name == "with check" else lambda self, batch: None
                )
                start = time.perf_counter()
                estimator.train(input_fn, steps=steps)
                rates[name].append(steps / (time.perf_counter() - start))
    finally:
        input_shapes.ShapeCheck.__call__ = checking
    print(f"{'logistic, generator input':26s} {'steps/s (best)':>15s} {'median':>8s}")
    for name, values in rates.items():
        print(f"{name:26s} {max(values):15.0f} {np.median(values):8.0f}")


def _step_times(estimators: dict, x, y, calls: int) -> dict:
    """Seconds per device call of 32 fused steps of each Estimator's compiled train program
    (``StepCompiler.multi``, the call ``train()`` makes), alternating, ``calls`` each, as
    ``(wall, process CPU time)``: the step's own cost, without the loop's host work; CPU
    time (all XLA threads) is the least sensitive to other processes on the machine."""
    batches = [
        ({"x": x[i * BATCH : (i + 1) * BATCH]}, y[i * BATCH : (i + 1) * BATCH]) for i in range(32)
    ]
    runs = {}
    for name, estimator in estimators.items():
        metrics = name == "metrics"
        runtime = estimator.runtime
        compiler = runtime.compiler(est.ModeKeys.TRAIN, metrics=metrics)
        abstract = runtime.states.abstract(compiler, batches[0])
        state = runtime.states.read(
            compiler, batches[0], estimator.latest_checkpoint(), training=True, abstract=abstract
        )
        acc = compiler.empty_accumulator(abstract, *batches[0]) if metrics else None
        runs[name] = [compiler, state, acc]

    def call(name):
        compiler, state, acc = runs[name]
        if acc is None:
            state, _, _ = compiler.multi(state, batches)
        else:
            state, acc, _, _ = compiler.multi(state, acc, batches)
        jax.block_until_ready(state)
        runs[name][1:] = [state, acc]

    wall = {name: [] for name in runs}
    cpu = {name: [] for name in runs}
    for name in runs:
        call(name)  # warm
    for _ in range(calls):
        for name in runs:
            start, start_cpu = time.perf_counter(), time.process_time()
            call(name)
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps-logistic", type=int, default=10000)
    parser.add_argument("--steps-mlp", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--train-metrics", action="store_true")
    parser.add_argument("--input-check", action="store_true")
    args = parser.parse_args()
    logging.getLogger("estimator").setLevel(logging.WARNING)
    x, y = make_data()
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, batch {BATCH}")
    if args.train_metrics:
        train_metrics_overhead(x, y, args.steps_mlp, args.repeats)
        return
    if args.input_check:
        input_check_overhead(x, y, args.steps_logistic, args.repeats)
        return
    print(
        f"{'workload':10s} {'estimator steps/s':>18s} {'hand-written steps/s':>21s} {'ratio':>6s}"
    )
    for name, (logits_fn, make_tx) in WORKLOADS.items():
        steps = args.steps_logistic if name == "logistic" else args.steps_mlp
        ours, theirs = [], []
        for _ in range(args.repeats):  # alternate, so drifts in machine load hit both
            ours += estimator_rate(logits_fn, make_tx, x, y, steps, 1)
            theirs += hand_written_rate(logits_fn, make_tx, x, y, steps, 1)
        a, b = max(ours), max(theirs)
        print(f"{name:10s} {a:18.0f} {b:21.0f} {a / b:6.2f}")


if __name__ == "__main__":
    main()
