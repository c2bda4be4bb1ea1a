"""Flax Linen modules inside ``model_fn``: :func:`linen`."""

from __future__ import annotations

import contextlib
import inspect
import zlib
from typing import Any

import jax

from estimator.model import dtype_policy
from estimator.model.variables import next_rng_key
from estimator.modules import _common

__all__ = ["linen"]

#: ``__call__`` arguments that take the training flag, and whether they mean "training"
#: (True) or its negation (False).
TRAINING_ARGUMENTS = {
    "train": True,
    "training": True,
    "is_training": True,
    "deterministic": False,
    "use_running_average": False,
}

#: Collections that hold what a call reports, not the model's state.
_TRANSIENT = ("intermediates", "losses")


def linen(module: Any, *inputs: Any, name: str | None = None, **apply_kwargs: Any):
    """Runs a Flax Linen module inside ``model_fn``, its variables as Estimator variables.

    The variables come from ``module.init`` with keys from the Estimator's seed
    (``"params"``, ``"dropout"`` and any stream named in ``rngs=``) when the model is
    initialised, and from ``jax.eval_shape(module.init, ...)`` (nothing computed) on every
    later trace. Each collection's variables become Estimator variables named
    ``<scope>/<path in the collection>`` (``cnn/Conv_0/kernel``,
    ``cnn/BatchNorm_0/mean``): the ``"params"`` collection trainable, the others
    (``"batch_stats"``, your own) non-trainable, updated by a TRAIN call
    (``mutable=[...]``) and kept with ``est.assign``, as
    ``est.layers.batch_normalization``'s statistics.

    The module is applied as ``module.apply(variables, *inputs, rngs=..., **apply_kwargs)``
    with a fresh ``"dropout"`` key each step (``est.next_rng_key()``). Linen has no
    standard training flag; when the method called (``__call__``, or ``method=``) takes
    one of ``train``, ``training``, ``is_training`` (set to ``mode == ModeKeys.TRAIN``)
    or ``deterministic``, ``use_running_average`` (set to its negation) and
    ``apply_kwargs`` does not give it, it is passed. Under a mixed dtype policy the
    floating inputs and ``"params"`` are cast to the compute dtype before the call, and
    so are the floating inputs of every submodule's ``__call__`` (as Keras layers cast
    theirs): batch statistics stay float32.

    Args:
      module: an unbound ``flax.linen.Module`` (the same or an equal one on every call).
      *inputs: the positional inputs of the method called.
      name: the variable scope; default ``module.name`` if set, else the class name in
        snake case (``CNN`` -> ``cnn``), made unique as layers' names are.
      **apply_kwargs: keyword arguments of ``module.apply`` and of the method: ``rngs=``
        (extra streams, e.g. ``{"noise": est.next_rng_key()}``), ``method=``, the
        method's own arguments. ``mutable=`` is managed here and refused.

    Returns:
      What the module returns.

    Raises:
      ImportError: Flax is not installed (``pip install 'jax-estimator[flax]'``).
      RuntimeError: outside ``model_fn``.
      TypeError: ``module`` is not a Linen module, or ``mutable=`` was given.
      ValueError: two collections hold a variable at the same path.
    """
    nn = _common.require("flax.linen", "flax", "linen")
    traverse = _common.require("flax.traverse_util", "flax", "linen")
    frame = _common.model_frame("linen")
    _check_call(nn, module, apply_kwargs)
    kwargs = dict(apply_kwargs)
    streams = dict(kwargs.pop("rngs", None) or {})
    training = _common.training(frame)
    _add_training_flag(module, kwargs, training)

    def init(key, *xs):
        variables = module.init(_init_rngs(key, streams), *xs, **kwargs)
        return {c: v for c, v in variables.items() if c not in _TRANSIENT}

    inputs = dtype_policy.autocast(inputs)
    abstract = jax.eval_shape(init, jax.random.key(0), *inputs)
    flat = _flat_collections(traverse, abstract)

    def initial(key):
        variables = init(key, *inputs)
        return {
            path: value
            for collection in variables.values()
            for path, value in traverse.flatten_dict(collection, sep="/").items()
        }

    default = module.name if isinstance(module.name, str) else type(module).__name__
    scope = _common.scope_name(name, _common.snake_case(default), "linen")
    non_trainable = {p: v for c, values in flat.items() if c != "params" for p, v in values.items()}
    binding = _common.bind("linen", frame, scope, flat.get("params", {}), non_trainable, initial)
    params = binding.params()
    variables = {
        c: traverse.unflatten_dict(
            {p: (params if c == "params" else binding.non_trainable)[p] for p in values}, sep="/"
        )
        for c, values in flat.items()
    }
    rngs = {"dropout": next_rng_key(), **streams}
    mutable = [c for c in flat if c != "params"] if training else False
    with _autocast_calls(nn):
        if not mutable:
            return module.apply(variables, *inputs, rngs=rngs, **kwargs)
        outputs, updates = module.apply(variables, *inputs, rngs=rngs, mutable=mutable, **kwargs)
    binding.update(
        {
            p: v
            for c in updates
            if c not in _TRANSIENT
            for p, v in traverse.flatten_dict(updates[c], sep="/").items()
        }
    )
    return outputs


def _check_call(nn, module, apply_kwargs: dict) -> None:
    """Refuses a ``module`` that is not a Linen module, and ``mutable=``."""
    if not isinstance(module, nn.Module):
        raise TypeError(
            "estimator.modules.linen(module, ...) takes a flax.linen.Module such as "
            f"nn.Dense(10); got {type(module).__name__}. For an nnx.Module use "
            "estimator.modules.nnx(lambda rngs: ..., ...)."
        )
    if "mutable" in apply_kwargs:
        raise TypeError(
            "estimator.modules.linen(..., mutable=...): the adapter decides what is mutable "
            "(every collection but 'params' in TRAIN mode, nothing otherwise). Remove "
            "mutable=."
        )


def _init_rngs(key: jax.Array, streams: dict) -> dict[str, jax.Array]:
    """``module.init``'s keys: ``"params"``, ``"dropout"`` and each stream of ``rngs=``,
    folded from ``key``."""
    rngs = {"params": jax.random.fold_in(key, 0), "dropout": jax.random.fold_in(key, 1)}
    for stream in streams:
        rngs[stream] = jax.random.fold_in(key, zlib.crc32(stream.encode()) >> 1)
    return rngs


def _flat_collections(traverse, variables: dict) -> dict[str, dict[str, Any]]:
    """``{collection: {"a/b/kernel": value}}``; refuses two collections holding a variable
    at the same path (they would be one Estimator variable)."""
    flat = {c: traverse.flatten_dict(v, sep="/") for c, v in variables.items()}
    where = {}
    for collection, values in flat.items():
        for path in values:
            if path in where:
                raise ValueError(
                    f"estimator.modules.linen: the collections {where[path]!r} and "
                    f"{collection!r} both hold a variable {path!r}; they would share one "
                    "Estimator variable. Rename one of them in the module."
                )
            where[path] = collection
    return flat


def _add_training_flag(module, kwargs: dict, training: bool) -> None:
    """Adds the method's training flag to ``kwargs`` (see :func:`linen`)."""
    method = kwargs.get("method")
    if method is None:
        function = type(module).__call__
    elif isinstance(method, str):
        function = getattr(type(module), method)
    else:
        function = method
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return
    for argument, meaning in TRAINING_ARGUMENTS.items():
        if argument in parameters and argument not in kwargs:
            kwargs[argument] = training if meaning else not training
            return


def _autocast_calls(nn):
    """Under a mixed policy, casts the floating inputs of every submodule's ``__call__`` to
    the compute dtype (what Keras layers do to their inputs), so that layers after one
    returning float32 (a ``BatchNorm`` whose statistics are float32) still compute in it."""
    if dtype_policy.compute_dtype() is None:
        return contextlib.nullcontext()

    def interceptor(next_fun, args, kwargs, context):
        if context.method_name == "__call__":
            args = dtype_policy.autocast(args)
        return next_fun(*args, **kwargs)

    return nn.intercept_methods(interceptor)
