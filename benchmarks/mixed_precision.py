"""The census DNN (``examples/census.py --model dnn``) under each dtype policy.

For ``float32``, ``mixed_bfloat16`` and ``mixed_float16`` (``RunConfig(dtype_policy=...)``),
in this process one after the other: a ``DNNClassifier`` [100, 75, 50, 25] on the census
tutorial's deep columns, Adagrad at 0.05, batch 256, trained ``--epochs`` epochs on
adult.data (timed whole: "cold", compiles included), then one more epoch in a second
``train()`` (timed: "steady", nothing compiled), then evaluated on adult.test. Prints the
times, examples per second in the steady epoch and the accuracy.

Usage: ``python benchmarks/mixed_precision.py [--data-dir DIR]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time

import jax

import canned
import estimator as est

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import census  # noqa: E402

POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=os.path.join(ROOT, "data", "adult"))
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    logging.getLogger("estimator").setLevel(logging.WARNING)
    logging.getLogger("absl").setLevel(logging.ERROR)
    train_x, train_y = census.load(os.path.join(args.data_dir, "adult.data"))
    test_x, test_y = census.load(os.path.join(args.data_dir, "adult.test"))
    stats = census.numeric_stats(train_x)
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, {len(train_y)} rows")
    print(
        f"{'policy':16s} {'cold (s)':>9s} {'steady epoch (s)':>17s} {'examples/s':>11s}"
        f" {'accuracy':>9s}"
    )
    for policy in POLICIES:
        model = canned.DNNClassifier(
            hidden_units=census.HIDDEN_UNITS,
            feature_columns=census.deep_columns(stats),
            model_dir=tempfile.mkdtemp(prefix="bench_mixed_"),
            label_vocabulary=census.LABELS,
            optimizer=canned.get_optimizer_instance("Adagrad", learning_rate=0.05),
            config=est.RunConfig(tf_random_seed=args.seed, dtype_policy=policy),
        )

        def input_fn(epochs):
            return est.inputs.numpy_input_fn(
                train_x, train_y, batch_size=256, num_epochs=epochs, shuffle=True
            )

        start = time.perf_counter()
        model.train(input_fn(args.epochs))
        cold = time.perf_counter() - start
        start = time.perf_counter()
        model.train(input_fn(1))
        steady = time.perf_counter() - start
        accuracy = model.evaluate(
            est.inputs.numpy_input_fn(test_x, test_y, batch_size=1024, shuffle=False)
        )["accuracy"]
        print(
            f"{policy:16s} {cold:9.2f} {steady:17.2f} {len(train_y) / steady:11.0f}"
            f" {accuracy:9.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
