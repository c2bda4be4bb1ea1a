"""Flax NNX modules inside ``model_fn``: :func:`nnx`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from estimator.model import dtype_policy
from estimator.model.variables import next_rng_key
from estimator.modules import _common

__all__ = ["nnx"]


def nnx(make: Callable[[Any], Any], *inputs: Any, name: str | None = None, **call_kwargs: Any):
    """Runs a Flax NNX module inside ``model_fn``, its parameters as Estimator variables.

    ``make(rngs)`` builds the module (``lambda rngs: MLP(784, 10, rngs=rngs)``); it is
    called with an ``nnx.Rngs`` seeded from the Estimator's seed when the model is
    initialised, so the parameters start from the module's own initialisers, and built
    abstractly (``nnx.eval_shape``, nothing computed) on every later trace. The module's
    state becomes Estimator variables named ``<scope>/<path in the module>``
    (``mlp/layers/0/kernel``):

    * ``nnx.Param`` (and its subclasses): trainable variables;
    * ``nnx.RngState`` (the streams of ``nnx.Dropout`` and other random layers): not
      stored; each step gets fresh keys from ``est.next_rng_key()``;
    * every other ``nnx.Variable`` (``nnx.BatchStat``: batch-norm statistics, your own
      variable types): non-trainable variables, whose changes during a TRAIN call are
      kept (``est.assign``), as ``est.layers.batch_normalization``'s.

    The module is put in training mode (``module.train()``: ``deterministic=False``,
    ``use_running_average=False``) when ``mode == ModeKeys.TRAIN`` and in evaluation mode
    (``module.eval()``) otherwise, then called as ``module(*inputs, **call_kwargs)``.
    Calling ``nnx`` again with the same ``name`` in one ``model_fn`` call shares the
    parameters. Under a mixed dtype policy (``RunConfig(dtype_policy=...)``) the floating
    inputs and parameters are cast to the compute dtype before the call, and layers whose
    ``dtype`` (NNX's computation dtype) is None compute in it: a ``BatchNorm`` keeps its
    statistics in float32 and returns the compute dtype.

    Args:
      make: ``rngs -> nnx.Module``; it must build the same structure on every call.
      *inputs: the module's positional inputs (arrays or pytrees of arrays).
      name: the variable scope of the module's variables; default: the module's class
        name in snake case (``MLP`` -> ``mlp``), made unique as layers' names are
        (``mlp``, ``mlp_1``, ...).
      **call_kwargs: keyword arguments of the module's ``__call__``.

    Returns:
      What the module returns (arrays; no module object leaves the call).

    Raises:
      ImportError: Flax is not installed (``pip install 'jax-estimator[flax]'``).
      RuntimeError: outside ``model_fn``.
      TypeError: ``make`` does not return an ``nnx.Module``.

    Example::

        def model_fn(features, labels, mode):
            logits = est.modules.nnx(lambda rngs: MLP(4, 32, 3, rngs=rngs), features["x"])
            ...
    """
    flax_nnx = _common.require("flax.nnx", "flax", "nnx")
    frame = _common.model_frame("nnx")

    def checked(rngs):
        module = make(rngs)
        if not isinstance(module, flax_nnx.Module):
            raise TypeError(
                "estimator.modules.nnx(make, ...): make(rngs) must return an nnx.Module, e.g. "
                f"lambda rngs: nnx.Linear(4, 2, rngs=rngs); it returned {type(module).__name__}."
            )
        return module

    abstract = flax_nnx.eval_shape(lambda: checked(flax_nnx.Rngs(0)))
    filters = (flax_nnx.Param, flax_nnx.RngState, ...)
    graphdef, params, rng_state, rest = flax_nnx.split(abstract, *filters)

    def initial(key):
        module = checked(flax_nnx.Rngs(key))
        _, p, _, r = flax_nnx.split(module, *filters)
        return {**_flat(flax_nnx, p), **_flat(flax_nnx, r)}

    scope = _common.scope_name(name, _common.snake_case(type(abstract).__name__), "nnx")
    binding = _common.bind(
        "nnx", frame, scope, _flat(flax_nnx, params), _flat(flax_nnx, rest), initial
    )
    module = flax_nnx.merge(
        graphdef,
        _state(flax_nnx, params, binding.params()),
        _fresh_rngs(flax_nnx, rng_state),
        _state(flax_nnx, rest, binding.non_trainable),
    )
    if _common.training(frame):
        module.train()
    else:
        module.eval()
    compute = dtype_policy.compute_dtype()
    if compute is not None:
        # NNX's own mixed precision: a layer's ``dtype`` is its computation dtype (its
        # parameters stay float32); layers left at None (infer) compute in the policy's.
        for _, sub in flax_nnx.iter_modules(module):
            if getattr(sub, "dtype", False) is None:
                sub.dtype = compute
    outputs = module(*dtype_policy.autocast(inputs), **call_kwargs)
    binding.update(_flat(flax_nnx, flax_nnx.state(module, flax_nnx.Not(filters[0]))))
    return outputs


def _flat(flax_nnx, state) -> dict[str, Any]:
    """``{"a/b/kernel": value}`` of an ``nnx.State`` (RNG state left out)."""
    return {
        _common.key_path_name(path): variable.get_value()
        for path, variable in flax_nnx.to_flat_state(state)
        if not isinstance(variable, flax_nnx.RngState)
    }


def _state(flax_nnx, template, values: dict):
    """``template`` (an ``nnx.State``) with each variable's value taken from ``values``."""
    return flax_nnx.from_flat_state(
        [
            (path, variable.replace(value=values[_common.key_path_name(path)]))
            for path, variable in flax_nnx.to_flat_state(template)
        ]
    )


def _fresh_rngs(flax_nnx, template):
    """The module's RNG streams with keys of this step (``est.next_rng_key()``) and their
    counts at zero: dropout masks change every step and follow the Estimator's seed."""
    fresh = []
    for path, variable in flax_nnx.to_flat_state(template):
        if isinstance(variable, flax_nnx.RngKey):
            fresh.append((path, variable.replace(value=next_rng_key())))
        else:
            spec = variable.get_value()
            fresh.append((path, variable.replace(value=jax.numpy.zeros(spec.shape, spec.dtype))))
    return flax_nnx.from_flat_state(fresh)
