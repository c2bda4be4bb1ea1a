"""Sparse updates of lookup tables in the train step (TF's ``SparseApply*`` kernels).

A table (embedding or linear weights) that ``model_fn`` reads only through
``estimator.model.rows.lookup_rows``, under a ``train_op`` declared row-wise for it
(``est.sparse_updates``; the canned FTRL, Adagrad and SGD), is trained without ever forming
a table-sized gradient:

1. The init run (TRAIN mode) gathers each lookup's rows from an identity copy of its table
   (:func:`plan_from_init`); when training starts without one (resumed from a
   checkpoint), the step's trace checks the plan the checkpoint recorded
   (``estimator.engine.row_plan``), or, without one, :func:`plan` traces ``model_fn`` once
   more, abstractly, with each candidate table's lookups reading a *shadow* copy. A table
   whose own variable is then unused in the traced program is read only through lookups;
   the trace also gives the number of ids each table looks up per step (static shapes).
2. The train step differentiates ``model_fn`` with respect to the other variables and to
   a zero ``delta`` per looked-up id (``RowAccess``): the gradient of each lookup's rows.
3. :func:`gather` gives each looked-up id (ids out of range point past the table) the
   summed gradient of its row, and gathers the rows and their optimizer slots (state
   leaves of the table's shape under its name): one entry per id, so shapes are static.
4. ``train_op.update`` runs on that small tree (dense variables whole, tables as rows), and
   :func:`scatter` writes the new rows and slots back (past the table: dropped). Entries of
   the same row carry the same values, so the order of the writes does not matter.

Per step this costs O(ids in the batch) for each table, whatever its size, plus the
summing of equal ids (O(ids²) up to ``MATMUL_MAX_IDS`` ids, then a sort), in a dozen small
operations per table. A table of at most ``WHOLE_ROWS_PER_ID`` rows per looked-up id is
cheaper to update whole, with the same result (:func:`whole_tables`): it is differentiated
as a dense variable (its lookups are plain gathers, whose gradient XLA adds into the
table), ``train_op.update`` runs on the whole table and its slots, and only the rows the
step looked up take the new values (a row mask from the lookups' ids; the others keep theirs
bit for bit), in a few elementwise passes that XLA fuses, and the program has fewer
operations to compile (``benchmarks/census_vs_hand_written.py`` measures the census
tables). SGD, Adagrad and FTRL leave a row without gradient unchanged, so either result
equals the dense update (TF's sparse kernels are the reference;
``tests/engine/test_sparse_updates.py``). Tables updated whole under one elementwise rule
are one array in the step (``estimator.engine.table_groups``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.extend.core import Var

from estimator.model.rows import RowAccess
from estimator.model.train_op import row_wise

__all__ = [
    "WHOLE_ROWS_PER_ID",
    "InitLookups",
    "Rows",
    "gather",
    "looked_up_only",
    "plan",
    "plan_from_init",
    "scatter",
    "whole_tables",
    "zero_deltas",
]


def plan(
    run: Callable, trainable: dict, args: tuple, looked_up: frozenset | None = None
) -> dict[str, int]:
    """The tables to update row by row, with the number of ids each looks up per step.

    Args:
      run: ``run(trainable, access, *args) -> (loss, train_op)``: ``model_fn`` in TRAIN mode
        on the given variables with ``access`` in its frame.
      trainable: ``{name: array}`` (traced or abstract).
      args: the other inputs of ``run`` (arrays, traced or abstract).
      looked_up: the variables ``lookup_rows`` read when the model was initialised (None:
        not known, every table is a candidate). Without candidates ``model_fn`` is not
        traced.

    Returns:
      ``{name: number of ids}`` (empty when nothing qualifies).
    """
    names = sorted(trainable)
    candidates = [
        n for n in names if _candidate(trainable[n]) and (looked_up is None or n in looked_up)
    ]
    if not candidates:
        return {}
    found: dict = {}

    def discover(values, shadows, rest):
        access = RowAccess(shadows=dict(zip(candidates, shadows, strict=True)))
        loss, train_op = run(dict(zip(names, values, strict=True)), access, *rest)
        found["shapes"], found["train_op"] = access.shapes, train_op
        return loss

    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), args)
    values = [jax.ShapeDtypeStruct(trainable[n].shape, trainable[n].dtype) for n in names]
    shadows = [values[names.index(n)] for n in candidates]
    jaxpr = jax.make_jaxpr(discover)(values, shadows, abstract).jaxpr
    used = {v for eqn in jaxpr.eqns for v in eqn.invars if isinstance(v, Var)}
    used.update(v for v in jaxpr.outvars if isinstance(v, Var))
    table_vars = dict(zip(names, jaxpr.invars[: len(names)], strict=True))
    rows_ok = row_wise(found["train_op"])
    return {
        name: sum(math.prod(s) for s in shapes)
        for name, shapes in found["shapes"].items()
        if table_vars[name] not in used and rows_ok(name)
    }


@jax.tree_util.register_static
class InitLookups:
    """The table lookups of the init run in TRAIN mode (static: part of its trace's
    result, beside the copies the lookups gathered from).

    Attributes:
      shapes: ``{name: [ids shape of each lookup]}`` (``RowAccess.shapes``).
      rows_ok: ``row_wise(train_op)`` of that run.
    """

    def __init__(self, shapes: dict, rows_ok: Callable[[str], bool]) -> None:
        self.shapes = shapes
        self.rows_ok = rows_ok


def plan_from_init(trace: tuple) -> dict[str, int]:
    """The tables to update row by row, from the trace of the init run in TRAIN mode (one
    ``model_fn`` run both creates the variables and plans: no :func:`plan` run).

    Args:
      trace: ``(closed jaxpr, abstract result)`` of the init run, whose result is ``(state,
        {"lookups": {name: [copies the lookups gathered from]}, "optimizer": params,
        "found": InitLookups})`` (``estimator.engine.init_run.init_run``; ``params``: the
        copy ``train_op.init`` read).

    Returns:
      ``{name: number of ids}``: as :func:`plan`, the tables whose variable the traced
      program uses only through the lookups' copies (and ``train_op.init``'s).
    """
    closed, result = trace
    state, copies = jax.tree.unflatten(jax.tree.structure(result), closed.jaxpr.outvars)
    allowed = {v for v in jax.tree.leaves(copies) if isinstance(v, Var)}
    used = {
        v
        for eqn in closed.jaxpr.eqns
        if not allowed.intersection(eqn.outvars)
        for v in eqn.invars
        if isinstance(v, Var)
    }
    # What each lookup's copy was made from: the variable's value when model_fn read it.
    # Anything but the value the state keeps (init_from_checkpoint replaces it after
    # model_fn ran) means reads this analysis cannot see: the table stays dense.
    source = {
        out: eqn.invars[eqn.outvars.index(out)]
        for eqn in closed.jaxpr.eqns
        for out in eqn.outvars
        if out in allowed
    }
    found = copies["found"]
    return {
        name: sum(math.prod(s) for s in shapes)
        for name, shapes in found.shapes.items()
        if isinstance(state.trainable.get(name), Var)
        and state.trainable[name] not in used
        and all(source.get(c) is state.trainable[name] for c in copies["lookups"][name])
        and _candidate(result[0].trainable[name])
        and found.rows_ok(name)
    }


def _candidate(x) -> bool:
    """Whether a variable may be a table updated row by row: floating, with rows."""
    return x.ndim >= 1 and jnp.issubdtype(x.dtype, jnp.inexact)


def zero_deltas(tables: dict[str, int], trainable: dict) -> dict:
    """``{name: zeros [n_ids, *row_shape]}``: what the train step differentiates."""
    return {
        name: jnp.zeros((count, *trainable[name].shape[1:]), trainable[name].dtype)
        for name, count in tables.items()
    }


class Rows(NamedTuple):
    """The rows of a step's tables (internal): which rows, and the optimizer's view."""

    index: dict  # {name: int32 [n_ids]}: unique row ids, padded with len(table) (dropped);
    # for a table updated whole: bool [len(table)], the rows looked up
    params: dict  # {name: [n_ids, *row]}: those rows of each table (not the whole tables)
    grads: dict  # {name: [n_ids, *row]}: their summed gradients (likewise)
    state: object  # train_op's state with each table's slots cut to the rows
    slots: tuple  # ((leaf index, name), ...): the slot leaves that were cut, or masked
    whole: frozenset = frozenset()  # the tables updated whole (whole_tables)


#: A table of at most this many rows per id a step looks up in it is updated whole, under
#: a mask of the looked-up rows, rather than row by row (see the module docstring).
WHOLE_ROWS_PER_ID = 16


def whole_tables(tables: dict[str, int], trainable: dict) -> frozenset:
    """The tables of a sparse plan (``{name: ids per step}``) that a step updates whole
    under a row mask: those of at most ``WHOLE_ROWS_PER_ID`` rows per looked-up id, for
    which that costs less than gathering and scattering their rows."""
    return frozenset(
        name
        for name, count in tables.items()
        if trainable[name].shape[0] <= WHOLE_ROWS_PER_ID * count
    )


def gather(
    trainable: dict, opt_state, delta_grads: dict, ids: dict, whole: frozenset = frozenset()
) -> Rows:
    """Deduplicates each table's looked-up ids and gathers rows, gradients and slots; for
    a table in ``whole`` (differentiated as a dense variable), the mask of its looked-up
    rows instead.

    Args:
      trainable: ``{name: array}`` including the tables.
      opt_state: ``train_op``'s state for ``trainable``.
      delta_grads: ``{name: [n_ids, *row]}``: the gradient of each lookup slot (the tables
        updated row by row).
      ids: ``{name: int32 [n_ids]}``: the looked-up ids in the same order (out of range:
        no row), of every table.
      whole: the tables updated whole (:func:`whole_tables`).
    """
    index, params, grads = {}, {}, {}
    for name in whole:
        index[name] = _looked_up(ids[name], trainable[name].shape[0])
    for name, slot_grads in delta_grads.items():
        table = trainable[name]
        size = table.shape[0]
        index[name], grads[name] = _sum_equal_ids(_row_keys(ids[name], size), slot_grads)
        params[name] = table.at[index[name]].get(mode="clip")
    leaves, treedef = jax.tree_util.tree_flatten_with_path(opt_state)
    cut, slots = [], []
    for i, (path, leaf) in enumerate(leaves):
        name = _table_of(path, leaf, trainable, index)
        if name is None:
            cut.append(leaf)
            continue
        cut.append(leaf if name in whole else leaf.at[index[name]].get(mode="clip"))
        slots.append((i, name))
    state = jax.tree.unflatten(treedef, cut)
    return Rows(index, params, grads, state, tuple(slots), whole)


def _looked_up(flat: jax.Array, size: int) -> jax.Array:
    """bool [size]: the rows ``flat`` looks up (ids out of range, negative ones too, look
    up none: a ``FILL_OR_DROP`` scatter drops them without wrapping)."""
    dims = jax.lax.ScatterDimensionNumbers(
        update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,)
    )
    return jax.lax.scatter(
        jnp.zeros(size, bool),
        flat[:, None],
        jnp.ones(flat.shape, bool),
        dims,
        mode=jax.lax.GatherScatterMode.FILL_OR_DROP,
    )


def _row_keys(flat: jax.Array, size: int) -> jax.Array:
    """Each looked-up id, with those out of range pointing past the table (dropped)."""
    return jnp.where((flat >= 0) & (flat < size), flat, size)


#: Up to this many ids a step sums the gradients of equal ids with an [n, n] equality
#: matrix (a few fused ops: cheapest for the usual batch); beyond, by sorting.
MATMUL_MAX_IDS = 2048


def _sum_equal_ids(key: jax.Array, grads: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(rows, sums)``: the row of each lookup slot (``key`` reordered or not) and, for
    each, the summed gradient of all slots of that row. The slots of one row then compute
    the same new row, so writing them all (in any order) is exact, as TF's sparse kernels
    apply the deduplicated gradient (``_deduplicate_indexed_slices``). ``key`` int32 [n],
    ``grads`` [n, *row]."""
    n = key.shape[0]
    if n <= MATMUL_MAX_IDS:
        same = (key[:, None] == key[None, :]).astype(grads.dtype)
        return key, jnp.tensordot(same, grads, axes=1)
    order = jnp.argsort(key)
    ordered = key[order]
    segment = jnp.cumsum(jnp.concatenate([jnp.zeros(1, key.dtype), ordered[1:] != ordered[:-1]]))
    sums = jax.ops.segment_sum(grads[order], segment, num_segments=n, indices_are_sorted=True)
    return ordered, sums[segment]


def _table_of(path, leaf, trainable: dict, index: dict) -> str | None:
    for entry in path:
        name = getattr(entry, "key", None)
        if name in index and getattr(leaf, "shape", None) == trainable[name].shape:
            return name
    return None


def looked_up_only(rows: Rows, params: dict, opt_state, new_params: dict, new_state) -> tuple:
    """``(new_params, new_state)`` where each table updated whole keeps its old values
    (``params``, ``opt_state``) in the rows the step did not look up: the optimizer's
    elementwise update and this select fuse into one pass over the table."""

    def keep(name, old, new):
        mask = rows.index[name].reshape((-1,) + (1,) * (old.ndim - 1))
        return jnp.where(mask, new, old)

    new_params = {
        name: keep(name, params[name], value) if name in rows.whole else value
        for name, value in new_params.items()
    }
    old = jax.tree.leaves(opt_state)
    new, treedef = jax.tree.flatten(new_state)
    for i, name in rows.slots:
        if name in rows.whole:
            new[i] = keep(name, old[i], new[i])
    return new_params, jax.tree.unflatten(treedef, new)


def scatter(rows: Rows, trainable: dict, opt_state, new_params: dict, new_state) -> tuple:
    """``(trainable, opt_state)`` with the new rows and slot rows of the tables updated
    row by row written back (``new_params``: those tables' rows)."""
    trainable = dict(trainable)
    for name, value in new_params.items():
        trainable[name] = trainable[name].at[rows.index[name]].set(value, mode="drop")
    full = jax.tree.leaves(opt_state)
    new, treedef = jax.tree.flatten(new_state)
    for i, name in rows.slots:
        if name not in rows.whole:
            new[i] = full[i].at[rows.index[name]].set(new[i], mode="drop")
    return trainable, jax.tree.unflatten(treedef, new)
