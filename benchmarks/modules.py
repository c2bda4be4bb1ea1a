"""Training step rates: a module inside the Estimator (``estimator.modules``) vs the same
module in its library's own hand-written ``jax.jit`` + optax loop.

For each library (Flax NNX, Flax Linen, Equinox, Keras 3 on JAX) and each model of
``tests/support/modules_zoo.py`` at its ``BENCH`` size (an MLP 64-256-256-10, a CNN on 16x16
images with 16 filters and batch normalization, a transformer block of width 64 with 4
heads over 16 tokens; batch 128, Adam), both sides train in this process on the same
pre-generated batches:

* the Estimator with the default ``RunConfig`` (checkpoints at the start and end of each
  ``train()``, loss logging and the step counter every 100 steps, the NaN guard,
  ``steps_per_execution=32``), fed by ``numpy_input_fn`` over the arrays; each
  ``train(steps=N)`` and ``train(steps=3N)`` call is timed whole, after a first call
  compiled the programs;
* the library's loop (``modules_zoo.Loop``: one jitted step per batch, state donated),
  started from the Estimator's initial parameters, timed over N and 3N steps after a
  warm-up step, up to ``block_until_ready``.

Each of ``--repeats`` rounds times, in turn, the two sides' calls of N steps, then their
calls of 3N, and gives two rates per side: per call (N steps ÷ the time of a call of N, so
``train()``'s fixed cost per call, the checkpoint written at its end, is in it) and steady
(2N steps ÷ the difference between the calls of 3N and N, so that fixed cost cancels: the
step rate). Printed: the median of each rate over the rounds, and the median of the
rounds' ratios (ours / hand-written: each round's two sides ran back to back, under the
same load; the target is a step rate >= 0.95 of the library loop's).

Usage: ``python benchmarks/modules.py [--steps N] [--repeats R] [--libraries nnx,keras]
[--architectures mlp,cnn]``.
Keras needs the JAX backend: this script sets ``KERAS_BACKEND=jax`` before importing it.
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import argparse  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from statistics import median  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import estimator as est  # noqa: E402

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "support")
)
import modules_zoo as zoo  # noqa: E402

N_BATCHES = 16  # distinct batches cycled through


def make_tx():
    return optax.adam(1e-3)


class Initial(est.SessionRunHook):
    def after_create_session(self, session, coord):
        state = jax.device_get(session.state)
        self.variables = {**state.trainable, **state.non_trainable}


def estimator_side(case, x, y, steps, steps_per_execution=32):
    """``(Estimator, input_fn, initial variables)`` after a first ``train()`` compiled."""
    model = est.Estimator(
        zoo.model_fn_for(case, make_tx),
        tempfile.mkdtemp(prefix="bench_modules_"),
        est.RunConfig(tf_random_seed=0, steps_per_execution=steps_per_execution),
    )
    input_fn = est.inputs.numpy_input_fn(
        {"x": x}, y, batch_size=case.size.batch, num_epochs=None, shuffle=False
    )
    initial = Initial()
    model.train(input_fn, steps=min(steps, 64), hooks=[initial])
    return model, input_fn, initial.variables


def time_estimator(model, input_fn, steps) -> float:
    start = time.perf_counter()
    model.train(input_fn, steps=steps)
    return time.perf_counter() - start


def time_hand(loop, batches, steps) -> float:
    start = time.perf_counter()
    for i in range(steps):
        loop.step(*batches[i % len(batches)])
    jax.block_until_ready(loop.state)
    return time.perf_counter() - start


def rates(times: dict, steps: int) -> tuple[list, list]:
    """``(per call, steady)``: each round's steps/s, from its calls of N and 3N steps."""
    short, long = times[steps], times[3 * steps]
    return (
        [steps / a for a in short],
        [2 * steps / (b - a) for a, b in zip(short, long, strict=True)],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="steps per timed run (default: 1500 for the MLP, 200 for the others, a few "
        "seconds each, so that train()'s fixed cost per call, two checkpoints, stays small)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--libraries", default=",".join(zoo.LIBRARIES))
    parser.add_argument("--architectures", default=",".join(zoo.ARCHITECTURES))
    args = parser.parse_args()
    logging.getLogger("estimator").setLevel(logging.WARNING)
    logging.getLogger("absl").setLevel(logging.ERROR)
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, {zoo.BENCH}")
    print(
        f"{'':21s} {'per call of N steps (steps/s)':>32s} {'steady (steps/s)':>32s}\n"
        f"{'library':8s} {'model':12s} {'estimator':>12s} {'hand-written':>13s} {'ratio':>6s}"
        f" {'estimator':>12s} {'hand-written':>13s} {'ratio':>6s}"
    )
    for library in args.libraries.split(","):
        for arch in args.architectures.split(","):
            case = zoo.case(library, arch, zoo.BENCH)
            steps = args.steps or (1500 if arch == "mlp" else 200)
            batches = zoo.batches(arch, case.size, N_BATCHES)
            x = np.concatenate([b[0] for b in batches])
            y = np.concatenate([b[1] for b in batches])
            model, input_fn, initial = estimator_side(case, x, y, steps)
            # The CNN also runs one step per call: XLA's CPU backend ran its kernel
            # gradients several times slower in the loop body of a fused call than at a
            # program's top level, until estimator.config.platform laid convolutions out in the
            # canonical layout (JAX_ESTIMATOR_CANONICAL_CONVOLUTIONS=0 shows the old gap).
            single = estimator_side(case, x, y, steps, 1)[:2] if arch == "cnn" else None
            loop = case.hand_loop(initial, make_tx())
            loop.step(*batches[0])  # compile
            jax.block_until_ready(loop.state)
            ours, ones, theirs = ({steps: [], 3 * steps: []} for _ in range(3))
            for _ in range(args.repeats):  # alternate, so drifts in machine load hit both
                for n in (steps, 3 * steps):
                    ours[n].append(time_estimator(model, input_fn, n))
                    if single:
                        ones[n].append(time_estimator(*single, n))
                    theirs[n].append(time_hand(loop, batches, n))
            hand = rates(theirs, steps)
            rows = [(arch, rates(ours, steps))]
            if single:
                rows.append(("(1 step/call)", rates(ones, steps)))
            for label, side in rows:
                columns = []
                for kind in (0, 1):  # per call, steady
                    ratios = [a / b for a, b in zip(side[kind], hand[kind], strict=True)]
                    columns.append(
                        f"{median(side[kind]):12.0f} {median(hand[kind]):13.0f} "
                        f"{median(ratios):6.2f}"
                    )
                print(
                    f"{library if label == arch else '':8s} {label:12s} " + " ".join(columns),
                    flush=True,
                )


if __name__ == "__main__":
    main()
