"""The init run: a model's fresh state, traced once per input signature.

``model_fn`` runs in init mode (its variables created from their initializers) once per
mode and input signature (:func:`estimator.engine.steps.traced`): :func:`abstract_init`
reads the state's shapes from that trace (and, in TRAIN mode, plans the sparse updates
from it: ``estimator.engine.sparse.plan_from_init``), and :func:`init_state`, the initial
state program, replays it.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from estimator.checkpoint import tree_form
from estimator.engine import sparse
from estimator.engine.row_plan import keep, plan_key
from estimator.engine.steps import TrainState, replay, traced
from estimator.mode_keys import ModeKeys
from estimator.model.function import ModelFunction
from estimator.model.rows import RowAccess
from estimator.model.train_op import row_rule, row_wise

__all__ = ["abstract_init", "init_run", "init_state"]


def _check_trainable(trainable: dict) -> None:
    for name, value in trainable.items():
        if not jnp.issubdtype(value.dtype, jnp.inexact):
            raise ValueError(
                f"Variable {name} has dtype {value.dtype} and is trainable; only floating-point "
                "variables can be trained. Create it with get_variable(..., trainable=False)."
            )


def init_run(model: ModelFunction, features, labels, rng=None, *, mode: str) -> tuple:
    """Freshly initialised variables, and ``train_op``'s state in TRAIN mode (its saved
    form), with what the sparse plan reads from this run's trace: ``(state, copies)``.

    In TRAIN mode each table lookup gathers from a copy of its table, and ``train_op.init``
    reads a copy of the variables (``copies``: ``{"lookups": {name: [copy, ...]},
    "optimizer": params}``; see ``estimator.engine.sparse.plan_from_init``), so one trace
    both creates the variables and plans the sparse updates (:func:`abstract_init`);
    ``copies`` is ``{}`` in the other modes. :func:`init_state` and :func:`abstract_init`
    run it through :func:`traced` (one trace per signature).

    Args:
      rng: the base key's data (``TrainState.rng``); None uses the model's key.

    Raises:
      ValueError: a trainable variable that is not floating-point.
    """
    training = mode == ModeKeys.TRAIN
    access = RowAccess(tagged=True) if training else None
    spec, frame = model.apply(mode, features, labels, key_data=rng, rows=access)
    model.init_lookups[mode] = frozenset(frame.lookups)
    _check_trainable(frame.trainable)
    opt_state, copies = None, {}
    if training:
        params = jax.lax.optimization_barrier(frame.trainable)
        opt_state = tree_form.saved_form(spec.train_op.init(params))
        found = sparse.InitLookups(access.shapes, row_wise(spec.train_op))
        model.row_rule = row_rule(spec.train_op)
        copies = {"lookups": access.reads, "optimizer": params, "found": found}
    state = TrainState(
        frame.trainable,
        frame.non_trainable,
        opt_state,
        jnp.zeros((), jnp.int32),
        jnp.full((), -1, jnp.int32),
        rng,
    )
    return state, copies


#: :func:`init_run` of each mode, one function each (:func:`traced` keys on it).
_INIT_RUNS = {
    mode: functools.partial(init_run, mode=mode)
    for mode in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)
}


def init_state(model: ModelFunction, mode: str, features, labels, rng=None) -> TrainState:
    """Freshly initialised variables, and ``train_op``'s state in TRAIN mode: the state of
    :func:`init_run`, replayed from its one trace per signature (:func:`traced`), which
    :func:`abstract_init` made or will reuse."""
    args = (features, labels, rng)
    return replay(traced(model, _INIT_RUNS[mode], *args), *args)[0]


def abstract_init(model: ModelFunction, mode: str, features, labels, rng=None) -> TrainState:
    """The abstract state of the init run of ``mode`` (:func:`init_run`), from its one
    trace (:func:`traced`). In TRAIN mode the trace also plans the sparse updates for this
    input signature (``estimator.engine.sparse.plan_from_init``), so the train step runs
    ``model_fn`` once, not again to plan."""
    trace = traced(model, _INIT_RUNS[mode], features, labels, rng)
    state, copies = trace[1]
    if copies:
        args = (state.non_trainable, features, labels, state.global_step, state.rng)
        key = plan_key(state.trainable, args, model.init_lookups[mode])
        if key not in model.sparse_plans:
            keep(model, key, sparse.plan_from_init(trace))
    return state
