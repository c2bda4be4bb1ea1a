"""``train_op``: what ``minimize`` / ``apply_gradients`` / ``tf.group`` return.

A :class:`TrainOp` is an ``optax.GradientTransformation`` (so ``EstimatorSpec`` takes it
as it is) built from one or more *applications*: an optimizer, the variables it updates
(``var_list``; None means every trainable variable) and, after ``apply_gradients``, the
symbolic edits to their gradients. Its state is a dict keyed by TF's slot names::

    {"Adam": {"dense/kernel": m, ...}, "Adam_1": {"dense/kernel": v, ...},
     "beta1_power": ..., "beta2_power": ...}

so warm start and ``estimator.warm_starting.variable_names`` call the slot of
``dense/kernel`` ``dense/kernel/Adam`` as TF does (the per-optimizer scalars become
``opt_state/beta1_power``). A second optimizer in a group gets TF's uniquified names
(``beta1_power_1``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import optax

from estimator.compat.v1._graph import frame_state
from estimator.compat.v1._symbolic import SymbolicGradient, evaluate

__all__ = [
    "TrainOp",
    "NoOp",
    "Application",
    "make_train_op",
    "group",
    "record_objective",
    "objective_of",
]


_EMPTY = (optax.EmptyState(),)


class NoOp:
    """``tf.no_op()``: an op that does nothing (``tf.group`` drops it)."""

    def __repr__(self) -> str:
        return "<tf.no_op>"


@dataclasses.dataclass(frozen=True, eq=False)
class Application:
    """One optimizer applied to some variables (internal).

    Attributes:
      optimizer: a ``tf.train.Optimizer``.
      names: the variables it updates, or None for every trainable variable.
      gradients: with ``apply_gradients``, the symbolic gradient for each name.
    """

    optimizer: Any
    names: tuple[str, ...] | None
    gradients: tuple[SymbolicGradient, ...] | None = None


class TrainOp(optax.GradientTransformation):
    """An ``optax.GradientTransformation`` made of TF 1 optimizer applications.

    Attributes:
      applications: the :class:`Application` s, applied to disjoint variables.
    """

    applications: tuple[Application, ...]


def _unique(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    i = 1
    while f"{name}_{i}" in taken:
        i += 1
    return f"{name}_{i}"


def _layout(applications: Sequence[Application]) -> list[tuple[Application, dict, dict]]:
    """For each application: ``{slot key: TF slot name}`` and ``{non-slot key: TF name}``."""
    taken_non_slots: set[str] = set()
    out = []
    for app in applications:
        slots: dict[str, str] = {}
        used: set[str] = set()
        for key, base in app.optimizer._slot_names():
            slots[key] = _unique(base, used)
            used.add(slots[key])
        non_slots = {}
        for key in app.optimizer._non_slot_names():
            non_slots[key] = _unique(key, taken_non_slots)
            taken_non_slots.add(non_slots[key])
        out.append((app, slots, non_slots))
    return out


def _check_disjoint(applications: Sequence[Application]) -> None:
    seen: dict[str, str] = {}
    everything = [a for a in applications if a.names is None]
    if everything and len(applications) > 1:
        raise ValueError(
            "tf.group of several minimize/apply_gradients where one updates every trainable "
            "variable: give each optimizer its own var_list (e.g. "
            "tf.trainable_variables('dnn') and tf.trainable_variables('linear'))."
        )
    for app in applications:
        for name in app.names or ():
            if name in seen:
                raise ValueError(
                    f"Variable {name} is updated by two optimizers ({seen[name]} and "
                    f"{app.optimizer.get_name()}). Give each variable to one optimizer."
                )
            seen[name] = app.optimizer.get_name()


def _selected(app: Application, params: dict) -> tuple[str, ...]:
    """The variables ``app`` updates: its names, or every variable given (under
    ``optax.masked`` / ``multi_transform``, a canned wide & deep estimator's per-scope
    optimizers, the other part's leaves are ``MaskedNode`` s)."""
    if app.names is not None:
        return app.names
    return tuple(sorted(k for k, v in params.items() if not isinstance(v, optax.MaskedNode)))


def _init(layout, params):
    """The state of :func:`make_train_op`'s transformation (see the module docstring)."""
    state: dict[str, Any] = {}
    for app, slots, non_slots in layout:
        names = _selected(app, params)
        for key, slot_name in slots.items():
            per_var = state.setdefault(slot_name, {})
            for name in names:
                per_var[name] = app.optimizer._init_slot(key, params[name])
        for key, tf_name in non_slots.items():
            state[tf_name] = app.optimizer._init_non_slot(key)
    # Without slots (gradient descent) the state has no leaves; a tuple holding optax's
    # empty state is one that checkpoints accept (orbax refuses an empty dict).
    return state or _EMPTY


def _apply(app: Application, slots, non_slots, grads, state, params, updates, new_state):
    """One application's updates (into ``updates``) and slots (into ``new_state``)."""
    names = _selected(app, params)
    if app.gradients is None:
        values = [grads[name] for name in names]
    else:
        values = evaluate(app.gradients, grads)
    hyper = app.optimizer._prepare()
    own_non_slots = {key: state[tf_name] for key, tf_name in non_slots.items()}
    for name, grad in zip(names, values, strict=True):
        var = params[name]
        own = {key: state[slot_name][name] for key, slot_name in slots.items()}
        delta, new_own = app.optimizer._apply_dense(
            jnp.asarray(grad, var.dtype), var, own, own_non_slots, hyper
        )
        updates[name] = delta
        for key, slot_name in slots.items():
            new_state[slot_name][name] = new_own[key]
    finished = app.optimizer._finish(own_non_slots, hyper)
    for key, tf_name in non_slots.items():
        new_state[tf_name] = finished[key]


def _update(layout, grads, state, params=None):
    """The update of :func:`make_train_op`'s transformation."""
    if params is None:
        raise ValueError("A TF 1 optimizer's update needs the current params.")
    updates = jax.tree.map(jnp.zeros_like, grads)
    if not isinstance(state, dict):
        state = {}
    new_state = {k: dict(v) if isinstance(v, dict) else v for k, v in state.items()}
    for app, slots, non_slots in layout:
        _apply(app, slots, non_slots, grads, state, params, updates, new_state)
    return updates, new_state or _EMPTY


def make_train_op(applications: Sequence[Application]) -> TrainOp:
    """The ``optax.GradientTransformation`` applying ``applications`` (internal).

    Raises:
      ValueError: two applications that update the same variable.
    """
    applications = tuple(applications)
    _check_disjoint(applications)
    layout = _layout(applications)

    def row_wise(name: str) -> bool:
        # A table in the looked-up rows only (est.sparse_updates): when the optimizer
        # applied to it updates row by row from its own gradient (minimize, or
        # apply_gradients of the plain gradients).
        return any(
            app.optimizer.row_wise
            and app.gradients is None
            and (app.names is None or name in app.names)
            for app in applications
        )

    op = TrainOp(functools.partial(_init, layout), functools.partial(_update, layout))
    op.applications = applications
    op.row_wise = row_wise
    return op


def group(*inputs: Any, name: str | None = None) -> TrainOp | NoOp:
    """``tf.group``: one ``train_op`` from several (``NoOp`` s, update ops and arrays are
    dropped: batch-norm updates apply without them).

    Raises:
      ValueError: two train ops that update the same variable.
    """
    del name
    applications: list[Application] = []

    def collect(items: Iterable[Any]) -> None:
        for item in items:
            if isinstance(item, TrainOp):
                applications.extend(item.applications)
            elif isinstance(item, (list, tuple)):
                collect(item)

    collect(inputs)
    if not applications:
        return NoOp()
    op = make_train_op(applications)
    objectives = {id(o): o for o in (objective_of(i) for i in _train_ops(inputs)) if o is not None}
    if len(objectives) > 1:
        raise ValueError(
            "tf.group of train ops that minimize different losses is not supported: the "
            "Estimator differentiates one loss per step. Minimize one loss (e.g. their sum) "
            "with each optimizer's var_list."
        )
    if objectives:
        record_objective(op, next(iter(objectives.values())))
    return op


def _train_ops(items: Iterable[Any]) -> Iterable[TrainOp]:
    for item in items:
        if isinstance(item, TrainOp):
            yield item
        elif isinstance(item, (list, tuple)):
            yield from _train_ops(item)


def record_objective(op: TrainOp, loss: Any) -> None:
    """Remembers, for this ``model_fn`` run, the loss ``op`` minimizes (internal)."""
    state = frame_state()
    if state is not None:
        state["minimize_losses"][id(op)] = (op, loss)


def objective_of(op: Any) -> Any:
    """The loss ``op`` minimizes in this ``model_fn`` run, or None (internal)."""
    state = frame_state()
    if state is None or not isinstance(op, TrainOp):
        return None
    entry = state["minimize_losses"].get(id(op))
    return None if entry is None else entry[1]
