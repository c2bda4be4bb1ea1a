"""Tests of the serving input receivers (``estimator.export``):
validation messages, raw receivers with symbolic or fixed batch sizes, alternatives,
features computed from the receiver tensors, and the parsing receiver that takes raw
per-example values (strings included) through a feature-column ``InputTransform``.

Expected messages are TF 2.15.1's where they translate (``tf.estimator.export``,
checked in a TF 2.15.1 venv): "features must be defined.", "receiver_tensors must be
defined.", "receiver_tensor keys must be strings: 1.", "receiver_tensors_alternatives must
be a dict: ...", "receiver_tensors_alternative keys must be strings: 1.", "Features and
labels must have distinct keys. Found overlapping keys: {'a'}"; for a non-tensor TF says
"feature a must be a Tensor, SparseTensor, or RaggedTensor."
"""

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import estimator as est
from canned import feature_column as fc
from estimator.export import (
    ServingInputReceiver,
    TensorServingInputReceiver,
    build_parsing_serving_input_receiver_fn,
    build_raw_serving_input_receiver_fn,
    build_raw_supervised_input_receiver_fn,
)
from estimator.export.__main__ import main as cli_main

PREDICT = est.ModeKeys.PREDICT
SPEC = jax.ShapeDtypeStruct((None, 3), jnp.float32)
RNG = np.random.default_rng(1)
X = RNG.normal(size=(256, 3)).astype(np.float32)
Y = (X[:, 0] + X[:, 2] > 0).astype(np.float32)


# ----- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ServingInputReceiver(None, {"x": SPEC}), "features must be defined."),
        (lambda: ServingInputReceiver({"x": SPEC}, None), "receiver_tensors must be defined."),
        (
            lambda: ServingInputReceiver({"x": SPEC}, {1: SPEC}),
            "receiver_tensor keys must be strings: 1.",
        ),
        (
            lambda: ServingInputReceiver({"x": "age"}, {"x": SPEC}),
            "feature x must be a jax.ShapeDtypeStruct or an array (TF: a Tensor or "
            "SparseTensor); got 'age'.",
        ),
        (
            lambda: ServingInputReceiver({"x": SPEC}, {"x": 3}),
            "receiver_tensor x must be a jax.ShapeDtypeStruct or an array",
        ),
        (
            lambda: ServingInputReceiver({"x": SPEC}, {"x": SPEC}, [SPEC]),
            "receiver_tensors_alternatives must be a dict: [",
        ),
        (
            lambda: ServingInputReceiver({"x": SPEC}, {"x": SPEC}, {"alt": {1: SPEC}}),
            "receiver_tensors_alternative keys must be strings: 1.",
        ),
        (lambda: TensorServingInputReceiver(None, {"x": SPEC}), "features must be defined."),
        (
            lambda: TensorServingInputReceiver({"x": SPEC}, {"x": SPEC}),
            "TensorServingInputReceiver takes a single feature spec, not a dict; use "
            "ServingInputReceiver for dict features.",
        ),
        (
            lambda: build_raw_supervised_input_receiver_fn({"a": SPEC}, {"a": SPEC}),
            "Features and labels must have distinct keys. Found overlapping keys: {'a'}",
        ),
        (
            lambda: build_parsing_serving_input_receiver_fn({}),
            "feature_spec must be a non-empty dict; got {}.",
        ),
        (
            lambda: build_parsing_serving_input_receiver_fn({"a": SPEC})(),
            "feature_spec['a'] must be a FixedLenFeature or VarLenFeature; got",
        ),
    ],
)
def test_receiver_validation_messages(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def test_single_specs_get_tf_default_names():
    receiver = ServingInputReceiver(SPEC, SPEC)
    assert receiver.features == {"feature": SPEC}
    assert receiver.receiver_tensors == {"input": SPEC}
    alternatives = ServingInputReceiver(SPEC, SPEC, {"alt": SPEC}).receiver_tensors_alternatives
    assert alternatives == {"alt": {"input": SPEC}}


def test_example_arrays_become_specs_with_default_batch_size():
    fn = build_raw_serving_input_receiver_fn(
        {"x": np.zeros((10, 3), np.float32), "word": np.array(["a"], object)},
        default_batch_size=4,
    )
    receiver = fn()
    # As TF's _placeholder_from_tensor: the first dimension becomes default_batch_size.
    assert receiver.receiver_tensors == {
        "x": jax.ShapeDtypeStruct((4, 3), np.float32),
        "word": jax.ShapeDtypeStruct((4,), np.dtype(object)),
    }
    assert receiver.features == receiver.receiver_tensors
    single = build_raw_serving_input_receiver_fn(np.zeros((1, 3), np.float32))()
    assert isinstance(single, TensorServingInputReceiver)
    assert single.receiver_tensors == {"input": jax.ShapeDtypeStruct((None, 3), np.float32)}


# ----- exports with raw receivers -----------------------------------------------------------


def model_fn(features, labels, mode):
    """Logistic regression on ``features["x"]`` or on ``features`` itself (an array)."""
    x = features["x"] if isinstance(features, dict) else features
    logits = est.layers.dense(x, 1, name="logits")[:, 0]
    predictions = {"logits": logits}
    if mode == PREDICT:
        return est.EstimatorSpec(mode, predictions=predictions)
    loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.5), predictions=predictions)


@pytest.fixture(scope="module")
def trained(trained_estimator):
    # One epoch of 256 examples in batches of 64: 4 steps.
    return trained_estimator(
        "receivers",
        steps=4,
        model_fn=model_fn,
        input_fn=est.inputs.numpy_input_fn({"x": X}, Y, batch_size=64, num_epochs=1, shuffle=False),
        tf_random_seed=3,
    )


@pytest.fixture(scope="module")
def reference(trained):
    """NumPy logits = x @ kernel + bias from the trained variables, [batch]."""
    kernel = trained.get_variable_value("logits/kernel").astype(np.float64)
    bias = trained.get_variable_value("logits/bias").astype(np.float64)
    return lambda x: (np.asarray(x, np.float64) @ kernel)[:, 0] + bias[0]


def export_and_load(estimator, receiver_fn, tmp_path):
    return est.export.load(estimator.export_saved_model(str(tmp_path), receiver_fn))


def test_none_batch_dimension_serves_any_batch_size(trained, reference, tmp_path):
    model = export_and_load(trained, build_raw_serving_input_receiver_fn({"x": SPEC}), tmp_path)
    signature = model.signatures["serving_default"]
    assert signature.inputs == {"x": {"dtype": "float32", "shape": [None, 3]}}
    for batch in (1, 7, 256):
        out = signature(x=X[:batch])
        assert out["logits"].shape == (batch,)
        np.testing.assert_allclose(out["logits"], reference(X[:batch]), rtol=1e-5, atol=1e-6)


def test_example_arrays_with_default_batch_size_fix_the_batch(trained, reference, tmp_path):
    receiver_fn = build_raw_serving_input_receiver_fn({"x": X[:1]}, default_batch_size=4)
    signature = export_and_load(trained, receiver_fn, tmp_path).signatures["serving_default"]
    assert signature.inputs == {"x": {"dtype": "float32", "shape": [4, 3]}}
    assert signature.outputs["logits"]["shape"] == [4]  # no symbolic dimension
    np.testing.assert_allclose(signature(x=X[:4])["logits"], reference(X[:4]), rtol=1e-5, atol=1e-6)
    expected = re.escape(
        "Input 'x' has shape [5, 3], expected [4, 3] (None: any size).\n"
        "Signature 'serving_default' expects:\n  x: float32 [4, 3]"
    )
    with pytest.raises(ValueError, match=expected):
        signature(x=X[:5])


def test_single_array_receiver_passes_an_array_as_features(trained, reference, tmp_path):
    # build_raw_serving_input_receiver_fn(array) -> TensorServingInputReceiver: model_fn
    # gets the array itself; the input is named "input" (TF's default).
    receiver_fn = build_raw_serving_input_receiver_fn(X[:2])
    signature = export_and_load(trained, receiver_fn, tmp_path).signatures["serving_default"]
    assert signature.inputs == {"input": {"dtype": "float32", "shape": [None, 3]}}
    np.testing.assert_allclose(
        signature(input=X[:3])["logits"], reference(X[:3]), rtol=1e-5, atol=1e-6
    )


def test_tensor_receiver_matches_its_feature_to_an_equal_receiver_spec(
    trained, reference, tmp_path
):
    # Two equal but distinct spec objects: the only receiver input with that shape and dtype
    # is the feature.
    receiver_fn = lambda: TensorServingInputReceiver(  # noqa: E731
        jax.ShapeDtypeStruct((None, 3), jnp.float32),
        {"rows": jax.ShapeDtypeStruct((None, 3), jnp.float32)},
    )
    signature = export_and_load(trained, receiver_fn, tmp_path).signatures["serving_default"]
    np.testing.assert_allclose(
        signature(rows=X[:2])["logits"], reference(X[:2]), rtol=1e-5, atol=1e-6
    )


def test_receiver_tensors_alternatives_give_prefixed_signatures(trained, reference, tmp_path):
    spec = jax.ShapeDtypeStruct((None, 3), jnp.float32)
    receiver_fn = lambda: ServingInputReceiver(  # noqa: E731
        {"x": spec}, {"x": spec}, receiver_tensors_alternatives={"other": {"x": spec}}
    )
    model = export_and_load(trained, receiver_fn, tmp_path)
    # TF's build_all_signature_defs: "<receiver name>:<export output key>".
    assert sorted(model.signatures) == ["other:serving_default", "serving_default"]
    for name in model.signatures:
        np.testing.assert_allclose(
            model.signatures[name](x=X[:3])["logits"], reference(X[:3]), rtol=1e-5, atol=1e-6
        )


def test_features_computed_from_receiver_tensors_with_jnp(trained, reference, tmp_path):
    # The service sends two inputs; the model's "x" is their concatenation, computed in the
    # exported function. The alternative "raw" group feeds "x" itself (downstream of the
    # function, as TF's alternatives feed points inside the receiver's graph).
    receiver_fn = lambda: ServingInputReceiver(  # noqa: E731
        lambda t: {"x": jnp.concatenate([t["first_two"], t["third"][:, None] * 2.0], -1)},
        {
            "first_two": jax.ShapeDtypeStruct((None, 2), jnp.float32),
            "third": jax.ShapeDtypeStruct((None,), jnp.float32),
        },
        receiver_tensors_alternatives={"raw": {"x": jax.ShapeDtypeStruct((None, 3), jnp.float32)}},
    )
    model = export_and_load(trained, receiver_fn, tmp_path)
    assert sorted(model.signatures) == ["raw:serving_default", "serving_default"]
    signature = model.signatures["serving_default"]
    assert sorted(signature.inputs) == ["first_two", "third"]
    out = signature(first_two=X[:5, :2], third=X[:5, 2])
    x = np.concatenate([X[:5, :2], X[:5, 2:] * 2.0], -1)  # what the function computes
    np.testing.assert_allclose(out["logits"], reference(x), rtol=1e-5, atol=1e-6)
    raw = model.signatures["raw:serving_default"](x=X[:5])
    np.testing.assert_allclose(raw["logits"], reference(X[:5]), rtol=1e-5, atol=1e-6)


def test_receiver_errors_at_export(trained, tmp_path):
    with pytest.raises(ValueError, match=r"Feature 'x' is not one of the receiver's inputs"):
        trained.export_saved_model(
            str(tmp_path),
            lambda: ServingInputReceiver(
                {"x": jax.ShapeDtypeStruct((None, 3), jnp.float32)},
                {"y": jax.ShapeDtypeStruct((None, 2), jnp.float32)},
            ),
        )
    with pytest.raises(
        ValueError,
        match=r"The input receiver function for mode 'infer' must return a "
        r"ServingInputReceiver; got dict\.",
    ):
        trained.export_saved_model(str(tmp_path), lambda: {"x": SPEC})
    with pytest.raises(ValueError, match=r"An input_receiver_fn must be defined\."):
        trained.export_saved_model(str(tmp_path), None)
    assert list(tmp_path.iterdir()) == []


# ----- the parsing receiver: raw per-example values ------------------------------------------

COLORS = ("red", "green", "blue")


def feature_columns():
    return [
        fc.numeric_column("age", default_value=30.0),
        fc.categorical_column_with_vocabulary_list("color", COLORS, num_oov_buckets=1),
    ]


def parsing_model_fn(features, labels, mode):
    """logits = 0.1 * age * w + sum of table[id] over the example's color ids (-1: none)."""
    w = est.get_variable("age_weight", [1], jnp.float32, est.initializers.ones_initializer())
    table = est.get_variable("color_table", [4], jnp.float32, est.initializers.zeros_initializer())
    ids = features["color/ids"]
    colors = jnp.where(ids >= 0, table[jnp.maximum(ids, 0)], 0.0).sum(-1)
    logits = 0.1 * features["age"][:, 0] * w[0] + colors
    predictions = {"logits": logits}
    if mode == PREDICT:
        return est.EstimatorSpec(mode, predictions=predictions)
    loss = jnp.mean((logits - labels) ** 2)
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.01), predictions=predictions)


@pytest.fixture(scope="module")
def parsing(tmp_path_factory):
    root = tmp_path_factory.mktemp("parsing")
    columns = feature_columns()
    estimator = est.Estimator(
        parsing_model_fn,
        str(root / "model"),
        config=est.RunConfig(tf_random_seed=0),
        input_transform=fc.input_transform(columns),
    )
    features = {
        "age": np.array([20.0, 40.0, 60.0, 25.0], np.float32),
        "color": np.array([["red", "blue"], ["green", ""], ["blue", ""], ["red", "green"]], object),
    }
    estimator.train(
        est.inputs.numpy_input_fn(
            features, np.array([1.0, -1.0, 2.0, 0.5], np.float32), batch_size=4, shuffle=False
        ),
        steps=3,
    )
    spec = fc.make_parse_example_spec(columns)
    path = estimator.export_saved_model(
        str(root / "export"), build_parsing_serving_input_receiver_fn(spec)
    )
    return estimator, est.export.load(path), path.decode()


def _parsing_reference(estimator, age, color_ids):
    """NumPy: 0.1 * age * w + sum(table[ids]) over the non-negative ids."""
    w = estimator.get_variable_value("age_weight")[0]
    table = estimator.get_variable_value("color_table")
    assert np.count_nonzero(table) >= 3  # trained: the lookup matters
    return np.array(
        [
            0.1 * a * w + sum(table[i] for i in ids if i >= 0)
            for a, ids in zip(age, color_ids, strict=True)
        ]
    )


def test_parsing_receiver_takes_raw_strings_defaults_and_var_len_lists(parsing):
    estimator, model, _ = parsing
    signature = model.signatures["serving_default"]
    assert signature.inputs == {
        "age": {"dtype": "float32", "shape": [None, 1]},
        "color": {"dtype": "string", "shape": [None, None]},
    }
    # A JSON-like batch: one age missing (None -> the FixedLenFeature default 30.0), color
    # lists of lengths 2, 1, 0 and an out-of-vocabulary value (OOV bucket, id 3).
    out = signature(age=[20, None, 50, 41.5], color=[["red", "blue"], ["green"], [], ["purple"]])
    # ids: red 0, blue 2, green 1, purple -> 3 (the one OOV bucket)
    expected = _parsing_reference(estimator, [20.0, 30.0, 50.0, 41.5], [[0, 2], [1], [], [3]])
    np.testing.assert_allclose(out["logits"], expected, rtol=1e-5, atol=1e-6)
    predicted = [
        p["logits"]
        for p in estimator.predict(
            est.inputs.numpy_input_fn(
                {
                    "age": np.array([20.0, 30.0, 50.0, 41.5], np.float32),
                    "color": np.array(
                        [["red", "blue"], ["green", ""], ["", ""], ["purple", ""]], object
                    ),
                },
                shuffle=False,
            )
        )
    ]
    np.testing.assert_allclose(out["logits"], predicted, atol=1e-6)


def test_parsing_receiver_omitted_inputs_take_their_defaults(parsing):
    estimator, model, _ = parsing
    out = model.signatures["serving_default"](color=["green", "blue"])  # one value each
    expected = _parsing_reference(estimator, [30.0, 30.0], [[1], [2]])
    np.testing.assert_allclose(out["logits"], expected, rtol=1e-5, atol=1e-6)
    # An omitted VarLenFeature is no values for every example.
    out = model.signatures["serving_default"](age=[20.0, 50.0])
    expected = _parsing_reference(estimator, [20.0, 50.0], [[], []])
    np.testing.assert_allclose(out["logits"], expected, rtol=1e-5, atol=1e-6)


def test_parsing_receiver_rejects_strings_for_numbers(parsing):
    _, model, _ = parsing
    with pytest.raises(
        ValueError,
        match=re.escape(
            "Input 'age' must be float32, got values of type str.\n"
            "Signature 'serving_default' expects:\n"
            "  age: float32 [None, 1]\n  color: string [None, None]"
        ),
    ):
        model.signatures["serving_default"](age=["forty"], color=[["red"]])


def test_cli_run_on_json_instances_with_missing_keys(parsing, tmp_path, capsys):
    estimator, model, path = parsing
    instances = [{"age": 20, "color": ["red", "blue"]}, {"color": ["green"]}, {"age": 50}]
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"instances": instances}))
    assert cli_main(["run", path, "--inputs", str(request)]) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = _parsing_reference(estimator, [20.0, 30.0, 50.0], [[0, 2], [1], []])
    np.testing.assert_allclose(printed["logits"], expected, rtol=1e-5, atol=1e-6)


def test_receiver_function_with_input_transform_is_refused(parsing, tmp_path):
    estimator, _, _ = parsing
    with pytest.raises(ValueError, match=r"The receiver computes features with a function, but"):
        estimator.export_saved_model(
            str(tmp_path),
            lambda: ServingInputReceiver(lambda t: t, {"age": SPEC}),
        )
