"""``estimator.layers.convolution``: JAX's convolution values and gradients, computed as a patch
matrix product (few input channels) or by convolutions in the canonical channels-last
layout (what XLA's CPU backend runs fast inside the Estimator's fused steps); max pooling
with TF's values and gradient."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

from estimator.layers import convolution
from estimator.layers.convolution import conv, max_pool

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
    (3, 2, "SAME", 1, 2),
]


@pytest.mark.parametrize("channels", [4, 32])  # patch matrix (k^n * 4 <= 256), convolution
@pytest.mark.parametrize(("n", "stride", "pad", "dilation", "k"), CASES)
def test_values_and_gradients_equal_lax(n, stride, pad, dilation, k, channels):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(3,) + (9,) * n + (channels,)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(k,) * n + (channels, 5)), jnp.float32)
    padding = [(1, 2)] * n if pad == "explicit" else pad
    spec = {1: ("NWC", "WIO", "NWC"), 2: ("NHWC", "HWIO", "NHWC"), 3: ("NDHWC", "DHWIO", "NDHWC")}[
        n
    ]

    def reference(x, w):
        return jax.lax.conv_general_dilated(
            x, w, (stride,) * n, padding, rhs_dilation=(dilation,) * n, dimension_numbers=spec
        )

    def ours(x, w):
        return conv(x, w, (stride,) * n, padding, (dilation,) * n)

    g = jnp.asarray(rng.normal(size=jax.eval_shape(reference, x, w).shape), jnp.float32)

    @jax.jit  # one compile for all, rather than op by op
    def both(x, w, g):
        pairs = [(y, vjp(g)) for y, vjp in (jax.vjp(reference, x, w), jax.vjp(ours, x, w))]
        # x as data (only the kernel differentiated): the transposed patch product
        data_value, data_vjp = jax.vjp(lambda w: ours(x, w), w)
        return pairs, (data_value, data_vjp(g)[0]), ours(x, w)  # last: undifferentiated

    ((expected, ref_grads), (value, our_grads)), (data_value, data_grad), forward = both(x, w, g)
    for computed in (value, data_value, forward):
        np.testing.assert_allclose(computed, expected, rtol=1e-5, atol=1e-5)
    for ours_grad, ref_grad in zip(
        (*our_grads, data_grad), (*ref_grads, ref_grads[1]), strict=True
    ):
        np.testing.assert_allclose(ours_grad, ref_grad, rtol=1e-4, atol=1e-4)


def _primitives(fn, *args) -> list[str]:
    jaxpr = jax.make_jaxpr(jax.grad(fn, argnums=tuple(range(len(args)))))(*args)
    return [e.primitive.name for e in _equations(jaxpr.jaxpr)]


def test_few_input_channels_take_the_patch_matrix():
    # 5x5 window x 1 channel = 25 <= PATCH_CONTRACTION_MAX: no convolution at all, forward
    # or backward; 3x3 x 32 = 288 > 256: three convolutions.
    def loss(x, w):
        return jnp.sum(conv(x, w, (1, 1), "SAME") ** 2)

    few = _primitives(loss, jnp.ones((2, 16, 16, 1)), jnp.ones((5, 5, 1, 8)))
    assert "conv_general_dilated" not in few and "dot_general" in few
    many = _primitives(loss, jnp.ones((2, 8, 8, 32)), jnp.ones((3, 3, 32, 4)))
    assert many.count("conv_general_dilated") == 3


def test_patch_matrix_construction_depends_on_what_is_differentiated():
    # Undifferentiated (evaluation, prediction): one gather builds the patch matrix, not
    # 25 slices (a kernel each to compile). Data under a kernel-only gradient (a training
    # step's first layer): the transposed matrix, a slice per window offset along one
    # dimension at a time (5 + 5), and no input gradient. A differentiated input: a slice
    # per window offset (25), whose transpose is its gradient.
    x, w = jnp.ones((2, 16, 16, 1)), jnp.ones((5, 5, 1, 8))

    def loss(x, w):
        return jnp.sum(conv(x, w, (1, 1), "SAME") ** 2)

    forward = [e.primitive.name for e in _equations(jax.make_jaxpr(loss)(x, w).jaxpr)]
    assert forward.count("gather") == 1 and "slice" not in forward
    weights_only = jax.make_jaxpr(jax.grad(loss, argnums=1))(x, w)  # x is data
    data = [e.primitive.name for e in _equations(weights_only.jaxpr)]
    assert "gather" not in data and data.count("slice") == 10 and "pad" in data
    both = _primitives(loss, x, w)
    assert "gather" not in both and both.count("slice") >= 25  # and the pad's transpose


def test_large_patch_matrices_stay_convolutions(monkeypatch):
    monkeypatch.setattr(convolution, "PATCH_BYTES_MAX", 1000)  # 2*8*8*9*4 bytes > 1000

    def loss(x, w):
        return jnp.sum(conv(x, w, (1, 1), "SAME") ** 2)

    assert "conv_general_dilated" in _primitives(
        loss, jnp.ones((2, 8, 8, 1)), jnp.ones((3, 3, 1, 4))
    )


def test_gradients_are_canonical_convolutions():
    x = jnp.ones((2, 8, 8, 32))
    w = jnp.ones((3, 3, 32, 4))

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


def test_max_pool_gradient_goes_to_the_first_maximum_as_tf():
    # TF 2.15 (tf.nn.max_pool2d(x, 2, 2, "VALID") under a GradientTape, output gradients
    # [[1, 2], [3, 4]]) gave these values and this input gradient: ties (the 3s of the
    # first window, the 0s of the third, the 5s of the fourth) send the whole gradient to
    # the window's first maximum in row-major order.
    x = jnp.asarray([[1, 3, 3, 0], [3, 2, 1, 1], [0, 0, 5, 5], [0, 0, 5, 5]], jnp.float32).reshape(
        1, 4, 4, 1
    )
    y, vjp = jax.vjp(lambda x: max_pool(x, (2, 2), (2, 2), "VALID"), x)
    np.testing.assert_array_equal(y.ravel(), [3, 3, 0, 5])
    (grad,) = vjp(jnp.asarray([1.0, 2, 3, 4]).reshape(1, 2, 2, 1))
    np.testing.assert_array_equal(
        grad.reshape(4, 4), [[0, 1, 2, 0], [0, 0, 0, 0], [3, 0, 4, 0], [0, 0, 0, 0]]
    )


@pytest.mark.parametrize(
    ("shape", "window", "strides", "padding"),
    [
        ((2, 8, 8, 3), (2, 2), (2, 2), "VALID"),  # blocks
        ((2, 9, 7, 3), (2, 2), (2, 2), "VALID"),  # blocks of the cropped input
        ((2, 8, 6, 3), (2, 3), (2, 3), "SAME"),  # blocks: SAME pads nothing
        ((2, 9, 8, 3), (2, 2), (2, 2), "SAME"),  # SAME pads: reduce_window
        ((2, 9, 9, 3), (3, 3), (2, 2), "VALID"),  # overlapping: reduce_window
        ((2, 12, 3), (4,), (4,), "VALID"),  # one spatial dimension
    ],
)
def test_max_pool_equals_reduce_window_without_ties(shape, window, strides, padding):
    x = jnp.asarray(np.random.default_rng(1).normal(size=shape), jnp.float32)  # no ties

    def reference(x):
        return jax.lax.reduce_window(
            x, -jnp.inf, jax.lax.max, (1, *window, 1), (1, *strides, 1), padding
        )

    expected, ref_vjp = jax.vjp(reference, x)
    value, our_vjp = jax.vjp(lambda x: max_pool(x, window, strides, padding), x)
    np.testing.assert_array_equal(value, expected)
    g = jnp.asarray(np.random.default_rng(2).normal(size=expected.shape), jnp.float32)
    np.testing.assert_array_equal(our_vjp(g)[0], ref_vjp(g)[0])
