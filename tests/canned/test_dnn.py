"""The DNN, wide & deep and baseline canned estimators against TF 2.15.

Parity: both frameworks start from the same weights — ``init_values`` below, written as a
checkpoint and given as ``warm_start_from`` (TF: a ``tf.compat.v1.train.Saver`` checkpoint
and ``WarmStartSettings(ckpt, vars_to_warm_start=".*")``) — and train 5 steps on the same
8 examples with each estimator's default optimizer. The expected numbers were taken from
TensorFlow 2.15.1 + tensorflow-estimator 2.15.0 running that script; TF is never imported
here. Random initial values themselves cannot match (JAX's PRNG is not TF's).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import canned
import estimator as est
from canned import feature_column as fc
from estimator.engine.steps import TrainState

X = np.array(
    [[0.5, -1.0], [1.5, 0.3], [-0.7, 0.8], [0.1, 0.1], [2.0, -0.5], [-1.2, -0.9], [0.9, 1.1],
     [-0.3, 0.4]],
    np.float32,
)  # fmt: skip
C = np.array([["a"], ["b"], ["c"], ["a"], ["b"], ["b"], ["c"], ["a"]], object)
Y = np.array([0, 1, 1, 0, 1, 0, 1, 0])
YR = np.array([[0.5], [1.2], [-0.3], [0.0], [2.0], [-1.0], [0.7], [0.1]], np.float32)
FEATURES = {"x": X, "c": C}
NUM = fc.numeric_column("x", shape=(2,))
CAT = fc.categorical_column_with_vocabulary_list("c", ["a", "b", "c"])
EMBEDDING = "dnn/input_from_feature_columns/input_layer/c_embedding/embedding_weights"
DNN_SHAPES = {
    "dnn/hiddenlayer_0/kernel": (4, 3),
    "dnn/hiddenlayer_0/bias": (3,),
    "dnn/hiddenlayer_1/kernel": (3, 2),
    "dnn/hiddenlayer_1/bias": (2,),
    EMBEDDING: (3, 2),
    "dnn/logits/kernel": (2, 1),
    "dnn/logits/bias": (1,),
}
BN_SHAPES = {
    "dnn/hiddenlayer_0/kernel": (5, 3),
    "dnn/hiddenlayer_0/bias": (3,),
    "dnn/hiddenlayer_0/batchnorm_0/gamma": (3,),
    "dnn/hiddenlayer_0/batchnorm_0/beta": (3,),
    "dnn/logits/kernel": (3, 1),
    "dnn/logits/bias": (1,),
}
WD_SHAPES = {
    "dnn/hiddenlayer_0/kernel": (2, 3),
    "dnn/hiddenlayer_0/bias": (3,),
    "dnn/logits/kernel": (3, 1),
    "dnn/logits/bias": (1,),
    "linear/linear_model/c/weights": (3, 1),
    "linear/linear_model/bias_weights": (1,),
}


def init_values(shapes, seed=0):
    """The shared starting point: uniform(-0.5, 0.5) in sorted-name order."""
    rng = np.random.default_rng(seed)
    return {
        name: rng.uniform(-0.5, 0.5, size=shape).astype(np.float32)
        for name, shape in sorted(shapes.items())
    }


def init_checkpoint(path, shapes, scale=None) -> str:
    """A checkpoint of ``init_values(shapes)`` (times ``scale[name]`` where given)."""
    values = {k: jnp.asarray(v) * (scale or {}).get(k, 1) for k, v in init_values(shapes).items()}
    state = TrainState(values, {}, None, jnp.zeros((), jnp.int32), jnp.full((), -1, jnp.int32))
    saver = est.Checkpointer(str(path))
    saver.save(0, state, with_opt_state=False)
    saver.wait()
    saver.close()
    return str(path)


def five_steps(estimator, labels):
    estimator.train(lambda: (FEATURES, labels), steps=5)
    loss = estimator.evaluate(lambda: (FEATURES, labels), steps=1)["loss"]
    (batch,) = estimator.predict(lambda: FEATURES, yield_single_examples=False)
    return loss, batch


# From TF 2.15.1 (the script described in the module docstring).
TF = {
    "dnn": (
        0.6917693018913269,
        [0.5334463119506836, 0.5353109836578369, 0.5259997844696045, 0.5282034873962402,
         0.5374242067337036, 0.5273259878158569, 0.5312790274620056, 0.5278307795524597],
    ),
    "dnnreg": (
        0.7997806072235107,
        [0.1374213993549347, 0.14503219723701477, 0.1072968989610672, 0.1162094995379448,
         0.153438001871109, 0.11265440285205841, 0.12866640090942383, 0.11470050364732742],
    ),
    "bn": (
        0.7066493034362793,
        [0.4657669961452484, 0.4424333870410919, 0.4985029995441437, 0.46971359848976135,
         0.4451647102832794, 0.490772008895874, 0.4692519009113312, 0.4724627137184143],
    ),
    "wd": (
        0.7498834729194641,
        [0.611433207988739, 0.5811914205551147, 0.6520410776138306, 0.6187763214111328,
         0.5993744134902954, 0.6482717990875244, 0.5749688148498535, 0.6353731751441956],
    ),
}  # fmt: skip
TF_BN_MOVING_MEAN = [0.0019324393942952156, 0.0018840630073100328, 0.0007733805105090141]
TF_BN_MOVING_VARIANCE = [0.9956706166267395, 0.995511531829834, 0.995378851890564]


def _check(name, loss, values):
    tf_loss, tf_values = TF[name]
    assert abs(loss - tf_loss) < 1e-6, (loss, tf_loss)
    np.testing.assert_allclose(np.ravel(values), tf_values, atol=1e-6)


@pytest.mark.slow
def test_dnn_classifier_matches_tf(tmp_path):
    # Default optimizer: TF 2.15's V2 DNN resolves 'Adagrad' with Keras's default rate, 0.001.
    model = canned.DNNClassifier(
        [3, 2],
        [NUM, fc.embedding_column(CAT, 2)],
        str(tmp_path / "m"),
        warm_start_from=init_checkpoint(tmp_path / "init", DNN_SHAPES),
    )
    loss, batch = five_steps(model, Y)
    _check("dnn", loss, batch["probabilities"][:, 1])


def test_dnn_regressor_matches_tf(tmp_path):
    model = canned.DNNRegressor(
        [3, 2],
        [NUM, fc.embedding_column(CAT, 2)],
        str(tmp_path / "m"),
        warm_start_from=init_checkpoint(tmp_path / "init", DNN_SHAPES),
    )
    loss, batch = five_steps(model, YR)
    _check("dnnreg", loss, batch["predictions"])


def test_dnn_batch_norm_matches_tf(tmp_path):
    model = canned.DNNClassifier(
        [3],
        [NUM, fc.indicator_column(CAT)],
        str(tmp_path / "m"),
        warm_start_from=init_checkpoint(tmp_path / "init", BN_SHAPES),
        batch_norm=True,
    )
    loss, batch = five_steps(model, Y)
    _check("bn", loss, batch["probabilities"][:, 1])
    prefix = "dnn/hiddenlayer_0/batchnorm_0/"
    np.testing.assert_allclose(
        model.get_variable_value(prefix + "moving_mean"), TF_BN_MOVING_MEAN, atol=1e-7
    )
    np.testing.assert_allclose(
        model.get_variable_value(prefix + "moving_variance"), TF_BN_MOVING_VARIANCE, atol=1e-7
    )


def test_wide_and_deep_matches_tf(tmp_path):
    # Two optimizers: FTRL at min(0.005, 1/sqrt(1)) on linear/..., Adagrad 0.001 on dnn/...
    model = canned.DNNLinearCombinedClassifier(
        str(tmp_path / "m"),
        linear_feature_columns=[CAT],
        dnn_feature_columns=[NUM],
        dnn_hidden_units=[3],
        warm_start_from=init_checkpoint(tmp_path / "init", WD_SHAPES),
    )
    loss, batch = five_steps(model, Y)
    _check("wd", loss, batch["probabilities"][:, 1])


def test_baselines_learn_tfs_prior_and_mean(tmp_path):
    # From TF 2.15.1, 5 steps of FTRL at 0.3 from zero, same data:
    # regressor bias 0.3985525667667389, eval loss 0.7500021457672119;
    # 3 classes [0, 1, 2, 2, 1, 2, 0, 2]: bias [-0.209392890, -0.209392875, 0.371877372],
    # eval loss 1.0412845611572266.
    regressor = canned.BaselineRegressor(str(tmp_path / "r"))
    regressor.train(lambda: (FEATURES, YR), steps=5)
    np.testing.assert_allclose(
        regressor.get_variable_value("baseline/bias"), [0.3985525667667389], atol=1e-6
    )
    result = regressor.evaluate(lambda: (FEATURES, YR), steps=1)
    assert abs(result["loss"] - 0.7500021457672119) < 1e-6
    labels = np.array([0, 1, 2, 2, 1, 2, 0, 2])
    classifier = canned.BaselineClassifier(str(tmp_path / "c"), n_classes=3)
    classifier.train(lambda: (FEATURES, labels), steps=5)
    np.testing.assert_allclose(
        classifier.get_variable_value("baseline/bias"),
        [-0.20939289033412933, -0.20939287543296814, 0.37187737226486206],
        atol=1e-6,
    )
    result = classifier.evaluate(lambda: (FEATURES, labels), steps=1)
    assert abs(result["loss"] - 1.0412845611572266) < 1e-6
    # The same prediction for every example, whatever its features.
    (batch,) = classifier.predict(lambda: FEATURES, yield_single_examples=False)
    assert (batch["probabilities"] == batch["probabilities"][0]).all()


def test_variable_names_are_tfs(tmp_path):
    # From TF 2.15.1: get_variable_names() of the same models, less optimizer slots.
    model = canned.DNNClassifier(
        [3], [NUM, fc.indicator_column(CAT)], str(tmp_path / "bn"), batch_norm=True
    )
    model.train(lambda: (FEATURES, Y), steps=1)
    assert model.get_variable_names() == [
        "dnn/hiddenlayer_0/batchnorm_0/beta",
        "dnn/hiddenlayer_0/batchnorm_0/gamma",
        "dnn/hiddenlayer_0/batchnorm_0/moving_mean",
        "dnn/hiddenlayer_0/batchnorm_0/moving_variance",
        "dnn/hiddenlayer_0/bias",
        "dnn/hiddenlayer_0/kernel",
        "dnn/logits/bias",
        "dnn/logits/kernel",
        "global_step",
    ]
    baseline = canned.BaselineRegressor(str(tmp_path / "base"))
    baseline.train(lambda: (FEATURES, YR), steps=1)
    assert baseline.get_variable_names() == ["baseline/bias", "global_step"]


def test_dropout_only_in_training(tmp_path):
    model = canned.DNNClassifier([16], [NUM], str(tmp_path), dropout=0.5)
    model.train(lambda: (FEATURES, Y), steps=2)
    first = list(model.predict(lambda: FEATURES, yield_single_examples=False))
    second = list(model.predict(lambda: FEATURES, yield_single_examples=False))
    np.testing.assert_array_equal(first[0]["logits"], second[0]["logits"])


def test_constructor_errors_as_tf(tmp_path):
    with pytest.raises(
        ValueError, match="^Either linear_feature_columns or dnn_feature_columns must be defined"
    ):
        canned.DNNLinearCombinedClassifier(str(tmp_path))
    with pytest.raises(ValueError, match="^dnn_hidden_units must be defined when"):
        canned.DNNLinearCombinedRegressor(str(tmp_path), dnn_feature_columns=[NUM])
    with pytest.raises(ValueError, match="feature_columns should not be empty"):
        canned.DNNClassifier([3], [], str(tmp_path))
    with pytest.raises(ValueError, match="n_classes cannot be None"):
        canned.BaselineClassifier(str(tmp_path), n_classes=None)


@pytest.mark.parametrize("kind", ["dnn", "wide_deep", "baseline"])
def test_exports_serve_raw_strings_with_tfs_signatures(tmp_path, kind):
    columns = [NUM, fc.embedding_column(CAT, 2)]
    model = {
        "dnn": lambda: canned.DNNClassifier([4], columns, str(tmp_path / "m")),
        "wide_deep": lambda: canned.DNNLinearCombinedClassifier(
            str(tmp_path / "m"),
            linear_feature_columns=[CAT],
            dnn_feature_columns=columns,
            dnn_hidden_units=[4],
        ),
        "baseline": lambda: canned.BaselineClassifier(str(tmp_path / "m")),
    }[kind]()
    model.train(lambda: (FEATURES, Y), steps=3)
    receiver = est.export.build_parsing_serving_input_receiver_fn(
        fc.make_parse_example_spec(columns)
    )
    served = est.export.load(model.export_saved_model(str(tmp_path / "export"), receiver))
    # TF 2.15.1's binary head: serving_default, classification, regression, predict.
    assert set(served.signatures) == {"serving_default", "classification", "regression", "predict"}
    out = served.signatures["classification"](x=X[:3].tolist(), c=["a", "b", "zzz"])
    (batch,) = model.predict(
        lambda: {"x": X[:3], "c": np.array([["a"], ["b"], ["zzz"]], object)},
        yield_single_examples=False,
    )
    np.testing.assert_allclose(out["scores"], batch["probabilities"], atol=1e-6)


def test_train_op_by_scope_routes_variables(tmp_path):
    # d loss / d a = d loss / d b = 1 for loss = a + b; sgd(0.5) moves a by -0.5, sgd(0.25)
    # moves b by -0.25, and c (no scope) stays.
    def model_fn(features, labels, mode):
        a = est.get_variable("one/a", [], initializer=est.initializers.zeros_initializer())
        b = est.get_variable("two/b", [], initializer=est.initializers.zeros_initializer())
        c = est.get_variable("c", [], initializer=est.initializers.zeros_initializer())
        loss = a + b + c + 0.0 * features["x"].sum()
        train_op = est.train_op_by_scope({"one": optax.sgd(0.5), "two": optax.sgd(0.25)})
        return est.EstimatorSpec(mode, loss=loss, train_op=train_op)

    model = est.Estimator(model_fn, str(tmp_path))
    model.train(lambda: ({"x": X}, None), steps=2)
    assert model.get_variable_value("one/a") == -1.0
    assert model.get_variable_value("two/b") == -0.5
    assert model.get_variable_value("c") == 0.0
    with pytest.raises(TypeError, match="must be an optax.GradientTransformation"):
        est.train_op_by_scope({"one": "sgd"})


@pytest.mark.slow
def test_embedding_combiners_and_max_norm_match_tf(tmp_path):
    # Two ids per example (some missing), embedding rows scaled x4 so that max_norm=0.7
    # clips them; 5 steps of the default DNN. From TF 2.15.1 (same warm-start procedure):
    # eval loss per combiner and the embedding table after training.
    tf_results = {
        "mean": (0.6756476163864136, [[1.7402974, 1.2634035], [-1.9890596, 1.429598],
                                      [-1.8656684, 0.9185994]]),
        "sqrtn": (0.669435977935791, [[1.740301, 1.2633988], [-1.9890602, 1.4295974],
                                      [-1.8656726, 0.9185911]]),
        "sum": (0.6604430675506592, [[1.7403194, 1.2633734], [-1.9890602, 1.4295974],
                                     [-1.8656785, 0.9185798]]),
    }  # fmt: skip
    ids = np.array(
        [["a", "b"], ["b", ""], ["c", "a"], ["a", "a"], ["b", "c"], ["", ""], ["c", "c"],
         ["a", "c"]],
        object,
    )  # fmt: skip
    shapes = {
        "dnn/hiddenlayer_0/kernel": (2, 3),
        "dnn/hiddenlayer_0/bias": (3,),
        "dnn/logits/kernel": (3, 1),
        "dnn/logits/bias": (1,),
        EMBEDDING: (3, 2),
    }
    init = init_checkpoint(tmp_path / "init", shapes, scale={EMBEDDING: 4})
    for combiner, (tf_loss, tf_table) in tf_results.items():
        column = fc.embedding_column(CAT, 2, combiner=combiner, max_norm=0.7)
        model = canned.DNNClassifier([3], [column], str(tmp_path / combiner), warm_start_from=init)
        model.train(lambda: ({"c": ids}, Y), steps=5)
        loss = model.evaluate(lambda: ({"c": ids}, Y), steps=1)["loss"]
        assert abs(loss - tf_loss) < 1e-6, (combiner, loss, tf_loss)
        np.testing.assert_allclose(model.get_variable_value(EMBEDDING), tf_table, atol=1e-6)
