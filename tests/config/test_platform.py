"""``estimator.config.platform``: the process-wide settings an Estimator makes (each with a switch)
and the code paths taken on the CPU backend alone (forced off here, as on another backend)."""

import os
import re
import subprocess
import sys

import jax
import jax.extend.random as jax_random
import jax.numpy as jnp
import numpy as np
import pytest

import estimator as est
from estimator.config import platform
from estimator.engine import compile_policy as compiler
from estimator.layers import convolution

HERE = os.path.dirname(os.path.abspath(__file__))


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


@pytest.mark.parametrize(
    ("setting", "switch"),
    [
        ("unroll_threefry", platform.UNROLL_THREEFRY),
        ("canonical_convolutions", platform.CANONICAL_CONVOLUTIONS),
    ],
)
def test_a_lowering_stays_as_jax_has_it_when_switched_off(monkeypatch, setting, switch):
    calls = []
    monkeypatch.setattr(platform, setting, lambda: calls.append(1))
    monkeypatch.setenv(switch, "0")
    platform.configure(None)
    assert calls == []
    monkeypatch.setenv(switch, "1")
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
    assert compiler.compile_options(compiler.MANY, 10) is None  # fast_compile's small program


def test_the_default_cache_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("JAX_ESTIMATOR_CACHE_DIR", str(tmp_path))
    assert platform.default_cache_dir() == str(tmp_path)
    monkeypatch.delenv("JAX_ESTIMATOR_CACHE_DIR")
    assert platform.default_cache_dir().endswith("/.cache/jax-estimator/xla")


def test_the_cache_is_enabled_without_jaxs_per_write_directory_scan(tmp_path):
    # JAX's size cap (jax_compilation_cache_max_size) lists the whole directory on every
    # write; the Estimator leaves it off (-1) and prunes once per process instead.
    est.Estimator(lambda features, labels, mode: None, model_dir=str(tmp_path))
    assert jax.config.jax_compilation_cache_dir
    assert jax.config.jax_compilation_cache_max_size == -1


def test_pruning_the_cache_deletes_the_least_recently_used_entries(tmp_path):
    # Six entries of 100 bytes, last used at t = 1000 s ... 6000 s (the later of access
    # and modification time), each with JAX's access-time file; and a file that is no entry.
    for i in range(6):
        entry = tmp_path / f"k{i}-cache"
        entry.write_bytes(b"x" * 100)
        (tmp_path / f"k{i}-atime").write_bytes(b"t" * 8)
        used = 1000.0 * (i + 1)
        os.utime(entry, (used, used - 500) if i % 2 else (used - 500, used))
    (tmp_path / ".lockfile").write_bytes(b"")
    # 600 bytes within a cap of 600: nothing to do.
    assert platform.prune_compilation_cache(str(tmp_path), max_bytes=600) == 0
    assert len(list(tmp_path.iterdir())) == 13
    # Over a cap of 400: down to 3/4 of it (300 bytes), the oldest first: k0, k1, k2 go.
    assert platform.prune_compilation_cache(str(tmp_path), max_bytes=400) == 300
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".lockfile", "k3-atime", "k3-cache", "k4-atime", "k4-cache", "k5-atime", "k5-cache"
    ]  # fmt: skip
    # A directory that cannot be listed is left alone.
    assert platform.prune_compilation_cache(str(tmp_path / "missing"), max_bytes=1) == 0


# Convolutions whose layouts differ from the CPU's canonical one (``NHWC``/``HWIO``): 2-D in
# TF's default and in PyTorch's layout, with strides, dilations, padding and groups; 1-D and
# 3-D; a transposed convolution (input dilation). Each: (x shape, w shape, keywords).
CONVOLUTIONS = {
    "nchw_stride_same": ((2, 3, 9, 9), (4, 3, 3, 3), dict(
        window_strides=(2, 2), padding="SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))),
    "nhwc_groups_dilated": ((2, 8, 8, 4), (3, 3, 2, 6), dict(
        window_strides=(1, 1), padding="VALID", rhs_dilation=(2, 1), feature_group_count=2,
        dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    "nwc_1d": ((3, 10, 2), (3, 2, 5), dict(
        window_strides=(1,), padding=((1, 2),), dimension_numbers=("NWC", "WIO", "NWC"))),
    "ndhwc_3d": ((1, 4, 5, 6, 2), (2, 2, 2, 2, 3), dict(
        window_strides=(1, 2, 1), padding="SAME", dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))),
    "chwn_transposed": ((3, 5, 5, 2), (3, 3, 3, 4), dict(
        window_strides=(1, 1), padding=((2, 2), (2, 2)), lhs_dilation=(2, 2),
        dimension_numbers=("CHWN", "HWIO", "NHWC"))),
}  # fmt: skip


def _convolution_values() -> dict:
    """Each case's output, its gradients (of the sum of squares) with respect to the input
    and the kernel, and its kernel after three SGD steps in a ``lax.fori_loop``, by name."""
    values = {}
    for name, (x_shape, w_shape, keywords) in CONVOLUTIONS.items():
        rng = np.random.default_rng(len(name))
        x = rng.normal(size=x_shape).astype(np.float32)
        w = rng.normal(size=w_shape).astype(np.float32)

        def loss(x, w, keywords=keywords):
            return jnp.sum(jax.lax.conv_general_dilated(x, w, **keywords) ** 2)

        def train(x, w, loss=loss):
            return jax.lax.fori_loop(0, 3, lambda i, w: w - 1e-3 * jax.grad(loss, 1)(x, w), w)

        forward = jax.jit(lambda x, w, k=keywords: jax.lax.conv_general_dilated(x, w, **k))
        grad_x, grad_w = jax.jit(jax.grad(loss, (0, 1)))(x, w)
        values.update({
            name: forward(x, w), name + "/grad_x": grad_x, name + "/grad_w": grad_w,
            name + "/loop": jax.jit(train)(x, w),
        })  # fmt: skip
    return {k: np.asarray(v) for k, v in values.items()}


def _lowered(name: str) -> str:
    x_shape, w_shape, keywords = CONVOLUTIONS[name]

    def train(x, w):
        loss = lambda w: jnp.sum(jax.lax.conv_general_dilated(x, w, **keywords) ** 2)  # noqa: E731
        return jax.lax.fori_loop(0, 3, lambda i, w: w - 1e-3 * jax.grad(loss)(w), w)

    return jax.jit(train).lower(jnp.zeros(x_shape), jnp.zeros(w_shape)).as_text()


CANONICAL = re.compile(r"dim_numbers = \[b, [\d, ]*f\]x\[[\d, ]*i, o\]->\[b, [\d, ]*f\]")


@pytest.mark.parametrize("name", CONVOLUTIONS)
def test_an_estimator_lays_every_cpu_convolution_out_canonically(tmp_path, name):
    est.Estimator(lambda features, labels, mode: None, model_dir=str(tmp_path))
    assert platform.canonical_convolutions()  # registered once, by the Estimator
    found = re.findall(r"stablehlo\.convolution.*", _lowered(name))
    assert len(found) == 2  # the forward pass and the kernel gradient, in the loop's body
    assert all(CANONICAL.search(line) for line in found), found


@pytest.mark.slow
def test_canonical_convolutions_give_jaxs_own_values(tmp_path):
    """Outputs and gradients equal those of JAX's own lowering, computed in a process with
    the switch off (the rule is never registered there)."""
    reference = tmp_path / "reference.npz"
    code = (
        f"import sys; sys.path.insert(0, {HERE!r}); import numpy as np, test_platform; "
        f"np.savez({str(reference)!r}, **test_platform._convolution_values())"
    )
    env = {**os.environ, platform.CANONICAL_CONVOLUTIONS: "0"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert platform.canonical_convolutions()
    ours, theirs = _convolution_values(), np.load(reference)
    assert sorted(ours) == sorted(theirs.files) and len(ours) == 4 * len(CONVOLUTIONS)
    for key, value in ours.items():
        np.testing.assert_allclose(value, theirs[key], rtol=2e-5, atol=1e-5, err_msg=key)
