"""Tables a train step updates as one array.

Tables updated whole that share a row shape, a dtype and their ``train_op``'s elementwise
rule (``estimator.model.train_op.row_rule``: the canned FTRL, Adagrad and SGD; the linear
model's one table per column) are one array in the step (:func:`table_groups`): their
lookups gather from it, and one gradient, row mask and update serve them all, where each
table would bring kernels of its own shape for XLA to compile. The tables stay separate
variables in the state and in checkpoints.

A fused call carries the train state with each group joined (:func:`join_state`,
``estimator.engine.programs``): the step's own join of the tables is then a concatenation
of adjacent slices of the carried array, and the loop's join of the step's split the same,
which XLA folds away, so the join and split run once a call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "Group",
    "group_lookups",
    "group_slots",
    "join_state",
    "join_tables",
    "split_slots",
    "split_state",
    "split_tables",
    "table_groups",
]


class Group(NamedTuple):
    """Tables a step updates as one array (:func:`table_groups`), under the name of the
    first: rows ``offsets[i]`` to ``offsets[i] + sizes[i]`` are ``names[i]``'s."""

    names: tuple  # the tables, in name order; the array goes by names[0]
    sizes: tuple  # their rows
    offsets: tuple  # where each starts in the array

    def join(self, values: dict) -> jax.Array:
        """The tables' ``values`` (``{name: [rows, ...]}``) as one array."""
        return jnp.concatenate([values[name] for name in self.names])

    def split(self, value: jax.Array) -> dict:
        """``{name: its rows of value}``: :meth:`join` undone."""
        return {
            name: jax.lax.slice_in_dim(value, start, start + size)
            for name, start, size in zip(self.names, self.offsets, self.sizes, strict=True)
        }


def table_groups(whole: frozenset, trainable: dict, rule: Callable | None) -> tuple:
    """The :class:`Group` s of the tables in ``whole`` (updated whole) that share a row shape,
    a dtype and a key of ``rule`` (``row_rule(train_op)``; None: not known, no groups), two
    tables or more each."""
    if rule is None:
        return ()
    by_kind: dict = {}
    for name in sorted(whole):
        key = rule(name)
        if key is not None:
            table = trainable[name]
            by_kind.setdefault((key, table.shape[1:], table.dtype), []).append(name)
    groups = []
    for names in by_kind.values():
        if len(names) > 1:
            sizes = tuple(trainable[n].shape[0] for n in names)
            offsets = tuple(int(x) for x in np.cumsum((0,) + sizes[:-1]))
            groups.append(Group(tuple(names), sizes, offsets))
    return tuple(groups)


def join_tables(groups: tuple, trainable: dict) -> dict:
    """``{first name: the group's array}`` of each group (the step differentiates these)."""
    return {g.names[0]: g.join(trainable) for g in groups}


def group_lookups(groups: tuple, joined: dict) -> dict:
    """``{table: (its group's array in joined, its offset, the group's name)}``
    (``RowAccess(grouped=...)``: the lookups record their ids under the group's name)."""
    return {
        name: (joined[g.names[0]], start, g.names[0])
        for g in groups
        for name, start in zip(g.names, g.offsets, strict=True)
    }


def split_tables(groups: tuple, trainable: dict, opt_state) -> tuple:
    """``(trainable, opt_state)`` with each group's array and slots split into its tables'
    (:func:`join_tables`, :func:`group_slots` undone)."""
    if not groups:
        return trainable, opt_state
    trainable = dict(trainable)
    for group in groups:
        trainable.update(group.split(trainable.pop(group.names[0])))
    return trainable, split_slots(opt_state, groups)


def join_state(state, groups: tuple):
    """``state`` (a ``TrainState``) with each group's tables and slots joined (the carry of
    a fused call's loop: its steps' own joins and splits then cancel out in XLA, see
    ``estimator.engine.programs``)."""
    if not groups:
        return state
    grouped = {n for g in groups for n in g.names}
    trainable = {k: v for k, v in state.trainable.items() if k not in grouped}
    trainable.update(join_tables(groups, state.trainable))
    return state._replace(
        trainable=trainable, opt_state=group_slots(state.opt_state, groups, state.trainable)
    )


def split_state(state, groups: tuple):
    """:func:`join_state` undone."""
    if not groups:
        return state
    trainable, opt_state = split_tables(groups, state.trainable, state.opt_state)
    return state._replace(trainable=trainable, opt_state=opt_state)


def group_slots(opt_state, groups: tuple, trainable: dict):
    """``opt_state`` with each group's slots joined under its first table's name: in every
    dict keyed by variable names, the tables' slots (arrays of their shape) become one
    array; the same empty entry for all (optax's ``MaskedNode`` of a variable another
    transform updates) becomes one.

    Raises:
      ValueError: a group's tables hold anything else there (a state of their own that is
        not a slot: the ``train_op``'s ``row_rule`` promised none).
    """
    if not groups:
        return opt_state

    def join(node):
        node = dict(node)
        for group in groups:
            present = [n in node for n in group.names]
            if not any(present):
                continue
            values = [node.pop(n, None) for n in group.names]
            slots = all(
                getattr(v, "shape", None) == trainable[n].shape
                for n, v in zip(group.names, values, strict=True)
            )
            empty = all(type(v) is type(values[0]) and not jax.tree.leaves(v) for v in values)
            if all(present) and slots:
                node[group.names[0]] = jnp.concatenate(values)
            elif all(present) and empty:
                node[group.names[0]] = values[0]
            else:
                raise ValueError(
                    f"The train_op's row_rule puts {list(group.names)} under one update, but "
                    "its state holds something other than slots of their shape for them (a "
                    "state of each variable's own); mark it without a rule "
                    "(mark_row_wise(transform, rule=None)) to update them one by one."
                )
        return node

    return _map_named(opt_state, groups, join, first_only=False)


def split_slots(opt_state, groups: tuple):
    """:func:`group_slots` undone: each group's joined slots split into its tables'."""

    def split(node):
        node = dict(node)
        for group in groups:
            if group.names[0] in node:
                value = node.pop(group.names[0])
                if jax.tree.leaves(value):
                    node.update(group.split(value))
                else:
                    node.update(dict.fromkeys(group.names, value))
        return node

    return _map_named(opt_state, groups, split, first_only=True)


def _map_named(tree, groups: tuple, fn: Callable, *, first_only: bool):
    """``tree`` with ``fn`` applied to each dict that holds a group's (first) table name."""
    names = {g.names[0] for g in groups} if first_only else {n for g in groups for n in g.names}

    def named(x) -> bool:
        return isinstance(x, dict) and not names.isdisjoint(x)

    return jax.tree.map(lambda x: fn(x) if named(x) else x, tree, is_leaf=named)
