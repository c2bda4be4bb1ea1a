"""``estimator.platform``: the process-wide settings an Estimator makes (each with a switch)
and the code paths taken on the CPU backend alone (forced off here, as on another backend)."""

import jax
import jax.extend.random as jax_random
import jax.numpy as jnp
import numpy as np
import pytest

import estimator as est
from estimator import convolution, platform
from estimator.engine import compile_policy as compiler


def test_an_estimator_unrolls_threefry_and_the_bits_are_the_known_answers(tmp_path):
    est.Estimator(lambda features, labels, mode: None, model_dir=str(tmp_path))
    assert platform.unroll_threefry()  # this JAX has the rule (registered once, by the Estimator)
    program = jax.jit(lambda key: jax.random.bits(key, (8,))).lower(jax.random.key(0))
    assert "while" not in program.as_text()
    # Threefry-2x32, 20 rounds: the known-answer tests of Random123 (Salmon et al., 2011),
    # kat_vectors: key (k0, k1), counter (x0, x1) -> (y0, y1).
    key0 = jnp.array([0, 0xFFFFFFFF, 0x13198A2E], jnp.uint32)
    key1 = jnp.array([0, 0xFFFFFFFF, 0x03707344], jnp.uint32)
    x0 = jnp.array([0, 0xFFFFFFFF, 0x243F6A88], jnp.uint32)
    x1 = jnp.array([0, 0xFFFFFFFF, 0x85A308D3], jnp.uint32)
    y0, y1 = jax.jit(jax_random.threefry2x32_p.bind)(key0, key1, x0, x1)
    np.testing.assert_array_equal(y0, np.array([0x6B200159, 0x1CB996FC, 0xC4923A9C], np.uint32))
    np.testing.assert_array_equal(y1, np.array([0x99BA4EFE, 0xBB002BE7, 0x483DF7A0], np.uint32))


def test_threefry_stays_as_jax_lowers_it_when_switched_off(monkeypatch):
    calls = []
    monkeypatch.setattr(platform, "unroll_threefry", lambda: calls.append(1))
    monkeypatch.setenv(platform.UNROLL_THREEFRY, "0")
    platform.configure(None)
    assert calls == []
    monkeypatch.setenv(platform.UNROLL_THREEFRY, "1")
    platform.configure(None)
    assert calls == [1]


def _primitives(f, *args):
    return str(jax.make_jaxpr(jax.grad(f, argnums=(0, 1)))(*args))


@pytest.mark.parametrize("how", ["another backend", "switched off"])
def test_off_the_cpu_convolutions_and_pooling_are_laxs(monkeypatch, how):
    if how == "another backend":
        monkeypatch.setattr(platform, "on_cpu", lambda: False)
    else:
        monkeypatch.setenv(platform.CPU_CONVOLUTIONS, "0")

    def loss(x, w):
        y = convolution.conv(x, w, (1, 1), "SAME")
        return jnp.sum(convolution.max_pool(y, (2, 2), (2, 2), "VALID") ** 2)

    x, w = jnp.ones((2, 16, 16, 1)), jnp.ones((5, 5, 1, 8))
    program = _primitives(loss, x, w)
    # JAX's own convolution and its gradients (which cuDNN runs on a GPU), JAX's pooling.
    assert program.count("conv_general_dilated") == 3 and "reduce_window_max" in program
    assert "custom_vjp" not in program and "dot_general" not in program
    reference = jax.lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    np.testing.assert_allclose(convolution.conv(x, w, (1, 1), "SAME"), reference, rtol=1e-6)


def test_on_the_cpu_a_few_channel_convolution_is_a_patch_matrix(monkeypatch):
    monkeypatch.delenv(platform.CPU_CONVOLUTIONS, raising=False)
    x, w = jnp.ones((2, 16, 16, 1)), jnp.ones((5, 5, 1, 8))
    program = _primitives(lambda x, w: jnp.sum(convolution.conv(x, w, (1, 1), "SAME")), x, w)
    assert "conv_general_dilated" not in program and "dot_general" in program


@pytest.mark.parametrize("how", ["another backend", "switched off"])
def test_off_the_cpu_every_program_compiles_with_xlas_defaults(monkeypatch, how):
    assert compiler.compile_options(compiler.ONCE) == {
        "xla_cpu_use_fusion_emitters": False,
        "xla_backend_optimization_level": 0,
    }
    assert compiler.compile_options(compiler.FEW) == {"xla_cpu_use_fusion_emitters": False}
    if how == "another backend":
        monkeypatch.setattr(platform, "on_cpu", lambda: False)
    else:
        monkeypatch.setenv(platform.CPU_COMPILE_OPTIONS, "off")
    runs = (compiler.ONCE, compiler.FEW, compiler.MANY)
    assert [compiler.compile_options(r) for r in runs] == [None, None, None]


def test_the_default_cache_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("JAX_ESTIMATOR_CACHE_DIR", str(tmp_path))
    assert platform.default_cache_dir() == str(tmp_path)
    monkeypatch.delenv("JAX_ESTIMATOR_CACHE_DIR")
    assert platform.default_cache_dir().endswith("/.cache/jax-estimator/xla")
