"""Serving ``tf.Example``: an export made with ``build_parsing_serving_input_receiver_fn``
takes serialized ``tf.Example`` protos under ``examples`` in ``est.export.load``
signatures, ``python -m estimator.export run`` and the REST server (``{"b64": ...}``), with
the outputs of the same rows sent as features. (``test_tf_saved_model.py`` shows that TF
running the TF SavedModel of such an export, fed serialized examples, answers what the
loader answers for those rows sent as features.)"""

import base64
import io as std_io
import json
import os
from contextlib import redirect_stdout

import numpy as np
import pytest
from starlette.testclient import TestClient

import canned
import estimator as est
from canned import feature_column as fc
from estimator.export import __main__ as export_cli
from estimator.serve._app import build_app
from estimator.serve._models import ModelWatcher

pytestmark = pytest.mark.slow  # trains and exports a model (~6 s)

ROWS = [
    {"size": 1.5, "color": "red", "tags": ["a", "b"]},
    {"size": 4.0, "color": "blue", "tags": []},
    {"size": 2.5, "tags": ["c"]},  # no color: the spec's default
]


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_examples")
    columns = [
        fc.numeric_column("size"),
        fc.categorical_column_with_vocabulary_list(
            "color", ["red", "green", "blue"], default_value=0
        ),
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
        est.inputs.numpy_input_fn(features, np.array([0, 1, 1, 0]), batch_size=2, shuffle=False)
    )
    spec = fc.make_parse_example_spec(columns)
    spec["color"] = est.io.FixedLenFeature([1], str, default_value="green")
    receiver = est.export.build_parsing_serving_input_receiver_fn(spec)
    return classifier.export_saved_model(str(root / "export"), receiver).decode()


def _serialized(rows):
    out = []
    for row in rows:
        example = est.io.protos.Example()
        feature = example.features.feature
        feature["size"].float_list.value.append(row["size"])
        if "color" in row:
            feature["color"].bytes_list.value.append(row["color"].encode())
        feature["tags"].bytes_list.value.extend(t.encode() for t in row["tags"])
        out.append(example.SerializeToString())
    return out


def _as_features(rows):
    return {
        "size": [r["size"] for r in rows],
        "color": [r.get("color") for r in rows],
        "tags": [r["tags"] for r in rows],
    }


def test_loader_signatures_take_serialized_examples(export_dir):
    model = est.export.load(export_dir)
    for name, signature in model.signatures.items():
        assert signature.accepts_examples, name
        want = signature(**_as_features(ROWS))
        got = signature(examples=_serialized(ROWS))
        assert sorted(got) == sorted(want)
        for key in want:
            if want[key].dtype == object:
                assert got[key].tolist() == want[key].tolist(), (name, key)
            else:
                np.testing.assert_allclose(got[key], want[key], atol=1e-6, err_msg=key)


def test_bad_examples_say_what_was_expected(export_dir):
    signature = est.export.load(export_dir).signatures["predict"]
    with pytest.raises(ValueError, match="either 'examples' .* or the features by name, not both"):
        signature(examples=_serialized(ROWS), size=[1.0])
    with pytest.raises(ValueError, match="serialized tf.Example bytes; got text"):
        signature(examples=["size: 1"])
    with pytest.raises(ValueError, match="Could not parse example input.*record 1 of the batch"):
        signature(examples=[_serialized(ROWS)[0], b"\x0a\x09x"])
    bad = est.io.protos.Example()
    bad.features.feature["size"].bytes_list.value.append(b"big")
    with pytest.raises(ValueError, match="Key: size, Index: 0.  Data types don't match"):
        signature(examples=[bad.SerializeToString()])
    with pytest.raises(ValueError, match="or examples: serialized tf.Example"):
        signature(nope=[1])


def test_cli_runs_b64_examples(export_dir, tmp_path):
    payload = {
        "inputs": {"examples": [{"b64": base64.b64encode(s).decode()} for s in _serialized(ROWS)]}
    }
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps(payload))
    out = std_io.StringIO()
    with redirect_stdout(out):
        code = export_cli.main(["run", export_dir, "--signature", "predict", "--inputs", str(path)])
    assert code == 0
    got = json.loads(out.getvalue())
    want = est.export.load(export_dir).signatures["predict"](**_as_features(ROWS))
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=1e-6)


def test_rest_predict_takes_b64_examples_named_and_unnamed(export_dir):
    watcher = ModelWatcher("census", os.path.dirname(export_dir), poll_seconds=3600)
    want = est.export.load(export_dir).signatures["predict"](**_as_features(ROWS))
    b64 = [{"b64": base64.b64encode(s).decode()} for s in _serialized(ROWS)]
    try:
        client = TestClient(build_app(watcher))
        requests = [
            {"signature_name": "predict", "instances": [{"examples": e} for e in b64]},
            {"signature_name": "predict", "instances": b64},  # TF Serving's one-input form
            {"signature_name": "predict", "inputs": {"examples": b64}},
        ]
        for body in requests:
            response = client.post("/v1/models/census:predict", json=body)
            assert response.status_code == 200, response.text
            data = response.json()
            probabilities = (
                [p["probabilities"] for p in data["predictions"]]
                if "predictions" in data
                else data["outputs"]["probabilities"]
            )
            np.testing.assert_allclose(probabilities, want["probabilities"], atol=1e-6)
        bad = client.post(
            "/v1/models/census:predict",
            json={"signature_name": "predict", "instances": [{"b64": "AAAA"}]},
        )
        assert bad.status_code == 400 and "Could not parse example input" in bad.text
    finally:
        watcher.close()


def test_loading_a_parsing_model_warms_the_parser(export_dir, monkeypatch):
    # The tf.Example parser's compiled loops load when the server loads the model, not on
    # the first request that sends examples; a model without a parsing receiver does not.
    from estimator.io import _kernels

    warmed = []
    monkeypatch.setattr(_kernels, "warm", lambda: warmed.append(True))
    watcher = ModelWatcher("m", os.path.dirname(export_dir), poll_seconds=0)
    assert watcher.version is not None and warmed == [True]
