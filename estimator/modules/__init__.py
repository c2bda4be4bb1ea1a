"""Modules of the JAX ecosystem inside a ``model_fn``: Flax NNX, Flax Linen, Equinox, Keras 3.

Synopsis::

    import estimator as est
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.hidden = nnx.Linear(4, 32, rngs=rngs)
            self.dropout = nnx.Dropout(0.1, rngs=rngs)
            self.out = nnx.Linear(32, 3, rngs=rngs)

        def __call__(self, x):
            return self.out(self.dropout(nnx.relu(self.hidden(x))))

    def model_fn(features, labels, mode):
        logits = est.modules.nnx(lambda rngs: MLP(rngs), features["x"])   # mlp/hidden/kernel, ...
        ...

One call per library turns a module into Estimator variables and applies it:

* :func:`nnx` ``(make, *inputs, name=None, **call_kwargs)`` — ``make(rngs)`` builds an
  ``nnx.Module``;
* :func:`linen` ``(module, *inputs, name=None, **apply_kwargs)`` — a ``flax.linen.Module``;
* :func:`equinox` ``(make, *inputs, name=None, vmap=False, **call_kwargs)`` — ``make(key)``
  builds an ``eqx.Module`` (or ``(module, state)``);
* :func:`keras` ``(layer, *inputs, name=None, **call_kwargs)`` — a Keras 3 layer or model on
  the JAX backend.

In every case the parameters are created once, from the module's own initialisers seeded
from the Estimator's seed, and stored as ordinary Estimator variables named
``<scope>/<path in the module>``, trainable and non-trainable apart: checkpoints,
``warm_start_from`` (regexes over those names), ``get_variable_value``, exports (the served
function is StableHLO: no module object, no library needed to serve), ``variable_partitions``,
``steps_per_execution`` and sparse updates of tables looked up with
``est.layers.embedding_lookup`` inside the module all work as for ``est.layers``. Batch-norm
statistics and other mutable state are updated in TRAIN mode, random layers get fresh keys
each step (``est.next_rng_key()``), and ``mode == ModeKeys.TRAIN`` is the module's training
flag. Under ``RunConfig(dtype_policy="mixed_bfloat16")`` the module computes in bfloat16 on
float32 variables.

Each library is an optional extra (``pip install 'jax-estimator[flax]'``, ``[equinox]``,
``[keras]``); ``import estimator`` imports none of them, an adapter imports its library
when first called. Keras must run on the JAX backend (``KERAS_BACKEND=jax`` before Keras
or TensorFlow is first imported; see :func:`keras`).
"""

from estimator.modules._equinox import equinox as equinox
from estimator.modules._keras import keras as keras
from estimator.modules._linen import linen as linen
from estimator.modules._nnx import nnx as nnx

__all__ = ["equinox", "keras", "linen", "nnx"]
