"""Load on ``python -m estimator.serve``: requests/s and p50/p99 latency under concurrency.

The census ``LinearClassifier`` (``examples/census.py``'s wide columns, trained
``--steps`` steps of batch 256 on adult.data; accuracy is irrelevant here) is exported
with the parsing receiver and served by ``python -m estimator.serve`` in a subprocess,
once without and once with ``--enable_batching`` (``--max_batch_size 64
--batch_timeout_micros 1000``). For 1, 8 and 64 concurrent clients (threads, one
keep-alive ``httpx.Client`` each) and 1 and 32 adult.test rows per request, every client
sends ``POST /v1/models/census:classify`` (``{"examples": [...]}``) back to back for
``--seconds`` (after 1 s of 64 clients as warm-up, which compiles the batch sizes);
reported: requests/s over the run and p50/p99 of each request's wall time
(JSON encoding, HTTP, server, decoding). The clients run on the same machine as the
server, so they compete for its cores. The in-process row is the loaded
``serving_default`` signature called back to back in one thread with the same rows as
Python lists (calls/s; p50/p99 per call).

Usage: ``python benchmarks/serving_load.py [--data-dir DIR] [--seconds 3]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

import httpx
import numpy as np

import canned
import estimator as est
from canned import feature_column as fc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIENTS = (1, 8, 64)
ROWS = (1, 32)


def export_census(data_dir: str, base: str, steps: int) -> tuple[str, dict]:
    spec = importlib.util.spec_from_file_location(
        "census", os.path.join(ROOT, "examples", "census.py")
    )
    census = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(census)
    train_x, train_y = census.load(os.path.join(data_dir, "adult.data"))
    test_x, _ = census.load(os.path.join(data_dir, "adult.test"))
    columns = census.wide_columns()
    model = canned.LinearClassifier(
        feature_columns=columns,
        model_dir=os.path.join(base, "model"),
        label_vocabulary=census.LABELS,
        config=est.RunConfig(tf_random_seed=0),
    )
    model.train(
        est.inputs.numpy_input_fn(train_x, train_y, batch_size=256, num_epochs=None, shuffle=True),
        steps=steps,
    )
    parse = fc.make_parse_example_spec(columns)
    receiver = est.export.build_parsing_serving_input_receiver_fn(parse)
    path = model.export_saved_model(os.path.join(base, "export"), receiver).decode()
    return path, {name: test_x[name] for name in parse}


def columns_of(test_x: dict, rows: int, i: int) -> dict:
    n = len(next(iter(test_x.values())))
    return {k: v[(i * rows) % (n - rows) :][:rows].tolist() for k, v in test_x.items()}


def start_server(base_path: str, *flags) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "estimator.serve", "--model_name", "census",
         "--model_base_path", base_path, "--port", str(port), "--host", "127.0.0.1",
         "--file_system_poll_wait_seconds", "0", *flags]
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    while True:
        try:
            httpx.get(f"{url}/v1/models/census")
            return proc, url
        except httpx.TransportError:
            time.sleep(0.2)


def load(url: str, bodies: list, clients: int, seconds: float) -> tuple[float, list]:
    times: list[float] = []
    stop = time.perf_counter() + seconds

    def client(k: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            i = k
            while time.perf_counter() < stop:
                start = time.perf_counter()
                response = http.post("/v1/models/census:classify", json=bodies[i % len(bodies)])
                times.append(time.perf_counter() - start)
                response.raise_for_status()
                i += 1

    began = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(times) / (time.perf_counter() - began), times


def row(label: str, rate: float, times: list) -> str:
    p50, p99 = np.percentile(np.asarray(times) * 1e3, [50, 99])
    return f"| {label} | {rate:,.0f} | {p50:.2f} | {p99:.2f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.path.join(ROOT, "..", "shared", "data", "adult"))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as base:
        path, test_x = export_census(args.data_dir, base, args.steps)
        print("| setting | requests/s | p50 ms | p99 ms |\n|---|---:|---:|---:|")
        signature = est.export.load(path).signatures["serving_default"]
        for rows in ROWS:
            inputs = [columns_of(test_x, rows, i) for i in range(16)]
            signature(**inputs[0])
            times, stop, i = [], time.perf_counter() + args.seconds, 0
            while time.perf_counter() < stop:
                start = time.perf_counter()
                signature(**inputs[i % 16])
                times.append(time.perf_counter() - start)
                i += 1
            print(row(f"in-process signature call, {rows} row(s)", len(times) / args.seconds,
                      times))  # fmt: skip
        for batching in (False, True):
            flags = (
                ("--enable_batching", "--max_batch_size", "64", "--batch_timeout_micros", "1000")
                if batching
                else ()
            )
            proc, url = start_server(os.path.dirname(path), *flags)
            try:
                for rows in ROWS:
                    bodies = [
                        {"examples": [dict(zip(cols, values, strict=True)) for values in
                                      zip(*cols.values(), strict=True)]}
                        for cols in (columns_of(test_x, rows, i) for i in range(16))
                    ]  # fmt: skip
                    load(url, bodies, 64, 1.0)  # warm-up: compiles the batch sizes seen
                    for clients in CLIENTS:
                        rate, times = load(url, bodies, clients, args.seconds)
                        label = (
                            f"HTTP, batching {'on' if batching else 'off'}, {clients} "
                            f"client(s), {rows} row(s)"
                        )
                        print(row(label, rate, times), flush=True)
            finally:
                proc.terminate()
                proc.wait()


if __name__ == "__main__":
    main()
