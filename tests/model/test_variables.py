"""Tests for ``estimator/variables.py``: get_variable, variable_scope, assign, next_rng_key,
get_global_step, identity, get_regularization_loss, run under the init/apply transform.

TF messages ("Trying to share variable ...", "If default_name is None then name_or_scope is
required", "Variable q did not get an initializer, ...") were checked with tensorflow 2.15.1's
``tf.compat.v1.get_variable`` / ``variable_scope``.
"""

import functools
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import estimator as est
from estimator.model.function import ModelFunction
from estimator.model.variables import (
    APPLY,
    INIT,
    Frame,
    current_frame,
    transform_context,
    unique_name,
)


def _init(fn, seed=0, step=0):
    frame = Frame(INIT, jax.random.key(seed), jnp.int32(step))
    with transform_context(frame):
        out = fn()
    return frame, out


def _apply(fn, trainable, non_trainable=None, seed=0, step=0):
    frame = Frame(
        APPLY,
        jax.random.key(seed),
        jnp.int32(step),
        trainable=dict(trainable),
        non_trainable=dict(non_trainable or {}),
    )
    with transform_context(frame):
        out = fn()
    return frame, out


# --- naming -------------------------------------------------------------------------------


def test_nested_scope_names():
    def fn():
        with est.variable_scope("outer") as outer:
            assert outer == "outer"
            with est.variable_scope("inner") as inner:
                assert inner == "outer/inner"
                est.get_variable("w", [2])
            est.get_variable("b", [1])
        est.get_variable("top", [1])

    frame, _ = _init(fn)
    assert sorted(frame.trainable) == ["outer/b", "outer/inner/w", "top"]


def test_scope_trailing_slash_is_stripped():
    def fn():
        with est.variable_scope("s/"):
            return est.get_variable("v", [1])

    frame, _ = _init(fn)
    assert list(frame.trainable) == ["s/v"]


def test_default_name_scopes_are_made_unique():
    # TF: variable_scope(None, default_name="block") twice -> block, block_1.
    def fn():
        names = []
        for _ in range(2):
            with est.variable_scope(None, default_name="block") as scope:
                names.append(scope)
                est.get_variable("v", [1])
        return names

    frame, names = _init(fn)
    assert names == ["block", "block_1"]
    assert sorted(frame.trainable) == ["block/v", "block_1/v"]


def test_scope_requires_a_name():
    def fn():
        with est.variable_scope(None):
            pass

    with pytest.raises(
        TypeError, match=r"^If default_name is None then name_or_scope is required$"
    ):
        _init(fn)


def test_unique_name_counts_per_scope_and_restart_each_call():
    def fn():
        names = [unique_name("dense"), unique_name("dense")]
        with est.variable_scope("tower"):
            names.append(unique_name("dense"))
        return names

    assert _init(fn)[1] == ["dense", "dense_1", "dense"]
    assert _init(fn)[1] == ["dense", "dense_1", "dense"]  # a new frame starts again at 0


# --- creation, reuse, errors --------------------------------------------------------------


def test_reuse_within_a_call_returns_the_same_value():
    def fn():
        a = est.get_variable("w", [3, 2])
        b = est.get_variable("w", [3, 2])
        return a, b

    frame, (a, b) = _init(fn)
    assert a is b
    assert list(frame.trainable) == ["w"]


def test_shape_mismatch_on_reuse():
    def fn():
        with est.variable_scope("s"):
            est.get_variable("w", [2])
            est.get_variable("w", [3])

    with pytest.raises(
        ValueError,
        match=r"^Trying to share variable s/w, but specified shape \(3,\) and found shape "
        r"\(2,\)\.$",
    ):
        _init(fn)


def test_dtype_mismatch_on_reuse():
    def fn():
        est.get_variable("w", [2])
        est.get_variable("w", [2], dtype=jnp.int32)

    with pytest.raises(
        ValueError,
        match=r"^Trying to share variable w, but specified dtype int32 and found dtype float32\.$",
    ):
        _init(fn)


def test_shape_change_between_init_and_apply():
    frame, _ = _init(lambda: est.get_variable("w", [2]))
    with pytest.raises(ValueError, match=r"Trying to share variable w, but specified shape \(4,\)"):
        _apply(lambda: est.get_variable("w", [4]), frame.trainable)


def test_trainable_mismatch():
    def fn():
        est.get_variable("w", [2])
        est.get_variable("w", [2], trainable=False)

    with pytest.raises(
        ValueError,
        match=r"^Variable w was created as trainable and is now requested as non-trainable\. "
        r"Pass the same trainable= on every call\.$",
    ):
        _init(fn)


def test_missing_shape_messages():
    with pytest.raises(
        ValueError,
        match=r"^Variable q did not get an initializer, so its `shape` argument must be "
        r"specified\.$",
    ):
        _init(lambda: est.get_variable("q"))
    with pytest.raises(
        ValueError,
        match=r"^Shape of a new variable \(q\) must be fully defined, but instead was None\.$",
    ):
        _init(lambda: est.get_variable("q", initializer=est.initializers.zeros_initializer()))


def test_array_initializer_gives_shape_and_dtype():
    frame, v = _init(lambda: est.get_variable("table", initializer=np.arange(6).reshape(2, 3)))
    assert v.shape == (2, 3) and v.dtype == jnp.int32  # int64 NumPy -> JAX's default int
    np.testing.assert_array_equal(v, np.arange(6).reshape(2, 3))
    frame, v = _init(lambda: est.get_variable("c", [2], initializer=[1.5, 2.5]))
    np.testing.assert_array_equal(v, [1.5, 2.5])
    assert v.dtype == jnp.float32


def test_initializer_returning_wrong_shape():
    def bad(key, shape, dtype):
        return jnp.zeros((5,), dtype)

    with pytest.raises(
        ValueError,
        match=r"^The initializer of variable w returned shape \(5,\), but the variable was "
        r"declared with shape \(2, 2\)\.$",
    ):
        _init(lambda: est.get_variable("w", [2, 2], initializer=bad))


def test_unknown_variable_in_apply_mode():
    frame, _ = _init(lambda: est.get_variable("w", [2]))
    with pytest.raises(
        ValueError,
        match=r"^Variable extra \(shape \(3,\)\) does not exist in the model's variables\. It was "
        r"not created when the model was initialised",
    ):
        _apply(lambda: est.get_variable("extra", [3]), frame.trainable)


def test_apply_mode_returns_given_values():
    frame, _ = _init(lambda: est.get_variable("w", [2]))
    given = jnp.array([7.0, 8.0])
    _, out = _apply(lambda: est.get_variable("w", [2]), {"w": given})
    assert out is given


@pytest.mark.parametrize(
    "what, call",
    [
        ("get_variable('w')", lambda: est.get_variable("w", [1])),
        ("assign", lambda: est.assign("w", 1.0)),
        ("next_rng_key", est.next_rng_key),
        ("identity", lambda: est.identity(jnp.ones(1), "x")),
        ("get_regularization_loss", est.get_regularization_loss),
    ],
)
def test_outside_model_fn(what, call):
    with pytest.raises(
        RuntimeError,
        match=rf"^{re.escape(what)} was called outside model_fn\. Variables and the global step "
        r"exist only while an Estimator runs model_fn",
    ):
        call()


def test_variable_scope_outside_model_fn():
    with pytest.raises(RuntimeError, match="variable_scope was called outside model_fn"):
        with est.variable_scope("s"):
            pass


def test_transform_context_restores_previous_frame():
    outer = Frame(INIT, jax.random.key(0), jnp.int32(0))
    inner = Frame(INIT, jax.random.key(1), jnp.int32(0))
    assert current_frame() is None
    with transform_context(outer):
        with transform_context(inner):
            assert current_frame() is inner
        assert current_frame() is outer
    assert current_frame() is None
    with pytest.raises(KeyError):
        with transform_context(outer):
            raise KeyError("boom")
    assert current_frame() is None


# --- default initializers -----------------------------------------------------------------


def test_default_float_initializer_is_glorot_uniform():
    # [3, 5] kernel: limit = sqrt(6 / (3 + 5)) = sqrt(0.75) ~ 0.866.
    frame, _ = _init(lambda: [est.get_variable(f"w{i}", [3, 5]) for i in range(200)])
    values = np.concatenate([np.asarray(v).ravel() for v in frame.trainable.values()])
    limit = math.sqrt(6 / 8)
    assert values.min() >= -limit and values.max() <= limit
    # Uniform(-l, l) has variance l^2 / 3 = 0.25; 3000 samples give std error ~0.005.
    assert abs(values.var() - limit**2 / 3) < 0.02
    assert values.max() > 0.8 * limit and values.min() < -0.8 * limit


def test_default_integer_initializer_is_zeros():
    _, v = _init(lambda: est.get_variable("count", [4], dtype=jnp.int32))
    assert v.dtype == jnp.int32
    np.testing.assert_array_equal(v, 0)


def test_scope_initializer_is_the_default_inside_the_scope():
    def fn():
        with est.variable_scope("a", initializer=est.initializers.constant_initializer(3.0)):
            with est.variable_scope("b"):
                inherited = est.get_variable("v", [2])
            explicit = est.get_variable("w", [2], initializer=est.initializers.ones_initializer())
        return inherited, explicit

    _, (inherited, explicit) = _init(fn)
    np.testing.assert_array_equal(inherited, [3.0, 3.0])
    np.testing.assert_array_equal(explicit, [1.0, 1.0])


def test_initial_values_are_stable_per_name():
    # The key of a variable's initializer depends on the base key and its name only, so adding
    # a variable does not change the others.
    _, a = _init(lambda: est.get_variable("w", [4]))
    _, (b, _) = _init(lambda: (est.get_variable("w", [4]), est.get_variable("z", [4])))
    _, (_, c) = _init(lambda: (est.get_variable("z", [4]), est.get_variable("w", [4])))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    _, other_seed = _init(lambda: est.get_variable("w", [4]), seed=1)
    assert not np.array_equal(a, other_seed)


# --- assign -------------------------------------------------------------------------------


def test_assign_by_name_and_by_array():
    def fn():
        with est.variable_scope("bn"):
            mean = est.get_variable("mean", [2], trainable=False, initializer=jnp.zeros(2))
            count = est.get_variable("count", [], jnp.int32, trainable=False)
        a = est.assign("bn/mean", [1.0, 2.0])
        b = est.assign(count, 5.7)  # cast to the variable's dtype
        with est.variable_scope("bn"):
            later = est.get_variable("mean", [2], trainable=False)
        return mean, a, b, later

    frame, (mean, a, b, later) = _init(fn)
    np.testing.assert_array_equal(mean, [0.0, 0.0])
    np.testing.assert_array_equal(frame.assigned["bn/mean"], [1.0, 2.0])
    assert frame.assigned["bn/count"].dtype == jnp.int32
    assert int(frame.assigned["bn/count"]) == 5
    assert a is frame.assigned["bn/mean"]
    # A later get_variable in the same call sees the assigned value.
    np.testing.assert_array_equal(later, [1.0, 2.0])
    # The stored (initial) value is untouched: the driver applies `assigned` after the step.
    np.testing.assert_array_equal(frame.non_trainable["bn/mean"], [0.0, 0.0])


def test_assign_to_assigned_array_chains():
    def fn():
        v = est.get_variable("v", [], trainable=False, initializer=jnp.float32(1.0))
        first = est.assign(v, v + 1.0)
        return est.assign(first, first * 10.0)

    frame, out = _init(fn)
    assert float(frame.assigned["v"]) == 20.0  # (1 + 1) * 10
    assert out is frame.assigned["v"]


def test_assign_trainable_is_an_error():
    def fn():
        est.get_variable("w", [2])
        est.assign("w", jnp.zeros(2))

    with pytest.raises(
        ValueError,
        match=r"^Variable w is trainable: its value comes from train_op and cannot be assigned\.",
    ):
        _init(fn)


def test_assign_unknown_name_lists_known_variables():
    def fn():
        est.get_variable("b", [1], trainable=False)
        est.get_variable("a", [1], trainable=False)
        est.assign("c", 1.0)

    with pytest.raises(
        ValueError,
        match=r"^assign\(\): no non-trainable variable named c\. Known non-trainable "
        r"variables: a, b\.$",
    ):
        _init(fn)
    with pytest.raises(ValueError, match=r"Known non-trainable variables: none\.$"):
        _init(lambda: est.assign("c", 1.0))


def test_assign_an_array_that_is_not_a_variable():
    def fn():
        est.get_variable("v", [2], trainable=False)
        est.assign(jnp.zeros(2), jnp.ones(2))

    with pytest.raises(ValueError, match=r"^assign\(\) takes a variable name or the array"):
        _init(fn)


def test_assign_shape_mismatch():
    def fn():
        est.get_variable("v", [2], trainable=False)
        est.assign("v", jnp.ones(3))

    with pytest.raises(
        ValueError,
        match=r"^assign\(\): variable v has shape \(2,\), but the new value has shape \(3,\)\.$",
    ):
        _init(fn)


def test_variables_sharing_an_array_initializer_are_distinct_for_assign():
    shared = jnp.zeros(2)

    def fn():
        a = est.get_variable("a", trainable=False, initializer=shared)
        est.get_variable("b", trainable=False, initializer=shared)
        est.assign(a, jnp.ones(2))

    frame, _ = _init(fn)
    assert list(frame.assigned) == ["a"]


# --- rng, global step, identity -----------------------------------------------------------


def test_next_rng_key_is_deterministic_and_distinct():
    def fn():
        return [jax.random.key_data(est.next_rng_key()) for _ in range(3)]

    _, first = _init(fn, seed=3)
    _, again = _init(fn, seed=3)
    _, other = _init(fn, seed=4)
    for x, y in zip(first, again, strict=True):
        np.testing.assert_array_equal(x, y)
    as_tuples = {tuple(np.asarray(k).ravel()) for k in first}
    assert len(as_tuples) == 3  # every call gives a new key
    assert not np.array_equal(first[0], other[0])


def test_next_rng_key_same_in_init_and_apply():
    _, key_init = _init(lambda: jax.random.key_data(est.next_rng_key()), seed=5)
    _, key_apply = _apply(lambda: jax.random.key_data(est.next_rng_key()), {}, seed=5)
    np.testing.assert_array_equal(key_init, key_apply)


def test_the_base_key_is_made_only_when_used_and_in_model_fns_trace():
    """The call's key is made at its first use, in the trace model_fn runs in: a model_fn
    without randomness has no key derivation in its program, and a key first drawn inside
    a ``lax.scan`` body (then drawn again after it) is the key drawn at the top level."""
    model = ModelFunction(lambda features, mode: None, None, est.RunConfig(tf_random_seed=7), 0)
    step = jnp.int32(3)

    def traced(body):
        def run(step):
            frame = Frame(APPLY, functools.partial(model.step_key, step), step)
            with transform_context(frame):
                return body()

        return run

    no_random = str(jax.make_jaxpr(traced(lambda: est.get_global_step() + 1))(step))
    assert "threefry" not in no_random and "random_fold_in" not in no_random

    def draws_at_the_top():
        return [jax.random.key_data(est.next_rng_key()) for _ in range(2)]

    def draws_first_in_a_scan():
        def body(carry, _):
            return carry, jax.random.key_data(est.next_rng_key())

        _, first = jax.lax.scan(body, 0, None, length=1)
        return [first[0], jax.random.key_data(est.next_rng_key())]

    top = jax.jit(traced(draws_at_the_top))(step)
    scanned = jax.jit(traced(draws_first_in_a_scan))(step)
    for a, b in zip(top, scanned, strict=True):
        np.testing.assert_array_equal(a, b)
    # and as before: the same keys as a base key made before model_fn ran
    eager = Frame(APPLY, lambda: model.step_key(step), step)
    with transform_context(eager):
        expected = draws_at_the_top()
    for a, b in zip(top, expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_get_global_step():
    assert est.get_global_step() is None  # outside model_fn, as TF without a global step
    _, step = _init(est.get_global_step, step=41)
    assert int(step) == 41


def test_get_global_step_traced_under_jit():
    @jax.jit
    def f(step):
        frame = Frame(APPLY, jax.random.key(0), step)
        with transform_context(frame):
            return est.get_global_step() * 2

    assert int(f(jnp.int32(21))) == 42


def test_identity_names_with_scope():
    def fn():
        est.identity(jnp.float32(1.0), "loss_copy")
        with est.variable_scope("head"):
            out = est.identity([1, 2], "logits")
        return out

    frame, out = _init(fn)
    assert sorted(frame.named) == ["head/logits", "loss_copy"]
    assert isinstance(out, jax.Array)
    np.testing.assert_array_equal(frame.named["head/logits"], [1, 2])


# --- regularization -----------------------------------------------------------------------


def test_regularization_loss_sums_regularizers():
    def l2(w):
        return 0.5 * jnp.sum(w**2)

    def fn():
        est.get_variable("a", initializer=jnp.array([1.0, 2.0]), regularizer=l2)
        est.get_variable("b", initializer=jnp.array([3.0]), regularizer=jnp.sum)
        est.get_variable("c", initializer=jnp.array([100.0]))  # no regularizer
        return est.get_regularization_loss()

    _, loss = _init(fn)
    # 0.5 * (1 + 4) + 3 = 5.5
    assert loss.dtype == jnp.float32
    np.testing.assert_allclose(float(loss), 5.5, rtol=1e-6)


def test_regularizer_counted_once_when_variable_is_reused():
    # TF adds the regularization loss when the variable is created, not on reuse
    # (tensorflow 2.15.1: one REGULARIZATION_LOSSES entry after two AUTO_REUSE requests).
    def fn():
        for _ in range(3):
            est.get_variable("w", initializer=jnp.array([2.0]), regularizer=jnp.sum)
        return est.get_regularization_loss()

    _, loss = _init(fn)
    assert float(loss) == 2.0
    _, loss = _apply(fn, {"w": jnp.array([4.0])})
    assert float(loss) == 4.0  # computed from the applied value


def test_regularization_loss_zero_without_regularizers():
    _, loss = _init(est.get_regularization_loss)
    assert loss.shape == () and float(loss) == 0.0
