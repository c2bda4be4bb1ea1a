"""TF Serving's gRPC API in ``python -m estimator.serve``.

One server (a subprocess, started once for the module) serves four models through a
``--model_config_file``: the census ``LinearClassifier``, a wide & deep classifier, a
custom ``model_fn`` regressor and a multi-head model (``tests/support/grpc_models.py``), with gRPC
on ``--port`` and REST on ``--rest_api_port``. A second process with TensorFlow runs TF
Serving's own client (``tests/jobs/grpc_client_job.py``: the ``tensorflow-serving-api`` stubs,
``tf.make_tensor_proto``, ``tf.make_ndarray``) against it and TF's SavedModel of each export
on the same ``tf.Example``s. This process compares those answers with REST and with
``estimator.export.load`` in process (1e-6), and sends bad requests with the server's own
message classes and raw bytes. The server process is checked never to import TensorFlow.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import grpc
import httpx
import numpy as np
import pytest
from grpc_models import DATA, MODELS, build, census_module, rows

import estimator as est
from estimator.serve import _examples
from estimator.serve._protos import messages
from estimator.serve._tensors import to_numpy

pytestmark = pytest.mark.slow
HERE = os.path.dirname(os.path.abspath(__file__))
LIMIT = 256 << 10  # --max_request_bytes: a larger gRPC message gets RESOURCE_EXHAUSTED
# The server, run so that it reports at exit whether TensorFlow was ever imported.
SERVER = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print('TENSORFLOW_IMPORTED', 'tensorflow' in sys.modules, "
    "flush=True))\n"
    "sys.argv[0] = 'estimator.serve'\n"
    "runpy.run_module('estimator.serve', run_name='__main__')\n"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("grpc"))
    census = census_module()
    train_x, train_y = census.load(os.path.join(DATA, "adult.data"))
    train_x, train_y = {k: v[:1024] for k, v in train_x.items()}, train_y[:1024]
    test_x, _ = census.load(os.path.join(DATA, "adult.test"))
    exports, inputs = {}, {}
    for name in MODELS:
        exports[name] = build(name, root, train_x, train_y)
        loaded = est.export.load(exports[name])
        inputs[name] = rows(test_x, sorted(loaded.signatures["serving_default"].inputs))
    config = os.path.join(root, "models.config")
    with open(config, "w") as f:
        f.write("model_config_list {\n")
        for name in MODELS:
            base = os.path.dirname(exports[name])
            f.write(f'  config {{ name: "{name}" base_path: "{base}" model_platform: "tensorflow"')
            if name == "census":
                version = os.path.basename(exports[name])
                f.write(f' version_labels {{ key: "stable" value: {version} }}')
            f.write(" }\n")
        f.write("}\n")
    port, rest_port = _free_port(), _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, "--model_config_file", config, "--port", str(port),
         "--rest_api_port", str(rest_port), "--host", "127.0.0.1",
         "--file_system_poll_wait_seconds", "0.2", "--max_request_bytes", str(LIMIT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    rest = httpx.Client(base_url=f"http://127.0.0.1:{rest_port}", timeout=60)
    deadline = time.monotonic() + 120
    while True:
        try:
            rest.get("/v1/models/census")
            break
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(proc.communicate()[1][-5000:]) from None
            time.sleep(0.2)
    job = {
        "address": f"127.0.0.1:{port}",
        "exports": exports,
        "rows": inputs,
        "saved_models": os.path.join(root, "saved_models"),
    }
    client = subprocess.run(
        [sys.executable, os.path.join(HERE, "..", "jobs", "grpc_client_job.py")],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if client.returncode != 0:
        proc.kill()
    assert client.returncode == 0, client.stderr[-5000:]
    answers = json.loads(client.stdout.strip().splitlines()[-1])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield {
        "exports": exports,
        "rows": inputs,
        "answers": answers,
        "channel": channel,
        "rest": rest,
        "proc": proc,
    }
    channel.close()
    rest.close()
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def _columns(rows_: list[dict]) -> dict:
    return {k: [r[k] for r in rows_] for k in rows_[0]}


def _context_rows(rows_: list[dict]) -> list[dict]:
    """The rows as ``grpc_client_job.py`` sends them with a context (its first two features,
    row 0's values, shared by every example)."""
    context = {k: rows_[0][k] for k in sorted(rows_[0])[:2]}
    return [dict(r, **context) for r in rows_]


@pytest.mark.parametrize("name", MODELS)
def test_tf_serving_client_answers_equal_the_loader_rest_and_tf(setup, name):
    loaded = est.export.load(setup["exports"][name])
    version = int(os.path.basename(setup["exports"][name]))
    calls = setup["answers"]["grpc"][name]
    tf_out = setup["answers"]["tf"][name]
    rows_ = setup["rows"][name]
    assert calls["status"] == [[version, "AVAILABLE", 0]]
    meta = calls["metadata"]
    assert meta["version"] == version
    assert {k: s["method_name"] for k, s in meta["signatures"].items()} == {
        k: s.method_name for k, s in loaded.signatures.items()
    }
    checked = set()
    for key, signature in loaded.signatures.items():
        want = signature(**_columns(rows_))
        if signature.method_name.endswith("/predict"):
            got = calls[f"predict:{key}"]
            assert got["model_spec"] == [name, version, key]
            assert sorted(got["outputs"]) == sorted(want)
            for output, value in want.items():
                if value.dtype == object:
                    assert got["outputs"][output] == [[v.decode() for v in r] for r in value]
                else:
                    np.testing.assert_allclose(got["outputs"][output], value, atol=1e-6)
            # TF's SavedModel of the export, on the same rows as serialized tf.Examples, and
            # ours on the same request (Predict with "examples", TF Serving's way).
            examples = calls[f"predict_examples:{key}"]
            assert sorted(examples) == sorted(want)
            for output, value in tf_out[key].items():
                if isinstance(value[0][0], str):
                    assert got["outputs"][output] == value == examples[output], output
                else:
                    np.testing.assert_allclose(got["outputs"][output], value, atol=1e-6)
                    np.testing.assert_allclose(examples[output], value, atol=1e-6)
            rest = setup["rest"].post(
                f"/v1/models/{name}:predict", json={"signature_name": key, "instances": rows_}
            )
            assert rest.status_code == 200, rest.text
            predictions = rest.json()["predictions"]
            if len(want) == 1:  # TF Serving's row format: a lone output is not keyed
                predictions = [dict(zip(want, [p], strict=True)) for p in predictions]
            keyed = {k: [p[k] for p in predictions] for k in want}
            for output, value in want.items():
                if value.dtype != object:
                    np.testing.assert_allclose(keyed[output], got["outputs"][output], atol=1e-6)
        elif signature.method_name.endswith("/classify"):
            got = calls[f"classify:{key}"]
            assert got["model_spec"] == [name, version, key]
            labels = [[c for c, _ in row] for row in got["result"]]
            scores = [[s for _, s in row] for row in got["result"]]
            if "classes" in want:
                assert labels == [[c.decode() for c in row] for row in want["classes"]]
                assert labels == tf_out[key]["classes"]
            np.testing.assert_allclose(scores, want["scores"], atol=1e-6)
            np.testing.assert_allclose(scores, tf_out[key]["scores"], atol=1e-6)
            rest = setup["rest"].post(
                f"/v1/models/{name}:classify", json={"signature_name": key, "examples": rows_}
            )
            np.testing.assert_allclose(
                [[s for _, s in row] for row in rest.json()["result"]], scores, atol=1e-6
            )
            context = calls[f"classify_context:{key}"]["result"]
            shared = signature(**_columns(_context_rows(rows_)))["scores"]
            np.testing.assert_allclose([[s for _, s in r] for r in context], shared, atol=1e-6)
        else:
            got = calls[f"regress:{key}"]
            assert got["model_spec"] == [name, version, key]
            np.testing.assert_allclose(got["result"], want["outputs"][:, 0], atol=1e-6)
            np.testing.assert_allclose(got["result"], np.ravel(tf_out[key]["outputs"]), atol=1e-6)
            rest = setup["rest"].post(
                f"/v1/models/{name}:regress", json={"signature_name": key, "examples": rows_}
            )
            np.testing.assert_allclose(rest.json()["result"], got["result"], atol=1e-6)
            context = calls[f"regress_context:{key}"]["result"]
            shared = signature(**_columns(_context_rows(rows_)))["outputs"][:, 0]
            np.testing.assert_allclose(context, shared, atol=1e-6)
        checked.add(signature.method_name)
    assert "tensorflow/serving/regress" in checked


def test_committed_descriptors_are_tensorflow_servings_schema(setup):
    """Every message, field and enum value the server uses is the installed
    ``tensorflow-serving-api``'s and TF's (checked in the client's process, which has both);
    with the versions it was generated from, the committed module is what
    ``gen_serving_descriptors.py`` writes, byte for byte."""
    schema = setup["answers"]["schema"]
    compared, problems = schema["differences"]
    assert problems == []
    assert compared > 100  # every message and enum of the 36 files
    with open(os.path.join(HERE, "..", "..", "estimator", "serve", "_descriptors.py")) as f:
        committed = f.read()
    serving, tensorflow = schema["versions"]
    if f"``tensorflow-serving-api=={serving}``" in committed and (
        f"``tensorflow=={tensorflow}``" in committed
    ):
        assert schema["rendered"] == committed


def test_output_filter_and_multi_inference(setup):
    calls = setup["answers"]["grpc"]
    assert sorted(calls["census"]["predict_filtered"]["outputs"]) == ["classes", "logits"]
    multi = calls["multi_head"]["multi_inference"]
    assert [(sig, kind) for sig, kind, _ in multi] == [
        ("income", "classification_result"),
        ("hours", "regression_result"),
    ]
    assert multi[0][2] == calls["multi_head"]["classify:income"]["result"]
    np.testing.assert_allclose(multi[1][2], calls["multi_head"]["regress:hours"]["result"])


# ----- requests built here with the server's own message classes ---------------------------
def _call(setup, method: str, request, service="PredictionService"):
    data = request if isinstance(request, bytes) else request.SerializeToString()
    rpc = setup["channel"].unary_unary(f"/tensorflow.serving.{service}/{method}")
    return rpc(data, timeout=60)


def _error(setup, method: str, request, service="PredictionService"):
    with pytest.raises(grpc.RpcError) as info:
        _call(setup, method, request, service)
    return info.value.code(), info.value.details()


def _predict(name="regressor", signature="", inputs=None, **spec):
    request = messages.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    for key, value in spec.items():
        if key == "version":
            request.model_spec.version.value = value
        else:
            setattr(request.model_spec, key, value)
    inputs = {"age": [[30.0]], "hours_per_week": [[40.0]]} if inputs is None else inputs
    for key, value in inputs.items():
        tensor = request.inputs[key]
        array = np.asarray(value)
        tensor.dtype = 7 if array.dtype.kind in "US" else {"f": 1, "i": 9}[array.dtype.kind]
        for size in array.shape:
            tensor.tensor_shape.dim.add().size = size
        if array.dtype.kind in "US":
            tensor.string_val.extend(v.encode() for v in array.ravel())
        elif array.dtype.kind == "f":
            tensor.float_val.extend(array.ravel().tolist())
        else:
            tensor.int64_val.extend(array.ravel().tolist())
    return request


def test_version_and_label_choose_the_served_version(setup):
    version = int(os.path.basename(setup["exports"]["census"]))
    census = {"age": [[30.0]], "education": [["11th"]], "marital_status": [["Divorced"]],
              "occupation": [["Sales"]], "relationship": [["Unmarried"]],
              "workclass": [["Private"]]}  # fmt: skip
    for spec in ({"version": version}, {"version_label": "stable"}):
        response = messages.PredictResponse.FromString(
            _call(setup, "Predict", _predict("census", "predict", census, **spec))
        )
        assert response.model_spec.version.value == version
        assert response.model_spec.signature_name == "predict"
    # The same label over REST (TF Serving's /labels/ routes).
    rest = setup["rest"]
    status = rest.get("/v1/models/census/labels/stable").json()
    assert status["model_version_status"][0]["version"] == str(version)
    row = {k: v[0][0] for k, v in census.items()}
    answer = rest.post(
        "/v1/models/census/labels/stable:predict",
        json={"signature_name": "predict", "instances": [row]},
    )
    assert answer.status_code == 200, answer.text
    np.testing.assert_allclose(
        answer.json()["predictions"][0]["logits"], to_numpy(response.outputs["logits"])[0]
    )
    unknown = rest.get("/v1/models/census/labels/canary")
    assert unknown.status_code == 400
    assert unknown.json()["error"] == "Unrecognized servable version label: canary"


BAD = [
    # (id, method, request, status code, message regex)
    ("malformed bytes", "Predict", b"\xff\xff\xff", "INVALID_ARGUMENT",
     r"Could not parse the request as tensorflow\.serving\.PredictRequest"),
    ("no model name", "Predict", _predict(name=""), "INVALID_ARGUMENT",
     r"^ModelSpec has no name specified\.$"),
    ("unknown model", "Predict", _predict(name="nope"), "NOT_FOUND",
     r"^Servable not found for request: Latest\(nope\)$"),
    ("unknown version", "Predict", _predict(version=7), "NOT_FOUND",
     r"^Servable not found for request: Specific\(regressor, 7\)$"),
    ("unknown label", "Predict", _predict(version_label="canary"), "INVALID_ARGUMENT",
     r"^Unrecognized servable version label: canary$"),
    ("unknown signature", "Predict", _predict(signature="nope"), "FAILED_PRECONDITION",
     r'^Serving signature key "nope" not found\.$'),
    ("extra input", "Predict", _predict(inputs={"age": [[1.0]], "sise": [[1.0]]}),
     "INVALID_ARGUMENT",
     r"^input size does not match signature: 2!=2 len\(\{age,sise\}\) != "
     r"len\(\{age,hours_per_week\}\)\. Sent extra: \{sise\}\. Missing but required: "
     r"\{hours_per_week\}\.$"),
    ("missing input", "Predict", _predict(inputs={"age": [[1.0]]}), "INVALID_ARGUMENT",
     r"missing \['hours_per_week'\]"),
    ("wrong dtype", "Predict", _predict(inputs={"age": [[1]], "hours_per_week": [[1.0]]}),
     "INVALID_ARGUMENT", r"^Expects arg\[age\] to be float but int64 is provided"),
    ("wrong shape", "Predict",
     _predict(inputs={"age": [[1.0, 2.0]], "hours_per_week": [[1.0]]}), "INVALID_ARGUMENT",
     r"Input 'age' has shape \[1, 2\], expected \[None, 1\]"),
    ("unknown output", "Predict", None, "INVALID_ARGUMENT",
     r"^output tensor alias not found in signature: nope Outputs "
     r"expected to be in the set \{outputs\}\.$"),
    ("duplicate output", "Predict", None, "INVALID_ARGUMENT",
     r"^duplicate output tensor alias: outputs$"),
    ("classify on a regression signature", "Classify", None, "INVALID_ARGUMENT",
     r"^Expected classification signature method_name to be tensorflow/serving/classify\. "
     r"Was: tensorflow/serving/regress$"),
    ("no examples", "Regress", None, "INVALID_ARGUMENT", r"^Input is empty\.$"),
    ("string for a float feature", "Regress", None, "INVALID_ARGUMENT",  # TF's message:
     r"Key: age, Index: 0\.  Data types don't match\. Data type: string but expected type: "
     r"float"),
    ("missing required feature", "Regress", None, "INVALID_ARGUMENT",
     r"Feature: hours_per_week \(data type: float\) is required but could not be found"),
    ("metadata without a field", "GetModelMetadata", None, "INVALID_ARGUMENT",
     r"^GetModelMetadataRequest must specify at least one metadata_field$"),
    ("status of an unknown version", "GetModelStatus", None, "NOT_FOUND",
     r"^Could not find version 7 of model regressor$"),
    ("multi inference over two models", "MultiInference", None, "INVALID_ARGUMENT",
     r"^All ModelSpecs in a MultiInferenceRequest must access the same model name\.$"),
    ("oversized", "Predict", None, "RESOURCE_EXHAUSTED", r"larger than max"),
]  # fmt: skip


def _bad_request(case_id: str, request):
    """The requests that need more than ``_predict``."""
    if case_id == "unknown output":
        request = _predict()
        request.output_filter.append("nope")
    elif case_id == "duplicate output":
        request = _predict()
        request.output_filter.extend(["outputs", "outputs"])
    elif case_id in ("classify on a regression signature", "no examples"):
        cls = messages.ClassificationRequest if case_id.startswith("classify") else None
        request = (cls or messages.RegressionRequest)()
        request.model_spec.name = "regressor"
        if case_id.startswith("classify"):
            example = request.input.example_list.examples.add()
            example.features.feature["age"].float_list.value.append(30.0)
    elif case_id in ("string for a float feature", "missing required feature"):
        request = messages.RegressionRequest()
        request.model_spec.name = "regressor"
        example = request.input.example_list.examples.add()
        if case_id.startswith("string"):
            example.features.feature["age"].bytes_list.value.append(b"old")
            example.features.feature["hours_per_week"].float_list.value.append(40.0)
        else:
            example.features.feature["age"].float_list.value.append(40.0)
    elif case_id == "metadata without a field":
        request = messages.GetModelMetadataRequest()
        request.model_spec.name = "regressor"
    elif case_id == "status of an unknown version":
        request = messages.GetModelStatusRequest()
        request.model_spec.name = "regressor"
        request.model_spec.version.value = 7
    elif case_id == "multi inference over two models":
        request = messages.MultiInferenceRequest()
        for name in ("regressor", "census"):
            task = request.tasks.add()
            task.model_spec.name = name
            task.method_name = "tensorflow/serving/regress"
    elif case_id == "oversized":
        request = _predict(inputs={"age": np.ones((LIMIT // 4, 1)), "hours_per_week": [[1.0]]})
    return request


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_requests_get_tf_servings_status_and_the_server_stays_up(setup, case):
    case_id, method, request, code, message = case
    service = "ModelService" if method == "GetModelStatus" else "PredictionService"
    got_code, details = _error(setup, method, _bad_request(case_id, request), service)
    assert got_code.name == code, details
    assert re.search(message, details), details
    assert setup["proc"].poll() is None
    response = messages.PredictResponse.FromString(_call(setup, "Predict", _predict()))
    assert response.outputs["outputs"].tensor_shape.dim[0].size == 1


def test_context_features_yield_to_the_examples_own(setup):
    request = messages.RegressionRequest()
    request.model_spec.name = "regressor"
    listed = request.input.example_list_with_context
    listed.context.features.feature["age"].float_list.value.append(99.0)
    listed.context.features.feature["hours_per_week"].float_list.value.append(40.0)
    own = listed.examples.add()
    own.features.feature["age"].float_list.value.append(25.0)
    listed.examples.add()  # takes both features from the context
    got = messages.RegressionResponse.FromString(_call(setup, "Regress", request))
    signature = est.export.load(setup["exports"]["regressor"]).signatures["serving_default"]
    want = signature(age=[[25.0], [99.0]], hours_per_week=[[40.0], [40.0]])["outputs"][:, 0]
    np.testing.assert_allclose([r.value for r in got.result.regressions], want, atol=1e-6)


@pytest.mark.parametrize("absent", [True, False])
@pytest.mark.parametrize("name", MODELS)
def test_reading_decoded_examples_equals_parse_example(setup, name, absent):
    """The servicer reads well-formed examples from the decoded request; what it gives the
    signature equals what ``estimator.io.parse_example`` gives, with some string features
    absent (lists per example) or every one present (one value per example)."""
    signature = est.export.load(setup["exports"][name]).signatures["serving_default"]
    examples = []
    for i, row in enumerate(setup["rows"][name]):
        example = messages.Example()
        for key, value in row.items():
            if absent and i % 3 == 1 and isinstance(value, str):
                continue  # a VarLenFeature absent from this example
            feature = example.features.feature[key]
            if isinstance(value, str):
                feature.bytes_list.value.append(value.encode())
            else:
                feature.float_list.value.append(value)
        examples.append(example)
    spec = signature._parse_spec
    direct = _examples.columns(signature, examples)
    one_each = [k for k, v in direct.items() if isinstance(v, list) and not isinstance(v[0], list)]
    assert bool(one_each) == (not absent and name != "regressor")  # the regressor: no strings
    reference = _examples.parsed(spec, [e.SerializeToString() for e in examples])
    assert sorted(direct) == sorted(reference)
    got, want = signature(**direct), signature(**reference)
    for key in want:
        if want[key].dtype == object:
            assert got[key].tolist() == want[key].tolist()
        else:
            np.testing.assert_array_equal(got[key], want[key])


def test_a_new_version_reaches_both_apis_without_failing_requests(setup):
    export = setup["exports"]["regressor"]
    old = int(os.path.basename(export))
    new = old + 1
    shutil.copytree(export, os.path.join(os.path.dirname(export), str(new)))
    status = messages.GetModelStatusRequest()
    status.model_spec.name = "regressor"
    deadline = time.monotonic() + 60
    while True:
        response = messages.PredictResponse.FromString(_call(setup, "Predict", _predict()))
        served = messages.GetModelStatusResponse.FromString(
            _call(setup, "GetModelStatus", status, "ModelService")
        ).model_version_status[0]
        if served.version == new:
            break
        assert response.model_spec.version.value == old
        assert time.monotonic() < deadline, "the new version was not picked up"
        time.sleep(0.1)
    response = messages.PredictResponse.FromString(_call(setup, "Predict", _predict()))
    assert response.model_spec.version.value == new
    rest = setup["rest"].get("/v1/models/regressor").json()
    assert rest["model_version_status"][0]["version"] == str(new)
    code, details = _error(setup, "Predict", _predict(version=old))
    assert code.name == "NOT_FOUND" and f"Specific(regressor, {old})" in details


def test_server_never_imported_tensorflow_and_sigterm_exits_cleanly(setup):
    proc = setup["proc"]
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    assert "TENSORFLOW_IMPORTED False" in out, (out, err[-3000:])
