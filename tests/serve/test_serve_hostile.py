"""Hostile and malformed requests to ``python -m estimator.serve``, over REST and gRPC: each is
answered with a 4xx or a client-side gRPC code (never a 5xx, INTERNAL or UNKNOWN), before
anything large is allocated for it, and the server answers a good request right after.

Named cases first (non-finite outputs written as TF Serving's ``NaN``/``Infinity`` tokens,
huge integers, lone surrogates, deep nesting, ``TensorProto``s of rank 65, of more elements
than int64 counts, of a huge declared shape and no values, lists that pad to more than
``--max_request_tensor_bytes``, an error message longer than gRPC's metadata limit), then
Hypothesis throws generated JSON bodies, ``TensorProto``s and raw messages at both APIs.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time

import grpc
import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import canned
import estimator as est
from canned import feature_column as fc
from estimator.serve._app import _JSON
from estimator.serve._protos import messages

pytestmark = pytest.mark.slow  # trains a model and starts a server
LIMIT = 1 << 20  # --max_request_tensor_bytes of the server under test
DT_FLOAT, DT_STRING, DT_INT64 = 1, 7, 9  # types.proto's numbers
# Random examples on a developer's machine (they find new cases); a fixed sequence in CI.
SETTINGS = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "60")),
    derandomize=bool(os.environ.get("CI")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
GOOD_ROW = {"size": 2.0, "color": "red", "tags": ["a"]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _export(root) -> str:
    """A LinearClassifier (a number, a string, a list of strings) exported with a parsing
    receiver: Predict, Classify and Regress signatures; ``size`` is ``[None, 1]``."""
    columns = [
        fc.numeric_column("size"),
        fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"]),
        fc.categorical_column_with_vocabulary_list("tags", ["a", "b", "c"]),
    ]
    classifier = canned.LinearClassifier(
        columns, model_dir=str(root / "model"), config=est.RunConfig(tf_random_seed=0)
    )
    features = {
        "size": np.array([1.0, 2.0, 3.0, 4.0], np.float32),
        "color": np.array(["red", "green", "blue", "red"], object),
        "tags": np.array([["a", "b"], ["c", ""], ["", ""], ["b", ""]], object),
    }
    classifier.train(
        est.inputs.numpy_input_fn(features, np.array([0, 1, 1, 0]), batch_size=4, shuffle=False)
    )
    spec = fc.make_parse_example_spec(columns)
    spec["color"] = est.io.FixedLenFeature([1], str, default_value="green")
    receiver = est.export.build_parsing_serving_input_receiver_fn(spec)
    return classifier.export_saved_model(str(root / "export"), receiver).decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    export = _export(root)
    port, rest_port = _free_port(), _free_port()
    log = open(root / "server.log", "w+")  # noqa: SIM115 (read at the end)
    proc = subprocess.Popen(
        [sys.executable, "-m", "estimator.serve", "--model_name", "m", "--model_base_path",
         os.path.dirname(export), "--port", str(port), "--rest_api_port", str(rest_port),
         "--host", "127.0.0.1", "--file_system_poll_wait_seconds", "0",
         "--max_request_tensor_bytes", str(LIMIT)],
        stderr=log,
    )  # fmt: skip
    rest = httpx.Client(base_url=f"http://127.0.0.1:{rest_port}", timeout=60)
    deadline = time.monotonic() + 120
    while True:
        try:
            rest.get("/v1/models/m")
            break
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                log.seek(0)
                raise RuntimeError(log.read()[-5000:]) from None
            time.sleep(0.2)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield {"rest": rest, "channel": channel, "proc": proc, "log": log}
    channel.close()
    rest.close()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    log.close()


def _rss_peak(pid: int) -> int:
    """The process's peak resident memory (``VmHWM``), in bytes."""
    with open(f"/proc/{pid}/status") as f:
        (line,) = [row for row in f if row.startswith("VmHWM:")]
    return int(line.split()[1]) * 1024


# ----- REST -----------------------------------------------------------------------------------
def _post(server, path: str, body: bytes) -> httpx.Response:
    return server["rest"].post(path, content=body, headers={"content-type": "application/json"})


def _rest_answers_a_good_request(server) -> None:
    good = json.dumps({"signature_name": "predict", "instances": [GOOD_ROW]}).encode()
    response = _post(server, "/v1/models/m:predict", good)
    assert response.status_code == 200, response.text
    assert server["proc"].poll() is None


def _rest_refuses(server, path: str, body: bytes) -> httpx.Response:
    response = _post(server, path, body)
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:2000])
    response.content.decode("utf-8")  # valid UTF-8 whatever the request held
    assert isinstance(response.json()["error"], str)
    _rest_answers_a_good_request(server)
    return response


def test_non_finite_outputs_are_written_as_tf_servings_tokens(server):
    # size NaN makes every logit, probability and score NaN.
    body = b'{"signature_name": "predict", "instances": [{"size": NaN, "color": "red"}]}'
    response = _post(server, "/v1/models/m:predict", body)
    assert response.status_code == 200, response.text
    assert '"logits":[NaN]' in response.text
    assert math.isnan(response.json()["predictions"][0]["logits"][0])  # Python's json reads it
    classify = _post(server, "/v1/models/m:classify", b'{"examples": [{"size": NaN}]}')
    assert classify.status_code == 200, classify.text
    assert all(math.isnan(score) for _, score in classify.json()["result"][0])
    # The infinities (which this model's outputs never are) as TF Serving writes them too.
    written = _JSON({"x": [float("inf"), -float("inf"), float("nan"), 1.5]}).body
    assert written == b'{"x":[Infinity,-Infinity,NaN,1.5]}'


REST_CASES = [
    # (id, path, body, status, message regex)
    ("5,001-digit integer", "/v1/models/m:predict",
     b'{"instances": [{"size": ' + b"9" * 5001 + b'}]}', 400,
     r"^JSON Parse error: Exceeds the limit \(4300 digits\)"),
    ("lone surrogate echoed", "/v1/models/m:predict",
     b'{"signature_name": "\\ud800x", "instances": [{"size": 1.0}]}', 400,
     r'^Serving signature name: "\\ud800x" not found'),
    ("invalid UTF-8", "/v1/models/m:predict", b'{"instances": ["\xff\xfe"]}', 400,
     r"^JSON Parse error: 'utf-8' codec can't decode"),
    ("deep nesting", "/v1/models/m:predict",
     b'{"instances": ' + b"[" * 900 + b"1" + b"]" * 900 + b"}", 400, r"."),
    ("deeper nesting", "/v1/models/m:predict", b'{"instances": ' + b"[" * 100_000, 400,
     r"too deeply"),
    ("instances an object", "/v1/models/m:predict", b'{"instances": {"size": 1}}', 400,
     r"'instances' must be a list of rows"),
    ("object for a number", "/v1/models/m:predict",
     b'{"signature_name": "predict", "instances": [{"size": {"a": 1}, "color": "red"}]}', 400,
     r"Input 'size' must be float32, got values of type dict"),
    ("huge version", "/v1/models/m/versions/" + "9" * 5000 + ":predict",
     b'{"instances": []}', 404, r"^Servable not found for request: Specific\(m, 9999"),
    ("null for a list", "/v1/models/m:predict",
     b'{"signature_name": "predict", "inputs": {"size": [[1.0]], "color": [["red"]], '
     b'"tags": null}}', 400,
     r"^Could not read the inputs \('NoneType' object is not iterable\): signature 'predict' "
     r"takes .*tags: string \[None, None\].*, each a list with a value \(or a list of "
     r"values\) per row\.$"),
    ("lists deeper than the input", "/v1/models/m:predict",
     b'{"signature_name": "predict", "instances": [{"size": [[[[1.0]]]], "color": "red"}]}',
     400, r"^Input 'size' nests lists 5 deep; signature 'predict' takes it as float32 "
     r"\[None, 1\], 2 levels at most\.$"),
    ("context not an object", "/v1/models/m:classify",
     b'{"examples": [{"size": 1}], "context": [1]}', 400, r"'context' must be an object"),
    ("padding to the limit", "/v1/models/m:predict",
     json.dumps({"signature_name": "predict",
                 "inputs": {"size": [[1.0]] * 2000, "color": [["red"]] * 2000,
                            "tags": [[]] * 1999 + [["a"] * 100]}}).encode(), 413,
     rf"take 1632000 bytes once decoded, over the limit of {LIMIT} bytes "
     r"\(--max_request_tensor_bytes\)"),
]  # fmt: skip


@pytest.mark.parametrize("case", REST_CASES, ids=[c[0] for c in REST_CASES])
def test_hostile_rest_requests_get_4xx_with_a_message(server, case):
    _, path, body, status, message = case
    response = _rest_refuses(server, path, body)
    assert response.status_code == status, response.text[:2000]
    assert re.search(message, response.json()["error"]), response.json()["error"][:2000]


def _json_value(children):
    """JSON text: containers of ``children``."""
    keys = st.sampled_from(["size", "color", "tags", "b64", "examples", "x", ""])
    return st.one_of(
        st.lists(children, max_size=4).map(lambda v: "[" + ",".join(v) + "]"),
        st.dictionaries(keys, children, max_size=3).map(
            lambda d: "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in d.items()) + "}"
        ),
    )


json_leaves = st.one_of(
    st.sampled_from(["null", "true", "false", "NaN", "Infinity", "-Infinity", "1e999", "-0",
                     '"red"', '"a"', '{"b64": "AAAA"}', '{"b64": "%%"}', '"\\ud800"', '"\\udfff"']),
    st.integers(-(2**80), 2**80).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(1, 6000).map(lambda n: "7" * n),  # up to 6,000 digits
    st.text(max_size=8).map(lambda t: json.dumps(t, ensure_ascii=True)),
)  # fmt: skip
json_values = st.recursive(json_leaves, _json_value, max_leaves=20)
REST_TEMPLATES = [
    ("/v1/models/m:predict", '{"instances": %s}'),
    ("/v1/models/m:predict", '{"inputs": %s}'),
    ("/v1/models/m:predict", '{"signature_name": "predict", "instances": [{"size": %s}]}'),
    ("/v1/models/m:predict", '{"signature_name": "predict", "inputs": {"size": [[1.0]], '
     '"color": [["red"]], "tags": %s}}'),
    ("/v1/models/m:predict", '{"signature_name": %s, "instances": [{"size": 1.0}]}'),
    ("/v1/models/m:classify", '{"examples": %s}'),
    ("/v1/models/m:regress", '{"signature_name": "regression", "examples": [{"size": %s}]}'),
    ("/v1/models/m:classify", '{"examples": [{"size": 1.0}], "context": %s}'),
    ("/v1/models/m/labels/x:predict", "%s"),
    ("/v1/models/m:predict", "%s"),
]  # fmt: skip


@SETTINGS
@given(
    template=st.sampled_from(REST_TEMPLATES),
    value=json_values,
    nesting=st.one_of(st.just(0), st.integers(1, 3000)),
)
def test_generated_json_bodies_never_get_a_5xx(server, template, value, nesting):
    path, body = template
    value = "[" * nesting + value + "]" * nesting
    response = _post(server, path, (body % value).encode("utf-8", "surrogatepass"))
    assert response.status_code < 500, (path, body % value[:500], response.text[:2000])
    response.content.decode("utf-8")
    if response.status_code != 200:
        assert isinstance(response.json()["error"], str)
    _rest_answers_a_good_request(server)


# ----- gRPC -----------------------------------------------------------------------------------
REFUSED = {"INVALID_ARGUMENT", "NOT_FOUND", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED",
           "UNIMPLEMENTED"}  # fmt: skip


def _call(server, method: str, request):
    data = request if isinstance(request, bytes) else request.SerializeToString()
    rpc = server["channel"].unary_unary(f"/tensorflow.serving.PredictionService/{method}")
    return rpc(data, timeout=60)


def _good_predict():
    request = messages.PredictRequest()
    request.model_spec.name = "m"
    request.model_spec.signature_name = "predict"
    for name, dtype, value in (("size", DT_FLOAT, 2.0), ("color", DT_STRING, b"red"),
                               ("tags", DT_STRING, b"a")):  # fmt: skip
        tensor = request.inputs[name]
        tensor.dtype = dtype
        tensor.tensor_shape.dim.add().size = 1
        tensor.tensor_shape.dim.add().size = 1
        (tensor.float_val if dtype == DT_FLOAT else tensor.string_val).append(value)
    return request


def _grpc_answers_a_good_request(server) -> None:
    response = messages.PredictResponse.FromString(_call(server, "Predict", _good_predict()))
    assert response.outputs["logits"].tensor_shape.dim[0].size == 1
    assert server["proc"].poll() is None


def _answer(server, method: str, request) -> tuple[str, str]:
    """``(code, details)`` of a request ("OK" if answered); a refusal must be one for the
    request's own sake."""
    try:
        _call(server, method, request)
    except grpc.RpcError as err:
        code, details = err.code().name, err.details()
    else:
        return "OK", ""
    assert code in REFUSED, (code, details[:2000])
    if code == "RESOURCE_EXHAUSTED":  # ours, not gRPC's refusal of a long status
        assert "--max_request" in details, details[:2000]
    return code, details


def _grpc_refuses(server, method: str, request) -> None:
    _answer(server, method, request)
    _grpc_answers_a_good_request(server)


def _tensor_request(name: str = "size", dtype: int = DT_FLOAT, shape=(1, 1), **fields):
    request = _good_predict()
    tensor = request.inputs[name]
    tensor.Clear()
    tensor.dtype = dtype
    for size in shape:
        tensor.tensor_shape.dim.add().size = size
    for field, values in fields.items():
        if field == "tensor_content":
            tensor.tensor_content = values
        else:
            getattr(tensor, field).extend(values)
    return request


GRPC_CASES = [
    # (id, request, code, details regex)
    ("rank 65", _tensor_request(shape=[1] * 65), "INVALID_ARGUMENT",
     r"^tensor parsing error: size \(Cannot parse tensor from proto: tensor_shape has 65 "
     r"dimensions; at most 64\.\)$"),
    ("more elements than int64 counts", _tensor_request(shape=[2**62, 2**62]),
     "INVALID_ARGUMENT", r"holds 21267647932558653966460912964485513216 elements, more than "
     r"int64 counts"),
    ("a zero beside a huge dimension", _tensor_request(shape=[0, 2**62]), "INVALID_ARGUMENT",
     r"tensor_shape \[0, 4611686018427387904\]: its nonzero dimensions multiply to more "
     r"bytes of DT_FLOAT than int64 counts"),
    ("negative dimension", _tensor_request(shape=[-1, 1]), "INVALID_ARGUMENT",
     r"Cannot parse tensor from proto: tensor_shape \[-1, 1\] has a negative dimension"),
    ("content shorter than the shape", _tensor_request(shape=[4, 1], tensor_content=b"\0" * 12),
     "INVALID_ARGUMENT", r"tensor_content has 12 bytes; shape \[4, 1\] of DT_FLOAT needs 16"),
    ("more values than the shape", _tensor_request(shape=[1, 1], float_val=[1.0, 2.0]),
     "INVALID_ARGUMENT", r"float_val has 2 values; shape \[1, 1\] holds 1"),
    ("unknown dtype", _tensor_request(dtype=999), "INVALID_ARGUMENT",
     r"dtype DataType\(999\) is not supported"),
    ("huge shape of the wrong width, no values", _tensor_request(shape=[50_000_000, 4]),
     "INVALID_ARGUMENT",
     r"^Input 'size' has shape \[50000000, 4\], expected \[None, 1\] \(None: any size\)\.$"),
    ("huge shape, no values", _tensor_request(shape=[50_000_000, 1]), "RESOURCE_EXHAUSTED",
     rf"^The request's inputs take 200000016 bytes once decoded, over the limit of {LIMIT} "
     r"bytes \(--max_request_tensor_bytes\)"),
    ("a 1 MB model name", None, "NOT_FOUND",
     r"^Servable not found for request: Latest\(xxxx.* \.\.\. \(\d+ more bytes cut\)$"),
    ("examples padding to the limit", None, "RESOURCE_EXHAUSTED",
     r"take \d+ bytes once decoded, over the limit"),
    ("int64 for a float input", _tensor_request("size", DT_INT64, int64_val=[2**63 - 1]),
     "INVALID_ARGUMENT", r"^Expects arg\[size\] to be float but int64 is provided"),
]  # fmt: skip


def _grpc_case(case_id: str, request):
    """The requests built on demand (large ones)."""
    if case_id == "a 1 MB model name":
        request = _good_predict()
        request.model_spec.name = "x" * (1 << 20)
    elif case_id == "examples padding to the limit":
        request = messages.ClassificationRequest()
        request.model_spec.name = "m"
        examples = request.input.example_list.examples
        for _ in range(2000):
            examples.add().features.feature["size"].float_list.value.append(1.0)
        examples[0].features.feature["tags"].bytes_list.value.extend([b"a"] * 100)
    return request


@pytest.mark.parametrize("case", GRPC_CASES, ids=[c[0] for c in GRPC_CASES])
def test_hostile_tensor_protos_are_refused_before_allocating(server, case):
    case_id, request, code, message = case
    method = "Classify" if case_id.startswith("examples") else "Predict"
    request = _grpc_case(case_id, request)
    peak = _rss_peak(server["proc"].pid)
    got_code, details = _answer(server, method, request)
    # Nothing near the declared size was allocated (200 MB for [5e7, 1] float32).
    assert _rss_peak(server["proc"].pid) - peak < 50 << 20
    assert got_code == code, details[:2000]
    assert re.search(message, details, re.DOTALL), details[:2000]
    assert len(details.encode()) <= 4096
    _grpc_answers_a_good_request(server)


# Dimensions: small, huge (2**62 and 2**63 - 1 overflow int64 when multiplied), any.
dims = st.one_of(
    st.integers(0, 3),
    st.sampled_from([50_000_000, 2**31, 2**62, 2**63 - 1]),
    st.integers(-3, 2**63 - 1),
)
VALUES = {
    "tensor_content": st.binary(max_size=6),
    "float_val": st.lists(st.floats(width=32), max_size=6),
    "int_val": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=6),
    "int64_val": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6),
    "string_val": st.lists(st.binary(max_size=8), max_size=6),
    "bool_val": st.lists(st.booleans(), max_size=6),
    "half_val": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=6),
}


@st.composite
def tensor_protos(draw):
    """A ``TensorProto``: mostly the dtypes the model takes (float, string), any rank up to
    70, any dimensions, unknown rank now and then, and values in one field or none."""
    tensor = messages.TensorProto()
    tensor.dtype = draw(st.one_of(st.sampled_from([DT_FLOAT, DT_STRING]), st.integers(0, 200)))
    rank = draw(st.one_of(st.integers(0, 3), st.integers(60, 70)))
    for size in draw(st.lists(dims, min_size=rank, max_size=rank)):
        tensor.tensor_shape.dim.add().size = size
    tensor.tensor_shape.unknown_rank = draw(st.integers(0, 9)) == 0
    field = draw(st.sampled_from([*VALUES, None]))
    if field == "tensor_content":
        tensor.tensor_content = draw(VALUES[field])
    elif field is not None:
        getattr(tensor, field).extend(draw(VALUES[field]))
    return tensor


@st.composite
def predict_requests(draw):
    request = messages.PredictRequest()
    request.model_spec.name = "m"
    request.model_spec.signature_name = draw(st.sampled_from(["", "predict", "nope"]))
    request.output_filter.extend(draw(st.lists(st.sampled_from(["logits", "nope"]), max_size=2)))
    names = st.sampled_from(["size", "color", "tags", "examples"])
    for name in draw(st.lists(names, min_size=1, max_size=3, unique=True)):
        request.inputs[name].CopyFrom(draw(tensor_protos()))
    return "Predict", request


@st.composite
def examples(draw):
    example = messages.Example()
    for key in draw(st.lists(st.sampled_from(["size", "color", "tags", "x"]), max_size=3)):
        feature = example.features.feature[key]
        kind = draw(st.sampled_from(["float", "int", "bytes"]))
        if kind == "float":
            feature.float_list.value.extend(draw(st.lists(st.floats(width=32), max_size=4)))
        elif kind == "int":
            values = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4)
            feature.int64_list.value.extend(draw(values))
        else:
            feature.bytes_list.value.extend(draw(st.lists(st.binary(max_size=4), max_size=4)))
    return example


@st.composite
def examples_requests(draw):
    """Classify, Regress or MultiInference of generated examples and model specs."""
    method = draw(st.sampled_from(["Classify", "Regress", "MultiInference"]))
    name = draw(st.sampled_from(["m", "", "other"]))
    signature = draw(st.sampled_from(["", "regression", "predict", "nope"]))
    if method == "MultiInference":
        request = messages.MultiInferenceRequest()
        for key, kind in ((signature, "regress"), ("classification", "classify")):
            task = request.tasks.add()
            task.model_spec.name = name
            task.model_spec.signature_name = key
            task.method_name = f"tensorflow/serving/{kind}"
        spec = request.tasks[0].model_spec
    else:
        request = getattr(messages, f"{'Regression' if method == 'Regress' else 'Classification'}"
                          "Request")()  # fmt: skip
        request.model_spec.name = name
        request.model_spec.signature_name = signature
        spec = request.model_spec
    version = draw(st.integers(-1, 2**63 - 1))
    if version >= 0:
        spec.version.value = version
    for example in draw(st.lists(examples(), max_size=4)):
        request.input.example_list.examples.add().CopyFrom(example)
    return method, request


raw_requests = st.tuples(
    st.sampled_from(["Predict", "Classify", "Regress", "MultiInference", "GetModelMetadata"]),
    st.binary(max_size=64),
)


@SETTINGS
@given(call=st.one_of(predict_requests(), predict_requests(), examples_requests(), raw_requests))
def test_generated_grpc_requests_never_get_internal(server, call):
    """Predict requests of generated ``TensorProto``s, Classify, Regress and MultiInference
    requests of generated examples and model specs, and raw bytes as any method's message."""
    method, request = call
    _grpc_refuses(server, method, request)


def test_the_server_logged_no_failure(server):
    """No request above reached the server's INTERNAL path (logged with a traceback) or
    Starlette's 500 (logged by uvicorn)."""
    log = server["log"]
    log.flush()
    log.seek(0)
    text = log.read()
    assert "Traceback" not in text and " failed" not in text, text[-5000:]
