"""The saved form of a pytree: nested dicts of its leaves, keyed by each level's name.

An optimizer's state is an optax pytree (NamedTuples, tuples, dataclasses) whose structure
only ``train_op.init`` knows, and ``train_op`` is known only once ``model_fn`` has run. The
engine carries that state, and checkpoints save it, in this form instead: every container
is a dict keyed by its entry's dict key, field name or index, as a string, and containers
without leaves are left out::

    (EmptyState(), ScaleByAdamState(count, mu={"w": ...}, nu={"w": ...}))
    -> {"1": {"count": ..., "mu": {"w": ...}, "nu": {"w": ...}}}

The leaves keep the names orbax and the checksums give them (``opt_state/1/mu/w``), so a
state read from a checkpoint of any version, or described by its metadata alone, has the
structure the train step takes, without running ``model_fn`` first; the step rebuilds
optax's structure inside its trace (:func:`structured`), which costs nothing per step.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

__all__ = ["describe", "from_description", "part", "parts", "saved_form", "structured"]


def part(entry) -> str:
    """A key path entry's name: its dict key, attribute name or index, as a string."""
    for attr in ("key", "name", "idx"):
        if hasattr(entry, attr):
            return str(getattr(entry, attr))
    return str(entry)


def parts(path) -> tuple[str, ...]:
    """The names of a key path's entries (``(DictKey("w"), SequenceKey(0))`` -> ``("w",
    "0")``)."""
    return tuple(part(entry) for entry in path)


def _leaves(tree) -> list[tuple[tuple[str, ...], Any]]:
    return [(parts(path), leaf) for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]]


def _nest(items) -> dict:
    out: dict = {}
    for names, leaf in items:
        level = out
        for name in names[:-1]:
            level = level.setdefault(name, {})
        level[names[-1]] = leaf
    return out


def saved_form(tree) -> dict:
    """``tree`` as nested dicts keyed by its entries' names (see the module docstring); a
    tree without leaves is ``{}``."""
    return _nest(_leaves(tree))


def describe(tree) -> list[list]:
    """``[[names, shape, dtype name], ...]`` of ``tree``'s leaves (JSON, for a checkpoint's
    metadata): what :func:`from_description` rebuilds its abstract saved form from."""
    return [
        [list(names), [int(d) for d in np.shape(leaf)], np.dtype(leaf.dtype).name]
        for names, leaf in _leaves(tree)
    ]


def from_description(description: list) -> dict:
    """The saved form, as ``jax.ShapeDtypeStruct`` leaves, that :func:`describe` described.

    Raises:
      ValueError: ``description`` is not such a list.
    """
    try:
        return _nest(
            (tuple(str(n) for n in names), jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype)))
            for names, shape, dtype in description
        )
    except (TypeError, ValueError) as err:
        raise ValueError(f"not a list of [names, shape, dtype]: {err}") from None


def structured(saved: dict, template, what: str):
    """``saved`` (a saved form) in ``template``'s structure (a pytree of arrays or
    ``jax.ShapeDtypeStruct``, e.g. ``jax.eval_shape(train_op.init, params)``), leaf for
    leaf by name.

    Raises:
      ValueError: a leaf missing from either, or of another shape or dtype: ``what`` (what
        ``saved`` is, e.g. "The optimizer state training resumes from") "does not match
        train_op's state", and the differences.
    """
    given = dict(_leaves(saved))
    flat, treedef = jax.tree_util.tree_flatten_with_path(template)
    wanted = {parts(path): leaf for path, leaf in flat}
    problems = []
    for names, leaf in wanted.items():
        have = given.get(names)
        if have is None:
            problems.append(f"{'/'.join(names)}: only in train_op's state")
        elif tuple(np.shape(have)) != tuple(leaf.shape) or np.dtype(have.dtype) != np.dtype(
            leaf.dtype
        ):
            problems.append(
                f"{'/'.join(names)}: {list(leaf.shape)} {np.dtype(leaf.dtype).name} in "
                f"train_op's state, {list(np.shape(have))} {np.dtype(have.dtype).name} saved"
            )
    problems += [f"{'/'.join(n)}: only saved" for n in given if n not in wanted]
    if problems:
        more = "; ..." if len(problems) > 5 else ""
        raise ValueError(
            f"{what} does not match train_op's state (was the optimizer changed?): "
            f"{'; '.join(problems[:5])}{more}"
        )
    return jax.tree_util.tree_unflatten(treedef, [given[parts(path)] for path, _ in flat])
