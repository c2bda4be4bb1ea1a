"""Cold start of the census models: how often ``model_fn`` runs, and how long a fresh
Estimator's first ``train()`` takes, on an empty ``model_dir`` and resuming a checkpoint.

For each model of ``examples/census.py`` (UCI Adult, batch 256), after one training that
fills the run's own persistent compilation cache, ``--repeats`` times: a fresh Estimator
trains one step on an empty ``model_dir``, and a fresh Estimator resumes the first one's
``model_dir`` for one step (a rerun of a job, an evaluator-turned-trainer). Compiles come
from the cache, so what is left is ``model_fn``'s traces, lowering, reading the checkpoint
and the first step. Prints ``model_fn``'s runs (``Estimator.trace_count``) and the
minimum and median seconds of each.

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

import estimator as est


def bench(census, kind: str, data, repeats: int) -> None:
    x, y = data
    stats = census.numeric_stats(x)

    def input_fn():
        return est.inputs.numpy_input_fn(x, y, batch_size=256, num_epochs=1, shuffle=False)

    resumed_dir = tempfile.mkdtemp(prefix="bench_cold_")
    census_throughput._model(census, kind, stats, resumed_dir).train(input_fn(), steps=1)  # cache
    times: dict[str, list[float]] = {"empty model_dir": [], "resumed": []}
    runs = {}
    for _ in range(repeats):
        for case, model_dir in (("empty model_dir", None), ("resumed", resumed_dir)):
            model = census_throughput._model(census, kind, stats, model_dir)
            start = time.perf_counter()
            model.train(input_fn(), steps=1)
            times[case].append(time.perf_counter() - start)
            runs[case] = model.trace_count
    print(f"{kind}: {census.MODELS[kind]}")
    for case, seconds in times.items():
        print(
            f"  first train(), {case:15s}: model_fn runs {runs[case]}, "
            f"min {min(seconds):.3f} s, median {statistics.median(seconds):.3f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = census_throughput.ROOT
    parser.add_argument("--data-dir", default=os.path.join(root, "..", "shared", "data", "adult"))
    parser.add_argument("--model", choices=["linear", "dnn", "wide_deep", "all"], default="all")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    os.environ["JAX_ESTIMATOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_xla_cache_")
    logging.getLogger("estimator").setLevel(logging.WARNING)
    census = census_throughput.load_census_module()
    data = census.load(os.path.join(args.data_dir, "adult.data"))
    kinds = ["linear", "dnn", "wide_deep"] if args.model == "all" else [args.model]
    for kind in kinds:
        bench(census, kind, data, args.repeats)


if __name__ == "__main__":
    main()
