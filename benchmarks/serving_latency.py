"""Serving latency of an exported model: export time and p50/p99 of one loaded signature.

Two models, both trained briefly in this process, exported with
``Estimator.export_saved_model`` and served with ``estimator.export.load(path)``:

* ``mlp``: the MLP of ``train_throughput.py`` (100 -> 256 -> 256 -> 1, ReLU, Adam; trained
  ``--mlp-steps`` steps of batch 256 on synthetic data), exported with a raw receiver
  (``x``: float32 ``[None, 100]``) and served NumPy float32 arrays;
* ``census``: the census example's ``LinearClassifier`` (``examples/census.py``: its wide
  columns, FTRL at 0.2; trained ``--census-epochs`` epochs of batch 256 on adult.data),
  exported with the parsing receiver of ``make_parse_example_spec(columns)`` and served
  raw adult.test rows as a service gets them from JSON: Python lists of ``str`` and
  ``float`` per feature. Its latency includes the host-side feature columns (vocabulary
  lookups, FarmHash fingerprints, bucketizing, crosses) run by the loader.

Export time is the ``export_saved_model`` call (checkpoint read, tracing, ``jax.export``
serialization, orbax save, rename). Load time is ``estimator.export.load``. For each
batch size (1 and 256) the ``serving_default`` signature is called once and that first
call is reported on its own (it compiles the function for that batch size); then
``--warmup`` untimed calls, then ``--calls`` calls each timed alone with
``time.perf_counter`` (wall time of ``signature(**inputs)``: input checks, host transform,
device call, transfer of the outputs back as NumPy). Inputs are prepared before timing and
cycle through 16 different batches. The served outputs for 256 inputs are checked against
``predict()`` (within 1e-6). Examples/s is the batch size over the p50 latency
(one caller, no concurrency).

Usage: ``python benchmarks/serving_latency.py [--data-dir DIR] [--calls 200]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import shutil
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import canned
import estimator as est
from canned import feature_column as fc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH_SIZES = (1, 256)
N_INPUTS = 16  # distinct prepared batches cycled through per batch size
TRAIN_BATCH = 256


def load_census_module():
    spec = importlib.util.spec_from_file_location(
        "census", os.path.join(ROOT, "examples", "census.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mlp_model_fn(features, labels, mode):
    h = est.layers.dense(features["x"], 256, activation=jax.nn.relu)
    h = est.layers.dense(h, 256, activation=jax.nn.relu)
    logits = est.layers.dense(h, 1)[:, 0]
    predictions = {"logits": logits, "probability": jax.nn.sigmoid(logits)}
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions=predictions)
    loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.adam(1e-3), predictions=predictions)


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def mlp(args, base: str):
    """Trains and exports the MLP.

    Returns:
      ``(export dir, export s, {batch: [inputs]}, outputs -> P(positive), predict()'s
      P(positive) for the first batch of 256 inputs)``.
    """
    rng = np.random.default_rng(0)
    x = rng.normal(size=(TRAIN_BATCH * 16, 100)).astype(np.float32)
    y = (x @ rng.normal(size=100) + rng.normal(size=len(x)) > 0).astype(np.float32)
    model = est.Estimator(
        mlp_model_fn, os.path.join(base, "mlp"), config=est.RunConfig(tf_random_seed=0)
    )
    model.train(
        est.inputs.numpy_input_fn(
            {"x": x}, y, batch_size=TRAIN_BATCH, num_epochs=None, shuffle=True
        ),
        steps=args.mlp_steps,
    )
    receiver = est.export.build_raw_serving_input_receiver_fn(
        {"x": jax.ShapeDtypeStruct((None, 100), jnp.float32)}
    )
    path, seconds = timed(
        lambda: model.export_saved_model(os.path.join(base, "mlp_export"), receiver)
    )
    inputs = {
        b: [{"x": x[(i * b) % len(x) :][:b].copy()} for i in range(N_INPUTS)] for b in BATCH_SIZES
    }
    expected = [
        p["probability"]
        for p in model.predict(est.inputs.numpy_input_fn({"x": x[:TRAIN_BATCH]}, shuffle=False))
    ]
    return path, seconds, inputs, lambda out: out["probability"], np.asarray(expected)


def census(args, base: str):
    """Trains and exports the census LinearClassifier; returns as :func:`mlp`."""
    module = load_census_module()
    train_x, train_y = module.load(os.path.join(args.data_dir, "adult.data"))
    test_x, _ = module.load(os.path.join(args.data_dir, "adult.test"))
    columns = module.wide_columns()
    model = canned.LinearClassifier(
        feature_columns=columns,
        model_dir=os.path.join(base, "census"),
        label_vocabulary=module.LABELS,
        config=est.RunConfig(tf_random_seed=0),
    )
    model.train(
        est.inputs.numpy_input_fn(
            train_x,
            train_y,
            batch_size=TRAIN_BATCH,
            num_epochs=args.census_epochs,
            shuffle=True,
        )
    )
    spec = fc.make_parse_example_spec(columns)
    receiver = est.export.build_parsing_serving_input_receiver_fn(spec)
    path, seconds = timed(
        lambda: model.export_saved_model(os.path.join(base, "census_export"), receiver)
    )
    n = len(test_x["age"])
    inputs = {
        b: [
            {name: test_x[name][(i * b) % n :][:b].tolist() for name in spec}
            for i in range(N_INPUTS)
        ]
        for b in BATCH_SIZES
    }
    first = {k: v[:TRAIN_BATCH] for k, v in test_x.items()}
    expected = [
        p["probabilities"][1]
        for p in model.predict(est.inputs.numpy_input_fn(first, shuffle=False))
    ]
    return path, seconds, inputs, lambda out: out["scores"][:, 1], np.asarray(expected)


def latencies(signature, inputs: list[dict], warmup: int, calls: int):
    """(first call s, [per-call s]) for one batch size."""
    _, first = timed(lambda: signature(**inputs[0]))
    for i in range(warmup):
        signature(**inputs[i % len(inputs)])
    times = []
    for i in range(calls):
        feed = inputs[i % len(inputs)]
        start = time.perf_counter()
        signature(**feed)
        times.append(time.perf_counter() - start)
    return first, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=os.path.join(ROOT, "data", "adult"))
    parser.add_argument("--mlp-steps", type=int, default=200)
    parser.add_argument("--census-epochs", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    logging.getLogger("estimator").setLevel(logging.WARNING)
    base = tempfile.mkdtemp(prefix="bench_serving_")
    rows, exports = [], []
    try:
        for name, build in (("mlp", mlp), ("census", census)):
            path, export_s, inputs, positive, expected = build(args, base)
            loaded, load_s = timed(lambda path=path: est.export.load(path))
            exports.append((name, export_s, load_s))
            signature = loaded.signatures["serving_default"]
            for batch in BATCH_SIZES:
                first, times = latencies(signature, inputs[batch], args.warmup, args.calls)
                p50, p99 = np.percentile(times, [50, 99])
                rows.append((name, batch, first, p50, p99))
            served = positive(signature(**inputs[TRAIN_BATCH][0]))
            if not np.allclose(served, expected, atol=1e-6):  # serves what predict() computes
                raise RuntimeError(f"The {name} export disagrees with predict().")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(
        f"jax {jax.__version__}, backend {jax.default_backend()}, signature serving_default, "
        f"{args.calls} timed calls after {args.warmup} warm-up calls"
    )
    print(f"{'model':8s} {'export s':>9s} {'load s':>7s}")
    for name, export_s, load_s in exports:
        print(f"{name:8s} {export_s:9.2f} {load_s:7.2f}")
    print()
    print(
        f"{'model':8s} {'batch':>5s} {'first call ms':>14s} {'p50 ms':>8s} {'p99 ms':>8s} "
        f"{'examples/s at p50':>18s}"
    )
    for name, batch, first, p50, p99 in rows:
        print(
            f"{name:8s} {batch:5d} {first * 1e3:14.1f} {p50 * 1e3:8.3f} {p99 * 1e3:8.3f} "
            f"{batch / p50:18,.0f}"
        )


if __name__ == "__main__":
    main()
