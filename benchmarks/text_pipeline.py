"""TF 1 CSV pipelines under ``estimator.compat.v1`` against TensorFlow 2.15, on UCI Adult.

The pipelines (``benchmarks/_text_pipelines.py``, one source for both sides)::

    TextLineDataset(path).map(parse_csv, num_parallel_calls=AUTOTUNE).batch(256).prefetch(AUTOTUNE)
    TextLineDataset(path).batch(256).map(parse_csv, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)

where ``parse_csv`` is ``tf.io.decode_csv`` of the 15 columns into a features dict and
``tf.equal(label, " >50K")``: TF run its recommended way (``AUTOTUNE`` and ``prefetch``),
iterated as eager tensors; ours iterated with ``as_numpy_iterator()`` (what the Estimator
reads). Both read the same file (adult.data without its empty line, which TF's
``decode_csv`` refuses).

Each side runs in a fresh process per round, the two alternating (which goes first
alternates too), so both see the same machine; each process warms up with one pass, then
times ``--passes`` passes. Printed: per order, the median and the spread (min–max) of
examples/s over the rounds, and the median of the per-round ratios ours / TF. On a machine
shared with other work the spreads say how much to trust the medians.

Usage: ``python benchmarks/text_pipeline.py [--rounds 5] [--tf-python /work/tf215/bin/python]``.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIDES = os.path.join(ROOT, "benchmarks", "_text_pipelines.py")
ORDERS = ("map_then_batch", "batch_then_map")
DATA_DIRS = [os.path.join(ROOT, "data", "adult")]


def adult_lines(data_dir: str | None) -> bytes:
    """adult.data (or adult.data.gz) from the first directory that has it."""
    for directory in [data_dir] if data_dir else DATA_DIRS:
        for name, read in (("adult.data", open), ("adult.data.gz", gzip.open)):
            path = os.path.join(directory, name)
            if os.path.exists(path):
                with read(path, "rb") as f:
                    return f.read()
    raise SystemExit(f"adult.data not found in {data_dir or DATA_DIRS}; pass --data-dir.")


def run(python: str, side: str, path: str, args) -> dict:
    env = {**os.environ, "PYTHONPATH": ROOT}
    command = [python, SIDES, side, path, str(args.batch_size), str(args.passes)]
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    default_tf = "/work/tf215/bin/python"
    parser.add_argument(
        "--tf-python",
        default=os.environ.get("TF_PYTHON", default_tf if os.path.exists(default_tf) else None),
        help="a Python with tensorflow 2.15 (default $TF_PYTHON or /work/tf215/bin/python)",
    )
    args = parser.parse_args()
    lines = [line for line in adult_lines(args.data_dir).split(b"\n") if line.strip()]
    path = os.path.join(tempfile.mkdtemp(prefix="text_pipeline_"), "adult.csv")
    with open(path, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    print(
        f"{datetime.date.today()}, {platform.node()} ({os.cpu_count()} CPUs), "
        f"{len(lines)} lines of UCI Adult, batch {args.batch_size}, {args.rounds} paired "
        f"rounds of {args.passes} timed passes"
    )
    sides = [("ours", sys.executable)] + ([("tf", args.tf_python)] if args.tf_python else [])
    results: dict[str, list[dict]] = {side: [] for side, _ in sides}
    for r in range(args.rounds):
        for side, python in sides if r % 2 == 0 else sides[::-1]:
            results[side].append(run(python, side, path, args))
        shown = "  ".join(
            f"{side} " + " ".join(f"{results[side][-1][o]:,.0f}" for o in ORDERS)
            for side, _ in sides
        )
        print(f"  round {r + 1}: {shown}")
    print("\nexamples/s, median (min–max) over rounds:")
    for order in ORDERS:
        row = f"  {order:15s}"
        for side, _ in sides:
            values = [x[order] for x in results[side]]
            spread = f"{min(values):,.0f}–{max(values):,.0f}"
            row += f"  {side} {statistics.median(values):10,.0f} ({spread})"
        if args.tf_python:
            ratios = [
                o[order] / t[order] for o, t in zip(results["ours"], results["tf"], strict=True)
            ]
            row += (
                f"  ours/TF {statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})"
            )
        print(row)
    if args.tf_python:
        print(f"TF side: {results['tf'][0]['version']} ({args.tf_python})")


if __name__ == "__main__":
    main()
