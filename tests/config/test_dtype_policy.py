"""``RunConfig(dtype_policy=...)``, mixed precision like Keras 3's.

Variables stay float32 (in the state, in checkpoints and in exports); ``est.layers`` and
the canned DNN tower compute in bfloat16 / float16; the loss is float32; under
``mixed_float16`` the loss is scaled dynamically and a step whose gradients overflow is
skipped, while a non-finite loss still stops training with ``NanLossDuringTrainingError``.
The module adapters' share is in ``tests/model/test_modules.py``.
"""

from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import canned
import estimator as est
from estimator.config import DTypePolicy
from estimator.model import dtype_policy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ADULT = os.environ.get("ADULT_DATA_DIR") or os.path.join(ROOT, "..", "shared", "data", "adult")


class States(est.SessionRunHook):
    def after_create_session(self, session, coord):
        self.initial = jax.device_get(session.state)

    def end(self, session):
        self.final = jax.device_get(session.state)


# --- The policy -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "compute", "scaling"),
    [
        ("float32", jnp.float32, False),
        ("mixed_bfloat16", jnp.bfloat16, False),
        ("mixed_float16", jnp.float16, True),
    ],
)
def test_policies_name_their_compute_and_variable_dtypes(name, compute, scaling):
    policy = est.RunConfig(dtype_policy=name).dtype_policy
    assert policy == DTypePolicy(name)
    assert policy.compute_dtype == compute and policy.variable_dtype == jnp.float32
    assert policy.loss_scaling is scaling
    assert est.RunConfig().replace(dtype_policy=name).dtype_policy.name == name


def test_the_default_policy_is_float32_and_a_keras_policy_object_is_read_by_name():
    assert est.RunConfig().dtype_policy.name == "float32"
    assert not est.RunConfig().dtype_policy.mixed

    class KerasLikePolicy:  # keras.DTypePolicy("mixed_bfloat16") has .name
        name = "mixed_bfloat16"

    assert est.RunConfig(dtype_policy=KerasLikePolicy()).dtype_policy.name == "mixed_bfloat16"


def test_bad_policies_say_what_is_accepted():
    with pytest.raises(ValueError, match=r"'mixed_int8'.*Valid policies are 'float32', "):
        est.RunConfig(dtype_policy="mixed_int8")
    with pytest.raises(ValueError, match=r"variables are always float32.*'mixed_bfloat16'"):
        est.RunConfig(dtype_policy="bfloat16")
    with pytest.raises(TypeError, match=r"'name' must be a string.*Received: name=16"):
        est.RunConfig(dtype_policy=16)


# --- est.layers ----------------------------------------------------------------------------


def test_layers_compute_in_bfloat16_on_float32_variables():
    seen = {}

    def model_fn(features, mode):
        x = features["x"]
        seen["dense"] = est.layers.dense(x, 3)
        image = est.layers.conv2d(x.reshape(4, 2, 2, 1), 2, 2)
        seen["conv2d"] = image
        seen["batch_norm"] = est.layers.batch_normalization(seen["dense"], training=True)
        seen["embedding"] = est.layers.embedding_lookup(
            None, features["ids"], vocab_size=5, dimension=2
        )
        return est.EstimatorSpec(mode, predictions=seen["dense"])

    config = est.RunConfig(dtype_policy="mixed_bfloat16")
    features = {"x": np.ones((4, 4), np.float32), "ids": np.array([0, 4], np.int32)}
    estimator = est.Estimator(model_fn, config=config)
    # Traced only (what the compiled steps see): nothing runs.
    jax.eval_shape(
        lambda f: estimator.model_fn(f, None, est.ModeKeys.PREDICT, config).predictions, features
    )
    for key in ("dense", "conv2d", "batch_norm", "embedding"):
        assert seen[key].dtype == jnp.bfloat16, key


def test_variables_stay_float32_in_checkpoints_and_exports(tmp_path):
    x = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)

    def model_fn(features, labels, mode):
        h = est.layers.dense(features["x"], 8, activation=jax.nn.relu)
        h = est.layers.batch_normalization(h, training=mode == est.ModeKeys.TRAIN)
        logits = est.layers.dense(h, 2).astype(jnp.float32)
        predictions = {"logits": logits}
        if mode == est.ModeKeys.PREDICT:
            return est.EstimatorSpec(mode, predictions=predictions)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        return est.EstimatorSpec(mode, loss=loss, predictions=predictions, train_op=optax.sgd(0.1))

    config = est.RunConfig(tf_random_seed=1, dtype_policy="mixed_bfloat16")
    estimator = est.Estimator(model_fn, str(tmp_path / "model"), config)
    states = States()
    train_fn = est.inputs.numpy_input_fn({"x": x}, y, batch_size=16, shuffle=False)
    estimator.train(train_fn, hooks=[states])
    names = [n for n in estimator.get_variable_names() if n != "global_step"]
    assert len(names) == 8  # two dense layers, gamma, beta and the moving statistics
    for name in names:
        assert estimator.get_variable_value(name).dtype == np.float32, name
        assert states.final.trainable.get(name, np.float32(0)).dtype == np.float32, name
    receiver = est.export.build_raw_serving_input_receiver_fn(
        {"x": jax.ShapeDtypeStruct((None, 4), jnp.float32)}
    )
    path = estimator.export_saved_model(str(tmp_path / "export"), receiver)
    exported = est.export.read_variables(path)
    for group in exported.values():
        for name, value in group.items():
            assert np.asarray(value).dtype == np.float32, name
    # The loss the hooks and evaluate() see is float32 even though the layers are not.
    assert isinstance(estimator.evaluate(train_fn)["loss"], float)


# --- mixed_float16: dynamic loss scaling ---------------------------------------------------


def test_loss_scaling_unscales_grows_and_skips_as_keras():
    transform = dtype_policy.loss_scaling(optax.sgd(1.0), initial_scale=4.0, dynamic_growth_steps=2)
    params = {"w": jnp.array([1.0])}
    state = transform.init(params)
    # Scaled gradient 8 at scale 4: the update is -8 / 4 = -2; one finite step counted.
    updates, state = transform.update({"w": jnp.array([8.0])}, state, params)
    np.testing.assert_allclose(updates["w"], [-2.0])
    assert float(state.dynamic_scale) == 4.0 and int(state.step_counter) == 1
    # The second finite step in a row (dynamic_growth_steps=2) doubles the scale; this
    # step's gradient is still unscaled with the old one: -4 / 4 = -1.
    updates, state = transform.update({"w": jnp.array([4.0])}, state, params)
    np.testing.assert_allclose(updates["w"], [-1.0])
    assert float(state.dynamic_scale) == 8.0 and int(state.step_counter) == 0
    # An overflowing gradient: nothing moves, the scale halves.
    updates, state = transform.update({"w": jnp.array([jnp.inf])}, state, params)
    np.testing.assert_array_equal(updates["w"], [0.0])
    assert float(state.dynamic_scale) == 4.0 and int(state.step_counter) == 0


def _scaled_model_fn(features, labels, mode):
    # h = x @ w in float16, the loss 1000 * mean(h) in float32: dloss/dh = 1000 / 8 = 125
    # per example, times the loss scale in the float16 backward pass. 125 * scale fits
    # float16 (max 65504) only for scale <= 524: from 2**15 six halvings (to 512) skip
    # six steps.
    h = est.layers.dense(features["x"], 1, use_bias=False)[:, 0]
    loss = 1000.0 * jnp.mean(h.astype(jnp.float32)) + 0.0 * jnp.sum(labels)
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.01))


def test_mixed_float16_skips_overflowing_steps_and_trains_on(tmp_path):
    x = np.full((8, 2), 0.01, np.float32)
    states = States()
    config = est.RunConfig(tf_random_seed=1, dtype_policy="mixed_float16")
    estimator = est.Estimator(_scaled_model_fn, str(tmp_path), config)
    estimator.train(lambda: iter([({"x": x}, np.zeros(8, np.float32))] * 10), hooks=[states])
    scale = states.final.opt_state  # LossScaleState, in its saved form (io.tree_form)
    assert float(scale["dynamic_scale"]) == 512.0  # 2**15 / 2**6
    assert int(scale["step_counter"]) == 4  # steps 7 to 10
    assert int(states.final.global_step) == 10
    assert int(states.final.non_finite_step) == -1  # the loss was finite throughout
    # Four applied SGD steps: dloss/dw = 1000 * mean(x) = 10 (x = 0.01, rounded to
    # float16's 0.0099945), so w moves by 4 * 0.01 * 10 = 0.4.
    w0 = states.initial.trainable["dense/kernel"]
    w = states.final.trainable["dense/kernel"]
    assert w.dtype == np.float32
    np.testing.assert_allclose(w0 - w, 0.4, rtol=2e-3)


def test_mixed_float16_keeps_the_nan_guarantee(tmp_path):
    x = np.full((8, 2), 0.01, np.float32)
    bad = x.copy()
    bad[3, 0] = np.nan
    batches = [({"x": x}, np.zeros(8, np.float32))] * 2 + [({"x": bad}, np.zeros(8, np.float32))]
    config = est.RunConfig(tf_random_seed=1, dtype_policy="mixed_float16", steps_per_execution=1)
    estimator = est.Estimator(_scaled_model_fn, str(tmp_path), config)
    with pytest.raises(est.NanLossDuringTrainingError, match="step"):
        estimator.train(lambda: iter(batches))
    # The checkpoint holds the last finite state: the NaN never reached the variables.
    assert np.isfinite(estimator.get_variable_value("dense/kernel")).all()


# --- The census DNN in bfloat16 ------------------------------------------------------------


@pytest.mark.slow
def test_bfloat16_census_dnn_reaches_the_float32_accuracy(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        import census
    finally:
        sys.path.pop(0)
    train_x, train_y = census.load(os.path.join(ADULT, "adult.data"))
    test_x, test_y = census.load(os.path.join(ADULT, "adult.test"))
    stats = census.numeric_stats(train_x)
    accuracy = {}
    for policy in ("float32", "mixed_bfloat16"):
        model = canned.DNNClassifier(
            hidden_units=census.HIDDEN_UNITS,
            feature_columns=census.deep_columns(stats),
            model_dir=str(tmp_path / policy),
            label_vocabulary=census.LABELS,
            optimizer=canned.get_optimizer_instance("Adagrad", learning_rate=0.05),
            config=est.RunConfig(tf_random_seed=1, dtype_policy=policy),
        )
        model.train(
            est.inputs.numpy_input_fn(train_x, train_y, batch_size=256, num_epochs=2, shuffle=True)
        )
        results = model.evaluate(
            est.inputs.numpy_input_fn(test_x, test_y, batch_size=1024, shuffle=False)
        )
        accuracy[policy] = results["accuracy"]
        for name in model.get_variable_names():
            if name != "global_step":
                assert model.get_variable_value(name).dtype == np.float32, name
    assert accuracy["float32"] > 0.84
    assert abs(accuracy["mixed_bfloat16"] - accuracy["float32"]) <= 0.005, accuracy
