"""Tests for ``estimator/layers.py`` (``tf.compat.v1.layers`` on ``get_variable``).

Variable names and shapes are those tensorflow 2.15.1 creates for the same calls
(``dense/kernel:0 (3, 4)``, ``dense_1/...``, ``logits/...``, ``tower/dense/...``,
``conv2d/kernel:0 (3, 3, 2, 3)``, ``conv2d_1/kernel:0 (2, 1, 2, 3)``,
``batch_normalization/{gamma,beta,moving_mean,moving_variance}``, ``bn/...``, then
``dense_2``). Outputs are compared with NumPy written here.
"""

import math
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import estimator as est
from estimator.model.variables import APPLY, INIT, Frame, transform_context

L = est.layers
RNG = np.random.default_rng(0)


def _run(fn, kind, seed=0, trainable=None, non_trainable=None):
    """Runs ``fn`` under the transform inside one ``jax.jit`` (one compilation per test
    instead of one per eager op); returns the frame's dicts and ``fn``'s output."""
    info = {}

    def body():
        frame = Frame(
            kind,
            jax.random.key(seed),
            jnp.int32(0),
            trainable=dict(trainable or {}),
            non_trainable=dict(non_trainable or {}),
        )
        with transform_context(frame):
            out = fn()
        info["rng_count"] = frame.rng_count
        return out, frame.trainable, frame.non_trainable, frame.assigned

    out, t, nt, assigned = jax.jit(body)()
    frame = types.SimpleNamespace(
        trainable=t, non_trainable=nt, assigned=assigned, rng_count=info["rng_count"]
    )
    return frame, out


def _init(fn, seed=0):
    return _run(fn, INIT, seed)


def _apply(fn, trainable, non_trainable, seed=0):
    return _run(fn, APPLY, seed, trainable, non_trainable)


def _shapes(frame):
    return {k: tuple(v.shape) for k, v in {**frame.trainable, **frame.non_trainable}.items()}


def _abstract_shapes(fn):
    """Variable shapes ``fn`` creates, traced abstractly (no compilation, no values)."""

    def collect():
        frame, _ = _init(fn)
        return {**frame.trainable, **frame.non_trainable}

    return {k: v.shape for k, v in jax.eval_shape(collect).items()}


def _const(array):
    return lambda key, shape, dtype: jnp.asarray(array, dtype)


# --- names --------------------------------------------------------------------------------


def test_variable_names_and_shapes_as_tf():
    x = jnp.ones((2, 3))
    img = jnp.ones((1, 5, 5, 2))

    def fn():
        L.dense(x, 4)
        L.dense(x, 4)
        L.dense(x, 2, name="logits")
        with est.variable_scope("tower"):
            L.dense(x, 4)
        L.conv2d(img, 3, 3)
        L.conv2d(img, 3, (2, 1))
        L.batch_normalization(x)
        L.batch_normalization(img, name="bn")
        L.dense(x, 4)

    # From TF 2.15.1 (tf.compat.v1.layers, same calls).
    assert _abstract_shapes(fn) == {
        "dense/kernel": (3, 4),
        "dense/bias": (4,),
        "dense_1/kernel": (3, 4),
        "dense_1/bias": (4,),
        "logits/kernel": (3, 2),
        "logits/bias": (2,),
        "tower/dense/kernel": (3, 4),
        "tower/dense/bias": (4,),
        "conv2d/kernel": (3, 3, 2, 3),
        "conv2d/bias": (3,),
        "conv2d_1/kernel": (2, 1, 2, 3),
        "conv2d_1/bias": (3,),
        "batch_normalization/gamma": (3,),
        "batch_normalization/beta": (3,),
        "batch_normalization/moving_mean": (3,),
        "batch_normalization/moving_variance": (3,),
        "bn/gamma": (2,),
        "bn/beta": (2,),
        "bn/moving_mean": (2,),
        "bn/moving_variance": (2,),
        "dense_2/kernel": (3, 4),
        "dense_2/bias": (4,),
    }


def test_batch_norm_moving_statistics_are_non_trainable():
    frame, _ = _init(lambda: L.batch_normalization(jnp.ones((2, 3))))
    assert sorted(frame.trainable) == ["batch_normalization/beta", "batch_normalization/gamma"]
    assert sorted(frame.non_trainable) == [
        "batch_normalization/moving_mean",
        "batch_normalization/moving_variance",
    ]


def test_names_agree_between_init_and_apply():
    def fn():
        return L.dense(L.dense(jnp.ones((1, 2)), 3), 1)

    frame, init_out = _init(fn)
    # apply would raise on an unknown name; with the init values it gives the init output
    _, apply_out = _apply(fn, frame.trainable, frame.non_trainable)
    np.testing.assert_allclose(apply_out, init_out, rtol=1e-6)


# --- dense --------------------------------------------------------------------------------


def test_dense_output_and_default_initializers():
    x = RNG.normal(size=(4, 3)).astype(np.float32)
    frame, out = _init(lambda: L.dense(x, 5))
    kernel, bias = np.asarray(frame.trainable["dense/kernel"]), frame.trainable["dense/bias"]
    np.testing.assert_array_equal(bias, np.zeros(5))  # zeros
    assert np.abs(kernel).max() <= math.sqrt(6 / (3 + 5))  # glorot_uniform limit 0.866
    np.testing.assert_allclose(out, x @ kernel, rtol=1e-5, atol=1e-6)


def test_dense_activation_bias_and_3d_inputs():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    k = RNG.normal(size=(4, 2)).astype(np.float32)
    b = np.array([0.5, -0.5], np.float32)
    _, out = _init(
        lambda: L.dense(x, 2, jax.nn.relu, kernel_initializer=_const(k), bias_initializer=_const(b))
    )
    assert out.shape == (2, 3, 2)
    np.testing.assert_allclose(out, np.maximum(x @ k + b, 0.0), rtol=1e-5, atol=1e-6)


def test_dense_without_bias_and_integer_inputs():
    frame, out = _init(
        lambda: L.dense(
            jnp.array([[1, 2]]), 1, use_bias=False, kernel_initializer=_const([[3.0], [4.0]])
        )
    )
    assert list(frame.trainable) == ["dense/kernel"]
    assert out.dtype == jnp.float32 and float(out[0, 0]) == 11.0  # 1 * 3 + 2 * 4


def test_dense_regularizers_constraints_and_trainable():
    def fn():
        L.dense(
            jnp.ones((1, 2)),
            2,
            kernel_initializer=_const([[1.0, -2.0], [3.0, 4.0]]),
            bias_initializer=_const([1.0, 1.0]),
            kernel_regularizer=lambda w: jnp.sum(jnp.abs(w)),
            bias_regularizer=jnp.sum,
            activity_regularizer=jnp.sum,
            kernel_constraint=lambda w: jnp.clip(w, 0.0, 2.0),
        )
        return est.get_regularization_loss()

    _, reg = _init(fn)
    # kernel |1|+|-2|+|3|+|4| = 10, bias 2, activity: the output with the constrained
    # kernel [[1, 0], [2, 2]]: [1 + 2, 0 + 2] + [1, 1] = [4, 3] -> 7. Total 19.
    assert float(reg) == 19.0
    frame, _ = _init(lambda: L.dense(jnp.ones((1, 2)), 2, trainable=False))
    assert sorted(frame.non_trainable) == ["dense/bias", "dense/kernel"] and not frame.trainable


def test_dense_scalar_input_error():
    with pytest.raises(
        ValueError,
        match=r"^The last dimension of the inputs to `Dense` should be defined\. Found shape",
    ):
        _init(lambda: L.dense(jnp.float32(1.0), 2))


# --- conv2d -------------------------------------------------------------------------------


def _np_conv2d(x, k, strides, padding, dilation):
    """Direct loop: out[n, i, j, f] = sum_{a, b, c} xp[n, i*s + a*d, j*s + b*d, c] k[a, b, c, f]."""
    n, h, w, _ = x.shape
    kh, kw, _, f = k.shape
    (sh, sw), (dh, dw) = strides, dilation
    ekh, ekw = (kh - 1) * dh + 1, (kw - 1) * dw + 1  # dilated kernel extent
    if padding == "same":  # TF: out = ceil(in / s); the extra padding goes after
        oh, ow = -(-h // sh), -(-w // sw)
        ph, pw = max((oh - 1) * sh + ekh - h, 0), max((ow - 1) * sw + ekw - w, 0)
        pads = ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0))
    else:
        oh, ow = (h - ekh) // sh + 1, (w - ekw) // sw + 1
        pads = ((0, 0),) * 4
    xp = np.pad(x, pads)
    out = np.zeros((n, oh, ow, f))
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    out[:, i, j, :] += xp[:, i * sh + a * dh, j * sw + b * dw, :] @ k[a, b]
    return out


@pytest.mark.parametrize(
    "kernel_size, strides, padding, dilation",
    [
        ((3, 3), (1, 1), "valid", (1, 1)),
        ((3, 3), (1, 1), "same", (1, 1)),
        ((2, 3), (2, 2), "same", (1, 1)),  # odd padding total: the extra row goes after
        ((3, 2), (2, 1), "valid", (1, 1)),
        ((2, 2), (1, 1), "same", (2, 2)),
        ((3, 3), (1, 1), "valid", (2, 1)),
    ],
)
def test_conv2d_against_numpy_loop(kernel_size, strides, padding, dilation):
    x = RNG.normal(size=(2, 7, 6, 3)).astype(np.float32)
    k = RNG.normal(size=(*kernel_size, 3, 4)).astype(np.float32)
    b = RNG.normal(size=(4,)).astype(np.float32)
    _, out = _init(
        lambda: L.conv2d(
            x,
            4,
            kernel_size,
            strides,
            padding,
            dilation_rate=dilation,
            kernel_initializer=_const(k),
            bias_initializer=_const(b),
        )
    )
    expected = _np_conv2d(x, k, strides, padding, dilation) + b
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_conv2d_int_arguments_activation_and_defaults():
    x = RNG.normal(size=(1, 4, 4, 1)).astype(np.float32)
    frame, out = _init(lambda: L.conv2d(x, 2, 2, strides=2, activation=jax.nn.relu))
    k = np.asarray(frame.trainable["conv2d/kernel"])
    # glorot_uniform with fans 2*2*1 = 4 and 2*2*2 = 8: limit sqrt(6 / 12).
    assert np.abs(k).max() <= math.sqrt(6 / 12)
    np.testing.assert_array_equal(frame.trainable["conv2d/bias"], 0.0)
    expected = np.maximum(_np_conv2d(x, k, (2, 2), "valid", (1, 1)), 0.0)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_conv2d_errors():
    img = jnp.ones((1, 4, 4, 1))
    with pytest.raises(
        ValueError,
        match=r"^Input 0 of layer conv2d is incompatible with the layer: expected ndim=4, found "
        r"ndim=3\. Full shape received: \(4, 4, 1\)(\n|$)",
    ):
        _init(lambda: L.conv2d(jnp.ones((4, 4, 1)), 1, 2))
    with pytest.raises(ValueError, match=r"^data_format='channels_first' is not supported"):
        _init(lambda: L.conv2d(img, 1, 2, data_format="channels_first"))
    with pytest.raises(
        ValueError,
        match=r"^The `padding` argument must be 'valid' or 'same'\. Received: FULL(\n|$)",
    ):
        _init(lambda: L.conv2d(img, 1, 2, padding="full"))
    with pytest.raises(
        ValueError,
        match=r"^The `kernel_size` argument must be a tuple of 2 integers\. "
        r"Received: \(1, 2, 3\)(\n|$)",
    ):
        _init(lambda: L.conv2d(img, 1, (1, 2, 3)))


# --- pooling ------------------------------------------------------------------------------


def _np_pool(x, size, strides, padding, reduce):
    n, h, w, c = x.shape
    (kh, kw), (sh, sw) = size, strides
    if padding == "same":
        oh, ow = -(-h // sh), -(-w // sw)
        ph, pw = max((oh - 1) * sh + kh - h, 0), max((ow - 1) * sw + kw - w, 0)
        top, left = ph // 2, pw // 2
    else:
        oh, ow, top, left = (h - kh) // sh + 1, (w - kw) // sw + 1, 0, 0
    out = np.zeros((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - top, j * sw - left
            # Only the entries inside the input: TF pads max with -inf and averages over
            # the valid entries.
            window = x[:, max(r0, 0) : r0 + kh, max(c0, 0) : c0 + kw, :]
            out[:, i, j, :] = reduce(window, axis=(1, 2))
    return out


@pytest.mark.parametrize(
    "size, strides, padding",
    [
        ((2, 2), (2, 2), "valid"),
        ((3, 3), (2, 2), "same"),
        ((2, 3), (1, 2), "same"),
        ((3, 2), (1, 1), "valid"),
    ],
)
def test_pooling_against_numpy(size, strides, padding):
    x = RNG.normal(size=(2, 5, 6, 3)).astype(np.float32)
    mx, av = jax.jit(
        lambda x: (
            L.max_pooling2d(x, size, strides, padding),
            L.average_pooling2d(x, size, strides, padding),
        )
    )(x)
    np.testing.assert_allclose(mx, _np_pool(x, size, strides, padding, np.max), rtol=1e-6)
    np.testing.assert_allclose(av, _np_pool(x, size, strides, padding, np.mean), rtol=1e-5)


def test_average_pooling_same_counts_only_valid_entries():
    # 1x2x2x1 input [[1, 2], [3, 4]], pool 2, stride 1, same -> out 2x2: pad one row and
    # column after. Corner (0, 0): (1+2+3+4)/4 = 2.5; (0, 1): (2+4)/2 = 3; (1, 0): (3+4)/2 =
    # 3.5; (1, 1): 4.
    x = jnp.array([1.0, 2.0, 3.0, 4.0]).reshape(1, 2, 2, 1)
    out = L.average_pooling2d(x, 2, 1, "same")
    np.testing.assert_allclose(out[0, :, :, 0], [[2.5, 3.0], [3.5, 4.0]])


def test_pooling_errors():
    x = jnp.ones((1, 2, 2, 1))
    with pytest.raises(ValueError, match="The `padding` argument must be 'valid' or 'same'"):
        L.max_pooling2d(x, 2, 2, "causal")
    with pytest.raises(ValueError, match="The `pool_size` argument must be a tuple of 2"):
        L.max_pooling2d(x, (2,), 2)
    with pytest.raises(ValueError, match="data_format='channels_first' is not supported"):
        L.average_pooling2d(x, 2, 2, data_format="channels_first")


# --- batch normalization ------------------------------------------------------------------


def test_batch_norm_training_normalises_with_batch_statistics_and_updates_moving():
    x = jnp.array([[1.0, 2.0], [3.0, 6.0]])
    frame, out = _init(lambda: L.batch_normalization(x, training=True))
    # Batch mean [2, 4], biased variance [1, 4]; epsilon 1e-3:
    # out = (x - mean) / sqrt(var + 1e-3).
    expected = np.array(
        [[-1 / np.sqrt(1.001), -2 / np.sqrt(4.001)], [1 / np.sqrt(1.001), 2 / np.sqrt(4.001)]]
    )
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    # moving = moving * 0.99 + batch * 0.01: mean 0 -> [0.02, 0.04];
    # variance 1 -> 0.99 + 0.01 * [1, 4] = [1.0, 1.03] (2-D input: biased variance, as TF).
    np.testing.assert_allclose(frame.assigned["batch_normalization/moving_mean"], [0.02, 0.04])
    np.testing.assert_allclose(
        frame.assigned["batch_normalization/moving_variance"], [1.0, 1.03], rtol=1e-6
    )


def test_batch_norm_4d_moving_variance_is_bessel_corrected_as_tf_fused():
    # 4-D channels-last input takes TF's fused kernel, whose moving-variance update uses the
    # unbiased batch variance (tensorflow 2.15.1: moving_variance matched 0.5 + 0.5 * var *
    # n / (n - 1) for a [2, 3, 3, 2] input with momentum 0.5).
    x = jnp.array([1.0, 2.0, 3.0, 6.0]).reshape(1, 2, 2, 1)
    frame, out = _init(lambda: L.batch_normalization(x, training=True, momentum=0.5))
    # mean 3; biased variance (4 + 1 + 0 + 9) / 4 = 3.5; unbiased 14 / 3 = 4.6667.
    np.testing.assert_allclose(frame.assigned["batch_normalization/moving_mean"], [1.5])
    np.testing.assert_allclose(
        frame.assigned["batch_normalization/moving_variance"], [0.5 + 0.5 * 14 / 3], rtol=1e-6
    )
    # The normalisation itself uses the biased variance 3.5.
    np.testing.assert_allclose(
        out.ravel(), (np.array([1, 2, 3, 6]) - 3) / np.sqrt(3.5 + 1e-3), rtol=1e-5
    )
    frame, _ = _init(lambda: L.batch_normalization(x, training=True, momentum=0.5, fused=False))
    np.testing.assert_allclose(
        frame.assigned["batch_normalization/moving_variance"], [0.5 + 0.5 * 3.5], rtol=1e-6
    )


def test_batch_norm_inference_uses_moving_statistics():
    x = jnp.array([[1.0, 2.0], [3.0, 6.0]])
    frame, out = _init(lambda: L.batch_normalization(x))  # TF's default training=False
    assert not frame.assigned
    np.testing.assert_allclose(out, np.asarray(x) / np.sqrt(1.001), rtol=1e-6)  # mean 0, var 1

    def fn():
        return L.batch_normalization(x, training=False)

    trainable = {
        "batch_normalization/gamma": jnp.array([2.0, 1.0]),
        "batch_normalization/beta": jnp.array([0.0, 10.0]),
    }
    moving = {
        "batch_normalization/moving_mean": jnp.array([1.0, 2.0]),
        "batch_normalization/moving_variance": jnp.array([4.0, 1.0]),
    }
    frame, out = _apply(fn, trainable, moving)
    # gamma * (x - mean) / sqrt(var + eps) + beta, per channel.
    expected = np.array([2.0, 1.0]) * (np.asarray(x) - [1.0, 2.0]) / np.sqrt(
        np.array([4.0, 1.0]) + 1e-3
    ) + [0.0, 10.0]
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    assert not frame.assigned


def test_batch_norm_axis_scale_center_and_names():
    x = RNG.normal(size=(3, 2, 4)).astype(np.float32)
    frame, out = _init(
        lambda: L.batch_normalization(
            x, axis=1, center=False, scale=False, training=True, name="norm"
        )
    )
    assert _shapes(frame) == {"norm/moving_mean": (2,), "norm/moving_variance": (2,)}
    mean = x.mean(axis=(0, 2), keepdims=True)
    var = x.var(axis=(0, 2), keepdims=True)
    np.testing.assert_allclose(out, (x - mean) / np.sqrt(var + 1e-3), rtol=1e-4, atol=1e-5)


def test_two_batch_norms_are_numbered():
    def fn():
        h = L.batch_normalization(jnp.ones((2, 3)))
        return L.batch_normalization(h)

    frame, _ = _init(fn)
    assert "batch_normalization_1/gamma" in frame.trainable


# --- dropout ------------------------------------------------------------------------------


def test_dropout_default_is_identity():
    x = jnp.arange(6.0)
    assert L.dropout(x) is x  # TF's default training=False
    frame, out = _init(lambda: L.dropout(x))
    np.testing.assert_array_equal(out, x)
    assert frame.rng_count == 0  # no key drawn


def test_dropout_training_zeroes_about_rate_and_scales():
    x = jnp.ones((100_000,))
    _, out = _init(lambda: L.dropout(x, rate=0.3, training=True))
    out = np.asarray(out)
    kept = out != 0
    # Kept entries are scaled by 1 / (1 - 0.3) = 1.4286; about 30% are zero.
    np.testing.assert_allclose(out[kept], 1 / 0.7, rtol=1e-6)
    assert abs((~kept).mean() - 0.3) < 0.01  # std error sqrt(0.21 / 1e5) = 0.0014
    assert abs(out.mean() - 1.0) < 0.02  # unbiased in expectation


def test_dropout_deterministic_per_key():
    x = jnp.ones((64,))
    _, a = _init(lambda: L.dropout(x, training=True), seed=1)
    _, b = _init(lambda: L.dropout(x, training=True), seed=1)
    _, c = _init(lambda: L.dropout(x, training=True), seed=2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)

    def two():
        return L.dropout(x, training=True), L.dropout(x, training=True)

    _, (d, e) = _init(two, seed=1)
    np.testing.assert_array_equal(d, a)  # the first call's key is the same
    assert not np.array_equal(d, e)  # a second call draws a new key


def test_dropout_noise_shape_drops_whole_rows():
    x = jnp.ones((200, 5))
    _, out = _init(lambda: L.dropout(x, rate=0.5, noise_shape=[200, 1], training=True))
    out = np.asarray(out)
    row_zero = (out == 0).all(axis=1)
    row_kept = (out == 2.0).all(axis=1)
    assert (row_zero | row_kept).all()
    assert 0.3 < row_zero.mean() < 0.7


def test_dropout_training_as_array_under_jit():
    x = jnp.ones((1000,))

    @jax.jit
    def f(training):
        frame = Frame(APPLY, jax.random.key(0), jnp.int32(0))
        with transform_context(frame):
            return L.dropout(x, rate=0.5, training=training)

    np.testing.assert_array_equal(f(jnp.bool_(False)), np.ones(1000))
    dropped = np.asarray(f(jnp.bool_(True)))
    assert set(np.unique(dropped)) == {0.0, 2.0}


@pytest.mark.parametrize("rate", [1.0, -0.1, 1.5])
def test_dropout_rate_error(rate):
    with pytest.raises(
        ValueError,
        match=rf"^rate must be a scalar tensor or a float in the range \[0, 1\), got {rate}(\n|$)",
    ):
        _init(lambda: L.dropout(jnp.ones(2), rate=rate, training=True))


# --- flatten ------------------------------------------------------------------------------


def test_flatten():
    x = jnp.arange(24.0).reshape(2, 3, 4)
    out = L.flatten(x)
    assert out.shape == (2, 12)
    np.testing.assert_array_equal(out[1], np.arange(12.0, 24.0))
    assert L.flatten(jnp.ones((5,))).shape == (5, 1)  # as TF: [batch] -> [batch, 1]
    assert L.flatten(jnp.ones((3, 2, 2, 1))).shape == (3, 4)


# --- embedding_lookup ---------------------------------------------------------------------


def test_embedding_lookup_with_given_table():
    table = jnp.arange(12.0).reshape(4, 3)
    ids = jnp.array([[0, 3], [2, 2]])
    out = L.embedding_lookup(table, ids)
    assert out.shape == (2, 2, 3)
    np.testing.assert_array_equal(out, np.asarray(table)[np.asarray(ids)])


def test_embedding_lookup_creates_table():
    def fn():
        a = L.embedding_lookup(None, jnp.array([1, 1]), vocab_size=1000, dimension=8)
        b = L.embedding_lookup(None, jnp.array([0]), vocab_size=3, dimension=2, name="emb")
        c = L.embedding_lookup(None, jnp.array([0]), vocab_size=3, dimension=2)
        return a, b, c

    frame, (a, _, _) = _init(fn)
    assert _shapes(frame) == {
        "embedding/embeddings": (1000, 8),
        "emb/embeddings": (3, 2),
        "embedding_1/embeddings": (3, 2),
    }
    table = np.asarray(frame.trainable["embedding/embeddings"])
    # Default initializer uniform(-0.05, 0.05): 8000 values fill the range.
    assert table.min() >= -0.05 and table.max() < 0.05 and table.max() > 0.049
    np.testing.assert_array_equal(a, table[[1, 1]])


def test_embedding_lookup_max_norm_clips_rows():
    # Rows with L2 norms 5 and 0.5; max_norm 1: the first is scaled to norm 1, the second kept.
    table = jnp.array([[3.0, 4.0], [0.3, 0.4]])
    out = np.asarray(L.embedding_lookup(table, jnp.array([0, 1]), max_norm=1.0))
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)


def test_embedding_lookup_needs_table_or_size():
    with pytest.raises(
        ValueError, match=r"^embedding_lookup needs either the table \(params\) or vocab_size"
    ):
        _init(lambda: L.embedding_lookup(None, jnp.array([0]), vocab_size=3))
