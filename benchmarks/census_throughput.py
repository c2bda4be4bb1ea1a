"""Census (UCI Adult) throughput of the canned linear, DNN and wide & deep models, with
TF 2.15 on the same data, columns and models in the same run.

Trains each model of ``examples/census.py`` for ``--epochs`` epochs at batch 256 and
evaluates on adult.test. Train: end to end (a fresh Estimator, compiles included, with a
cold persistent compilation cache of the run's own), a rerun (a fresh Estimator whose
programs come from that cache, as a second run of a job) and steady state (a second
``train()`` of the same Estimator); evaluate: first call and steady, and the time of a fresh
Estimator's first evaluation of the checkpoint (an evaluator job's).
With ``--tf-python`` (a Python with tensorflow 2.15 + tensorflow-estimator 2.15; TF is
never a dependency of this package) it runs ``benchmarks/_tf_census.py`` for the same
model in a subprocess — TF's recommended input (``tf.data`` with ``prefetch``), default
``RunConfig`` — and prints the ratio of train examples/s, ours end to end over TF's. For
the linear model it also times the feature columns' host phase alone, as a share of the
steady training time (it runs in the input pipeline beside the device's work).

Usage: ``python benchmarks/census_throughput.py [--model all] [--tf-python PATH]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import subprocess
import tempfile
import time

import jax

import estimator as est

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_census_module():
    spec = importlib.util.spec_from_file_location(
        "census", os.path.join(ROOT, "examples", "census.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _model(census, kind: str, stats: dict, model_dir: str | None = None):
    model_dir = model_dir or tempfile.mkdtemp(prefix="bench_census_")
    return census.make_model(kind, model_dir, 0, stats)


def _tf(args, kind: str) -> dict | None:
    """TF 2.15's figures from ``_tf_census.py`` run by ``--tf-python`` (None without it)."""
    if not args.tf_python:
        return None
    script = os.path.join(ROOT, "benchmarks", "_tf_census.py")
    command = [args.tf_python, script, args.data_dir, kind, str(args.epochs), str(args.batch_size)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def bench(args, census, kind, data) -> None:
    train_x, train_y, test_x, test_y = data
    stats = census.numeric_stats(train_x)

    def train_input():
        return est.inputs.numpy_input_fn(
            train_x, train_y, batch_size=args.batch_size, num_epochs=args.epochs, shuffle=True
        )

    n_train = len(train_y) * args.epochs
    start = time.perf_counter()
    _model(census, kind, stats).train(train_input())  # end to end, cold: compiles included
    end_to_end = time.perf_counter() - start
    model = _model(census, kind, stats)
    start = time.perf_counter()
    model.train(train_input())  # a rerun: a fresh Estimator, compiled programs from the cache
    rerun = time.perf_counter() - start
    start = time.perf_counter()
    model.train(train_input())  # steady state: the same shapes again, nothing compiles
    steady = time.perf_counter() - start
    eval_fn = est.inputs.numpy_input_fn(test_x, test_y, batch_size=args.batch_size, shuffle=False)
    start = time.perf_counter()
    results = model.evaluate(eval_fn)
    eval_first = time.perf_counter() - start
    start = time.perf_counter()
    model.evaluate(eval_fn)
    eval_time = time.perf_counter() - start
    # An evaluator job's first evaluation: a fresh Estimator on the checkpoint (its
    # programs from the cache).
    start = time.perf_counter()
    _model(census, kind, stats, model.model_dir).evaluate(eval_fn)
    eval_fresh = time.perf_counter() - start
    print(f"\n{kind}: {census.MODELS[kind]}")
    print(
        f"  train    end to end {n_train / end_to_end:9,.0f} examples/s ({end_to_end:.2f} s), "
        f"rerun {n_train / rerun:9,.0f} examples/s ({rerun:.2f} s), "
        f"steady {n_train / steady:9,.0f} examples/s ({steady:.2f} s)"
    )
    print(
        f"  evaluate first call {len(test_y) / eval_first:9,.0f} examples/s, steady "
        f"{len(test_y) / eval_time:9,.0f} examples/s (accuracy {results['accuracy']:.4f}, "
        f"auc {results['auc']:.4f}); a fresh Estimator on the checkpoint {eval_fresh:.2f} s"
    )
    tf_figures = _tf(args, kind)
    if tf_figures is not None:
        ratio = (n_train / end_to_end) / tf_figures["train_examples_per_s"]
        print(
            f"  TF 2.15  train {tf_figures['train_examples_per_s']:9,.0f} examples/s "
            f"({tf_figures['train_s']:.2f} s), evaluate "
            f"{tf_figures['eval_examples_per_s']:9,.0f} examples/s (accuracy "
            f"{tf_figures['accuracy']:.4f}, auc {tf_figures['auc']:.4f})"
        )
        print(f"  ratio (ours end to end / TF, train): {ratio:.2f}")
    if kind == "linear":
        transform = model.runtime.input_transform  # the host phase the Estimator runs per batch
        start = time.perf_counter()
        batches = 0
        for features, labels in train_input()():
            transform.apply(features, labels)
            batches += 1
        host_time = time.perf_counter() - start
        print(
            f"  host phase of the feature columns alone: {host_time:.2f} s = "
            f"{1e6 * host_time / batches:.0f} us/batch = {host_time / steady:.0%} of the "
            "steady training wall time"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=os.path.join(ROOT, "data", "adult"))
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--model", choices=["linear", "dnn", "wide_deep", "all"], default="all")
    parser.add_argument(
        "--tf-python",
        default=os.environ.get("TF_PYTHON"),
        help="a Python with tensorflow 2.15 + tensorflow-estimator 2.15 (default $TF_PYTHON): "
        "runs TF's side in the same benchmark run",
    )
    args = parser.parse_args()
    # A cold persistent compilation cache of its own (see estimator.compilation_cache).
    os.environ["JAX_ESTIMATOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_xla_cache_")
    logging.getLogger("estimator").setLevel(logging.WARNING)
    census = load_census_module()
    train_x, train_y = census.load(os.path.join(args.data_dir, "adult.data"))
    test_x, test_y = census.load(os.path.join(args.data_dir, "adult.test"))
    print(
        f"jax {jax.__version__}, backend {jax.default_backend()}, batch "
        f"{args.batch_size}, {args.epochs} epochs of {len(train_y)} examples"
    )
    kinds = ["linear", "dnn", "wide_deep"] if args.model == "all" else [args.model]
    for kind in kinds:
        bench(args, census, kind, (train_x, train_y, test_x, test_y))


if __name__ == "__main__":
    main()
