"""The sparse plan of a train step: which tables it updates row by row, and how many ids
each looks up per step (``estimator.engine.sparse``), made once per model and input
signature from one of three sources:

1. the trace of the init run, on a first training with an empty ``model_dir``
   (``sparse.plan_from_init``): no run of ``model_fn`` of its own;
2. the plan a checkpoint's metadata records for this input signature (its
   :func:`digest`), on a resumed training: the step is traced with it at once, and that
   trace is checked (:func:`lookups_only`): each planned table's value, as ``model_fn``
   received it (marked by :func:`mark`), is used by row lookups only, and each table looks
   up the recorded number of ids. A plan the trace contradicts (``model_fn`` now also reads
   the table whole, or looks up other shapes) is dropped and the step traced again with
   the next source. ``model_fn`` runs once;
3. otherwise :func:`sparse.plan`: ``model_fn`` runs once more, abstractly, before the step.

A table is a candidate when ``lookup_rows`` read it under a ``train_op`` that may update
it row by row: in the init run, as a checkpoint's metadata records
(``ModelFunction.sparse_candidates``), or as a step's trace finds (:class:`LookupsFound`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.extend.core import ClosedJaxpr, Jaxpr, Var

from estimator.engine import sparse
from estimator.mode_keys import ModeKeys
from estimator.model.function import ModelFunction
from estimator.model.rows import LOOKUP_SCOPE, PlanMismatch

__all__ = [
    "TABLE_SCOPE",
    "LookupsFound",
    "RuleFound",
    "digest",
    "keep",
    "lookups_only",
    "mark",
    "plan_key",
    "planned",
    "tables",
]

#: The name scope of :func:`mark`'s identity: the value of a planned table that
#: ``model_fn`` receives is the output of an equation under it.
TABLE_SCOPE = "estimator_row_table"


def plan_key(trainable: dict, args: tuple, looked_up: frozenset) -> tuple:
    """What a sparse plan depends on: the structure, shapes and dtypes of the variables
    and the step's other inputs (traced, abstract or host arrays alike), and the
    candidate tables."""
    leaves, treedef = jax.tree.flatten((trainable, args))
    shapes = tuple((tuple(np.shape(x)), jax.dtypes.canonicalize_dtype(x.dtype)) for x in leaves)
    return treedef, shapes, looked_up


def digest(key: tuple) -> str:
    """A :func:`plan_key`'s input signature (its structure, shapes and dtypes, not its
    candidates) as a short hex string, the same in every process: the name a checkpoint's
    metadata records the plan under."""
    treedef, shapes, _ = key
    return hashlib.sha256(repr((str(treedef), shapes)).encode()).hexdigest()[:24]


def keep(model: ModelFunction, key: tuple, plan: dict[str, int]) -> None:
    """Makes ``plan`` the sparse plan for ``key`` in this process, and the one the next
    checkpoints record for its input signature (``ModelFunction.plan_records``)."""
    model.sparse_plans[key] = plan
    model.plan_records[digest(key)] = dict(plan)


class LookupsFound(Exception):
    """A train step traced without a sparse plan found lookups it may update row by row
    (``args[0]``: the tables ``lookup_rows`` read); see :func:`planned`."""


class RuleFound(Exception):
    """A train step traced with other table groups than its ``train_op``'s ``row_rule``
    gives (``args[0]``; not known before, as in a training resumed from a checkpoint, or
    changed): see :func:`planned` and ``estimator.engine.table_groups``."""


class _Unchecked:
    """A recorded plan a step's trace is using before :func:`planned` checks it."""

    def __init__(self, key: tuple, plan: dict[str, int]) -> None:
        self.key, self.plan, self.marks = key, plan, 0


def tables(model: ModelFunction, run: Callable, trainable: dict, args: tuple) -> dict[str, int]:
    """``{table: ids per step}`` to update row by row in a train step (see the module
    docstring for where the plan comes from).

    Args:
      run: ``run(trainable, access, *args) -> (loss, train_op)``: ``model_fn`` in TRAIN mode
        (for :func:`sparse.plan`).
      trainable: ``{name: array}`` (traced or abstract).
      args: the step's other inputs ``(non_trainable, features, labels, global_step, rng)``.
    """
    looked_up = model.init_lookups.get(ModeKeys.TRAIN, frozenset())
    key = plan_key(trainable, args, looked_up)
    if key in model.sparse_plans:
        return model.sparse_plans[key]
    recorded = None if key in model.rejected_plans else model.plan_records.get(digest(key))
    if recorded is not None and looked_up and set(recorded) == looked_up:
        model.unchecked.append(_Unchecked(key, recorded))
        return recorded
    keep(model, key, sparse.plan(run, trainable, args, looked_up))
    return model.sparse_plans[key]


def mark(model: ModelFunction, trainable: dict, plan: dict[str, int]) -> dict:
    """``{name: the table}`` for the tables of ``plan``: each the output of an
    ``optimization_barrier`` under :data:`TABLE_SCOPE` (it computes nothing; unlike a jitted
    identity, JAX does not forward it away when the table is differentiated, as a table
    updated whole is), the value ``model_fn`` receives, so the step's trace shows every use
    ``model_fn`` made of it."""
    marked = {}
    with jax.named_scope(TABLE_SCOPE):
        for name in plan:
            marked[name] = jax.lax.optimization_barrier(trainable[name])
    for check in model.unchecked:
        check.marks += len(plan)
    return marked


def lookups_only(jaxpr: Jaxpr, marks: int) -> bool:
    """Whether the ``marks`` values :func:`mark` made are all in ``jaxpr`` (or its inner
    jaxprs) and each is used only by row lookups (equations under
    ``estimator.model.rows.LOOKUP_SCOPE``): not read whole, not returned, not passed to a
    function of ``model_fn``'s own (whose use this check cannot see). The marks are the
    forward identities: a table updated whole is differentiated, and the identity's
    transpose (its gradient, which the optimizer reads) is no use of the table."""
    seen = 0

    def check(inner: Jaxpr) -> bool:
        nonlocal seen
        marked = {v for eqn in inner.eqns if _forward_mark(eqn) for v in eqn.outvars}
        seen += len(marked)
        for eqn in inner.eqns:
            if _under(eqn, TABLE_SCOPE) or _under(eqn, LOOKUP_SCOPE):
                continue
            if marked.intersection(v for v in eqn.invars if isinstance(v, Var)):
                return False
            if not all(check(sub) for sub in _inner_jaxprs(eqn)):
                return False
        return not marked.intersection(v for v in inner.outvars if isinstance(v, Var))

    return check(jaxpr) and seen == marks


def _under(eqn, scope: str) -> bool:
    return scope in str(eqn.source_info.name_stack)


def _forward_mark(eqn) -> bool:
    """An equation of :func:`mark` on the forward pass (not its transpose in a gradient)."""
    stack = str(eqn.source_info.name_stack)
    return TABLE_SCOPE in stack and f"transpose(jvp({TABLE_SCOPE}" not in stack


def _inner_jaxprs(eqn):
    for value in eqn.params.values():
        for item in value if isinstance(value, tuple | list) else (value,):
            if isinstance(item, ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, Jaxpr):
                yield item


def planned(model: ModelFunction, trace: Callable[[], Any], renew: Callable[[], None]) -> Any:
    """``trace()``, the trace of a program with a train step (a ``jax.jit(...).trace``
    result, or :func:`~estimator.engine.steps.traced`'s ``(closed jaxpr, shapes)``),
    traced again when its sparse plan did not hold:

    * it raised :class:`LookupsFound`: traced again with those tables as candidates;
    * it raised :class:`RuleFound`: traced again with that rule's table groups (the
      program a first training, whose init run shows the rule, traces at once);
    * it used a recorded plan (:func:`tables`) that its trace contradicts (a
      ``PlanMismatch``, or :func:`lookups_only` false): the plan is dropped for its key
      and the step traced again (``renew()`` first: ``jax.jit`` keeps a finished trace, and
      the program must hold nothing of the abandoned one).

    The whole trace starts over each time, so the program's StableHLO (the persistent
    compilation cache's key) is the one a first training's trace gives."""
    while True:
        cached = set(model.step_traces)
        try:
            result = trace()
        except LookupsFound as found:
            model.unchecked.clear()
            model.init_lookups[ModeKeys.TRAIN] = found.args[0]
            continue
        except RuleFound as found:
            model.unchecked.clear()
            model.row_rule = found.args[0]
            continue
        except PlanMismatch:
            _reject(model, cached)
            renew()
            continue
        except BaseException:
            model.unchecked.clear()
            raise
        if not model.unchecked:
            return result
        closed = result.jaxpr if hasattr(result, "jaxpr") else result[0]
        if lookups_only(closed.jaxpr, sum(check.marks for check in model.unchecked)):
            for check in model.unchecked:
                keep(model, check.key, check.plan)
            model.unchecked.clear()
            return result
        _reject(model, cached)
        renew()


def _reject(model: ModelFunction, cached: set) -> None:
    """Drops the recorded plans the last trace used, and the step traces it kept."""
    for check in model.unchecked:
        model.rejected_plans.add(check.key)
        model.plan_records.pop(digest(check.key), None)
    model.unchecked.clear()
    for key in set(model.step_traces) - cached:
        del model.step_traces[key]
