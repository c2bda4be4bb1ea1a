"""Tests for ``estimator/initializers.py``: each factory's distribution, checked on large
samples against the formula of its ``tf.compat.v1`` counterpart.

Tolerances: with N samples the standard error of a mean is sigma / sqrt(N) and that of a
standard deviation about sigma / sqrt(2N); N >= 100,000 everywhere, so a 2% relative
tolerance is over 6 standard errors, while a wrong formula (e.g. fan_in for fan_avg, or a
missing truncation correction of 0.88) is off by 12% or more.

Samples are 10,000 draws of a [3, 5] kernel, so the fans are those of the kernel while the
sample is large; the draws run eagerly under ``vmap`` so that every test reuses the same
compiled random primitives (compilation, not sampling, is what costs time here).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from estimator import initializers as init
from estimator.initializers import _fans

TRUNC_STD = 0.87962566103423978  # std of a unit normal truncated to [-2, 2]


def _sample(initializer, shape=(3, 5), n_draws=10_000, seed=0):
    """n_draws independent float32 draws of ``shape``, flattened to float64."""
    keys = jax.random.split(jax.random.key(seed), n_draws)
    values = jax.vmap(lambda k: initializer(k, shape, jnp.float32))(keys)
    return np.asarray(values, np.float64).ravel()


# --- constants ----------------------------------------------------------------------------


def test_zeros_ones_constant():
    key = jax.random.key(0)
    z = init.zeros_initializer()(key, (2, 3), jnp.int32)
    assert z.dtype == jnp.int32 and z.shape == (2, 3) and not np.any(z)
    o = init.ones_initializer()(key, (4,), jnp.float32)
    np.testing.assert_array_equal(o, np.ones(4))
    c = init.constant_initializer(2.5)(key, (2, 2), jnp.float32)
    np.testing.assert_array_equal(c, np.full((2, 2), 2.5))
    row = init.constant_initializer([1.0, 2.0, 3.0])(key, (2, 3), jnp.float32)
    np.testing.assert_array_equal(row, [[1, 2, 3], [1, 2, 3]])  # broadcast over rows
    assert init.constant_initializer()(key, (3,), jnp.float32).tolist() == [0.0, 0.0, 0.0]


def test_dtype_default_is_float32():
    assert init.zeros_initializer()(jax.random.key(0), (1,)).dtype == jnp.float32
    assert init.random_normal_initializer()(jax.random.key(0), (1,)).dtype == jnp.float32


# --- plain random initializers ------------------------------------------------------------


def test_random_normal_mean_and_stddev():
    x = _sample(init.random_normal_initializer(mean=1.0, stddev=2.0))
    # std error of the mean: 2 / sqrt(1.5e5) = 0.0052.
    assert abs(x.mean() - 1.0) < 0.03
    np.testing.assert_allclose(x.std(), 2.0, rtol=0.02)
    assert np.abs(x - 1.0).max() > 2 * 2.0  # untruncated: tails beyond 2 sigma exist


def test_truncated_normal_stays_within_two_stddev():
    mean, stddev = 0.5, 0.3
    x = _sample(init.truncated_normal_initializer(mean=mean, stddev=stddev))
    assert x.min() >= mean - 2 * stddev - 1e-6 and x.max() <= mean + 2 * stddev + 1e-6
    assert x.min() < mean - 1.9 * stddev and x.max() > mean + 1.9 * stddev
    # Truncating N(0, 1) to [-2, 2] leaves std 0.8796: 0.3 * 0.8796 = 0.2639.
    np.testing.assert_allclose(x.std(), stddev * TRUNC_STD, rtol=0.02)
    assert abs(x.mean() - mean) < 0.01


def test_random_uniform_range_and_moments():
    x = _sample(init.random_uniform_initializer(minval=-1.0, maxval=3.0))
    assert x.min() >= -1.0 and x.max() < 3.0
    # U(-1, 3): mean 1, variance (3 - (-1))^2 / 12 = 16 / 12 = 1.333.
    assert abs(x.mean() - 1.0) < 0.02
    np.testing.assert_allclose(x.var(), 16 / 12, rtol=0.02)


def test_random_uniform_default_maxval_is_one():
    x = _sample(init.random_uniform_initializer())
    assert x.min() >= 0.0 and x.max() < 1.0
    assert abs(x.mean() - 0.5) < 0.01


def test_seed_argument_is_ignored_keys_decide():
    a = _sample(init.random_normal_initializer(seed=1), seed=7)
    b = _sample(init.random_normal_initializer(seed=2), seed=7)
    np.testing.assert_array_equal(a, b)
    c = _sample(init.random_normal_initializer(seed=1), seed=8)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_dtype_respected(dtype):
    assert init.glorot_uniform_initializer()(jax.random.key(0), (3, 5), dtype).dtype == dtype


# --- fans (TF's _compute_fans) ------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, fans",
    [
        ((), (1.0, 1.0)),  # scalar
        ((7,), (7.0, 7.0)),  # 1-D: fan_in = fan_out = shape[0]
        ((3, 5), (3.0, 5.0)),  # dense kernel [in, out]
        ((2, 3, 4, 6), (24.0, 36.0)),  # conv kernel: receptive field 2 * 3 = 6; 4 * 6, 6 * 6
        ((2, 2, 2, 3, 5), (24.0, 40.0)),  # 3-D conv: receptive field 8; 3 * 8, 5 * 8
    ],
)
def test_fans(shape, fans):
    assert _fans(shape) == fans


# --- variance scaling ---------------------------------------------------------------------

_CONV = (3, 3, 64, 32)  # receptive field 9: fan_in 576, fan_out 288, fan_avg 432


@pytest.mark.parametrize("mode, n", [("fan_in", 576), ("fan_out", 288), ("fan_avg", 432)])
def test_variance_scaling_uniform_conv_fans(mode, n):
    scale = 2.0
    f = init.variance_scaling_initializer(scale, mode, "uniform")
    x = np.asarray(f(jax.random.key(0), _CONV, jnp.float32), np.float64).ravel()  # 18,432
    limit = math.sqrt(3 * scale / n)  # uniform(-l, l) has variance l^2 / 3 = scale / n
    assert x.min() >= -limit and x.max() <= limit
    assert x.max() > 0.99 * limit and x.min() < -0.99 * limit
    # Relative std error of a uniform's sample variance: sqrt(0.8 / 18432) = 0.66%; the
    # other modes' variances differ by 25% or more.
    np.testing.assert_allclose(x.var(), scale / n, rtol=0.03)


@pytest.mark.parametrize("distribution", ["truncated_normal", "normal", "TRUNCATED_NORMAL"])
def test_variance_scaling_truncated_normal(distribution):
    # [3, 5] with fan_in: variance 1 / 3; TF divides the pre-truncation stddev by 0.8796 so
    # that the truncated values have exactly that variance.
    f = init.variance_scaling_initializer(1.0, "fan_in", distribution)
    x = _sample(f)
    std = math.sqrt(1 / 3)
    np.testing.assert_allclose(x.std(), std, rtol=0.02)
    bound = 2 * std / TRUNC_STD  # 2 pre-truncation standard deviations = 1.3127
    assert np.abs(x).max() <= bound + 1e-6
    assert np.abs(x).max() > 0.98 * bound


def test_variance_scaling_untruncated_normal():
    f = init.variance_scaling_initializer(1.0, "fan_out", "untruncated_normal")
    x = _sample(f)
    std = math.sqrt(1 / 5)
    np.testing.assert_allclose(x.std(), std, rtol=0.02)
    # A normal puts 4.55% of its mass beyond 2 sigma; truncation would put none there.
    frac = np.mean(np.abs(x) > 2 * std)
    assert 0.04 < frac < 0.051


def test_variance_scaling_zero_fan_does_not_divide_by_zero():
    # TF: scale / max(1, n); a [0, 5] kernel (fan_in 0) is simply empty.
    f = init.variance_scaling_initializer(1.0, "fan_in", "truncated_normal")
    assert f(jax.random.key(0), (0, 5), jnp.float32).shape == (0, 5)


# --- named variants -----------------------------------------------------------------------


def test_glorot_uniform_bounds_for_3x5_kernel():
    # limit = sqrt(6 / (fan_in + fan_out)) = sqrt(6 / (3 + 5)) = sqrt(0.75) = 0.8660.
    x = _sample(init.glorot_uniform_initializer())
    limit = math.sqrt(6 / 8)
    assert x.min() >= -limit and x.max() <= limit
    assert x.max() > 0.999 * limit and x.min() < -0.999 * limit
    np.testing.assert_allclose(x.var(), limit**2 / 3, rtol=0.02)  # = 0.25
    assert abs(x.mean()) < 0.01


def test_glorot_normal_3x5():
    # stddev after truncation sqrt(2 / (3 + 5)) = 0.5; bound 2 * 0.5 / 0.8796 = 1.137.
    x = _sample(init.glorot_normal_initializer())
    np.testing.assert_allclose(x.std(), 0.5, rtol=0.02)
    assert np.abs(x).max() <= 1.0 / TRUNC_STD + 1e-6


def test_he_normal_and_lecun_normal_use_fan_in():
    # [3, 5]: he std sqrt(2 / 3) = 0.8165, lecun std sqrt(1 / 3) = 0.5774.
    he = _sample(init.he_normal())
    lecun = _sample(init.lecun_normal())
    np.testing.assert_allclose(he.std(), math.sqrt(2 / 3), rtol=0.02)
    np.testing.assert_allclose(lecun.std(), math.sqrt(1 / 3), rtol=0.02)
    assert np.abs(he).max() <= 2 * math.sqrt(2 / 3) / TRUNC_STD + 1e-6


def test_he_uniform_limit():
    # limit sqrt(6 / fan_in) = sqrt(6 / 3) = 1.4142 for a [3, 5] kernel.
    x = _sample(init.he_uniform())
    limit = math.sqrt(2.0)
    assert x.max() <= limit and x.max() > 0.999 * limit and x.min() >= -limit


# --- argument errors (TF 2.15's tf.compat.v1.variance_scaling_initializer messages) -------


@pytest.mark.parametrize("scale", [0.0, -1.0])
def test_scale_must_be_positive(scale):
    with pytest.raises(
        ValueError, match=rf"^Argument `scale` must be a positive float\. Received: {scale}$"
    ):
        init.variance_scaling_initializer(scale)


def test_invalid_mode():
    with pytest.raises(
        ValueError,
        match=r"^Argument `mode` should be one of \('fan_in', 'fan_out', 'fan_avg'\)\. "
        r"Received: fan_sum$",
    ):
        init.variance_scaling_initializer(1.0, "fan_sum")


def test_invalid_distribution():
    with pytest.raises(
        ValueError,
        match=r"^Argument `distribution` should be one of \('normal', 'uniform', "
        r"'truncated_normal', 'untruncated_normal'\)\. Received: gamma$",
    ):
        init.variance_scaling_initializer(1.0, "fan_in", "Gamma")
