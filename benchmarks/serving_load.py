"""Load on ``python -m estimator.serve``, REST and gRPC: requests/s, mean/p50/p99 latency.

The census ``LinearClassifier`` (``examples/census.py``'s wide columns, trained
``--steps`` steps of batch 256 on adult.data; accuracy is irrelevant here) is exported
with the parsing receiver and served by ``python -m estimator.serve`` in a subprocess
(REST on ``--rest_api_port``, gRPC on ``--port``, one process), once without and once with
``--enable_batching`` (``--max_batch_size 64 --batch_timeout_micros 1000``). For 1, 8 and 64
concurrent clients and 1 and 32 adult.test rows per request, every client sends requests back
to back on its own connection for ``--seconds`` (closed loop), after a warm-up at the same
concurrency (1-s runs until requests/s stops rising: the batch sizes compile first): REST
``POST /v1/models/census:classify`` (``{"examples": [...]}``, 16 different bodies in turn), gRPC
``tensorflow.serving.PredictionService/Classify`` (a ``ClassificationRequest`` of the same
rows as ``tf.Example``s, one body). Reported: requests/s over the run and the mean, p50 and
p99 of the request latency as the client measures it (protocol, parsing, server, the
answer's bytes).

Load generators (C programs with one thread, so they take little of the 2 cores the server
runs on): ``wrk`` for REST and ``h2load`` (nghttp2's HTTP/2 load tester; Debian's
``wrk`` and ``nghttp2-client`` packages) for gRPC, which sends the gRPC-framed request over
HTTP/2 with TF Serving's path and headers (its log gives each request's latency; the script
first checks that the server answers the body with grpc-status 0). Without them the script
uses asyncio clients (``httpx``, ``grpc.aio``) in a separate process (``--client python``
forces it), which take a larger share of the CPU and lower the server's numbers. The
in-process row is the loaded ``serving_default`` signature called back to back in one thread
with the same rows as Python lists (calls/s; latency per call).

The last lines compare the targets with what was measured, for each protocol: at 64
clients, one row per request, batching off, requests/s >= 0.5x the in-process calls/s and
p99 <= 2.5x the mean latency (a tail, not starvation: a closed loop of 64 clients at
throughput X has a mean latency of about 64 / X); with batching on, requests/s >= 3x
batching off.

Usage: ``python benchmarks/serving_load.py [--data-dir DIR] [--seconds 3] [--client
native|python] [--protocols rest,grpc]``.
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


def start_server(base_path: str, *flags) -> tuple[subprocess.Popen, str, str]:
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
            return proc, url, f"127.0.0.1:{grpc_port}"
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start") from None
            time.sleep(0.2)


# ----- load generators: each returns (requests/s, mean ms, p50 ms, p99 ms) ---------------
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}
GRPC_PATH = "/tensorflow.serving.PredictionService/Classify"


def _summary(times_ms, elapsed: float) -> tuple[float, float, float, float]:
    times = np.asarray(times_ms, dtype=np.float64)
    p50, p99 = np.percentile(times, [50, 99])
    return len(times) / elapsed, float(times.mean()), float(p50), float(p99)


def _lua(bodies: list[str]) -> str:
    """A wrk script sending the bodies in turn (one counter per wrk thread)."""
    items = ",\n".join(f"[==[{b}]==]" for b in bodies)
    return (
        f"local bodies = {{\n{items}\n}}\nlocal i = 0\n"
        'local headers = {["Content-Type"] = "application/json"}\n'
        "request = function()\n  i = i % #bodies + 1\n"
        f'  return wrk.format("POST", "{PATH}", headers, bodies[i])\nend\n'
    )


def load_wrk(url: str, bodies: list, clients: int, seconds: float, scratch: str):
    script = os.path.join(scratch, "bodies.lua")
    with open(script, "w") as f:
        f.write(_lua(bodies))
    out = subprocess.run(
        ["wrk", "-t1", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--latency", "-s",
         script, url + PATH],
        capture_output=True,
        text=True,
        check=True,
    ).stdout  # fmt: skip
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise RuntimeError(f"{errors.group(1)} requests failed:\n{out}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))

    def value(pattern: str) -> float:
        number, unit = re.search(pattern + r"\s+([\d.]+)(us|ms|s|m)\b", out).groups()
        return float(number) * _UNITS[unit]

    return rate, value(r"Latency"), value(r"\b50%"), value(r"\b99%")


def load_h2load(url: str, bodies: list, clients: int, seconds: float, scratch: str):
    """h2load on the gRPC port: one gRPC-framed body, ``clients`` connections of one stream."""
    body, log = os.path.join(scratch, "grpc.bin"), os.path.join(scratch, "h2load.log")
    with open(body, "wb") as f:
        f.write(bodies[0])
    if os.path.exists(log):
        os.remove(log)  # h2load appends to its log
    out = subprocess.run(
        ["h2load", "-t1", f"-c{clients}", "-m1", f"-D{max(1, round(seconds))}", "-d", body,
         "-H", "content-type: application/grpc", "-H", "te: trailers", f"--log-file={log}",
         url + GRPC_PATH],
        capture_output=True,
        text=True,
        check=True,
    ).stdout  # fmt: skip
    done = re.search(r"requests: .* (\d+) succeeded, (\d+) failed, (\d+) errored", out)
    if done is None or int(done.group(2)) or int(done.group(3)):
        raise RuntimeError(f"h2load reported failures:\n{out}")
    with open(log) as f:
        entries = [line.split("\t") for line in f if line.strip()]
    starts = [int(e[0]) for e in entries]
    ends = [int(e[0]) + int(e[2]) for e in entries]
    elapsed = (max(ends) - min(starts)) / 1e6
    return _summary([int(e[2]) / 1e3 for e in entries], elapsed)


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
                times.append((time.perf_counter() - start) * 1e3)
                response.raise_for_status()
                i += 1

        began = time.perf_counter()
        await asyncio.gather(*(client(k) for k in range(clients)))
        return _summary(times, time.perf_counter() - began)


async def _python_grpc_client(address: str, body: bytes, clients: int, seconds: float):
    import grpc

    times: list[float] = []
    channels = [grpc.aio.insecure_channel(address) for _ in range(clients)]
    stop = time.perf_counter() + seconds

    async def client(channel) -> None:
        call = channel.unary_unary(GRPC_PATH)
        while time.perf_counter() < stop:
            start = time.perf_counter()
            await call(body, timeout=60)
            times.append((time.perf_counter() - start) * 1e3)

    began = time.perf_counter()
    await asyncio.gather(*(client(c) for c in channels))
    elapsed = time.perf_counter() - began
    for channel in channels:
        await channel.close()
    return _summary(times, elapsed)


def _client_process(kind: str, url: str, bodies: list, clients: int, seconds: float):
    """An asyncio client in a process of its own (not the benchmark's, nor the server's)."""
    payload = [kind, url, [b.hex() if isinstance(b, bytes) else b for b in bodies], clients]
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--client-process"],
        input=json.dumps([*payload, seconds]),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return tuple(json.loads(out))


def load_python(url: str, bodies: list, clients: int, seconds: float, scratch: str):
    return _client_process("rest", url, bodies, clients, seconds)


def load_python_grpc(url: str, bodies: list, clients: int, seconds: float, scratch: str):
    return _client_process("grpc", url, bodies, clients, seconds)


def row(label: str, rate: float, mean: float, p50: float, p99: float) -> str:
    return f"| {label} | {rate:,.0f} | {mean:.2f} | {p50:.2f} | {p99:.2f} |"


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
        times.append((time.perf_counter() - start) * 1e3)
        i += 1
    return _summary(times, time.perf_counter() - began)


def rest_bodies(test_x: dict, rows: int) -> list[str]:
    return [
        json.dumps({"examples": [dict(zip(cols, values, strict=True)) for values
                                 in zip(*cols.values(), strict=True)]})
        for cols in (columns_of(test_x, rows, i) for i in range(16))
    ]  # fmt: skip


def grpc_body(test_x: dict, rows: int) -> bytes:
    """A gRPC-framed ``ClassificationRequest`` of ``rows`` rows (flag 0, length, message)."""
    from estimator.serve._protos import messages

    request = messages.ClassificationRequest()
    request.model_spec.name = "census"
    cols = columns_of(test_x, rows, 0)
    for values in zip(*cols.values(), strict=True):
        features = request.input.example_list.examples.add().features.feature
        for key, value in zip(cols, values, strict=True):
            if isinstance(value, str):
                features[key].bytes_list.value.append(value.encode())
            else:
                features[key].float_list.value.append(value)
    data = request.SerializeToString()
    return b"\0" + len(data).to_bytes(4, "big") + data


def check_grpc(address: str, body: bytes) -> None:
    """One call through a gRPC client: h2load cannot see a gRPC error (HTTP 200, trailers)."""
    import grpc

    with grpc.insecure_channel(address) as channel:
        answer = channel.unary_unary(GRPC_PATH)(body[5:], timeout=60)
    from estimator.serve._protos import messages

    result = messages.ClassificationResponse.FromString(answer).result
    assert len(result.classifications) >= 1, result


def warm_up(load, target, bodies: list, clients: int, scratch: str) -> None:
    """1-s runs until requests/s stops rising (by 20%, 8 runs at most): the batch sizes the
    clients bring compile before the measurement (each new size compiles once, seconds on a
    busy machine)."""
    previous = 0.0
    for _ in range(8):
        rate = load(target, bodies, clients, 1.0, scratch)[0]
        if rate > 0 and rate < 1.2 * previous:
            return
        previous = rate


def verdicts(label: str, results: dict, calls: float) -> str:
    rate, mean, _, p99 = results[False, 64, 1]
    batched = results[True, 64, 1][0]
    ok = {True: "met", False: "MISSED"}
    return (
        f"{label}, 64 clients, 1 row: batching off {rate:,.0f} requests/s = "
        f"{rate / calls:.2f}x the in-process {calls:,.0f} calls/s (target >= 0.5x: "
        f"{ok[rate >= 0.5 * calls]}); p99 {p99:.1f} ms = {p99 / mean:.2f}x the mean "
        f"{mean:.1f} ms (target <= 2.5x: {ok[p99 <= 2.5 * mean]}); batching on "
        f"{batched:,.0f} requests/s = {batched / rate:.2f}x batching off (target >= 3x: "
        f"{ok[batched >= 3 * rate]})."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.path.join(ROOT, "data", "adult"))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--client", choices=("native", "python"), default=None)
    parser.add_argument("--protocols", default="rest,grpc")
    parser.add_argument("--client-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_process:
        kind, url, bodies, clients, seconds = json.load(sys.stdin)
        if kind == "rest":
            result = asyncio.run(_python_client(url, bodies, clients, seconds))
        else:
            body = bytes.fromhex(bodies[0])[5:]
            result = asyncio.run(_python_grpc_client(url, body, clients, seconds))
        print(json.dumps(result))
        return
    protocols = args.protocols.split(",")
    native = args.client != "python"
    loaders = {
        "rest": load_wrk if native and shutil.which("wrk") else load_python,
        "grpc": load_h2load if native and shutil.which("h2load") else load_python_grpc,
    }
    names = {load_wrk: "wrk", load_python: "httpx (asyncio)", load_h2load: "h2load",
             load_python_grpc: "grpc.aio"}  # fmt: skip
    results: dict = {p: {} for p in protocols}
    with tempfile.TemporaryDirectory() as base:
        path, test_x = export_census(args.data_dir, base, args.steps)
        generators = ", ".join(f"{p}: {names[loaders[p]]}" for p in protocols)
        print(f"load generators: {generators}; {os.cpu_count()} CPUs; {args.seconds:g} s a row\n")
        print("| setting | requests/s | mean ms | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|")
        in_proc = {}
        for rows in ROWS:
            in_proc[rows] = in_process(path, test_x, rows, args.seconds)
            print(row(f"in-process signature call, {rows} row(s)", *in_proc[rows]), flush=True)
        for batching in (False, True):
            flags = (
                ("--enable_batching", "--max_batch_size", "64", "--batch_timeout_micros", "1000")
                if batching
                else ()
            )
            proc, url, grpc_address = start_server(os.path.dirname(path), *flags)
            try:
                for protocol in protocols:
                    for rows in ROWS:
                        if protocol == "rest":
                            target, bodies = url, rest_bodies(test_x, rows)
                        else:
                            bodies = [grpc_body(test_x, rows)]
                            check_grpc(grpc_address, bodies[0])
                            target = (
                                f"http://{grpc_address}"
                                if loaders["grpc"] is load_h2load
                                else grpc_address
                            )
                        load = loaders[protocol]
                        for clients in CLIENTS:
                            warm_up(load, target, bodies, clients, base)
                        for clients in CLIENTS:
                            measured = load(target, bodies, clients, args.seconds, base)
                            results[protocol][batching, clients, rows] = measured
                            label = (
                                f"{'REST' if protocol == 'rest' else 'gRPC'}, batching "
                                f"{'on' if batching else 'off'}, {clients} client(s), {rows} "
                                "row(s)"
                            )
                            print(row(label, *measured), flush=True)
            finally:
                proc.terminate()
                proc.wait()
    print()
    for protocol in protocols:
        label = "REST" if protocol == "rest" else "gRPC"
        print(verdicts(label, results[protocol], in_proc[1][0]))


if __name__ == "__main__":
    main()
