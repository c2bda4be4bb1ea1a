"""Tests for canned.optimizers.get_optimizer_instance (TF 2.15's optimizer resolution)."""

import doctest
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import canned.optimizers
from canned.optimizers import _scale_by_keras_adagrad, get_optimizer_instance

W0 = np.array([0.5, -1.0, 2.0], np.float32)
# Three steps; the third weight sees g = 1e-6 and then 0, where epsilon placement matters.
GRADS = np.array([[0.1, -0.2, 0.3], [-0.4, 0.05, 1e-6], [2.0, -3.0, 0.0]], np.float32)


def run(opt, w0=W0, grads=GRADS):
    params = jnp.asarray(w0)
    state = opt.init(params)
    history = []
    for g in grads:
        updates, state = opt.update(jnp.asarray(g), state, params)
        params = optax.apply_updates(params, updates)
        history.append(np.asarray(params))
    return np.array(history)


# Independent float64 references of the Keras 2.15 legacy update rules (TF kernels).
def keras_adagrad(w0, grads, lr, n0=0.1, eps=1e-7):
    w, n, out = np.float64(w0), np.full(len(w0), n0), []
    for g in np.float64(grads):
        n = n + g**2
        w = w - lr * g / (np.sqrt(n) + eps)
        out.append(w)
    return np.array(out)


def keras_adam(w0, grads, lr, b1=0.9, b2=0.999, eps=1e-7):
    w, m, v, out = np.float64(w0), np.zeros(len(w0)), np.zeros(len(w0)), []
    for t, g in enumerate(np.float64(grads), start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        w = w - lr * np.sqrt(1 - b2**t) / (1 - b1**t) * m / (np.sqrt(v) + eps)
        out.append(w)
    return np.array(out)


def keras_rmsprop(w0, grads, lr, rho=0.9, eps=1e-7):
    w, r, out = np.float64(w0), np.zeros(len(w0)), []
    for g in np.float64(grads):
        r = rho * r + (1 - rho) * g**2
        w = w - lr * g / (np.sqrt(r) + eps)
        out.append(w)
    return np.array(out)


def keras_sgd(w0, grads, lr):
    return np.float64(w0) - lr * np.cumsum(np.float64(grads), axis=0)


def keras_ftrl(w0, grads, lr, n0=0.1):
    # FTRL without regularisation, p = -0.5 (canned.ftrl's own tests cover the options).
    w, n, z, out = np.float64(w0), np.full(len(w0), n0), np.zeros(len(w0)), []
    for g in np.float64(grads):
        n_new = n + g**2
        z = z + g - (np.sqrt(n_new) - np.sqrt(n)) / lr * w
        w = -z / (np.sqrt(n_new) / lr)
        n = n_new
        out.append(w)
    return np.array(out)


# Weights after each step from W0 with GRADS, from TF 2.15.1:
# get_optimizer_instance_v2(name, lr).apply_gradients on a float32 tf.Variable.
TF_WEIGHTS = {
    "Adagrad": [
        [0.46984887, -0.94654775, 1.9311752],
        [0.54682887, -0.9597931, 1.931175],
        [0.45004207, -0.86057544, 1.931175],
    ],
    "Adam": [
        [0.40000317, -0.9000016, 1.900001],
        [0.45595288, -0.85305566, 1.8329959],
        [0.40211388, -0.78683865, 1.7812004],
    ],
    "Ftrl": [
        [-0.03703357, -0.047941264, 0.41139805],
        [0.11692651, -0.07443191, 0.41139758],
        [-0.07664705, 0.12400331, 0.41139758],
    ],
    "RMSProp": [
        [0.18377328, -0.68377274, 1.6837726],
        [0.4914653, -0.7643549, 1.6837715],
        [0.18108371, -0.44873416, 1.6837715],
    ],
    "SGD": [[0.49, -0.98, 1.97], [0.53000003, -0.985, 1.9699999], [0.33000004, -0.685, 1.9699999]],
}
LEARNING_RATES = {"Adagrad": 0.1, "Adam": 0.1, "Ftrl": 0.2, "RMSProp": 0.1, "SGD": 0.1}
REFERENCES = {
    "Adagrad": keras_adagrad,
    "Adam": keras_adam,
    "Ftrl": keras_ftrl,
    "RMSProp": keras_rmsprop,
    "SGD": keras_sgd,
}


@pytest.mark.parametrize("name", sorted(TF_WEIGHTS))
def test_named_optimizer_matches_keras_reference_and_tf(name):
    lr = LEARNING_RATES[name]
    expected = REFERENCES[name](W0, GRADS, lr)
    # The reference agrees with TF 2.15.1 (checks the reference) ...
    np.testing.assert_allclose(expected, TF_WEIGHTS[name], rtol=1e-6, atol=1e-7)
    # ... and so does the resolved optimizer.
    got = run(get_optimizer_instance(name, learning_rate=lr))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(TF_WEIGHTS))
def test_named_optimizer_jit_compiles_once(name):
    opt = get_optimizer_instance(name, learning_rate=LEARNING_RATES[name])
    traces = []

    @jax.jit
    def step(params, state, grads):
        traces.append(1)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    params = jnp.asarray(W0)
    state = opt.init(params)
    for g in GRADS:
        params, state = step(params, state, jnp.asarray(g))
    assert len(traces) == 1
    np.testing.assert_allclose(params, run(opt)[-1], rtol=1e-6, atol=1e-7)


def test_adagrad_first_step_by_hand():
    # n = 0.1 + 0.1² = 0.11; Δw = -0.1·0.1 / (√0.11 + 1e-7) = -0.01 / 0.3316625 = -0.0301511.
    opt = get_optimizer_instance("Adagrad", learning_rate=0.1)
    params = jnp.array([0.0])
    updates, _ = opt.update(jnp.array([0.1]), opt.init(params), params)
    np.testing.assert_allclose(updates, [-0.0301511], rtol=1e-6)


def test_adam_uses_keras_epsilon_hat():
    # Step 1 with g = 1e-6, lr 0.1: m = 1e-7, v = 1e-15, √v = 3.1623e-8;
    # Keras: Δw = -0.1·√(1-0.999)/(1-0.9) · m/(√v + 1e-7)
    #           = -0.1·0.316228 · 1e-7/1.316228e-7 = -0.1·0.240253 = -0.0240253.
    # (optax.adam adds eps to the corrected √v̂ = 1e-6 instead: -0.1·1e-6/1.1e-6 = -0.0909.)
    opt = get_optimizer_instance("Adam", learning_rate=0.1)
    params = jnp.array([0.0])
    updates, _ = opt.update(jnp.array([1e-6]), opt.init(params), params)
    np.testing.assert_allclose(updates, [-0.0240253], rtol=1e-5)


def test_rmsprop_adds_epsilon_outside_the_root():
    # Step 1 with g = 1e-6, lr 0.1: r = 0.1·1e-12, √r = 3.16228e-7;
    # Δw = -0.1·1e-6 / (3.16228e-7 + 1e-7) = -0.1·2.402532 = -0.2402532.
    # (Inside the root it would be -0.1·1e-6/√(1e-13 + 1e-7) = -3.2e-4.)
    opt = get_optimizer_instance("RMSProp", learning_rate=0.1)
    params = jnp.array([0.0])
    updates, _ = opt.update(jnp.array([1e-6]), opt.init(params), params)
    np.testing.assert_allclose(updates, [-0.2402532], rtol=1e-5)


def test_keras_adagrad_adds_epsilon_outside_the_root():
    # With n₀ = 0 and g = 1e-4: n = 1e-8, √n = 1e-4; g / (√n + 1e-7) = 1e-4 / 1.001e-4
    # = 0.999001 (optax.scale_by_rss: 1e-4 / √(1e-8 + 1e-7) = 0.3015).
    tx = _scale_by_keras_adagrad(initial_accumulator_value=0.0)
    updates, state = tx.update(jnp.array([1e-4]), tx.init(jnp.zeros(1)))
    np.testing.assert_allclose(updates, [0.999001], rtol=1e-5)
    np.testing.assert_allclose(state.sum_of_squares, [1e-8], rtol=1e-5)


@pytest.mark.parametrize(
    "name, default_lr",
    [("Adagrad", 0.001), ("Adam", 0.001), ("Ftrl", 0.001), ("RMSProp", 0.001), ("SGD", 0.01)],
)
def test_name_without_learning_rate_uses_keras_default(name, default_lr):
    # TF 2.15's get_optimizer_instance_v2 instantiates the Keras legacy class bare.
    got = run(get_optimizer_instance(name))
    expected = REFERENCES[name](W0, GRADS, default_lr)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def test_name_with_schedule():
    # SGD with a schedule of the step count: lr 0.1 at step 0, 0.2 at step 1.
    # w = 0.5 - 0.1·0.1 = 0.49, then 0.49 - 0.2·(-0.4) = 0.57.
    opt = get_optimizer_instance("SGD", learning_rate=lambda count: 0.1 * (count + 1))
    got = run(opt, grads=GRADS[:2])
    np.testing.assert_allclose(got[:, 0], [0.49, 0.57], rtol=1e-6)


def test_zero_learning_rate_is_kept_not_replaced():
    # TF 2.15 treats learning_rate=0 as missing (Keras default); here 0 means 0.
    got = run(get_optimizer_instance("SGD", learning_rate=0.0))
    np.testing.assert_array_equal(got, np.broadcast_to(W0, got.shape))
    with pytest.raises(ValueError, match=r"`learning_rate` needs to be positive"):
        get_optimizer_instance("Ftrl", learning_rate=0.0)


def test_unsupported_name_lists_names():
    with pytest.raises(
        ValueError,
        match=r"^Unsupported optimizer name: Nadam\. Supported names are: "
        r"\('Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD'\)$",
    ):
        get_optimizer_instance("Nadam", learning_rate=0.1)


def test_wrong_case_name_suggests_the_right_one():
    with pytest.raises(ValueError, match=r"case-sensitive: did you mean 'RMSProp'\?"):
        get_optimizer_instance("rmsprop", learning_rate=0.1)


def test_gradient_transformation_passes_through():
    tx = optax.adamw(1e-3)  # a GradientTransformationExtraArgs
    assert get_optimizer_instance(tx) is tx
    plain = optax.GradientTransformation(tx.init, tx.update)
    assert get_optimizer_instance(plain, learning_rate=0.5) is plain  # learning_rate ignored


def test_callable_is_called():
    tx = optax.sgd(0.3)
    calls = []

    def make():
        calls.append(1)
        return tx

    assert get_optimizer_instance(make) is tx
    assert calls == [1]
    partial = functools.partial(optax.sgd, learning_rate=0.3)
    got = run(get_optimizer_instance(partial), grads=GRADS[:1])
    np.testing.assert_allclose(got[0], W0 - 0.3 * GRADS[0], rtol=1e-6)


def test_callable_needing_arguments_raises():
    with pytest.raises(TypeError, match=r"cannot be called without arguments.*functools\.partial"):
        get_optimizer_instance(optax.adam)


def test_callable_returning_something_else_raises():
    with pytest.raises(
        TypeError, match=r"returned 'Adam' \(type str\); expected an optax\.GradientTransformation"
    ):
        get_optimizer_instance(lambda: "Adam")


@pytest.mark.parametrize("opt, type_name", [(3, "int"), (None, "NoneType"), ((1, 2), "tuple")])
def test_other_objects_raise_type_error(opt, type_name):
    with pytest.raises(
        TypeError,
        match=rf"not an optax\.GradientTransformation instance\. Given: .* \(type {type_name}\)\. "
        r"Pass a name in \('Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD'\)",
    ):
        get_optimizer_instance(opt)


def _fake_tf_class(module, name, learning_rate=None):
    """A stand-in for a TF/Keras optimizer class, recognised by its module (no TF import)."""

    def get_config(self):
        if learning_rate is None:
            raise RuntimeError("no config")
        return {"name": name, "learning_rate": learning_rate}

    return type(name, (), {"__module__": module, "get_config": get_config})


@pytest.mark.parametrize(
    "module, name, lr, suggestion",
    [
        (
            "keras.src.optimizers.legacy.adam",
            "Adam",
            0.01,
            r"get_optimizer_instance\('Adam', learning_rate=0\.01\)",
        ),
        (
            "keras.src.optimizers.legacy.rmsprop",
            "RMSprop",
            None,
            r"get_optimizer_instance\('RMSProp', learning_rate=0\.001\)",
        ),
        (
            "tensorflow.python.training.gradient_descent",
            "GradientDescentOptimizer",
            None,
            r"get_optimizer_instance\('SGD', learning_rate=0\.01\)",
        ),
        (
            "keras.src.optimizers.lion",
            "Lion",
            0.0003,
            r"an optax transformation such as optax\.adam\(0\.0003\)",
        ),
    ],
)
def test_tf_optimizer_object_gets_a_helpful_error(module, name, lr, suggestion):
    cls = _fake_tf_class(module, name, lr)
    pattern = rf"Got a TensorFlow/Keras optimizer \({module}\.{name}\).*here: {suggestion}\.$"
    with pytest.raises(TypeError, match=pattern):
        get_optimizer_instance(cls())
    # Also when a callable returns one (TF allows a callable returning an optimizer).
    with pytest.raises(TypeError, match=pattern):
        get_optimizer_instance(lambda: cls())


def test_tf_optimizer_class_gets_the_same_error():
    cls = _fake_tf_class("keras.src.optimizers.legacy.ftrl", "Ftrl")
    with pytest.raises(
        TypeError,
        match=r"TensorFlow/Keras optimizer \(keras\.src\.optimizers\.legacy\.ftrl\.Ftrl\).*"
        r"get_optimizer_instance\('Ftrl', learning_rate=0\.001\)",
    ):
        get_optimizer_instance(cls)


def test_docstring_examples_run():
    results = doctest.testmod(canned.optimizers, optionflags=doctest.ELLIPSIS)
    assert results.attempted > 0
    assert results.failed == 0
