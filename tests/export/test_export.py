"""Tests of ``Estimator.export_saved_model``: semantics, signatures, the artifact's layout,
atomicity and warm start from an export.

Receivers are tested in ``test_export_receivers.py``; the loader and the command line in
``test_export_loader.py``. Every export compiles, so exports are shared through
module-scoped fixtures; the models are tiny (a 3 -> 1 logistic regression).
"""

import json
import os
import re
import shutil
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
import pytest
from jax import export as jax_export

import canned
import estimator as est
from canned import feature_column as fc
from estimator import checkpoint as ckpt

PREDICT = est.ModeKeys.PREDICT
X_SPEC = jax.ShapeDtypeStruct((None, 3), jnp.float32)
RNG = np.random.default_rng(0)
X = RNG.normal(size=(48, 3)).astype(np.float32)
Y = (X[:, 0] - X[:, 1] > 0).astype(np.float32)


def model_fn(features, labels, mode, params):
    """Logistic regression; ``params["outputs"]`` picks the PREDICT export_outputs."""
    logits = est.layers.dense(features["x"], 1, name="logits")[:, 0]
    probability = jax.nn.sigmoid(logits)
    predictions = {"logits": logits, "probability": probability}
    if mode == PREDICT:
        kind = params.get("outputs", "none")
        class_ids = (logits > 0).astype(jnp.int32)
        all_ids = jnp.stack([jnp.zeros_like(class_ids), jnp.ones_like(class_ids)], -1)
        classify = est.ClassificationOutput(
            scores=jnp.stack([1 - probability, probability], -1),
            classes=est.index_to_string(all_ids, ["neg", "pos"]),
        )
        export_outputs = {
            "none": None,
            "regression_only": {"reg": est.RegressionOutput(probability)},
            "all": {
                "serving_default": classify,
                "classification": classify,
                "regression": est.RegressionOutput(probability),
                "predict": est.PredictOutput(predictions),
            },
        }[kind]
        return est.EstimatorSpec(mode, predictions=predictions, export_outputs=export_outputs)
    loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
    return est.EstimatorSpec(
        mode,
        loss=loss,
        train_op=optax.sgd(params["learning_rate"]),
        predictions=predictions,
        eval_metric_ops={
            "accuracy": est.metrics.accuracy(labels, (logits > 0).astype(jnp.float32))
        },
    )


def raw_receiver():
    return est.export.build_raw_serving_input_receiver_fn({"x": X_SPEC})


def make_estimator(model_dir, *, outputs="none", learning_rate=0.5, seed=0, **kwargs):
    return est.Estimator(
        model_fn,
        str(model_dir),
        config=est.RunConfig(tf_random_seed=seed),
        params={"learning_rate": learning_rate, "outputs": outputs},
        **kwargs,
    )


def reference_logits(x, kernel, bias):
    """NumPy reference of the model: logits = x @ kernel + bias, [batch]."""
    return (np.asarray(x, np.float64) @ kernel.astype(np.float64))[:, 0] + bias[0]


@pytest.fixture(scope="module")
def trained(trained_estimator):
    """An estimator trained 3 steps, one epoch of 48 examples (checkpoints at steps 0 and 3)."""
    estimator = trained_estimator(
        "export",
        steps=3,
        model_fn=model_fn,
        input_fn=est.inputs.numpy_input_fn({"x": X}, Y, batch_size=16, num_epochs=1, shuffle=False),
        params={"learning_rate": 0.5, "outputs": "none"},
    )
    assert ckpt.checkpoint_step(estimator.latest_checkpoint()) == 3
    return estimator


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    """``(base, path, t_before, t_after)`` of an export of the latest checkpoint."""
    base = tmp_path_factory.mktemp("exports")
    before = time.time()
    path = trained.export_saved_model(str(base), raw_receiver())
    return str(base), path, before, time.time()


def _manifest(path) -> dict:
    with open(os.path.join(os.fsdecode(path), "manifest.json")) as f:
        return json.load(f)


# ----- requirement 1: export_saved_model semantics -----------------------------------------


def test_export_is_written_to_base_slash_unix_seconds_and_returned_as_bytes(exported):
    base, path, before, after = exported
    assert isinstance(path, bytes)  # TF returns the export path as bytes
    path = path.decode()
    assert os.path.dirname(path) == base
    stamp = os.path.basename(path)
    assert re.fullmatch(r"\d+", stamp)
    assert int(before) <= int(stamp) <= int(after) + 1
    assert sorted(os.listdir(base)) == [stamp]  # no temp- directory left behind
    assert os.path.isfile(os.path.join(path, "manifest.json"))


def test_export_uses_latest_checkpoint_or_the_given_one(trained, exported, tmp_path):
    latest = est.export.load(exported[1])
    assert latest.global_step == 3
    older_path = trained.export_saved_model(
        str(tmp_path), raw_receiver(), checkpoint_path=ckpt.step_dir(trained.model_dir, 0)
    )
    older = est.export.load(older_path)
    assert older.global_step == 0 and _manifest(older_path)["global_step"] == 0

    x = X[:5]
    for model, step in ((latest, 3), (older, 0)):
        checkpoint = ckpt.step_dir(trained.model_dir, step)
        kernel = ckpt.load_variable(checkpoint, "logits/kernel")
        bias = ckpt.load_variable(checkpoint, "logits/bias")
        got = model.signatures["serving_default"](x=x)["logits"]
        np.testing.assert_allclose(got, reference_logits(x, kernel, bias), rtol=1e-5, atol=1e-6)
    # Three SGD steps changed the weights, so the two exports disagree.
    assert not np.allclose(
        latest.signatures["serving_default"](x=x)["logits"],
        older.signatures["serving_default"](x=x)["logits"],
        atol=1e-3,
    )


def test_export_without_checkpoint_raises_tf_message(tmp_path):
    untrained = make_estimator(tmp_path / "empty")
    with pytest.raises(
        ValueError, match=re.escape(f"Couldn't find trained model at {untrained.model_dir}.")
    ):
        untrained.export_saved_model(str(tmp_path / "export"), raw_receiver())
    assert not (tmp_path / "export").exists()  # nothing written


def test_exports_in_the_same_second_get_later_names(trained, tmp_path, monkeypatch):
    frozen = 1_800_000_000.25
    monkeypatch.setattr(time, "time", lambda: frozen)
    first = trained.export_saved_model(str(tmp_path), raw_receiver())
    second = trained.export_saved_model(str(tmp_path), raw_receiver())
    # int(1_800_000_000.25) = 1800000000 is taken by the first, so the second is one later
    # (TF would sleep until the next second instead).
    assert os.path.basename(first) == b"1800000000"
    assert os.path.basename(second) == b"1800000001"
    assert sorted(os.listdir(tmp_path)) == ["1800000000", "1800000001"]
    assert est.export.load(second).global_step == 3


def test_a_later_export_sorts_after_every_earlier_one(trained, tmp_path, monkeypatch):
    """Exports faster than one a second take names ahead of the clock; a later export whose
    second is free (an older export deleted) still gets a later name: exporters keep the
    largest versions, and an earlier name would have their garbage collection delete the
    newest export (a BestExporter's best model) at once."""
    now = [1_800_000_000.5]
    monkeypatch.setattr(time, "time", lambda: now[0])
    names = [trained.export_saved_model(str(tmp_path), raw_receiver()) for _ in range(3)]
    # 1800000000 at the clock, then 1800000001 and 1800000002 ahead of it.
    assert [os.path.basename(n) for n in names] == [b"1800000000", b"1800000001", b"1800000002"]
    shutil.rmtree(tmp_path / "1800000000")  # exports_to_keep deleted the oldest
    now[0] = 1_800_000_000.9  # the clock still in the same second
    newest = trained.export_saved_model(str(tmp_path), raw_receiver())
    assert os.path.basename(newest) == b"1800000003"  # not the freed 1800000000


@pytest.fixture(scope="module")
def all_modes(trained, tmp_path_factory):
    supervised = est.export.build_raw_supervised_input_receiver_fn(
        {"x": X_SPEC}, jax.ShapeDtypeStruct((None,), jnp.float32)
    )
    path = trained.experimental_export_all_saved_models(
        str(tmp_path_factory.mktemp("all_modes")),
        {PREDICT: raw_receiver(), est.ModeKeys.EVAL: supervised, est.ModeKeys.TRAIN: supervised},
    )
    return path


def test_export_all_saved_models_has_predict_eval_and_train_signatures(all_modes, trained):
    model = est.export.load(all_modes)
    assert sorted(model.signatures) == ["eval", "serving_default", "train"]
    # Signature keys and method names of TF 2.15's supervised exports.
    assert {n: (s.mode, s.method_name) for n, s in model.signatures.items()} == {
        "serving_default": ("infer", "tensorflow/serving/predict"),
        "eval": ("eval", "tensorflow/supervised/eval"),
        "train": ("train", "tensorflow/supervised/training"),
    }
    assert sorted(model.signatures["eval"].inputs) == ["label", "x"]
    assert sorted(model.signatures["eval"].outputs) == [
        "loss",
        "metrics/accuracy/value",
        "predictions/logits",
        "predictions/probability",
    ]
    assert sorted(model.signatures["train"].outputs) == [
        "loss",
        "predictions/logits",
        "predictions/probability",
    ]

    x, y = X[:8], Y[:8]
    evaluated = trained.evaluate(
        est.inputs.numpy_input_fn({"x": x}, y, batch_size=8, shuffle=False)
    )
    out = model.signatures["eval"](x=x, label=y)
    # One batch of 8: evaluate's loss is the mean over batches of a single batch loss.
    np.testing.assert_allclose(out["loss"], evaluated["loss"], rtol=1e-6)
    np.testing.assert_allclose(out["metrics/accuracy/value"], evaluated["accuracy"], rtol=1e-6)
    served = model.signatures["serving_default"](x=x)
    np.testing.assert_allclose(out["predictions/logits"], served["logits"], rtol=1e-6)
    # The train signature computes the loss but does not step: calling it twice gives the
    # same loss, equal to the eval loss.
    train_out = model.signatures["train"](x=x, label=y)
    np.testing.assert_allclose(train_out["loss"], out["loss"], rtol=1e-6)
    np.testing.assert_allclose(model.signatures["train"](x=x, label=y)["loss"], out["loss"])


# ----- requirement 3: signatures ------------------------------------------------------------


def test_model_fn_without_export_outputs_gives_serving_default_predict_output(exported):
    entry = _manifest(exported[1])["signatures"]
    assert sorted(entry) == ["serving_default"]
    signature = entry["serving_default"]
    assert signature["mode"] == "infer"
    assert signature["method_name"] == "tensorflow/serving/predict"
    assert sorted(signature["outputs"]) == ["logits", "probability"]  # the predictions


def test_single_export_output_is_aliased_as_serving_default(trained, tmp_path):
    estimator = make_estimator(trained.model_dir, outputs="regression_only")
    model = est.export.load(estimator.export_saved_model(str(tmp_path), raw_receiver()))
    assert sorted(model.signatures) == ["reg", "serving_default"]
    for name in ("reg", "serving_default"):
        signature = model.signatures[name]
        assert signature.method_name == "tensorflow/serving/regress"
        assert sorted(signature.outputs) == ["outputs"]
    x = X[:4]
    kernel = trained.get_variable_value("logits/kernel")
    bias = trained.get_variable_value("logits/bias")
    expected = 1 / (1 + np.exp(-reference_logits(x, kernel, bias)))
    np.testing.assert_allclose(model.signatures["reg"](x=x)["outputs"], expected, rtol=1e-5)
    np.testing.assert_allclose(
        model.signatures["serving_default"](x=x)["outputs"], expected, rtol=1e-5
    )


def test_classification_and_regression_signatures_with_a_raw_float_receiver(trained, tmp_path):
    # TF 2.15 drops classification and regression signatures unless the receiver is a
    # single string tensor (ClassificationOutput.as_signature_def: "Classification
    # signatures can only accept a single tensor input of type tf.string"), which leaves a
    # raw-receiver export without serving_default. We export them for any receiver.
    estimator = make_estimator(trained.model_dir, outputs="all")
    model = est.export.load(estimator.export_saved_model(str(tmp_path), raw_receiver()))
    methods = {name: s.method_name for name, s in model.signatures.items()}
    assert methods == {
        "serving_default": "tensorflow/serving/classify",
        "classification": "tensorflow/serving/classify",
        "regression": "tensorflow/serving/regress",
        "predict": "tensorflow/serving/predict",
    }
    assert {name: s.mode for name, s in model.signatures.items()} == dict.fromkeys(methods, "infer")
    x = X[:3]
    p = 1 / (
        1
        + np.exp(
            -reference_logits(
                x,
                trained.get_variable_value("logits/kernel"),
                trained.get_variable_value("logits/bias"),
            )
        )
    )
    out = model.signatures["serving_default"](x=x)
    assert out["classes"].tolist() == [[b"neg", b"pos"]] * 3
    np.testing.assert_allclose(out["scores"], np.stack([1 - p, p], -1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        model.signatures["regression"](x=x)["outputs"], p, rtol=1e-5, atol=1e-6
    )
    assert sorted(model.signatures["predict"](x=x)) == ["logits", "probability"]


def test_an_export_runs_model_fn_once_for_all_its_signatures(trained, tmp_path):
    # TF builds one graph per export; we trace model_fn once (on the variables the
    # checkpoint's metadata lists), not once per signature key, and a key whose outputs
    # are another's (serving_default is classification here) shares its function.
    calls = []

    def counting(features, labels, mode, params):
        calls.append(mode)
        return model_fn(features, labels, mode, params)

    estimator = est.Estimator(
        counting,
        trained.model_dir,
        config=est.RunConfig(tf_random_seed=0),
        params={"learning_rate": 0.5, "outputs": "all"},
    )
    path = estimator.export_saved_model(str(tmp_path), raw_receiver()).decode()
    assert calls == [PREDICT]  # all four signatures
    manifest = _manifest(path)

    def function_bytes(name):
        with open(os.path.join(path, manifest["signatures"][name]["function"]), "rb") as f:
            return f.read()

    assert function_bytes("serving_default") == function_bytes("classification")
    assert function_bytes("regression") != function_bytes("classification")


def test_an_export_of_a_changed_model_fn_lists_what_differs(trained, tmp_path):
    # The first trace runs on the checkpoint's variables; a model asking for another one
    # is run in init mode, and the restore lists the differences (nothing is written).
    def renamed(features, labels, mode, params):
        logits = est.layers.dense(features["x"], 1, name="renamed")[:, 0]
        return est.EstimatorSpec(mode, predictions={"logits": logits})

    estimator = est.Estimator(renamed, trained.model_dir)
    with pytest.raises(ValueError) as info:
        estimator.export_saved_model(str(tmp_path / "exports"), raw_receiver())
    message = str(info.value)
    assert "in the model, not in the checkpoint: renamed/kernel [3, 1]" in message
    assert "in the checkpoint, not in the model: logits/kernel [3, 1]" in message
    assert not os.path.exists(tmp_path / "exports") or not os.listdir(tmp_path / "exports")


def test_each_signature_function_computes_only_what_its_outputs_need():
    from estimator.export._shared_trace import signature_functions

    def outputs(x):
        shared = {"a": jnp.sin(x)}
        return {"first": shared, "alias": shared, "cheap": {"b": x * 2.0}}

    x = jnp.arange(3.0)
    shapes, functions = signature_functions(outputs, x)
    assert jax.tree.map(lambda s: s.shape, shapes) == {
        "first": {"a": (3,)},
        "alias": {"a": (3,)},
        "cheap": {"b": (3,)},
    }
    assert functions["alias"] is functions["first"]
    np.testing.assert_allclose(functions["first"](x)["a"], np.sin(np.arange(3.0)))
    np.testing.assert_allclose(functions["cheap"](x)["b"], [0.0, 2.0, 4.0])
    primitives = {e.primitive.name for e in jax.make_jaxpr(functions["cheap"])(x).eqns}
    assert primitives == {"mul"}  # no sin: the other keys' equations are left out


# LinearClassifier: what TF 2.15.1 exports for the same columns
# (tensorflow_estimator 2.15.0; saved_model_cli show --all, parsing receiver):
#   serving_default  classify  outputs classes DT_STRING (-1, 2), scores DT_FLOAT (-1, 2)
#   classification   classify  outputs classes DT_STRING (-1, 2), scores DT_FLOAT (-1, 2)
#   regression       regress   outputs outputs DT_FLOAT (-1, 1)
#   predict          predict   outputs all_class_ids DT_INT32 (-1, 2), all_classes DT_STRING
#                              (-1, 2), class_ids DT_INT64 (-1, 1), classes DT_STRING (-1, 1),
#                              logistic DT_FLOAT (-1, 1), logits DT_FLOAT (-1, 1),
#                              probabilities DT_FLOAT (-1, 2)
# With build_raw_serving_input_receiver_fn TF 2.15.1 exports only `predict` (no default).
TF_LINEAR_CLASSIFIER_SIGNATURES = {
    "serving_default": ("tensorflow/serving/classify", {"classes": 2, "scores": 2}),
    "classification": ("tensorflow/serving/classify", {"classes": 2, "scores": 2}),
    "regression": ("tensorflow/serving/regress", {"outputs": 1}),
    "predict": (
        "tensorflow/serving/predict",
        {
            "all_class_ids": 2,
            "all_classes": 2,
            "class_ids": 1,
            "classes": 1,
            "logistic": 1,
            "logits": 1,
            "probabilities": 2,
        },
    ),
}
COLORS = ["red", "green", "blue"]


@pytest.fixture(scope="module")
def linear(tmp_path_factory):
    """A LinearClassifier over a numeric and a vocabulary-file column, and its exports
    with a parsing receiver and with a raw receiver."""
    root = tmp_path_factory.mktemp("linear")
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
    labels = np.array([0, 1, 1, 0, 1, 1])
    classifier.train(
        est.inputs.numpy_input_fn(features, labels, batch_size=3, num_epochs=2, shuffle=False)
    )
    parsing = est.export.build_parsing_serving_input_receiver_fn(
        fc.make_parse_example_spec(columns)
    )
    raw = est.export.build_raw_serving_input_receiver_fn(
        {"size": np.zeros([1], np.float32), "color": np.array(["red"], object)}
    )
    return {
        "classifier": classifier,
        "vocabulary": str(vocabulary),
        "parsing": classifier.export_saved_model(str(root / "export"), parsing),
        "raw": classifier.export_saved_model(str(root / "export"), raw),
    }


@pytest.mark.parametrize("receiver", ["parsing", "raw"])
def test_linear_classifier_exports_tf_signatures_and_always_a_default(linear, receiver):
    model = est.export.load(linear[receiver])
    got = {
        name: (s.method_name, {k: v["shape"][1] for k, v in s.outputs.items()})
        for name, s in model.signatures.items()
    }
    assert got == TF_LINEAR_CLASSIFIER_SIGNATURES
    for name, signature in model.signatures.items():
        for output in signature.outputs.values():
            assert output["shape"][0] == "b", (name, output)  # symbolic batch dimension
    predict = model.signatures["predict"].outputs
    assert predict["classes"]["dtype"] == "string"
    assert predict["all_classes"]["dtype"] == "string"
    assert predict["probabilities"]["dtype"] == "float32"
    # TF: class_ids DT_INT64; jax (without x64) computes int32.
    assert predict["class_ids"]["dtype"] == "int32"
    assert predict["all_class_ids"]["dtype"] == "int32"  # TF: DT_INT32


def test_linear_classifier_export_scores_raw_strings_like_predict(linear):
    model = est.export.load(linear["parsing"])
    raw = {"size": [1.5, 4.0, 2.0], "color": [["blue"], ["red"], ["purple"]]}
    out = model.signatures["serving_default"](**raw)
    expected = list(
        linear["classifier"].predict(
            est.inputs.numpy_input_fn(
                {
                    "size": np.array([1.5, 4.0, 2.0], np.float32),
                    "color": np.array(["blue", "red", "purple"], object),
                },
                shuffle=False,
            )
        )
    )
    np.testing.assert_allclose(
        out["scores"], np.stack([p["probabilities"] for p in expected]), atol=1e-6
    )
    assert out["classes"].tolist() == [[b"0", b"1"]] * 3  # TF's default class names
    predict = model.signatures["predict"](**raw)
    assert predict["classes"].ravel().tolist() == [p["classes"][0] for p in expected]


# ----- requirement 4: the artifact ----------------------------------------------------------


def test_manifest_fields(exported, trained):
    manifest = _manifest(exported[1])
    assert manifest["format"] == "jax_estimator.export" and manifest["version"] == 2
    assert manifest["jax_version"] == jax.__version__
    assert manifest["platforms"] == ["cpu"]
    assert manifest["global_step"] == 3
    assert manifest["variables"] == {
        "logits/kernel": {"shape": [3, 1], "dtype": "float32", "trainable": True},
        "logits/bias": {"shape": [1], "dtype": "float32", "trainable": True},
    }
    signature = manifest["signatures"]["serving_default"]
    assert signature["function"] == "functions/serving_default.jax"
    assert signature["inputs"] == {"x": {"dtype": "float32", "shape": [None, 3]}}
    assert signature["outputs"] == {
        "logits": {"dtype": "float32", "shape": ["b"]},
        "probability": {"dtype": "float32", "shape": ["b"]},
    }
    assert manifest["input_transform"] is None and manifest["assets"] == []
    # No host path of the exporting machine: the checkpoint by name only.
    assert manifest["checkpoint"] == "model.ckpt_3"
    assert "/" not in json.dumps(manifest["checkpoint"]) and str(trained.model_dir) not in (
        json.dumps(manifest)
    )


def test_one_serialized_function_per_signature_taking_the_variables(linear):
    path = linear["parsing"].decode()
    manifest = _manifest(path)
    functions = sorted(os.listdir(os.path.join(path, "functions")))
    assert functions == sorted(f"{name}.jax" for name in manifest["signatures"])
    for name, entry in manifest["signatures"].items():
        with open(os.path.join(path, entry["function"]), "rb") as f:
            exported = jax_export.deserialize(bytearray(f.read()))
        # Arguments: (variables, features, labels); the variables are inputs, with the
        # shapes the manifest lists.
        variables, _features, _labels = jax.tree.unflatten(
            exported.in_tree, list(exported.in_avals)
        )[0]
        shapes = {k: list(v.shape) for k, v in variables["trainable"].items()}
        assert shapes == {
            k: v["shape"] for k, v in manifest["variables"].items() if v["trainable"]
        }, name
        assert sorted(exported.platforms) == ["cpu"]


def _big_model_fn(features, labels, mode):
    hidden = est.layers.dense(features["x"], 1000, use_bias=False, name="big")
    logits = hidden.sum(-1)
    if mode == PREDICT:
        return est.EstimatorSpec(mode, predictions={"logits": logits})
    loss = jnp.mean((logits - labels) ** 2)
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.0))


def test_weights_are_arguments_not_constants(exported, tmp_path):
    # A 1000 x 1000 kernel (4,000,000 bytes of float32) makes the variables 4 MB but leaves
    # the serialized function small.
    big = est.Estimator(
        _big_model_fn, str(tmp_path / "big"), config=est.RunConfig(tf_random_seed=0)
    )
    big.train(
        est.inputs.numpy_input_fn(
            {"x": np.ones((2, 1000), np.float32)},
            np.zeros(2, np.float32),
            batch_size=2,
            shuffle=False,
        ),
        steps=1,
    )
    receiver = est.export.build_raw_serving_input_receiver_fn(
        {"x": jax.ShapeDtypeStruct((None, 1000), jnp.float32)}
    )
    big_path = big.export_saved_model(str(tmp_path / "export"), receiver).decode()

    def size(root, sub):
        return sum(
            os.path.getsize(os.path.join(d, f))
            for d, _, fs in os.walk(os.path.join(root, sub))
            for f in fs
        )

    small_path = exported[1].decode()
    assert size(big_path, "variables") > 3_000_000
    assert size(big_path, "functions") < 50_000
    assert abs(size(big_path, "functions") - size(small_path, "functions")) < 20_000


def test_outputs_follow_the_saved_variables(exported, tmp_path):
    # Rewrite variables/ of a copy with other values: the same function gives other outputs.
    copy = str(tmp_path / "1234567890")
    shutil.copytree(exported[1].decode(), copy)
    kernel = np.array([[1.0], [2.0], [-1.0]], np.float32)
    bias = np.array([0.5], np.float32)
    shutil.rmtree(os.path.join(copy, "variables"))
    with ocp.StandardCheckpointer() as saver:
        saver.save(
            os.path.join(copy, "variables"),
            {
                "trainable": {"logits/kernel": kernel, "logits/bias": bias},
                "non_trainable": {},
            },
        )
    x = np.array([[1.0, 1.0, 1.0], [0.0, 2.0, 4.0]], np.float32)
    # The checksums catch the rewrite; verify_files=False loads it anyway.
    with pytest.raises(ValueError, match=r"variables/.* is corrupt or was altered"):
        est.export.load(copy)
    # logits = [1 + 2 - 1 + 0.5, 0 + 4 - 4 + 0.5] = [2.5, 0.5]
    out = est.export.load(copy, verify_files=False).signatures["serving_default"](x=x)
    np.testing.assert_allclose(out["logits"], [2.5, 0.5], rtol=1e-6)


def test_assets_hold_the_vocabulary_file(linear):
    path = linear["parsing"].decode()
    assert os.listdir(os.path.join(path, "assets")) == ["colors.txt"]
    with open(os.path.join(path, "assets", "colors.txt")) as f:
        assert f.read() == "red\ngreen\nblue\n"
    assert _manifest(path)["assets"] == ["colors.txt"]
    # The loader reads the copy: the export still works once the original file is gone.
    moved = linear["vocabulary"] + ".moved"
    os.rename(linear["vocabulary"], moved)
    try:
        out = est.export.load(path).signatures["predict"](size=[1.0], color=[["green"]])
        assert out["probabilities"].shape == (1, 2)
    finally:
        os.rename(moved, linear["vocabulary"])


@pytest.fixture(scope="module")
def text_export(trained, tmp_path_factory):
    root = tmp_path_factory.mktemp("text")
    notes = root / "notes.txt"
    notes.write_text("exported for the tests\n")
    path = trained.export_saved_model(
        str(root / "export"),
        raw_receiver(),
        assets_extra={"docs/notes.txt": str(notes), "top.txt": str(notes)},
        as_text=True,
    )
    return path.decode()


def test_assets_extra_and_as_text(text_export):
    extra = os.path.join(text_export, "assets.extra")
    for relative in ("docs/notes.txt", "top.txt"):
        with open(os.path.join(extra, relative)) as f:
            assert f.read() == "exported for the tests\n"
    with open(os.path.join(text_export, "functions", "serving_default.mlir")) as f:
        mlir = f.read()
    # StableHLO text: the module, its entry point, the dense layer's matmul, and the
    # symbolic batch dimension.
    assert re.search(r"^module @\S+ attributes \{jax.uses_shape_polymorphism = true", mlir, re.M)
    assert "func.func public @main" in mlir and "stablehlo.dot_general" in mlir
    with open(os.path.join(text_export, "manifest.json")) as f:
        assert f.read().startswith('{\n  "assets"')  # indented when as_text


@pytest.mark.parametrize("which", ["text", "linear"])
def test_every_file_is_json_orbax_a_function_or_an_asset(which, text_export, linear):
    root = text_export if which == "text" else linear["parsing"].decode()
    assert set(os.listdir(root)) <= {
        "manifest.json",
        "functions",
        "variables",
        "assets",
        "assets.extra",
    }
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            top = os.path.relpath(path, root).split(os.sep)[0]
            if top == "manifest.json":
                with open(path) as f:
                    json.load(f)
            elif top == "functions":
                if name.endswith(".jax"):
                    with open(path, "rb") as f:
                        jax_export.deserialize(bytearray(f.read()))
                else:
                    assert name.endswith(".mlir"), path
            elif top in ("assets", "assets.extra"):
                with open(path) as f:
                    f.read()  # text files copied from the given sources
            else:
                assert top == "variables", path
    # variables/ is an orbax checkpoint: orbax reads it, with the manifest's names.
    restored = ocp.StandardCheckpointer().restore(os.path.join(root, "variables"))
    assert set(restored["trainable"]) == {
        k for k, v in _manifest(root)["variables"].items() if v["trainable"]
    }


# ----- requirement 8: atomicity -------------------------------------------------------------


@pytest.mark.parametrize("where", ["orbax save", "manifest write", "rename"])
def test_an_interrupted_export_leaves_nothing_the_loader_accepts(
    trained, tmp_path, monkeypatch, where
):
    failed = []

    def fail(what):
        failed.append(what)
        raise RuntimeError("disk full (simulated)")

    if where == "orbax save":
        monkeypatch.setattr(ocp.StandardCheckpointer, "save", lambda *a, **k: fail(where))
    elif where == "manifest write":
        real_dump = json.dump

        def dump(obj, fp, *args, **kwargs):
            if os.path.basename(getattr(fp, "name", "")) == "manifest.json":
                fail(where)
            return real_dump(obj, fp, *args, **kwargs)

        monkeypatch.setattr(json, "dump", dump)
    else:
        real_rename = os.rename

        def rename(src, dst, *args, **kwargs):
            if os.path.basename(os.fspath(src)).startswith("temp-"):
                fail(where)  # the final rename of temp-<ts>-... to <ts>
            return real_rename(src, dst, *args, **kwargs)

        monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(RuntimeError, match="disk full"):
        trained.export_saved_model(str(tmp_path), raw_receiver())
    assert failed == [where]  # it failed where intended, once
    assert os.listdir(tmp_path) == []  # neither <digits> nor temp-<digits>-...


def test_loader_refuses_directories_without_manifest_or_named_temp(exported, tmp_path):
    empty = tmp_path / "1700000000"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"is not a complete export: expected manifest.json"):
        est.export.load(str(empty))
    # A complete-looking temp directory (interrupted between the manifest and the rename).
    temp = tmp_path / "temp-1700000000"
    shutil.copytree(exported[1].decode(), temp)
    with pytest.raises(ValueError, match=r"a temp-\* directory is an interrupted export"):
        est.export.load(str(temp))


# ----- requirement 7: warm start from an export ---------------------------------------------


def _train_one_step_at_lr_zero(estimator):
    estimator.train(est.inputs.numpy_input_fn({"x": X}, Y, batch_size=16, shuffle=False), steps=1)


def test_warm_start_from_an_export_reads_its_variables(exported, tmp_path):
    saved = est.export.load(exported[1]).variables["trainable"]
    warm = make_estimator(
        tmp_path / "warm", learning_rate=0.0, seed=7, warm_start_from=exported[1].decode()
    )
    _train_one_step_at_lr_zero(warm)
    cold = make_estimator(tmp_path / "cold", learning_rate=0.0, seed=7)
    _train_one_step_at_lr_zero(cold)
    for name in ("logits/kernel", "logits/bias"):
        np.testing.assert_array_equal(warm.get_variable_value(name), np.asarray(saved[name]))
    # Without warm start the same seed gives other (initial) values.
    assert not np.allclose(cold.get_variable_value("logits/kernel"), saved["logits/kernel"])


def test_warm_start_is_skipped_when_model_dir_has_a_checkpoint(exported, tmp_path):
    model_dir = tmp_path / "model"
    first = make_estimator(model_dir, learning_rate=0.0, seed=7)
    _train_one_step_at_lr_zero(first)
    own = first.get_variable_value("logits/kernel")
    again = make_estimator(
        model_dir, learning_rate=0.0, seed=7, warm_start_from=exported[1].decode()
    )
    _train_one_step_at_lr_zero(again)
    np.testing.assert_array_equal(again.get_variable_value("logits/kernel"), own)
    saved = est.export.load(exported[1]).variables["trainable"]["logits/kernel"]
    assert not np.allclose(own, saved)


def test_export_savedmodel_is_tfs_deprecated_alias(trained, tmp_path, caplog):
    import logging

    with caplog.at_level(logging.WARNING, logger="estimator"):
        path = trained.export_savedmodel(str(tmp_path), raw_receiver())
    assert "use `export_saved_model` instead" in caplog.text
    assert est.export.load(path).global_step == 3
