"""``estimator.convolution.conv``: JAX's convolution values and gradients, computed by
convolutions in the canonical channels-last layout (what XLA's CPU backend runs fast inside
the Estimator's fused ``lax.scan`` steps)."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

from estimator.convolution import conv

# (spatial dims, stride, padding, dilation, kernel size): each option with each other one
# at least once (all 144 combinations of 1-2 dims, strides 1-3, the three paddings,
# dilations 1-2 and kernels 2/3/5 were checked the same way once).
CASES = [
    (1, 1, "SAME", 1, 3),
    (1, 2, "VALID", 2, 2),
    (1, 3, "explicit", 1, 2),
    (2, 1, "SAME", 2, 2),
    (2, 2, "SAME", 1, 3),
    (2, 2, "VALID", 1, 2),
    (2, 1, "explicit", 2, 3),
    (2, 3, "VALID", 2, 3),
]


@pytest.mark.parametrize(("n", "stride", "pad", "dilation", "k"), CASES)
def test_values_and_gradients_equal_lax(n, stride, pad, dilation, k):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(3,) + (9,) * n + (4,)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(k,) * n + (4, 5)), jnp.float32)
    padding = [(1, 2)] * n if pad == "explicit" else pad
    spec = ("NWC", "WIO", "NWC") if n == 1 else ("NHWC", "HWIO", "NHWC")

    def reference(x, w):
        return jax.lax.conv_general_dilated(
            x, w, (stride,) * n, padding, rhs_dilation=(dilation,) * n, dimension_numbers=spec
        )

    def ours(x, w):
        return conv(x, w, (stride,) * n, padding, (dilation,) * n)

    expected, ref_vjp = jax.vjp(reference, x, w)
    value, our_vjp = jax.vjp(ours, x, w)
    np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-5)
    g = jnp.asarray(rng.normal(size=expected.shape), jnp.float32)
    for ours_grad, ref_grad in zip(our_vjp(g), ref_vjp(g), strict=True):
        np.testing.assert_allclose(ours_grad, ref_grad, rtol=1e-4, atol=1e-4)


def test_gradients_are_canonical_convolutions():
    x = jnp.ones((2, 8, 8, 3))
    w = jnp.ones((3, 3, 3, 4))

    def loss(x, w):
        return jnp.sum(conv(x, w, (2, 2), "SAME") ** 2)

    jaxpr = jax.make_jaxpr(jax.grad(loss, argnums=(0, 1)))(x, w)
    convs = [e for e in _equations(jaxpr.jaxpr) if e.primitive.name == "conv_general_dilated"]
    assert len(convs) == 3  # forward, input gradient, kernel gradient
    for equation in convs:
        numbers = equation.params["dimension_numbers"]
        # NHWC / HWIO / NHWC: batch 0, features last; kernel in-features 2, out-features 3.
        assert numbers.lhs_spec == (0, 3, 1, 2)
        assert numbers.rhs_spec == (3, 2, 0, 1)
        assert numbers.out_spec == (0, 3, 1, 2)


def _equations(jaxpr):
    for equation in jaxpr.eqns:
        yield equation
        for sub in jax.extend.core.jaxprs_in_params(equation.params):
            yield from _equations(sub)
