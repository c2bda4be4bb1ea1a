"""Wide models at scale: a LinearClassifier on hashed string columns as the tables grow.

Ten string columns with 100,000 distinct values each, ``categorical_column_with_hash_bucket``
with B buckets per column, batch 256, the default ``RunConfig`` and the canned FTRL (TF
2.15's defaults). For each B (10³, 10⁶, 10⁷ by default; ``--sizes`` adds 10⁸ where memory
allows: 10 columns × 10⁸ rows × 3 values (weights, accumulator, linear) × 4 bytes = 12 GB)
it reports, from a fresh process each:

* steady-state train steps/s, timed by a hook between step ``--warmup`` and
  ``--warmup + --steps`` inside one ``train()`` call (compiles and start-up excluded);
* end to end: the wall time of that whole ``train()`` call, compiles included (the
  persistent compilation cache is off, so every run compiles);
* peak resident memory of the process.

It first times the host phase alone: ``categorical_column_with_hash_bucket`` over a million
unique strings, batch by batch (256 strings a call) and over the whole array at once (what
an in-memory input runs, ``numpy_input_fn``): strings/s on one core.

With ``--tf-python`` (a Python with tensorflow 2.15 + tensorflow-estimator 2.15; TF is never
a dependency of this package) TF's ``tf.estimator.LinearClassifier`` runs the same columns on
the same rows (written once to a shared ``.npy`` file), fed by TF's recommended input path
(``tf.data``: ``from_tensor_slices → repeat → batch → prefetch``), default ``RunConfig``,
timed by the same kind of hook. Ours reads the rows with ``estimator.inputs.numpy_input_fn``.

Usage: ``python benchmarks/wide_scaling.py [--tf-python PATH] [--sizes 1e3,1e6,1e7]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

COLUMNS = 10
DISTINCT = 100_000


def write_rows(path: str, rows: int, seed: int = 0) -> None:
    """``rows`` rows of ten string columns (and a label), saved as ``.npz`` (no pickle)."""
    rng = np.random.default_rng(seed)
    data = {
        f"c{j}": np.char.add(f"c{j}_", rng.integers(0, DISTINCT, rows).astype(str))
        for j in range(COLUMNS)
    }
    data["label"] = (rng.uniform(size=rows) < 0.3).astype(np.int64)
    np.savez(path, **data)


def host_phase_rate(batch_size: int, count: int = 1_000_000) -> tuple[float, float]:
    """Strings/s through a hash bucket column's host op: per batch, and all at once."""
    from canned import feature_column as fc

    strings = np.array([f"user-{i}-{i * 7919 % 100_003}" for i in range(count)], dtype=object)
    op = fc.categorical_column_with_hash_bucket("s", 1_000_000).host_op
    start = time.perf_counter()
    for lo in range(0, count, batch_size):
        op.apply({"s": strings[lo : lo + batch_size]})
    per_batch = count / (time.perf_counter() - start)
    start = time.perf_counter()
    op.apply({"s": strings})
    return per_batch, count / (time.perf_counter() - start)


def ours(rows_path: str, buckets: int, warmup: int, steps: int, batch_size: int) -> dict:
    """Our LinearClassifier on the rows: steady steps/s, end-to-end seconds, peak RSS."""
    import canned
    import estimator as est
    from canned import feature_column as fc

    data = dict(np.load(rows_path))
    labels = data.pop("label")
    columns = [fc.categorical_column_with_hash_bucket(k, buckets) for k in sorted(data)]
    times = {}

    class Timer(est.SessionRunHook):
        def after_run(self, run_context, run_values):
            step = run_context.session.global_step
            if step in (warmup, warmup + steps):
                run_context.session.run("loss")  # waits for the step (dispatch is async)
                times[step] = time.perf_counter()

    config = est.RunConfig(compilation_cache_dir=None)
    model = canned.LinearClassifier(columns, tempfile.mkdtemp(prefix="wide_"), config=config)
    fn = est.inputs.numpy_input_fn(
        data, labels, batch_size=batch_size, num_epochs=None, shuffle=False
    )
    start = time.perf_counter()
    model.train(fn, steps=warmup + steps, hooks=[Timer()])
    total = time.perf_counter() - start
    return _result(steps / (times[warmup + steps] - times[warmup]), total)


def _result(steps_per_sec: float, seconds: float) -> dict:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {"steps_per_sec": steps_per_sec, "end_to_end_s": seconds, "peak_rss_gb": peak / 1e9}


def _child(python: str, script: str, *args) -> dict:
    out = subprocess.run(
        [python, script, *map(str, args)], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"{script} {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e3,1e6,1e7", help="buckets per column")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--tf-python", help="a Python with TF 2.15 + tensorflow-estimator")
    parser.add_argument("--child", nargs=2, metavar=("ROWS", "BUCKETS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = ours(args.child[0], int(args.child[1]), args.warmup, args.steps, args.batch_size)
        print(json.dumps(result))
        return
    per_batch, whole = host_phase_rate(args.batch_size)
    print(
        f"host phase, hash bucket column, 1,000,000 unique strings: {per_batch / 1e6:.1f} M/s "
        f"in batches of {args.batch_size}, {whole / 1e6:.1f} M/s over the whole array"
    )
    here = os.path.dirname(os.path.abspath(__file__))
    rows_path = os.path.join(tempfile.mkdtemp(prefix="wide_rows_"), "rows.npz")
    write_rows(rows_path, (args.warmup + args.steps + 10) * args.batch_size)
    print(
        f"{COLUMNS} hashed string columns ({DISTINCT:,} distinct values each), batch "
        f"{args.batch_size}, default RunConfig; steady = steps {args.warmup}..."
        f"{args.warmup + args.steps}; end to end = the whole train() incl. compiles"
    )
    header = f"{'buckets':>12} | {'ours steps/s':>12} {'e2e s':>7} {'RSS GB':>7}"
    if args.tf_python:
        header += f" | {'TF steps/s':>10} {'e2e s':>7} {'RSS GB':>7} | {'ratio':>6}"
    print(header)
    first = None
    for size in (int(float(s)) for s in args.sizes.split(",")):
        common = ("--warmup", args.warmup, "--steps", args.steps, "--batch-size", args.batch_size)
        mine = _child(sys.executable, __file__, *common, "--child", rows_path, size)
        first = first or mine["steps_per_sec"]
        line = (
            f"{size:>12,} | {mine['steps_per_sec']:>12.1f} {mine['end_to_end_s']:>7.1f} "
            f"{mine['peak_rss_gb']:>7.2f}"
        )
        if args.tf_python:
            theirs = _child(
                args.tf_python, os.path.join(here, "_tf_wide.py"), rows_path, size, *common[1::2]
            )
            ratio = mine["steps_per_sec"] / theirs["steps_per_sec"]
            line += (
                f" | {theirs['steps_per_sec']:>10.1f} {theirs['end_to_end_s']:>7.1f} "
                f"{theirs['peak_rss_gb']:>7.2f} | {ratio:>5.1f}x"
            )
        print(line + f"   (ours vs ours at the first size: {mine['steps_per_sec'] / first:.2f})")


if __name__ == "__main__":
    main()
