"""One trace of ``model_fn`` for all the signatures of an export.

TF builds one graph per export, and each signature names some of its tensors. Exporting one
function per signature key with ``jax.export`` would run ``model_fn`` (and the feature
columns' Python) once per key and lower the whole model each time. Instead the model is
traced once to a jaxpr (``jax.make_jaxpr``), and each key's function evaluates only the
equations its outputs need; keys whose outputs are the very same values (``serving_default``
is usually one of the other keys' ``ExportOutput``) share one function, so one
``jax.export``: an export with several signatures costs about one trace and one lowering
per distinct function instead of one per key.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
from jax.extend.core import ClosedJaxpr, Jaxpr, Var

from estimator.engine.steps import replay

__all__ = ["signature_functions"]


def signature_functions(fn: Callable, *args) -> tuple[dict, dict[str, Callable]]:
    """Traces ``fn(*args) -> {key: outputs}`` once; returns its output shapes and, per key,
    a function of the same arguments giving that key's outputs.

    Args:
      fn: a function of arrays returning a dict of pytrees (the outputs of each signature).
      *args: its arguments, abstract (``jax.ShapeDtypeStruct``, symbolic dimensions
        allowed) or concrete.

    Returns:
      ``(shapes, functions)``: ``fn``'s outputs as ``jax.ShapeDtypeStruct`` pytrees, and
      ``{key: f}`` where ``f(*args)`` equals ``fn(*args)[key]``. Keys with identical outputs
      get the same function object.
    """
    closed, shapes = jax.make_jaxpr(fn, return_shape=True)(*args)
    index = jax.tree.unflatten(jax.tree.structure(shapes), range(len(closed.jaxpr.outvars)))
    functions: dict[str, Callable] = {}
    by_outputs: dict = {}
    for key in shapes:
        positions = jax.tree.leaves(index[key])
        outvars = [closed.jaxpr.outvars[i] for i in positions]
        # Literals (constants) are not shared values: such a key gets a function of its own.
        same = (
            jax.tree.structure(index[key]),
            tuple(v if isinstance(v, Var) else object() for v in outvars),
        )
        if same not in by_outputs:
            by_outputs[same] = _function(closed, outvars, shapes[key])
        functions[key] = by_outputs[same]
    return shapes, functions


def _function(closed: ClosedJaxpr, outvars: list, shapes) -> Callable:
    """The function computing ``outvars`` of ``closed`` (the equations they depend on,
    and every equation with an effect), returned in the structure of ``shapes``."""
    jaxpr = closed.jaxpr
    needed = {v for v in outvars if isinstance(v, Var)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if eqn.effects or any(v in needed for v in eqn.outvars):
            kept.append(eqn)
            needed.update(v for v in eqn.invars if isinstance(v, Var))
    pruned = Jaxpr(
        jaxpr.constvars,
        jaxpr.invars,
        outvars,
        kept[::-1],
        jaxpr.effects,
        jaxpr.debug_info.with_unknown_names(),  # fewer results than the traced function
    )
    return functools.partial(replay, (ClosedJaxpr(pruned, closed.consts), shapes))
