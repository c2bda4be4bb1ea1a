"""Census (UCI Adult) from GZIP TFRecord files of ``tf.Example``: parse throughput and
training from files, with TF 2.15 reading the same files in the same run.

The script writes adult.data with all its columns (numbers as ``float_list``, strings as
``bytes_list``, the label as an int64 ``label``) to a GZIP TFRecord file with
``est.io.write_examples``, then measures:

* **parse**: examples/s of reading and parsing every column, best of ``--passes`` passes,
  batches of ``--parse-batch``: ours as ``est.inputs.tfrecord_input_fn`` yields them
  (reading, decompression, CRC checks and parsing in its background threads), and the
  same work on the calling thread alone (``read_records`` + ``parse_example``), and split
  into reading and parsing per record; TF's
  ``TFRecordDataset`` → ``batch`` → ``map(tf.io.parse_example, AUTOTUNE)`` → ``prefetch``.
* **train**: the canned ``LinearClassifier`` (the tutorial's wide columns) and
  ``DNNLinearCombinedClassifier`` (wide + deep columns), ``--epochs`` epochs at batch
  ``--batch-size``, from the file: ours end to end cold (a fresh Estimator with a cold
  compilation cache, compiles included), then ``--rounds`` paired rounds of steady
  ``train()`` calls (of Estimators that trained already) from the file and from memory
  (``numpy_input_fn``), which goes first alternating, with medians, spreads and the
  median ratio; the CPU µs per example of each phase from files on one thread (reading,
  parsing, the columns' host phase) beside the in-memory step's, and the rate they allow
  on 2 cores; TF's Estimator fed ``TFRecordDataset`` → ``shuffle(10000)`` → ``repeat`` →
  ``batch`` → ``map(parse_example)`` → ``prefetch`` (its recommended way): end to end, and
  steady (its steps after the 100th, timed by a hook).

It also times the reader's compiled loops (numba) in fresh processes: compiled with an
empty cache, then loaded from it.

With ``--tf-python`` (a Python with tensorflow 2.15 + tensorflow-estimator 2.15) TF's side
runs in a subprocess (``benchmarks/_tf_tfrecord.py``) and the ratios are printed.

Usage: ``python benchmarks/tfrecord_input.py [--model all] [--tf-python PATH]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np

import canned
import estimator as est
from canned import feature_column as fc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _census():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "census", os.path.join(ROOT, "examples", "census.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tf(args, *command) -> dict | None:
    if not args.tf_python:
        return None
    script = os.path.join(ROOT, "benchmarks", "_tf_tfrecord.py")
    out = subprocess.run(
        [args.tf_python, script, *map(str, command)], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def all_columns_spec(census) -> dict:
    spec = {
        name: est.io.FixedLenFeature([1], np.float32 if name in census.NUMERIC else str)
        for name in census.COLUMNS[:-1]
    }
    spec["label"] = est.io.FixedLenFeature([1], np.int64)
    return spec


def bench_parse(args, census, path: str) -> None:
    spec = all_columns_spec(census)
    threaded, alone = [], []
    for _ in range(args.passes):
        input_fn = est.inputs.tfrecord_input_fn(
            path, spec, batch_size=args.parse_batch, shuffle=False, compression_type="GZIP"
        )
        start, n = time.perf_counter(), 0
        for batch in input_fn():
            n += len(batch["label"])
        threaded.append(n / (time.perf_counter() - start))
        start, n, records = time.perf_counter(), 0, []
        for record in est.io.read_records(path, "GZIP"):
            records.append(record)
            if len(records) == args.parse_batch:
                n += len(est.io.parse_example(records, spec)["label"])
                records = []
        if records:
            n += len(est.io.parse_example(records, spec)["label"])
        alone.append(n / (time.perf_counter() - start))
    print(f"\nparse all {len(spec)} columns, batch {args.parse_batch}, best of {args.passes}:")
    print(f"  ours tfrecord_input_fn      {max(threaded):10,.0f} examples/s")
    print(f"  ours on the calling thread  {max(alone):10,.0f} examples/s")
    read_us, parse_us = _stages(args, path, spec)
    print(f"  per record on one thread: read (GZIP, frames, CRCs) {read_us:.2f} µs, parse "
          f"{parse_us:.2f} µs")  # fmt: skip
    theirs = _tf(args, "parse", path, args.parse_batch, args.passes)
    if theirs is not None:
        tf_rate = theirs["parse_examples_per_s"]
        print(f"  TF 2.15 tf.data             {tf_rate:10,.0f} examples/s")
        print(f"  ratio ours / TF: {max(threaded) / tf_rate:.2f} (calling thread alone "
              f"{max(alone) / tf_rate:.2f})")  # fmt: skip


def _stages(args, path: str, spec: dict) -> tuple[float, float]:
    """µs per record of reading alone and of parsing alone (``parse_example`` on batches of
    ``--parse-batch``), best of ``--passes``, on the calling thread."""
    read, parse = [], []
    for _ in range(args.passes):
        start = time.perf_counter()
        records = list(est.io.read_records(path, "GZIP"))
        read.append(time.perf_counter() - start)
        start = time.perf_counter()
        for lo in range(0, len(records), args.parse_batch):
            est.io.parse_example(records[lo : lo + args.parse_batch], spec)
        parse.append(time.perf_counter() - start)
    return min(read) / len(records) * 1e6, min(parse) / len(records) * 1e6


_COMPILE = """
import time
import estimator
t = time.perf_counter()
from estimator.io import _kernels
imported = time.perf_counter() - t
_kernels.warm()
print(imported, time.perf_counter() - t - imported)
"""


def bench_compile() -> None:
    """The TFRecord reader's compiled loops: compiled in a fresh process with an empty
    numba cache, then loaded from that cache in another."""
    cache = tempfile.mkdtemp(prefix="bench_numba_cache_")
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    print("\nthe reader's compiled loops (numba), each in a fresh process:")
    for what in ("compile (empty cache)", "load (cache filled)"):
        out = subprocess.run(
            [sys.executable, "-c", _COMPILE],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        print(f"  {what:22s} import numba and the module {float(out[0]):.2f} s, "
              f"all loops {float(out[1]):.2f} s")  # fmt: skip


def _model(census, kind: str, stats: dict):
    model_dir = tempfile.mkdtemp(prefix="bench_tfrecord_")
    config = est.RunConfig(tf_random_seed=0)
    if kind == "linear":
        return canned.LinearClassifier(census.wide_columns(), model_dir, config=config)
    return canned.DNNLinearCombinedClassifier(
        model_dir,
        linear_feature_columns=census.wide_columns(),
        dnn_feature_columns=census.deep_columns(stats),
        dnn_hidden_units=census.HIDDEN_UNITS,
        dnn_optimizer=canned.get_optimizer_instance("Adagrad", learning_rate=0.05),
        config=config,
    )


def _host_costs(args, path: str, spec: dict, model) -> dict[str, float]:
    """CPU µs per example of each phase of training from files, on one thread, best of
    ``--passes``: reading (decompression, framing, CRCs), parsing the columns' spec for the
    host phase, and the host phase (``map_rows``' function)."""
    from estimator.io._parse import parse_for_host_phase
    from estimator.io._records import Records
    from estimator.io.tfrecord import read_record_chunks

    transform = model.runtime.input_transform

    def best(fn):
        times = []
        for _ in range(args.passes):
            start = time.thread_time()
            out = fn()
            times.append(time.thread_time() - start)
        return min(times), out

    read, chunks = best(lambda: list(read_record_chunks(path, "GZIP")))
    block = Records.concat(chunks)
    n = len(block)
    blocks = [block.take(slice(lo, lo + 4096)) for lo in range(0, n, 4096)]
    parse, parsed = best(lambda: [parse_for_host_phase(b, spec) for b in blocks])

    def host():
        for features in parsed:
            features = dict(features)
            labels = features.pop("label")
            transform.apply(features, labels)

    phase, _ = best(host)
    return {"read": read / n * 1e6, "parse": parse / n * 1e6, "host phase": phase / n * 1e6}


def _steady(model, input_fn, n: int) -> tuple[float, float]:
    """examples/s of one ``train()`` of an Estimator that has trained already, and the
    process's CPU µs per example over it (all threads)."""
    cpu, start = time.process_time(), time.perf_counter()
    model.train(input_fn)
    return n / (time.perf_counter() - start), (time.process_time() - cpu) / n * 1e6


def bench_train(args, census, kind: str, path: str, train_x, labels) -> None:
    stats = census.numeric_stats(train_x)
    columns = census.wide_columns()
    if kind != "linear":
        columns += census.deep_columns(stats)
    spec = {**fc.make_parse_example_spec(columns), "label": est.io.FixedLenFeature([1], np.int64)}

    def from_files():
        return est.inputs.tfrecord_input_fn(
            path, spec, label_key="label", batch_size=args.batch_size, num_epochs=args.epochs,
            shuffle=True, compression_type="GZIP",
        )  # fmt: skip

    def in_memory():
        return est.inputs.numpy_input_fn(
            train_x, labels, batch_size=args.batch_size, num_epochs=args.epochs, shuffle=True
        )

    n = len(labels) * args.epochs
    model = _model(census, kind, stats)
    start = time.perf_counter()
    model.train(from_files())
    cold = time.perf_counter() - start
    memory_model = _model(census, kind, stats)
    memory_model.train(in_memory())
    files, memory = [], []
    for r in range(args.rounds):  # paired rounds, which goes first alternating
        pair = [(files, model, from_files), (memory, memory_model, in_memory)]
        for out, m, fn in pair if r % 2 == 0 else pair[::-1]:
            out.append(_steady(m, fn(), n))
    ratios = sorted(f[0] / m[0] for f, m in zip(files, memory, strict=True))

    def show(values):
        rates = sorted(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        return (
            f"{statistics.median(rates):9,.0f} examples/s ({rates[0]:,.0f}–{rates[-1]:,.0f}), "
            f"{cpu:.2f} CPU µs/example"
        )

    print(f"\ntrain {kind}, {args.epochs} epochs, batch {args.batch_size}, steady over "
          f"{args.rounds} paired rounds, median (min–max):")  # fmt: skip
    print(f"  ours from files (tfrecord_input_fn) {show(files)}")
    print(f"  ours in memory (numpy_input_fn)     {show(memory)}")
    print(f"  from files / in memory: {statistics.median(ratios):.2f} "
          f"({ratios[0]:.2f}–{ratios[-1]:.2f}); cold from files {n / cold:,.0f} examples/s "
          f"({cold:.2f} s)")  # fmt: skip
    costs = _host_costs(args, path, spec, model)
    step = statistics.median(v[1] for v in memory)
    total = sum(costs.values()) + step
    shown = ", ".join(f"{k} {v:.2f}" for k, v in costs.items())
    print(f"  CPU µs per example on one thread: {shown}; the in-memory step {step:.2f} (all "
          f"threads): {total:.2f} in all")  # fmt: skip
    # From files every phase is the work, on 2 cores at best (the phases in parallel: 2 /
    # total µs per example), against the in-memory rate measured (whose step may use more
    # than one core: 1 / step µs would overstate it), and never faster than in memory.
    in_memory = statistics.median(v[0] for v in memory)
    bound = min(1.0, 2e6 / total / in_memory)
    print(f"  2-core bound of from files / in memory: min(1, 2 / {total:.2f} µs / "
          f"{in_memory:,.0f} examples/s) = {bound:.2f}")  # fmt: skip
    theirs = _tf(args, "train", args.data_dir, path, kind, args.epochs, args.batch_size)
    if theirs is not None:
        print(f"  TF 2.15 end to end {theirs['train_examples_per_s']:9,.0f} examples/s "
              f"({theirs['train_s']:.2f} s); steady {theirs['steady_examples_per_s']:9,.0f} "
              "examples/s")  # fmt: skip
        tf_steady = theirs["steady_examples_per_s"]
        ours = statistics.median(v[0] for v in files)
        print(f"  ratios: ours steady / TF steady {ours / tf_steady:.2f}; "
              f"TF time / ours, end to end cold {theirs['train_s'] / cold:.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=os.path.join(ROOT, "data", "adult"))
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--parse-batch", type=int, default=512)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", choices=["linear", "wide_deep", "all", "none"], default="all")
    parser.add_argument("--tf-python", default=os.environ.get("TF_PYTHON"))
    args = parser.parse_args()
    os.environ["JAX_ESTIMATOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_xla_cache_")
    logging.getLogger("estimator").setLevel(logging.WARNING)
    census = _census()
    train_x, train_y = census.load(os.path.join(args.data_dir, "adult.data"))
    labels = (train_y == ">50K").astype(np.int64)
    path = os.path.join(tempfile.mkdtemp(prefix="bench_tfrecord_data_"), "adult.tfrecord.gz")
    start = time.perf_counter()
    est.io.write_examples(path, {**train_x, "label": labels}, compression_type="GZIP")
    print(
        f"jax {jax.__version__}, backend {jax.default_backend()}; wrote {len(labels)} examples "
        f"({os.path.getsize(path) / 1e6:.1f} MB GZIP) in {time.perf_counter() - start:.1f} s"
    )
    bench_compile()
    bench_parse(args, census, path)
    kinds = {"all": ["linear", "wide_deep"], "none": []}.get(args.model, [args.model])
    for kind in kinds:
        bench_train(args, census, kind, path, train_x, labels)


if __name__ == "__main__":
    main()
