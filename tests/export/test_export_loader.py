"""Tests of ``estimator.export.load`` and ``python -m estimator.export``: a fresh process that
never imports the model code reproduces
``Estimator.predict``; bad inputs are refused with what the signature expects; one loaded
model serves many threads; the command line shows and runs signatures like TF's
``saved_model_cli``.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import estimator as est
from estimator.export.__main__ import main as cli_main

PREDICT = est.ModeKeys.PREDICT
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng(2)
X = RNG.normal(size=(64, 4)).astype(np.float32)
K = RNG.integers(0, 5, size=64).astype(np.int32)
Y = ((X[:, 0] > 0) ^ (K % 2 == 0)).astype(np.int32)
BATCHES = (1, 3, 64)


def model_fn(features, labels, mode):
    """A small MLP on a float input ``x`` [batch, 4] and an int id ``k`` [batch] in 0..4."""
    hidden = est.layers.dense(features["x"], 8, activation=jnp.tanh, name="hidden")
    embedding = est.get_variable(
        "k_embedding", [5, 8], jnp.float32, est.initializers.random_normal_initializer()
    )
    logits = est.layers.dense(hidden + embedding[features["k"]], 2, name="logits")
    predictions = {
        "logits": logits,
        "probabilities": jax.nn.softmax(logits),
        "class_ids": jnp.argmax(logits, -1).astype(jnp.int32),
    }
    if mode == PREDICT:
        return est.EstimatorSpec(mode, predictions=predictions)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.adam(0.05), predictions=predictions)


@pytest.fixture(scope="module")
def trained(trained_estimator):
    # One epoch of 64 examples in batches of 16: 4 steps.
    features = {"x": X, "k": K}
    return trained_estimator(
        "loader",
        steps=4,
        model_fn=model_fn,
        input_fn=est.inputs.numpy_input_fn(features, Y, batch_size=16, num_epochs=1, shuffle=False),
        tf_random_seed=5,
    )


@pytest.fixture(scope="module")
def export_path(trained, tmp_path_factory):
    receiver_fn = est.export.build_raw_serving_input_receiver_fn(
        {
            "x": jax.ShapeDtypeStruct((None, 4), jnp.float32),
            "k": jax.ShapeDtypeStruct((None,), jnp.int32),
        }
    )
    return trained.export_saved_model(str(tmp_path_factory.mktemp("export")), receiver_fn).decode()


@pytest.fixture(scope="module")
def predicted(trained):
    """In-process ``Estimator.predict`` on all 64 rows, ``{key: [64, ...]}``."""
    (batch,) = trained.predict(
        est.inputs.numpy_input_fn({"x": X, "k": K}, batch_size=64, shuffle=False),
        yield_single_examples=False,
    )
    return batch


# A fresh interpreter that imports only estimator.export and numpy: no model code (this
# file), no canned, no TensorFlow.
FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import estimator.export

    model = estimator.export.load(sys.argv[1])
    data = np.load(sys.argv[2])
    outputs = {}
    for batch in (1, 3, 64):
        result = model.signatures["serving_default"](x=data[f"x{batch}"], k=data[f"k{batch}"])
        outputs.update({f"{key}{batch}": value for key, value in result.items()})
    np.savez(sys.argv[3], **outputs)
    print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in
                            ("tensorflow", "canned", "test_export_loader"))))
    """
)


class Subprocesses:
    """The fresh-process script and three CLI commands, started together in the background
    (each takes a couple of seconds, mostly importing jax) while the in-process tests run."""

    def __init__(self, export_path: str, root) -> None:
        self.root = root
        inputs = root / "inputs.npz"
        np.savez(inputs, **{f"x{b}": X[:b] for b in BATCHES}, **{f"k{b}": K[:b] for b in BATCHES})
        columns = root / "columns.json"
        columns.write_text(json.dumps({"inputs": {"x": X[:3].tolist(), "k": K[:3].tolist()}}))
        rows = root / "rows.json"
        rows.write_text(
            json.dumps({"instances": [{"x": X[i].tolist(), "k": int(K[i])} for i in range(3)]})
        )
        cli = [sys.executable, "-m", "estimator.export"]
        out = str(root / "out.npz")
        commands = {
            "fresh": [sys.executable, "-c", FRESH_PROCESS, export_path, str(inputs), out],
            "show": [*cli, "show", export_path],
            "run_columns": [
                *cli,
                "run",
                export_path,
                "--signature",
                "serving_default",
                "--inputs",
                str(columns),
            ],
            "run_rows": [*cli, "run", export_path, "--inputs", str(rows)],
        }
        self._running = {
            name: subprocess.Popen(
                command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for name, command in commands.items()
        }
        self._results = {}

    def result(self, name: str) -> tuple[int, str, str]:
        """``(returncode, stdout, stderr)`` of one command (waits for it)."""
        if name not in self._results:
            out, err = self._running[name].communicate(timeout=300)
            self._results[name] = (self._running[name].returncode, out, err)
        return self._results[name]


@pytest.fixture(scope="module")
def subprocesses(export_path, tmp_path_factory):
    launched = Subprocesses(export_path, tmp_path_factory.mktemp("subprocess"))
    yield launched
    for name in launched._running:
        launched.result(name)  # reap them all


@pytest.fixture(scope="module")
def model(export_path):
    """The loaded export (in this process; the ``slow`` tests' subprocesses load their own)."""
    return est.export.load(export_path)


# ----- requirement 5: the loader ------------------------------------------------------------


def test_in_process_load_matches_predict_for_each_batch_size(model, predicted):
    signature = model.signatures["serving_default"]
    for batch in BATCHES:
        out = signature(x=X[:batch], k=K[:batch])
        assert sorted(out) == ["class_ids", "logits", "probabilities"]
        assert out["class_ids"].dtype == np.int32 and out["logits"].dtype == np.float32
        np.testing.assert_allclose(out["logits"], predicted["logits"][:batch], atol=1e-6)


def test_loaded_model_metadata(model, trained):
    assert model.global_step == 4  # 64 rows / batch 16, one epoch
    assert sorted(model.signatures) == ["serving_default"]
    signature = model.signatures["serving_default"]
    assert signature.inputs == {
        "k": {"dtype": "int32", "shape": [None]},
        "x": {"dtype": "float32", "shape": [None, 4]},
    }
    assert signature.outputs["probabilities"] == {"dtype": "float32", "shape": ["b", 2]}
    assert signature.method_name == "tensorflow/serving/predict"
    np.testing.assert_array_equal(
        model.variables["trainable"]["k_embedding"], trained.get_variable_value("k_embedding")
    )


EXPECTS = "Signature 'serving_default' expects:\n  k: int32 [None]\n  x: float32 [None, 4]"


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (
            {"x": X[:2], "kk": K[:2]},
            "Wrong inputs: missing ['k'], unexpected ['kk'].\n" + EXPECTS,
        ),
        ({"x": X[:2]}, "Wrong inputs: missing ['k'], unexpected [].\n" + EXPECTS),
        (
            {"x": X[:2], "k": [0.5, 1.0]},
            "Input 'k' must be int32, got float64 (which does not convert without loss).\n"
            + EXPECTS,
        ),
        (
            {"x": [["a", "b", "c", "d"]], "k": [1]},
            "Input 'x' must be float32, got values of type str.\n" + EXPECTS,
        ),
        (
            {"x": [[1.0, None, 2.0, 3.0]], "k": [1]},
            "Input 'x' must be float32, got values of type NoneType, float.\n" + EXPECTS,
        ),
        (
            {"x": [[1.0, True, 2.0, 3.0]], "k": [1]},  # numpy would read True as 1.0
            "Input 'x' must be float32, got values of type bool, float.\n" + EXPECTS,
        ),
        (
            {"x": X[:2], "k": np.array([True, False])},
            "Input 'k' must be int32, got values of type bool.\n" + EXPECTS,
        ),
        (
            {"x": X[:2, :3], "k": K[:2]},
            "Input 'x' has shape [2, 3], expected [None, 4] (None: any size).\n" + EXPECTS,
        ),
        (
            {"x": X[:2], "k": K[:2, None]},
            "Input 'k' has shape [2, 1], expected [None] (None: any size).\n" + EXPECTS,
        ),
        (
            {"x": X[:2], "k": K[:3]},
            "Inputs have different batch sizes (2 and 3 for 'k').\n" + EXPECTS,
        ),
    ],
    ids=[
        "name",
        "missing",
        "float-for-int",
        "strings",
        "none",
        "bool-in-floats",
        "bools",
        "shape",
        "rank",
        "batch",
    ],  # fmt: skip
)
def test_bad_inputs_raise_with_what_the_signature_expects(model, inputs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        model.signatures["serving_default"](**inputs)


def test_ints_and_lists_are_accepted_for_float_inputs(model):
    # JSON numbers arrive as Python ints and lists; int -> float32 loses nothing.
    signature = model.signatures["serving_default"]
    as_lists = signature(x=[[1, 0, -2, 3]], k=[4])
    as_arrays = signature(x=np.array([[1.0, 0.0, -2.0, 3.0]], np.float32), k=np.array([4]))
    np.testing.assert_array_equal(as_lists["logits"], as_arrays["logits"])


def test_concurrent_calls_from_a_thread_pool_equal_sequential_results(model):
    signature = model.signatures["serving_default"]
    # 160 calls with different inputs: batch sizes 1, 3 and 64, rows rolled by the call.
    calls = [
        (np.roll(X, i, axis=0)[: BATCHES[i % 3]], np.roll(K, i)[: BATCHES[i % 3]])
        for i in range(160)
    ]
    sequential = [signature(x=x, k=k)["logits"] for x, k in calls]
    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded = list(pool.map(lambda call: signature(x=call[0], k=call[1])["logits"], calls))
    for got, expected in zip(threaded, sequential, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert len({float(s[0, 0]) for s in sequential}) > 50  # the inputs really differ


@pytest.mark.slow
def test_fresh_process_without_model_code_matches_predict(subprocesses, predicted):
    code, out, err = subprocesses.result("fresh")
    assert code == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == []  # none of those modules imported
    served = np.load(subprocesses.root / "out.npz")
    for batch in BATCHES:
        for key in ("logits", "probabilities", "class_ids"):
            np.testing.assert_allclose(
                served[f"{key}{batch}"], predicted[key][:batch], rtol=0, atol=1e-6
            )
    # Not all the same class: the comparison covers both branches of the argmax.
    assert set(served["class_ids64"].tolist()) == {0, 1}


# ----- requirement 6: the command line ------------------------------------------------------


@pytest.mark.slow
def test_cli_show_prints_the_signatures(subprocesses, export_path):
    code, out, err = subprocesses.result("show")
    assert code == 0, err
    assert f"Export {export_path} (global step 4, jax {jax.__version__}" in out
    assert (
        "signature_def['serving_default']: mode infer, method tensorflow/serving/predict\n"
        "  inputs:\n"
        "    inputs['k']: dtype int32, shape [None]\n"
        "    inputs['x']: dtype float32, shape [None, 4]\n"
        "  outputs:\n"
        "    outputs['class_ids']: dtype int32, shape ['b']\n"
        "    outputs['logits']: dtype float32, shape ['b', 2]\n"
        "    outputs['probabilities']: dtype float32, shape ['b', 2]"
    ) in out


@pytest.mark.slow
@pytest.mark.parametrize("request_format", ["run_columns", "run_rows"])
def test_cli_run_prints_outputs_as_json_equal_to_the_python_call(
    subprocesses, model, request_format
):
    code, out, err = subprocesses.result(request_format)
    assert code == 0, err
    printed = json.loads(out)
    expected = model.signatures["serving_default"](x=X[:3], k=K[:3])
    assert sorted(printed) == sorted(expected)
    for key, value in expected.items():
        # float32 -> JSON (a Python float holds it exactly) -> float32: no rounding.
        np.testing.assert_array_equal(np.asarray(printed[key], value.dtype), value)


def test_cli_run_unknown_signature(export_path, tmp_path, capsys):
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"x": X[:1].tolist(), "k": [1]}))  # plain columns
    assert cli_main(["run", export_path, "--signature", "classify", "--inputs", str(request)]) == 2
    assert "No signature 'classify'; the export has ['serving_default']." in capsys.readouterr().err
    assert cli_main(["run", export_path, "--inputs", str(request)]) == 0
    assert sorted(json.loads(capsys.readouterr().out)) == ["class_ids", "logits", "probabilities"]


def test_cli_run_names_an_inputs_file_that_is_not_json(export_path, tmp_path, capsys):
    request = tmp_path / "rows.json"
    request.write_text('{"x": [[1, 2] [3, 4]]}')  # a missing comma at char 14
    assert cli_main(["run", export_path, "--inputs", str(request)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: the inputs file {request} is not valid JSON: ")
    assert "Expecting ',' delimiter at line 1 column 15 (char 14)" in err
    assert '{"instances": [{"age": 39}, {"age": 50}]}' in err
