"""Load on ``python -m estimator.serve``: requests/s and p50/p99 latency under concurrency.

The census ``LinearClassifier`` (``examples/census.py``'s wide columns, trained
``--steps`` steps of batch 256 on adult.data; accuracy is irrelevant here) is exported
with the parsing receiver and served by ``python -m estimator.serve`` in a subprocess,
once without and once with ``--enable_batching`` (``--max_batch_size 64
--batch_timeout_micros 1000``). For 1, 8 and 64 concurrent clients and 1 and 32
adult.test rows per request, every client sends ``POST /v1/models/census:classify``
(``{"examples": [...]}``, 16 different bodies in turn) back to back on a keep-alive
connection for ``--seconds`` (closed loop), after 1 s of 64 clients as warm-up (which
compiles the batch sizes). Reported: requests/s over the run and p50/p99 of the request
latency as the client measures it (HTTP, JSON, server, the answer's bytes).

The load generator is ``wrk`` (Debian's ``wrk`` package: one C thread, epoll, so it takes
little of the 2 cores the server runs on) when it is on PATH; otherwise an asyncio
``httpx`` client in a separate process (``--client python`` forces it), which takes a
larger share of the CPU and lowers the server's numbers. The in-process row is the loaded
``serving_default`` signature called back to back in one thread with the same rows as
Python lists (calls/s; p50/p99 per call). The last lines compare the target of issue 12
(64 clients, batch 1: requests/s >= 0.5x the in-process calls/s; p99 <= 10 ms without
batching) with what was measured, and give the Little's-law bound on the p99 target: a
closed loop of 64 clients at mean latency L completes 64 / L requests/s, so p99 <= 10 ms
needs at least 6,400 requests/s.

Usage: ``python benchmarks/serving_load.py [--data-dir DIR] [--seconds 3] [--client
wrk|python]``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import httpx
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIENTS = (1, 8, 64)
ROWS = (1, 32)
PATH = "/v1/models/census:classify"


def export_census(data_dir: str, base: str, steps: int) -> tuple[str, dict]:
    import canned
    import estimator as est
    from canned import feature_column as fc

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(base_path: str, *flags) -> tuple[subprocess.Popen, str]:
    port, grpc_port = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "estimator.serve", "--model_name", "census",
         "--model_base_path", base_path, "--rest_api_port", str(port), "--port",
         str(grpc_port), "--host", "127.0.0.1",
         "--file_system_poll_wait_seconds", "0", *flags]
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            httpx.get(f"{url}/v1/models/census")
            return proc, url
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start") from None
            time.sleep(0.2)


# ----- load generators: each returns (requests/s, p50 ms, p99 ms) -------------------------
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}


def _lua(bodies: list[str]) -> str:
    """A wrk script sending the bodies in turn (one counter per wrk thread)."""
    items = ",\n".join(f"[==[{b}]==]" for b in bodies)
    return (
        f"local bodies = {{\n{items}\n}}\nlocal i = 0\n"
        'local headers = {["Content-Type"] = "application/json"}\n'
        "request = function()\n  i = i % #bodies + 1\n"
        f'  return wrk.format("POST", "{PATH}", headers, bodies[i])\nend\n'
    )


def load_wrk(url: str, bodies: list[str], clients: int, seconds: float, scratch: str):
    script = os.path.join(scratch, "bodies.lua")
    with open(script, "w") as f:
        f.write(_lua(bodies))
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{clients}",
            f"-d{max(1, round(seconds))}s",
            "--latency",
            "-s",
            script,
            url + PATH,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise RuntimeError(f"{errors.group(1)} requests failed:\n{out}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))

    def percentile(p: str) -> float:
        value, unit = re.search(rf"\b{p}%\s+([\d.]+)(us|ms|s|m)\b", out).groups()
        return float(value) * _UNITS[unit]

    return rate, percentile("50"), percentile("99")


async def _python_client(url: str, bodies: list[str], clients: int, seconds: float):
    times: list[float] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:
        stop = time.perf_counter() + seconds

        async def client(k: int) -> None:
            i = k
            while time.perf_counter() < stop:
                start = time.perf_counter()
                response = await http.post(PATH, content=bodies[i % len(bodies)], headers=headers)
                times.append(time.perf_counter() - start)
                response.raise_for_status()
                i += 1

        began = time.perf_counter()
        await asyncio.gather(*(client(k) for k in range(clients)))
        elapsed = time.perf_counter() - began
    p50, p99 = np.percentile(np.asarray(times) * 1e3, [50, 99])
    return len(times) / elapsed, float(p50), float(p99)


def load_python(url: str, bodies: list[str], clients: int, seconds: float, scratch: str):
    """The asyncio client in a process of its own (not the benchmark's, nor the server's)."""
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--client-process"],
        input=json.dumps([url, bodies, clients, seconds]),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return tuple(json.loads(out))


def row(label: str, rate: float, p50: float, p99: float) -> str:
    return f"| {label} | {rate:,.0f} | {p50:.2f} | {p99:.2f} |"


def in_process(path: str, test_x: dict, rows: int, seconds: float):
    import estimator as est

    signature = est.export.load(path).signatures["serving_default"]
    inputs = [columns_of(test_x, rows, i) for i in range(16)]
    signature(**inputs[0])
    began = time.perf_counter()
    times, stop, i = [], began + seconds, 0
    while time.perf_counter() < stop:
        start = time.perf_counter()
        signature(**inputs[i % 16])
        times.append(time.perf_counter() - start)
        i += 1
    p50, p99 = np.percentile(np.asarray(times) * 1e3, [50, 99])
    return len(times) / (time.perf_counter() - began), float(p50), float(p99)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.path.join(ROOT, "..", "shared", "data", "adult"))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--client", choices=("wrk", "python"), default=None)
    parser.add_argument("--client-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_process:
        url, bodies, clients, seconds = json.load(sys.stdin)
        print(json.dumps(asyncio.run(_python_client(url, bodies, clients, seconds))))
        return
    client = args.client or ("wrk" if shutil.which("wrk") else "python")
    load = load_wrk if client == "wrk" else load_python
    results = {}
    with tempfile.TemporaryDirectory() as base:
        path, test_x = export_census(args.data_dir, base, args.steps)
        print(f"load generator: {client}; {os.cpu_count()} CPUs; {args.seconds:g} s per row\n")
        print("| setting | requests/s | p50 ms | p99 ms |\n|---|---:|---:|---:|")
        for rows in ROWS:
            results["in-process", rows] = in_process(path, test_x, rows, args.seconds)
            print(row(f"in-process signature call, {rows} row(s)", *results["in-process", rows]))
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
                        json.dumps({"examples": [dict(zip(cols, values, strict=True)) for values
                                                 in zip(*cols.values(), strict=True)]})
                        for cols in (columns_of(test_x, rows, i) for i in range(16))
                    ]  # fmt: skip
                    load(url, bodies, 64, 1.0, base)  # warm-up: compiles the batch sizes seen
                    for clients in CLIENTS:
                        measured = load(url, bodies, clients, args.seconds, base)
                        results[batching, clients, rows] = measured
                        label = (
                            f"HTTP, batching {'on' if batching else 'off'}, {clients} "
                            f"client(s), {rows} row(s)"
                        )
                        print(row(label, *measured), flush=True)
            finally:
                proc.terminate()
                proc.wait()
    calls, call_p50, _ = results["in-process", 1]
    rate, _, p99 = results[False, 64, 1]
    best = max(results[b, 64, 1][0] for b in (False, True))
    cpus = os.cpu_count() or 1
    ceiling = cpus / call_p50 * 1e3  # calls/s if every CPU did nothing but in-process calls
    print(
        f"\n64 clients, 1 row: {rate:,.0f} requests/s without batching, {best:,.0f} at best = "
        f"{best / calls:.2f}x the in-process {calls:,.0f} calls/s (target >= 0.5x); p99 "
        f"without batching {p99:.1f} ms (target <= 10 ms).\nLittle's law: 64 clients in a "
        f"closed loop at p99 <= 10 ms need >= 6,400 requests/s, i.e. <= "
        f"{cpus / 6400 * 1e3:.2f} ms of CPU per request on {cpus} CPUs; one in-process call "
        f"alone takes {call_p50:.2f} ms (p50), so at most ~{ceiling:,.0f} calls/s fit even "
        f"without HTTP: mean latency >= 64 / {ceiling:,.0f} = {64 / ceiling * 1e3:.0f} ms."
    )


if __name__ == "__main__":
    main()
