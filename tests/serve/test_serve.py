"""``python -m estimator.serve``: TF Serving's REST API
over a real socket, with httpx, against a server in a subprocess; answers match
``estimator.export.load``; a new version is picked up without failing requests; bad
requests get 4xx with ``{"error": ...}``; SIGTERM ends the server cleanly.
"""

import base64
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

import canned
import estimator as est
from canned import feature_column as fc

pytestmark = pytest.mark.slow  # starts servers
COLORS = ["red", "green", "blue"]
ROWS = [{"size": 1.5, "color": "red"}, {"size": 4.0, "color": "blue"}]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A LinearClassifier exported with a parsing receiver into ``<base>/<version>/``."""
    root = tmp_path_factory.mktemp("serve")
    vocabulary = root / "colors.txt"
    vocabulary.write_text("\n".join(COLORS) + "\n")
    columns = [
        fc.numeric_column("size"),
        fc.categorical_column_with_vocabulary_file("color", str(vocabulary)),
    ]
    classifier = canned.LinearClassifier(
        columns, model_dir=str(root / "model"), config=est.RunConfig(tf_random_seed=0)
    )
    features = {
        "size": np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], np.float32),
        "color": np.array(["red", "green", "blue", "red", "blue", "green"], object),
    }
    classifier.train(
        est.inputs.numpy_input_fn(
            features, np.array([0, 1, 1, 0, 1, 1]), batch_size=3, num_epochs=2, shuffle=False
        )
    )
    receiver = est.export.build_parsing_serving_input_receiver_fn(
        fc.make_parse_example_spec(columns)
    )
    path = classifier.export_saved_model(str(root / "export"), receiver).decode()
    return os.path.dirname(path), os.path.basename(path)


def _start(base_path, *flags):
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "estimator.serve",
            "--model_name",
            "census",
            "--model_base_path",
            base_path,
            "--rest_api_port",
            str(port),
            "--port",
            str(_free_port()),
            "--host",
            "127.0.0.1",
            "--file_system_poll_wait_seconds",
            "0.2",
            "--max_request_bytes",
            "4096",
            *flags,
        ],
        stderr=subprocess.PIPE,
    )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
    deadline = time.monotonic() + 60
    while True:
        try:
            client.get("/v1/models/census")
            break
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(proc.stderr.read().decode()) from None
            time.sleep(0.2)
    return client, proc


@pytest.fixture(scope="module")
def server(base):
    client, proc = _start(base[0])
    yield client, proc
    if proc.poll() is None:
        proc.kill()
    client.close()


@pytest.fixture(scope="module")
def loaded(base):
    return est.export.load(os.path.join(*base))


def test_status_and_metadata(server, base):
    client, _ = server
    version = base[1]
    status = {
        "model_version_status": [
            {
                "version": version,
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
        ]
    }
    assert client.get("/v1/models/census").json() == status
    assert client.get(f"/v1/models/census/versions/{version}").json() == status
    meta = client.get("/v1/models/census/metadata").json()
    assert meta["model_spec"] == {"name": "census", "signature_name": "", "version": version}
    defs = meta["metadata"]["signature_def"]["signature_def"]
    assert {k: d["method_name"] for k, d in defs.items()} == {
        "serving_default": "tensorflow/serving/classify",
        "classification": "tensorflow/serving/classify",
        "regression": "tensorflow/serving/regress",
        "predict": "tensorflow/serving/predict",
    }
    assert set(defs["predict"]["inputs"]) == {"size", "color"}
    # TF Serving's TensorInfo JSON; [b, 2] with a symbolic batch -> sizes "-1", "2".
    assert defs["predict"]["outputs"]["probabilities"] == {
        "dtype": "DT_FLOAT",
        "tensor_shape": {
            "dim": [{"size": "-1", "name": ""}, {"size": "2", "name": ""}],
            "unknown_rank": False,
        },
        "name": "probabilities",
    }


def test_predict_rows_columnar_and_b64_match_the_loader(server, loaded):
    client, _ = server
    want = loaded.signatures["predict"](size=[1.5, 4.0], color=["red", "blue"])
    rows = client.post(
        "/v1/models/census:predict", json={"signature_name": "predict", "instances": ROWS}
    )
    assert rows.status_code == 200, rows.text
    predictions = rows.json()["predictions"]
    np.testing.assert_allclose(
        [p["probabilities"] for p in predictions], want["probabilities"], atol=1e-6
    )
    assert [p["classes"] for p in predictions] == [
        [c.decode() for c in row] for row in want["classes"]
    ]
    b64 = base64.b64encode(b"blue").decode()
    columnar = client.post(
        f"/v1/models/census/versions/{os.path.basename(loaded.path)}:predict",
        json={
            "signature_name": "predict",
            "inputs": {"size": [1.5, 4.0], "color": ["red", {"b64": b64}]},
        },
    )
    assert columnar.status_code == 200, columnar.text
    np.testing.assert_allclose(columnar.json()["outputs"]["logits"], want["logits"], atol=1e-6)


def test_predict_takes_serialized_tf_examples_as_b64(server, loaded):
    # TF Serving's form for a parsing signature: serialized tf.Example as {"b64": ...}.
    client, _ = server
    want = loaded.signatures["predict"](size=[1.5, 4.0], color=["red", "blue"])
    b64 = []
    for row in ROWS:
        example = est.io.protos.Example()
        example.features.feature["size"].float_list.value.append(row["size"])
        example.features.feature["color"].bytes_list.value.append(row["color"].encode())
        b64.append({"b64": base64.b64encode(example.SerializeToString()).decode()})
    response = client.post(
        "/v1/models/census:predict", json={"signature_name": "predict", "instances": b64}
    )
    assert response.status_code == 200, response.text
    np.testing.assert_allclose(
        [p["probabilities"] for p in response.json()["predictions"]],
        want["probabilities"],
        atol=1e-6,
    )


def test_classify_and_regress_examples(server, loaded):
    client, _ = server
    examples = {"examples": ROWS}
    classify = client.post("/v1/models/census:classify", json=examples)
    assert classify.status_code == 200, classify.text
    want = loaded.signatures["serving_default"](size=[1.5, 4.0], color=["red", "blue"])
    result = classify.json()["result"]
    assert [[c for c, _ in row] for row in result] == [["0", "1"], ["0", "1"]]
    np.testing.assert_allclose([[s for _, s in row] for row in result], want["scores"], atol=1e-6)
    regress = client.post(
        "/v1/models/census:regress", json={"signature_name": "regression", **examples}
    )
    assert regress.status_code == 200, regress.text
    want = loaded.signatures["regression"](size=[1.5, 4.0], color=["red", "blue"])
    np.testing.assert_allclose(regress.json()["result"], want["outputs"][:, 0], atol=1e-6)


BAD = [
    ("malformed JSON", "/v1/models/census:predict", b"{not json", 400, "JSON Parse error"),
    ("not an object", "/v1/models/census:predict", b"[1, 2]", 400, "must be a JSON object"),
    ("nested too deeply", "/v1/models/census:predict", b"[" * 3000, 400, "too deeply"),
    ("no instances", "/v1/models/census:predict", {"rows": ROWS}, 400, "Missing 'inputs'"),
    (
        "both formats",
        "/v1/models/census:predict",
        {"instances": ROWS, "inputs": {}},
        400,
        "either 'instances' or 'inputs'",
    ),
    (
        "wrong input key",
        "/v1/models/census:predict",
        {"signature_name": "predict", "instances": [{"sise": 1.0, "color": "red"}]},
        400,
        r"unexpected \['sise'\]",
    ),
    (
        "wrong type",
        "/v1/models/census:predict",
        {"signature_name": "predict", "instances": [{"size": "big", "color": "red"}]},
        400,
        "'size' must be float32",
    ),
    (
        "boolean for a float",  # JSON true is not 1.0
        "/v1/models/census:predict",
        {"signature_name": "predict", "instances": [{"size": True, "color": "red"}]},
        400,
        "'size' must be float32, got values of type bool",
    ),
    (
        "bad b64",
        "/v1/models/census:predict",
        {"signature_name": "predict", "instances": [{"size": 1.0, "color": {"b64": "%%"}}]},
        400,
        "Invalid base64",
    ),
    (
        "unknown signature",
        "/v1/models/census:predict",
        {"signature_name": "nope", "instances": ROWS},
        400,
        'signature name: "nope" not found',
    ),
    (
        "classify on predict",
        "/v1/models/census:classify",
        {"signature_name": "predict", "examples": ROWS},
        400,
        "method_name to be",
    ),
    (
        "examples not a list",
        "/v1/models/census:classify",
        {"examples": {"size": 1}},
        400,
        "non-empty list",
    ),
    (
        "unknown model",
        "/v1/models/other:predict",
        {"instances": ROWS},
        404,
        r"Servable not found for request: Latest\(other\)",
    ),
    (
        "unknown version",
        "/v1/models/census/versions/7:predict",
        {"instances": ROWS},
        404,
        r"Specific\(census, 7\)",
    ),
    ("unknown verb", "/v1/models/census:explain", {"instances": ROWS}, 404, "Unknown method"),
    (
        "oversized",
        "/v1/models/census:predict",
        {"instances": ROWS * 200},
        413,
        "exceeds the limit of 4096 bytes",
    ),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_requests_get_4xx_with_a_message(server, case):
    client, proc = server
    _, path, body, status, message = case
    if isinstance(body, bytes):
        response = client.post(path, content=body)
    else:
        response = client.post(path, json=body)
    assert response.status_code == status, response.text
    assert re.search(message, response.json()["error"]), response.json()
    assert proc.poll() is None
    assert client.get("/v1/models/census").status_code == 200


def test_new_version_is_served_without_failing_requests_then_sigterm(server, base):
    client, proc = server
    base_path, version = base
    new = str(int(version) + 1)

    def ask(_):
        return client.post("/v1/models/census:classify", json={"examples": ROWS}).status_code

    with ThreadPoolExecutor(4) as pool:
        pending = pool.map(ask, range(40))
        shutil.copytree(os.path.join(base_path, version), os.path.join(base_path, new))
        codes = list(pending)
        deadline = time.monotonic() + 30
        while client.get("/v1/models/census").json()["model_version_status"][0]["version"] != new:
            assert time.monotonic() < deadline, "new version not picked up"
            codes += list(pool.map(ask, range(4)))
    assert set(codes) == {200}
    assert client.get(f"/v1/models/census/versions/{version}").status_code == 404
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0


def test_batching_merges_concurrent_requests_and_isolates_a_bad_one(base, loaded):
    client, proc = _start(
        base[0], "--enable_batching", "--max_batch_size", "8", "--batch_timeout_micros", "50000"
    )
    try:
        sizes = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        bodies = [
            {"signature_name": "predict", "instances": [{"size": s, "color": "green"}]}
            for s in sizes
        ]
        bodies.append(
            {"signature_name": "predict", "instances": [{"size": "bad", "color": "green"}]}
        )
        with ThreadPoolExecutor(len(bodies)) as pool:
            answers = list(
                pool.map(lambda b: client.post("/v1/models/census:predict", json=b), bodies)
            )
        want = loaded.signatures["predict"](size=sizes, color=["green"] * 6)["logits"]
        got = [a.json()["predictions"][0]["logits"] for a in answers[:-1]]
        np.testing.assert_allclose(got, want, atol=1e-6)
        assert answers[-1].status_code == 400
        assert "'size' must be float32" in answers[-1].json()["error"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        client.close()


def _lines_until(lines: queue.Queue, seen: list, pattern: str, seconds: float = 60) -> str:
    """Reads the server's stderr lines into ``seen`` until one matches ``pattern``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            raise AssertionError(f"no line matching {pattern!r} in:\n" + "".join(seen)) from None
        seen.append(line)
        if re.search(pattern, line):
            return line


def test_the_server_logs_its_addresses_and_each_version_it_loads_or_unloads(base, tmp_path):
    """Run as ``python -m estimator.serve`` (no logging set up), the server prints TF
    Serving's lines: the version it loaded, then the gRPC and REST addresses once both
    listen; later, a version that fails to load with the reason (once, though it is tried at
    every poll), a new version loaded and the one it replaces unloaded."""
    base_path, version = str(tmp_path / "export"), int(base[1])
    shutil.copytree(os.path.join(*base), os.path.join(base_path, str(version)))
    port, rest_port = _free_port(), _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "estimator.serve", "--model_name", "census",
         "--model_base_path", base_path, "--port", str(port), "--rest_api_port",
         str(rest_port), "--host", "127.0.0.1", "--file_system_poll_wait_seconds", "0.1"],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()
    seen: list = []
    try:
        _lines_until(lines, seen, r"Exporting HTTP/REST API at:")
        startup = "".join(seen)
        order = [
            f"] Successfully loaded servable version {{name: census version: {version}}}\n",
            f"] Running gRPC ModelServer at 127.0.0.1:{port} ...\n",
            f"] Exporting HTTP/REST API at:127.0.0.1:{rest_port} ...\n",
        ]
        assert all(line in startup for line in order), startup
        assert [startup.index(line) for line in order] == sorted(startup.index(x) for x in order)
        with httpx.Client(base_url=f"http://127.0.0.1:{rest_port}") as client:
            assert client.get("/v1/models/census").status_code == 200  # up, as it said
        # A broken version: named, with the reason, once (it is retried at every poll).
        broken = os.path.join(base_path, str(version + 1))
        os.makedirs(broken)
        with open(os.path.join(broken, "manifest.json"), "w") as f:
            f.write("{not json")
        failed = _lines_until(lines, seen, r"failed")
        assert re.search(
            rf"E estimator\.serve\._models\] Loading servable: \{{name: census version: "
            rf"{version + 1}\}} failed: ValueError: .*manifest\.json",
            failed,
        ), failed
        time.sleep(0.5)  # five more polls
        # A new version arrives whole, as an export does (written aside, then renamed): a
        # copy made in place would be seen half-written at a poll.
        staged = str(tmp_path / "staged")
        shutil.copytree(os.path.join(*base), staged)
        os.rename(staged, os.path.join(base_path, str(version + 2)))
        _lines_until(lines, seen, r"Unloading servable version")
        later = "".join(seen[len(startup.splitlines()) :])
        assert later.count(" failed: ") == 1, later
        assert (
            f"Successfully loaded servable version {{name: census version: {version + 2}}}" in later
        ), later
        assert f"Unloading servable version {{name: census version: {version}}}" in later
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
