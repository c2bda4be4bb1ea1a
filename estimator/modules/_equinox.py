"""Equinox modules inside ``model_fn``: :func:`equinox`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import jax

from estimator.model import dtype_policy
from estimator.model.variables import next_rng_key
from estimator.modules import _common

__all__ = ["equinox"]

_ARRAY = (jax.Array, jax.ShapeDtypeStruct)


def equinox(
    make: Callable[[jax.Array], Any],
    *inputs: Any,
    name: str | None = None,
    vmap: bool | str = False,
    **call_kwargs: Any,
):
    """Runs an Equinox module inside ``model_fn``, its arrays as Estimator variables.

    ``make(key)`` builds the module (``lambda key: eqx.nn.MLP(4, 3, 32, 2, key=key)``), or
    the pair ``(module, state)`` of a stateful one
    (``eqx.nn.make_with_state(CNN)``). It is called with a key from the Estimator's seed
    when the model is initialised, so the arrays start from the module's own
    initialisers, and built abstractly (``eqx.filter_eval_shape``, nothing computed) on
    every later trace. Arrays become Estimator variables named ``<scope>/<path in the
    module>`` (``mlp/layers/0/weight``):

    * floating-point arrays of the module: trainable (Equinox trains every inexact array;
      a frozen one must go through ``jax.lax.stop_gradient`` in the module, as in
      Equinox);
    * other arrays of the module (integer tables, masks): non-trainable constants;
    * the ``eqx.nn.State`` of a stateful module (``eqx.nn.BatchNorm``'s statistics),
      named by the path of its ``eqx.nn.StateIndex`` (``cnn/bn/ema_state_index/0``):
      non-trainable, the new state of a TRAIN call kept (``est.assign``).

    The module runs in inference mode (``eqx.nn.inference_mode``: ``Dropout`` off,
    ``BatchNorm`` on its running statistics) unless ``mode == ModeKeys.TRAIN``. It is
    called as ``module(*inputs, **call_kwargs)``, or ``module(*inputs, state,
    **call_kwargs)`` returning ``(outputs, state)`` when stateful, with ``key=`` a fresh
    key each step (``est.next_rng_key()``) when its ``__call__`` takes ``key`` and
    ``call_kwargs`` does not give one. Under a mixed dtype policy the floating inputs and
    trainable arrays are cast to the compute dtype first (as ``jmp`` casts an Equinox
    model), except those of stateful layers: an ``eqx.nn.BatchNorm`` computes in float32
    with its float32 state (it needs float32 inputs: cast them, ``x.astype(jnp.float32)``,
    a no-op at full precision), so by JAX's promotion what follows it is float32 unless
    the module casts it back.

    Equinox layers take one example: vmap inside your module's ``__call__``, or pass
    ``vmap=True`` to map the module over the leading (batch) axis of every input, state
    broadcast, the key split per example, under the axis name ``"batch"`` (a string
    names another axis) that ``eqx.nn.BatchNorm(..., axis_name="batch")`` reduces over.

    Args:
      make: ``key -> eqx.Module`` or ``key -> (eqx.Module, eqx.nn.State)``; the same
        structure on every call.
      *inputs: the module's positional inputs.
      name: the variable scope; default the module's class name in snake case
        (``MLP`` -> ``mlp``), made unique as layers' names are.
      vmap: map the module over the inputs' leading axis (see above).
      **call_kwargs: keyword arguments of the module's ``__call__``.

    Returns:
      The module's outputs (without the state of a stateful module).

    Raises:
      ImportError: Equinox is not installed (``pip install 'jax-estimator[equinox]'``).
      RuntimeError: outside ``model_fn``.
      TypeError: ``make`` returns something other than a module or a (module, state) pair.
    """
    eqx = _common.require("equinox", "equinox", "equinox")
    frame = _common.model_frame("equinox")
    abstract_module, abstract_state = _split_made(eqx, eqx.filter_eval_shape(make, _KEY0()))
    arrays, static = eqx.partition(abstract_module, lambda x: isinstance(x, _ARRAY))
    indices = _state_indices(eqx, abstract_module)
    trainable, constants = {}, {}
    for path, leaf in _named_leaves(arrays):
        (trainable if jax.numpy.issubdtype(leaf.dtype, jax.numpy.inexact) else constants)[path] = (
            leaf
        )
    state_specs = _state_values(abstract_state, indices)

    def initial(key):
        module, state = _split_made(eqx, make(key))
        values = dict(_named_leaves(eqx.filter(module, eqx.is_array)))
        return {**values, **_state_values(state, indices)}

    scope = _common.scope_name(name, _common.snake_case(type(abstract_module).__name__), "equinox")
    binding = _common.bind(
        "equinox", frame, scope, trainable, {**constants, **state_specs}, initial
    )
    # Stateful layers (eqx.nn.BatchNorm) keep float32 weights beside their float32 state,
    # as Keras' batch normalization does under a mixed policy.
    stateful = tuple(path.rpartition("/")[0] + "/" for path in indices)
    params = binding.params(lambda path: path.startswith(stateful))
    values = {**params, **{p: binding.non_trainable[p] for p in constants}}
    module = eqx.combine(
        jax.tree_util.tree_map_with_path(
            lambda path, _: values[_common.key_path_name(path)], arrays
        ),
        static,
    )
    module = eqx.nn.inference_mode(module, value=not _common.training(frame))
    state = None
    if abstract_state is not None:
        # The state's leaves replaced by the variables (not state.set(): a weakly typed
        # initial value, such as a counter made from a Python int, comes back strong).
        names = {id(leaf): path for path, leaf in state_specs.items()}
        state = jax.tree.map(lambda leaf: binding.non_trainable[names[id(leaf)]], abstract_state)
    kwargs = dict(call_kwargs)
    if "key" not in kwargs and _takes_key(module):
        kwargs["key"] = next_rng_key()
    outputs = _call(module, dtype_policy.autocast(inputs), state, kwargs, vmap)
    if state is None:
        return outputs
    outputs, new_state = outputs
    binding.update(_state_values(new_state, indices))
    return outputs


def _KEY0() -> jax.Array:  # noqa: N802 - a constant made where it is used
    return jax.random.key(0)


def _split_made(eqx, made):
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], eqx.nn.State):
        module, state = made
    else:
        module, state = made, None
    if not isinstance(module, eqx.Module):
        raise TypeError(
            "estimator.modules.equinox(make, ...): make(key) must return an eqx.Module or "
            "the (module, state) pair of eqx.nn.make_with_state(Model)(key); it returned "
            f"{type(made).__name__}."
        )
    return module, state


def _named_leaves(tree) -> list[tuple[str, Any]]:
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return [(_common.key_path_name(path), leaf) for path, leaf in leaves]


def _state_indices(eqx, module) -> dict[str, Any]:
    """``{module path: eqx.nn.StateIndex}`` of a stateful module."""
    leaves = jax.tree_util.tree_flatten_with_path(
        module, is_leaf=lambda x: isinstance(x, eqx.nn.StateIndex)
    )[0]
    return {
        _common.key_path_name(path): leaf
        for path, leaf in leaves
        if isinstance(leaf, eqx.nn.StateIndex)
    }


def _state_values(state, indices: dict) -> dict[str, Any]:
    """``{"<index path>/<path in its value>": array}`` of an ``eqx.nn.State``."""
    if state is None:
        return {}
    values = {}
    for path, index in indices.items():
        for sub, leaf in _named_leaves(state.get(index)):
            values[f"{path}/{sub}" if sub else path] = leaf
    return values


def _takes_key(module) -> bool:
    try:
        parameters = inspect.signature(type(module).__call__).parameters
    except (TypeError, ValueError):
        return False
    return "key" in parameters


def _call(module, inputs: tuple, state, kwargs: dict, vmap: bool | str):
    extra = () if state is None else (state,)
    if not vmap:
        return module(*inputs, *extra, **kwargs)
    axis_name = "batch" if vmap is True else vmap
    key = kwargs.pop("key", None)
    size = jax.tree.leaves(inputs)[0].shape[0]
    keys = None if key is None else jax.random.split(key, size)

    def one(xs, k):
        return module(*xs, *extra, **kwargs, **({} if k is None else {"key": k}))

    out_axes = 0 if state is None else (0, None)
    in_axes = (0, None if keys is None else 0)
    return jax.vmap(one, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)(inputs, keys)
