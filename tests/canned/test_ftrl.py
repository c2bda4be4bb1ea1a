"""Tests for canned.ftrl: TF 2.15's FTRL kernel as an optax transformation."""

import doctest
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import canned._ftrl
from canned._ftrl import FtrlState, ftrl


def ftrl_reference(w0, grads, *, lr, p=-0.5, n0=0.1, l1=0.0, l2=0.0, shrink=0.0, beta=0.0):
    """Independent per-element FTRL-Proximal in float64, written from TF's kernel equations.

    Returns the weights after every step, shape [steps, n_weights], and the final (n, z).
    """
    w = [float(x) for x in w0]
    n = [float(n0)] * len(w)
    z = [0.0] * len(w)
    history = []
    for t, g_t in enumerate(grads):
        a = lr(t) if callable(lr) else lr
        l2_eff = l2 + beta / (2 * a)
        for i, g in enumerate(float(x) for x in g_t):
            g_shr = g + 2 * shrink * w[i]
            n_new = n[i] + g * g  # plain gradient, not g_shr
            sigma = (n_new ** (-p) - n[i] ** (-p)) / a
            z[i] = z[i] + g_shr - sigma * w[i]
            n[i] = n_new
            if abs(z[i]) <= l1:
                w[i] = 0.0
            else:
                w[i] = (math.copysign(l1, z[i]) - z[i]) / (n_new ** (-p) / a + 2 * l2_eff)
        history.append(list(w))
    return np.array(history), np.array(n), np.array(z)


def run_ftrl(opt, w0, grads):
    """Applies `opt` step by step; returns weights after every step and the final state."""
    params = jnp.asarray(w0, jnp.float32)
    state = opt.init(params)
    history = []
    for g in grads:
        updates, state = opt.update(jnp.asarray(g, jnp.float32), state, params)
        params = optax.apply_updates(params, updates)
        history.append(np.asarray(params))
    return np.array(history), state


G3 = [[0.5, -1.0, 0.2], [0.3, 0.4, -0.6], [-0.2, 0.1, 0.05]]

# Weights after each of the 3 steps of G3, from TF 2.15.1:
# tf.keras.optimizers.legacy.Ftrl(**kwargs).apply_gradients on a float32 tf.Variable(w0).
TF_CASES = {
    "defaults_lr_0.5": (
        [0.0, 0.0, 0.0],
        dict(lr=0.5),
        dict(learning_rate=0.5),
        [
            [-0.4225771, 0.4767313, -0.26726124],
            [-0.64871067, 0.29855713, 0.15700287],
            [-0.5043731, 0.25418934, 0.12173557],
        ],
    ),
    "all_options": (
        [0.3, -0.2, 0.1],
        dict(lr=0.2, p=-0.7, n0=0.2, l1=0.05, l2=0.1, shrink=0.03, beta=0.4),
        dict(
            learning_rate=0.2,
            learning_rate_power=-0.7,
            initial_accumulator_value=0.2,
            l1_regularization_strength=0.05,
            l2_regularization_strength=0.1,
            l2_shrinkage_regularization_strength=0.03,
            beta=0.4,
        ),
        [
            [-0.019072408, 0.01903455, -0.03314266],
            [-0.07392621, -0.016812313, 0.05497434],
            [-0.037516307, -0.028551323, 0.045635257],
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(TF_CASES))
def test_reference_and_ftrl_match_tf_literals(case):
    w0, ref_kwargs, ftrl_kwargs, tf_weights = TF_CASES[case]
    expected, n, z = ftrl_reference(w0, G3, **ref_kwargs)
    # The NumPy reference reproduces TF 2.15.1 (checks the reference itself) ...
    np.testing.assert_allclose(expected, tf_weights, rtol=2e-6, atol=1e-7)
    # ... and so does ftrl, weights after each step and the final slots.
    got, state = run_ftrl(ftrl(**ftrl_kwargs), w0, G3)
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(state.accumulator, n, rtol=1e-6)
    np.testing.assert_allclose(state.linear, z, rtol=2e-6, atol=1e-7)
    assert int(state.count) == 3


def test_accumulator_slots_from_tf():
    # Slots after the "defaults_lr_0.5" run, from TF 2.15.1: accumulator 0.1 + Σg², e.g.
    # 0.1 + 0.25 + 0.09 + 0.04 = 0.48; linear [0.69887984, -0.57291365, -0.17258996].
    _, state = run_ftrl(ftrl(0.5), [0.0, 0.0, 0.0], G3)
    np.testing.assert_allclose(state.accumulator, [0.48, 1.27, 0.5025], rtol=1e-6)
    np.testing.assert_allclose(state.linear, [0.69887984, -0.57291365, -0.17258996], rtol=2e-6)


REFERENCE_CASES = {
    # Fixed per-weight rate (p = 0) with an L1 that zeroes some weights.
    "p0_l1": dict(lr=0.3, p=0.0, n0=0.0, l1=0.4),
    # p = -1 (n to the first power), L2 and beta only.
    "p-1_l2_beta": dict(lr=0.7, p=-1.0, n0=0.5, l2=0.2, beta=1.5),
    # Shrinkage only, default power.
    "shrinkage": dict(lr=0.1, shrink=0.5),
    # Everything at once, p = -0.3.
    "everything": dict(lr=0.05, p=-0.3, n0=0.05, l1=0.01, l2=0.3, shrink=0.2, beta=0.7),
}


@pytest.mark.parametrize("case", sorted(REFERENCE_CASES))
def test_matches_numpy_reference_over_five_steps(case):
    kw = REFERENCE_CASES[case]
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=6).astype(np.float32)
    grads = rng.normal(size=(5, 6)).astype(np.float32)
    expected, n, z = ftrl_reference(w0, grads, **kw)
    opt = ftrl(
        kw["lr"],
        learning_rate_power=kw.get("p", -0.5),
        initial_accumulator_value=kw.get("n0", 0.1),
        l1_regularization_strength=kw.get("l1", 0.0),
        l2_regularization_strength=kw.get("l2", 0.0),
        l2_shrinkage_regularization_strength=kw.get("shrink", 0.0),
        beta=kw.get("beta", 0.0),
    )
    got, state = run_ftrl(opt, w0, grads)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.accumulator, n, rtol=1e-6)
    np.testing.assert_allclose(state.linear, z, rtol=1e-5, atol=1e-6)
    if case == "p0_l1":
        # L1 zeroes are exact zeros after apply_updates (w + (0 - w) == 0), and some occur.
        assert np.sum(got == 0.0) > 0
        np.testing.assert_array_equal(got == 0.0, expected == 0.0)


def test_by_hand_two_steps_with_l1_l2():
    # lr α = 1, n₀ = 0, l1 = 1, l2 = 0.5 (2·l2 = 1), w₀ = 0.
    # Step 1, g = 3: n = 0 + 9 = 9, √n = 3; z = 0 + 3 - (3 - 0)/1·0 = 3;
    #   |z| = 3 > 1, w = (sign(3)·1 - 3) / (3/1 + 1) = -2/4 = -0.5.
    # Step 2, g = 4: n = 9 + 16 = 25, √n = 5; z = 3 + 4 - (5 - 3)/1·(-0.5) = 8;
    #   w = (1 - 8) / (5 + 1) = -7/6.
    opt = ftrl(
        1.0, initial_accumulator_value=0.0, l1_regularization_strength=1.0,
        l2_regularization_strength=0.5,
    )  # fmt: skip
    got, state = run_ftrl(opt, [0.0], [[3.0], [4.0]])
    np.testing.assert_allclose(got[:, 0], [-0.5, -7 / 6], rtol=1e-6)
    np.testing.assert_allclose(state.accumulator, [25.0])
    np.testing.assert_allclose(state.linear, [8.0], rtol=1e-6)


def test_by_hand_accumulator_uses_plain_gradient_under_shrinkage():
    # α = 1, n₀ = 0, shrinkage s = 1, w₀ = 1, g = 3.
    # g̃ = 3 + 2·1·1 = 5; n = 0 + 3² = 9 (plain g; with g̃ it would be 25);
    # z = 0 + 5 - (√9 - √0)/1·1 = 2; w = -2 / (3/1) = -2/3.
    # (Had n grown by g̃² = 25: z = 5 - 5 = 0 and w = 0.)
    opt = ftrl(1.0, initial_accumulator_value=0.0, l2_shrinkage_regularization_strength=1.0)
    got, state = run_ftrl(opt, [1.0], [[3.0]])
    np.testing.assert_allclose(got[0], [-2 / 3], rtol=1e-6)
    np.testing.assert_allclose(state.accumulator, [9.0])


def test_by_hand_power_and_beta():
    # learning_rate_power p = -1 uses n¹: α = 1, n₀ = 1, g = 1, w₀ = 0:
    #   n = 2; z = 1 - (2 - 1)/1·0 = 1; w = -1 / (2/1) = -0.5   (p = -0.5 would give -1/√2).
    opt = ftrl(1.0, learning_rate_power=-1.0, initial_accumulator_value=1.0)
    got, _ = run_ftrl(opt, [0.0], [[1.0]])
    np.testing.assert_allclose(got[0], [-0.5], rtol=1e-6)
    # beta = 2 adds β/(2α) = 1 to l2, so 2·l2 = 2: α = 1, n₀ = 0, g = 3:
    #   n = 9, z = 3, w = -3 / (3 + 2) = -0.6.
    got, _ = run_ftrl(ftrl(1.0, initial_accumulator_value=0.0, beta=2.0), [0.0], [[3.0]])
    np.testing.assert_allclose(got[0], [-0.6], rtol=1e-6)


def test_learning_rate_schedule_uses_step_count_from_zero():
    # Keras evaluates a schedule at `iterations` = steps already applied (0 first).
    # From TF 2.15.1 with PiecewiseConstantDecay([1], [0.5, 0.1]) (0.5 for steps 0 and 1,
    # then 0.1) and beta = 0.3:
    tf_weights = [
        [-0.2803923, 0.37069747, -0.14833148],
        [-0.436103, 0.23009963, 0.14955156],
        [-0.07744079, 0.03958543, 0.025163658],
    ]

    def schedule(count):
        return jnp.where(count <= 1, 0.5, 0.1)

    expected, _, _ = ftrl_reference([0, 0, 0], G3, lr=lambda t: 0.5 if t <= 1 else 0.1, beta=0.3)
    np.testing.assert_allclose(expected, tf_weights, rtol=2e-6, atol=1e-7)
    got, _ = run_ftrl(ftrl(schedule, beta=0.3), [0, 0, 0], G3)
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-7)


def test_apply_updates_gives_reference_weights_on_a_pytree():
    params = {
        "linear/weights": jnp.array([[0.2, -0.1], [0.0, 0.4], [0.3, 0.3]], jnp.float32),
        "linear/bias_weights": jnp.array([0.05], jnp.float32),
    }
    rng = np.random.default_rng(1)
    grads_seq = [
        {k: rng.normal(size=v.shape).astype(np.float32) for k, v in params.items()}
        for _ in range(3)
    ]
    kw = dict(lr=0.2, l1=0.01, l2=0.05, shrink=0.02)
    opt = ftrl(
        0.2, l1_regularization_strength=0.01, l2_regularization_strength=0.05,
        l2_shrinkage_regularization_strength=0.02,
    )  # fmt: skip
    state = opt.init(params)
    assert isinstance(state, FtrlState)
    for k, v in params.items():
        np.testing.assert_array_equal(state.accumulator[k], np.full(v.shape, 0.1, np.float32))
        np.testing.assert_array_equal(state.linear[k], np.zeros(v.shape, np.float32))
        assert state.accumulator[k].dtype == state.linear[k].dtype == jnp.float32
    assert state.count.dtype == jnp.int32 and int(state.count) == 0
    p = params
    for g in grads_seq:
        updates, state = opt.update(g, state, p)
        p = optax.apply_updates(p, updates)
    for k, v in params.items():
        expected, _, _ = ftrl_reference(np.ravel(v), [np.ravel(g[k]) for g in grads_seq], **kw)
        np.testing.assert_allclose(np.ravel(p[k]), expected[-1], rtol=1e-5, atol=1e-7, err_msg=k)


def test_update_returns_new_minus_old_weights():
    # One step from w₀ = 0.4 with g = 1, α = 0.5: n = 1.1, z = 1 - (√1.1 - √0.1)/0.5·0.4
    # = 1 - 1.465162·0.4 = 0.4139352; w = -0.4139352 / (√1.1/0.5) = -0.1973359
    # (TF 2.15.1: -0.19733587); the update is w - w₀ = -0.5973359.
    opt = ftrl(0.5)
    params = jnp.array([0.4])
    updates, _ = opt.update(jnp.array([1.0]), opt.init(params), params)
    np.testing.assert_allclose(updates, [-0.5973359], rtol=1e-6)


def test_jit_compiles_once_and_matches_eager():
    opt = ftrl(0.3, l1_regularization_strength=0.02, l2_shrinkage_regularization_strength=0.1)
    traces = []

    @jax.jit
    def step(params, state, grads):
        traces.append(1)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    rng = np.random.default_rng(2)
    grads = rng.normal(size=(4, 5)).astype(np.float32)
    params = jnp.zeros(5)
    state = opt.init(params)
    for g in grads:
        params, state = step(params, state, jnp.asarray(g))
    assert len(traces) == 1
    eager, _ = run_ftrl(opt, np.zeros(5), grads)
    np.testing.assert_allclose(params, eager[-1], rtol=1e-6, atol=1e-7)


def test_works_inside_chain():
    # Clipping first, then FTRL: the chain passes params through to ftrl's update.
    opt = optax.chain(optax.clip(0.5), ftrl(0.5))
    params = jnp.array([0.0])
    updates, _ = opt.update(jnp.array([3.0]), opt.init(params), params)
    # Clipped g = 0.5: n = 0.35, z = 0.5, w = -0.5 / (√0.35/0.5) = -0.4225771 (as G3's step 1).
    np.testing.assert_allclose(updates, [-0.4225771], rtol=1e-6)


def test_params_none_raises():
    opt = ftrl(0.1)
    params = jnp.zeros(2)
    with pytest.raises(ValueError, match=r"ftrl needs the current parameters.*params=None"):
        opt.update(jnp.ones(2), opt.init(params))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            dict(initial_accumulator_value=-0.1),
            r"`initial_accumulator_value` needs to be positive or zero\. "
            r"Received: initial_accumulator_value=-0\.1\.",
        ),
        (
            dict(learning_rate_power=0.5),
            r"`learning_rate_power` needs to be negative or zero\. "
            r"Received: learning_rate_power=0\.5\.",
        ),
        (
            dict(l1_regularization_strength=-1.0),
            r"`l1_regularization_strength` needs to be positive or zero\. "
            r"Received: l1_regularization_strength=-1\.0\.",
        ),
        (
            dict(l2_regularization_strength=-1.0),
            r"`l2_regularization_strength` needs to be positive or zero\. "
            r"Received: l2_regularization_strength=-1\.0\.",
        ),
        (
            dict(l2_shrinkage_regularization_strength=-2.0),
            r"`l2_shrinkage_regularization_strength` needs to be positive or zero\. "
            r"Received: l2_shrinkage_regularization_strength=-2\.0\.",
        ),
        (dict(beta=-0.5), r"`beta` needs to be positive or zero\. Received: beta=-0\.5\."),
    ],
)
def test_invalid_arguments_raise_keras_messages(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ftrl(0.1, **kwargs)


@pytest.mark.parametrize("lr", [0.0, -0.2])
def test_non_positive_learning_rate_raises(lr):
    with pytest.raises(ValueError, match=r"`learning_rate` needs to be positive.*pass a value > 0"):
        ftrl(lr)


def test_zero_boundaries_are_accepted():
    # TF allows exactly 0 for these, and p = 0 (a fixed per-weight learning rate).
    opt = ftrl(0.1, learning_rate_power=0.0, initial_accumulator_value=0.0)
    got, _ = run_ftrl(opt, [0.0], [[2.0]])
    # p = 0: n⁰ = 1 for every n, so σ = 0; z = 2; w = -2 / (1/0.1) = -0.2.
    np.testing.assert_allclose(got[0], [-0.2], rtol=1e-6)


class TestZeroGradientRows:
    """Dense zero gradients versus TF's sparse updates (rows absent from a batch)."""

    def test_zero_gradient_is_a_no_op_without_shrinkage(self):
        # Row 0 gets gradients, row 1 never does (as a vocabulary entry absent from all
        # batches). l1 and l2 are on; shrinkage is off; weights start at zero (canned linear).
        opt = ftrl(0.5, l1_regularization_strength=0.05, l2_regularization_strength=0.1)
        params = jnp.zeros((2, 1))
        state = opt.init(params)
        for g in ([[1.0], [0.0]], [[-0.3], [0.0]]):
            updates, state = opt.update(jnp.array(g), state, params)
            params = optax.apply_updates(params, updates)
        # Row 1: n = 0.1, z = 0, w = 0 exactly, as TF's sparse path (never touched).
        assert float(params[1, 0]) == 0.0
        assert float(state.accumulator[1, 0]) == pytest.approx(0.1)
        assert float(state.linear[1, 0]) == 0.0
        # Now a step with no gradient anywhere: n and z unchanged exactly; the weights
        # are recomputed from the same (z, n), so they stay put (row 0 up to the rounding of
        # w + (w' - w)), as if the rows had been absent from a sparse gradient.
        before = (params, state)
        updates, state = opt.update(jnp.zeros((2, 1)), state, params)
        params = optax.apply_updates(params, updates)
        np.testing.assert_array_equal(state.accumulator, before[1].accumulator)
        np.testing.assert_array_equal(state.linear, before[1].linear)
        np.testing.assert_allclose(params, before[0], rtol=1e-7, atol=0)
        assert float(params[1, 0]) == 0.0

    def test_shrinkage_moves_zero_gradient_rows_unlike_tf_sparse(self):
        # w₀ = [0.4, 0.4], α = 0.5, s = 0.1; row 0 gets g = 1 then 0.5, row 1 gets 0.
        # Row 1, step 1: g̃ = 0 + 2·0.1·0.4 = 0.08; n = 0.1; z = 0.08;
        #   w = -0.08 / (√0.1/0.5) = -0.08 / 0.6324555 = -0.1264911.
        # Step 2: g̃ = 2·0.1·(-0.1264911) = -0.0252982; z = 0.0547018; w = -0.0864911.
        # From TF 2.15.1, dense gradients: row 1 = [-0.12649111, -0.086491115], the same.
        # TF's sparse path (IndexedSlices with row 0 only) leaves row 1 at 0.4 both steps;
        # with dense JAX gradients that behaviour is not available.
        opt = ftrl(0.5, l2_shrinkage_regularization_strength=0.1)
        got, _ = run_ftrl(opt, [0.4, 0.4], [[1.0, 0.0], [0.5, 0.0]])
        np.testing.assert_allclose(got[:, 1], [-0.12649111, -0.086491115], rtol=1e-6)
        # Row 0 matches TF's sparse and dense runs alike (from TF 2.15.1).
        np.testing.assert_allclose(got[:, 0], [-0.2354744, -0.43037373], rtol=1e-6)

    def test_nonzero_start_with_zero_gradient_is_reset_to_zero(self):
        # w₀ = 0.4, g = 0, no regularisation: n = 0.1, z = 0 + 0 - (√0.1 - √0.1)/α·0.4 = 0,
        # so w = -0 / (√0.1/α) = 0: the initial value is forgotten on the first step.
        # From TF 2.15.1 (dense): row 1 = [0.0, 0.0]; TF's sparse path keeps 0.4 until the
        # row first appears.
        got, _ = run_ftrl(ftrl(0.5), [0.4, 0.4], [[1.0, 0.0], [0.5, 0.0]])
        np.testing.assert_array_equal(got[:, 1], [0.0, 0.0])
        np.testing.assert_allclose(got[:, 0], [-0.19733587, -0.4125016], rtol=1e-6)


def test_docstring_examples_run():
    results = doctest.testmod(
        canned._ftrl, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    assert results.attempted > 0
    assert results.failed == 0
