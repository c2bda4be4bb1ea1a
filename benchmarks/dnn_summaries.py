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

Per process (an empty compilation cache each): two warm-up calls, the first of which
compiles (its time and its longest XLA compile, the train step's, are recorded), then
``--repeats`` pairs of a 1-epoch and a 5-epoch ``train()``; the step time is ``(t_5 - t_1) /
(4 epochs of steps)`` (fixed per-call costs cancel), the median of the pairs. Printed: per
variant, the median and range over the rounds of that step time in µs, of the first call's
seconds and of its step compile's seconds.

Usage: ``python benchmarks/dnn_summaries.py [--rounds 3] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The event JAX records the seconds of each XLA compile under (``jax._src.dispatch``).
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
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

    import jax
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

    compiles = []  # seconds of each XLA compile of the first call (JAX's own record)
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **_: compiles.append(seconds) if event == COMPILE_EVENT else None
    )
    first = train(1)
    step_compile = max(compiles)
    train(1)
    steps = 4 * len(y) / 256
    times = [(train(5) - train(1)) / steps * 1e6 for _ in range(repeats)]
    print(
        json.dumps(
            {
                "variant": variant,
                "us_per_step": statistics.median(times),
                "first_s": first,
                "step_compile_s": step_compile,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.repeats)
        return
    found: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for r in range(args.rounds):
        order = VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]
        for variant in order:
            # An empty compilation cache per process: the first call compiles.
            cache = tempfile.mkdtemp(prefix="bench_xla_")
            env = {**os.environ, "JAX_ESTIMATOR_CACHE_DIR": cache}
            out = subprocess.run(
                [sys.executable, __file__, "--child", variant, "--repeats", str(args.repeats)],
                capture_output=True, text=True, check=True, env=env,
            ).stdout  # fmt: skip
            shutil.rmtree(cache, ignore_errors=True)
            found[variant].append(json.loads(out.strip().splitlines()[-1]))
        print(
            f"round {r + 1}: "
            + ", ".join(f"{v} {found[v][-1]['us_per_step']:.0f}" for v in VARIANTS)
        )
    print(
        f"\ncensus DNN, batch 256, median (min-max) of {args.rounds}: µs per training step; "
        "the first 1-epoch train() (s) and its train step's XLA compile (s), cold"
    )
    for variant, results in found.items():
        columns = [
            spread([r[key] for r in results], fmt)
            for key, fmt in (("us_per_step", ".0f"), ("first_s", ".2f"), ("step_compile_s", ".2f"))
        ]
        print(f"  {variant:20} " + "   ".join(columns))


def spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


if __name__ == "__main__":
    main()
