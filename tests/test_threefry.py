"""``estimator.engine.threefry``: JAX's Threefry hash lowered unrolled on the CPU gives the
same bits (Random123's known answers), without the rolled ``while`` loop."""

import jax
import jax.extend.random as jax_random
import jax.numpy as jnp
import numpy as np

import estimator as est
from estimator.engine import threefry


def test_an_estimator_unrolls_threefry_and_the_bits_are_the_known_answers(tmp_path):
    est.Estimator(lambda features, labels, mode: None, model_dir=str(tmp_path))
    assert threefry.unroll()  # this JAX has the rule (registered once, by the Estimator)
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
