"""A module trained by the Estimator gives the numbers of the
library's own training loop.

For an MLP, a small CNN (with batch normalization) and a transformer block written with
each library (``tests/support/modules_zoo.py``), the Estimator trains ``STEPS`` steps through
``estimator.modules`` and the library's hand-written ``jax.jit`` + optax loop trains the
same number of steps on the same batches from the parameters the Estimator started from;
every parameter and every piece of state (batch-norm statistics) then agrees to 1e-6.

The Keras cases run on JAX's backend (``tests/conftest.py`` sets ``KERAS_BACKEND=jax``).
"""

from __future__ import annotations

import jax
import modules_zoo as zoo
import numpy as np
import optax
import pytest

import estimator as est

STEPS = 4
LIBRARIES = list(zoo.LIBRARIES)


class Snapshots(est.SessionRunHook):
    """The variables at the start of the run and at its end, by name."""

    def after_create_session(self, session, coord):
        self.initial = self._variables(session.state)

    def end(self, session):
        self.final = self._variables(session.state)

    @staticmethod
    def _variables(state):
        state = jax.device_get(state)
        return {k: np.asarray(v) for k, v in {**state.trainable, **state.non_trainable}.items()}


def make_tx():
    return optax.adam(1e-2)


@pytest.mark.slow
@pytest.mark.parametrize("arch", zoo.ARCHITECTURES)
@pytest.mark.parametrize("library", LIBRARIES)
def test_estimator_training_equals_the_library_own_loop(library, arch, tmp_path):
    case = zoo.case(library, arch)
    data = zoo.batches(arch, case.size, STEPS)
    snapshots = Snapshots()
    config = est.RunConfig(
        tf_random_seed=3, save_checkpoints_steps=None, save_checkpoints_secs=None
    )
    estimator = est.Estimator(zoo.model_fn_for(case, make_tx), str(tmp_path), config)
    estimator.train(lambda: iter([({"x": x}, y) for x, y in data]), hooks=[snapshots])

    loop = case.hand_loop(snapshots.initial, make_tx())
    assert sorted(loop.variables()) == sorted(snapshots.initial)  # the same names
    for x, y in data:
        loop.step(x, y)
    hand = loop.variables()
    moved = 0
    for name, value in snapshots.final.items():
        if value.dtype == bool:  # Equinox's batch norm: "first call" flag
            np.testing.assert_array_equal(value, hand[name], err_msg=name)
        else:
            np.testing.assert_allclose(value, hand[name], rtol=0, atol=1e-6, err_msg=name)
        moved += not np.array_equal(value, snapshots.initial[name])
    assert moved == len(snapshots.final)  # every parameter and statistic was trained
