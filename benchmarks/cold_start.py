"""Cold start of the census models: how often ``model_fn`` runs, and how long a fresh
Estimator's first ``train()`` takes, on an empty ``model_dir`` and resuming a checkpoint,
and its first ``evaluate()``.

For each model of ``examples/census.py`` (UCI Adult, batch 256), after one training and
one evaluation that fill the run's own persistent compilation cache, ``--repeats`` times:
a fresh Estimator trains one step on an empty ``model_dir``, a fresh Estimator resumes the
first one's ``model_dir`` for one step (a rerun of a job, an evaluator-turned-trainer), and
a fresh Estimator evaluates that ``model_dir``'s checkpoint on one batch (an evaluator
task). Compiles come from the cache, so what is left is ``model_fn``'s traces, lowering,
reading the checkpoint and the first step. Prints ``model_fn``'s runs
(``Estimator.trace_count``) and the minimum and median seconds of each. ``small`` is a
custom ``model_fn`` of the size most programs' tests train (one ``est.layers.dense`` of 4
inputs, a mean squared error, SGD, a mean-absolute-error metric; batch 16 of random rows),
where what is left is nearly all tracing and lowering.

To compare two versions, run this file from each checkout in alternating processes
(``PYTHONPATH=<checkout> python benchmarks/cold_start.py``): the figures vary with the
machine's load by more than a trace costs.

Usage: ``python benchmarks/cold_start.py [--model all] [--repeats 9]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time

import census_throughput
import jax.numpy as jnp
import numpy as np
import optax

import estimator as est


def small_model_fn(features, labels, mode):
    prediction = est.layers.dense(features["x"], 1, name="out")[:, 0]
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions={"y": prediction})
    loss = jnp.mean((prediction - labels) ** 2)
    return est.EstimatorSpec(
        mode,
        loss=loss,
        train_op=optax.sgd(0.1),
        eval_metric_ops={"mae": est.metrics.mean_absolute_error(labels, prediction)},
    )


def _small():
    """``(make(model_dir), input_fn)`` of the small custom model."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = x.sum(axis=1)

    def make(model_dir):
        return est.Estimator(small_model_fn, model_dir or tempfile.mkdtemp(prefix="bench_cold_"))

    def input_fn():
        return est.inputs.numpy_input_fn({"x": x}, y, batch_size=16, num_epochs=1, shuffle=False)

    return make, input_fn


def _census(census, kind: str, data):
    x, y = data
    stats = census.numeric_stats(x)

    def make(model_dir):
        return census_throughput._model(census, kind, stats, model_dir)

    def input_fn():
        return est.inputs.numpy_input_fn(x, y, batch_size=256, num_epochs=1, shuffle=False)

    return make, input_fn


def bench(name: str, make, input_fn, repeats: int) -> None:
    resumed_dir = tempfile.mkdtemp(prefix="bench_cold_")
    first = make(resumed_dir)
    first.train(input_fn(), steps=1)  # fills the cache
    first.evaluate(input_fn(), steps=1)
    cases = (
        ("train(), empty model_dir", None),
        ("train(), resumed", resumed_dir),
        ("evaluate()", resumed_dir),
    )
    times: dict[str, list[float]] = {case: [] for case, _ in cases}
    runs = {}
    for _ in range(repeats):
        for case, model_dir in cases:
            model = make(model_dir)
            start = time.perf_counter()
            if case == "evaluate()":
                model.evaluate(input_fn(), steps=1)
            else:
                model.train(input_fn(), steps=1)
            times[case].append(time.perf_counter() - start)
            runs[case] = model.trace_count
    print(name)
    for case, seconds in times.items():
        print(
            f"  first {case:24s}: model_fn runs {runs[case]}, "
            f"min {min(seconds):.3f} s, median {statistics.median(seconds):.3f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = census_throughput.ROOT
    parser.add_argument("--data-dir", default=os.path.join(root, "data", "adult"))
    parser.add_argument(
        "--model", choices=["linear", "dnn", "wide_deep", "small", "all"], default="all"
    )
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    os.environ["JAX_ESTIMATOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_xla_cache_")
    logging.getLogger("estimator").setLevel(logging.WARNING)
    census = census_throughput.load_census_module()
    data = census.load(os.path.join(args.data_dir, "adult.data"))
    kinds = ["linear", "dnn", "wide_deep", "small"] if args.model == "all" else [args.model]
    for kind in kinds:
        if kind == "small":
            bench("small: a custom model_fn, one dense layer", *_small(), args.repeats)
        else:
            bench(f"{kind}: {census.MODELS[kind]}", *_census(census, kind, data), args.repeats)


if __name__ == "__main__":
    main()
