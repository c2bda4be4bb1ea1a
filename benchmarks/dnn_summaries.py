"""What the census DNN's layer summaries cost per training step.

``canned.DNNClassifier`` records TF's ``_add_hiddenlayer_summary`` for each hidden layer and
the logits (``canned.dnn.layer_summary``): the fraction of zero activations (a scalar) and
an activation histogram, written every ``save_summary_steps`` (100, TF 2.15's default). A
``model_fn`` that records a histogram has its summaries computed by a program of their own,
only at the steps that write them (``estimator.engine.steps``). This script trains
``examples/census.py``'s DNN (batch 256, default ``RunConfig`` otherwise) under six
variants, each in a fresh process per round, the variants in a rotated order each round:

* ``default``: as shipped;
* ``in_step``: every summary an output of every step (as in a multi-process job, where
  they stay in the step: ``estimator.engine.steps._apart`` replaced);
* ``no_layer_summaries``: ``layer_summary`` replaced by a no-op (the loss summary stays);
* ``fractions_only``: only the zero fractions (scalars alone: outputs of every step);
* ``histograms_only``: only the histograms;
* ``no_summary_hook``: ``RunConfig(save_summary_steps=0)``.

Per process: two warm-up calls (compiles), then ``--repeats`` pairs of a 1-epoch and a
5-epoch ``train()``; the step time is ``(t_5 - t_1) / (4 epochs of steps)`` (fixed per-call
costs cancel), the median of the pairs. Printed: per variant, the median and range over the
rounds of that step time in µs.

Usage: ``python benchmarks/dnn_summaries.py [--rounds 3] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = (
    "default",
    "in_step",
    "no_layer_summaries",
    "fractions_only",
    "histograms_only",
    "no_summary_hook",
)


def child(variant: str, repeats: int) -> None:
    import logging
    import time

    import jax.numpy as jnp

    import canned
    import canned.dnn
    import estimator as est

    logging.getLogger("estimator").setLevel(logging.WARNING)
    spec = importlib.util.spec_from_file_location(
        "census", os.path.join(ROOT, "examples", "census.py")
    )
    census = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(census)
    x, y = census.load(os.path.join(census.data_dir(), "adult.data"))
    stats = census.numeric_stats(x)

    def fractions(value, tag):
        zero = jnp.mean((value == 0).astype(jnp.float32))
        est.summary.scalar(f"{tag}/fraction_of_zero_values", zero)

    def histograms(value, tag):
        est.summary.histogram(f"{tag}/activation", value, per_example=True)

    replaced = {
        "no_layer_summaries": lambda value, tag: None,
        "fractions_only": fractions,
        "histograms_only": histograms,
    }
    if variant in replaced:
        canned.dnn.layer_summary = replaced[variant]
    if variant == "in_step":
        from estimator.engine import steps as engine_steps

        engine_steps._apart = lambda frame: ()
    config = est.RunConfig(tf_random_seed=0)
    if variant == "no_summary_hook":
        config = config.replace(save_summary_steps=0)
    model = canned.DNNClassifier(
        hidden_units=census.HIDDEN_UNITS,
        feature_columns=census.deep_columns(stats),
        label_vocabulary=census.LABELS,
        optimizer=canned.get_optimizer_instance("Adagrad", learning_rate=0.05),
        config=config,
    )

    def train(epochs: int) -> float:
        input_fn = est.inputs.numpy_input_fn(x, y, batch_size=256, num_epochs=epochs, shuffle=True)
        start = time.perf_counter()
        model.train(input_fn)
        return time.perf_counter() - start

    train(1)
    train(1)
    steps = 4 * len(y) / 256
    times = [(train(5) - train(1)) / steps * 1e6 for _ in range(repeats)]
    print(json.dumps({"variant": variant, "us_per_step": statistics.median(times)}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.repeats)
        return
    env = {**os.environ, "JAX_ESTIMATOR_CACHE_DIR": tempfile.mkdtemp(prefix="bench_xla_")}
    found: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for r in range(args.rounds):
        order = VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]
        for variant in order:
            out = subprocess.run(
                [sys.executable, __file__, "--child", variant, "--repeats", str(args.repeats)],
                capture_output=True, text=True, check=True, env=env,
            ).stdout  # fmt: skip
            found[variant].append(json.loads(out.strip().splitlines()[-1])["us_per_step"])
        print(f"round {r + 1}: " + ", ".join(f"{v} {found[v][-1]:.0f}" for v in VARIANTS))
    print(f"\ncensus DNN, batch 256, µs per training step, median (min-max) of {args.rounds}:")
    for variant, values in found.items():
        print(
            f"  {variant:20} {statistics.median(values):7.0f} ({min(values):.0f}-{max(values):.0f})"
        )


if __name__ == "__main__":
    main()
