"""The batch signature a call keeps: only the batch dimension may vary between batches.

A step is traced and compiled for the shapes of the batch it runs on, and ``model_fn``
creates its variables for the first batch's. A feature whose width or rank changes later
would make the next step retrace: at best a silent recompile (a label going from
``[32]`` to ``[32, 1]`` then broadcasts in a user's loss), at worst an error about a
variable (``dense/kernel``) that names neither the input nor the step. TF 2.15 fails at
the input's placeholder shape instead. :class:`ShapeCheck` compares every batch a call
takes with its first batch, on the host, before the batch reaches a step, and names the
feature or label, the step, both shapes and the fix.

What may vary is the first dimension of every array: the batch dimension of a dense
feature (a shorter last batch), and the number of values of a sparse or ragged value's
arrays (``estimator.io.SparseValue``'s ``indices`` ``[nnz, rank]`` and ``values``,
``RaggedValue``'s ``values`` and row splits). Everything else, and the keys, may not.

The check reads shapes only (no array, no device sync): a batch with the previous one's
keys and full shapes passes after one tuple comparison, and only a batch of other shapes
(a shorter last one) is compared with the first array by array. Inputs that cannot change
shape (``numpy_input_fn``'s batches, a single batch) are not checked. What it costs per
batch and per step: ``benchmarks/train_throughput.py --input-check``.
"""

from __future__ import annotations

import operator
from typing import Any

import jax
import numpy as np

__all__ = ["ShapeCheck"]

#: The call whose batches are checked, by mode, as the messages name it.
_CALLS = {"train": "train() call", "eval": "evaluation", "infer": "predict() call"}


def _dims(shape: tuple) -> tuple | None:
    """The part of a shape that must not change: all but the first dimension (None for a
    scalar, so that a change of rank from 0 to 1 is seen too)."""
    return shape[1:] if shape else None


_SHAPE = operator.attrgetter("shape")


def _quick(tree) -> Any:
    """The keys and full shapes of a dict of arrays, an array's shape, or None: compared
    with the previous batch's at C speed (raises AttributeError for other trees)."""
    if tree is None:
        return None
    if type(tree) is dict:
        return tuple(tree), tuple(map(_SHAPE, tree.values()))
    return tree.shape


def _shape(x) -> str:
    return str(list(x.shape if hasattr(x, "shape") else np.shape(x)))


def _describe(tree) -> str:
    if tree is None:
        return "none"
    if isinstance(tree, dict):
        return f"keys {sorted(tree, key=str)}"
    if hasattr(tree, "shape"):
        return f"an array of shape {_shape(tree)}"
    return f"the structure {jax.tree_util.tree_structure(tree)}"


class ShapeCheck:
    """Refuses a batch whose features or labels differ from the call's first batch in
    anything but the first dimension of each array (internal).

    Called with every batch a call hands to a step, in order (the step it would run is the
    count of calls); the first batch sets the signature.

    Args:
      mode: a ``ModeKeys`` value: which call the messages name.
      features: whether to check the features; False where they are the output of an
        ``input_transform`` (feature columns pad multi-valued and sequence features to
        each batch's longest, by design, and check the raw inputs' shapes themselves).
    """

    def __init__(self, mode: str, *, features: bool = True) -> None:
        self._call = _CALLS.get(mode, mode)
        self._features = features
        self.step = 0  # the batches checked so far
        self._first: tuple[_Skeleton, _Skeleton] | None = None  # features', labels'
        self._last = None  # the last batch's keys and full shapes (see _quick)

    def continue_from(self, other: ShapeCheck) -> None:
        """Goes on from ``other``'s first batch and step count (the next pass of an input
        read again in the same call)."""
        self.step, self._first, self._last = other.step, other._first, other._last

    def __call__(self, batch: tuple) -> None:
        """Checks ``batch``: ``(features, labels)`` or ``(features,)``.

        A batch of the previous one's keys and full shapes passes at once; any other is
        compared with the first batch, array by array.

        Raises:
          ValueError: a feature or label whose shape beyond the first dimension, or whose
            keys or structure, differ from the first batch's: naming it, the step, both
            shapes and the fix.
        """
        self.step += 1
        features = batch[0] if self._features else None
        labels = batch[1] if len(batch) > 1 else None
        try:
            quick = (_quick(features), _quick(labels))
        except AttributeError:  # sparse or ragged values, nested trees: compared in full
            quick = None
        if quick is not None and quick == self._last:
            return
        if self._first is None:
            # Shapes only: the first batch itself (on a device, maybe) is not kept.
            self._first = (_Skeleton(features), _Skeleton(labels))
        else:
            self._compare("Feature", "Features", self._first[0], features)
            self._compare("Label", "Labels", self._first[1], labels)
        self._last = quick

    def _compare(self, one: str, all_: str, first: _Skeleton, this) -> None:
        at = f"at step {self.step} of this {self._call}"
        these = jax.tree_util.tree_flatten_with_path(this)[0]
        if first.shapes.keys() != {path for path, _ in these}:
            raise ValueError(
                f"{all_} changed {at}: the first batch had {first.description}, this batch "
                f"has {_describe(this)}. Every batch of a call must have the same "
                f"{all_.lower()} (keys and structure); only the batch dimension (the first) "
                "of each array may vary. Return features and labels of one structure from "
                "input_fn for every batch."
            )
        for path, value in these:
            before = first.shapes[path]
            if _dims(before) == _dims(np.shape(value)):
                continue
            if path:
                name, what = f"{one} {_name(path)}", f"{one.lower()} {_name(path)}"
            else:
                name, what = all_, all_.lower()
            wanted = ", ".join(["batch_size", *map(str, before[1:])]) if before else ""
            raise ValueError(
                f"{name} changed shape {at}: the first batch had {list(before)}, this batch "
                f"has {_shape(value)}. Only the batch dimension (the first) may vary between "
                "batches: a step is compiled for the first batch's shapes, and model_fn's "
                f"variables are made for them. Give {what} the shape [{wanted}] in every "
                "batch in input_fn (pad, truncate or reshape it)."
            )


class _Skeleton:
    """What a check needs of the first batch's features or labels: each array's shape by
    its path in the tree, and a description of the tree."""

    def __init__(self, tree) -> None:
        self.shapes = {
            path: tuple(np.shape(x)) for path, x in jax.tree_util.tree_flatten_with_path(tree)[0]
        }
        self.description = _describe(tree)


def _name(path: tuple) -> str:
    """``'x'`` for the key ``x`` of a dict; ``'ids'.indices``, ``[0]`` for deeper paths."""
    head, rest = path[0], path[1:]
    key = getattr(head, "key", None)
    first = repr(key) if key is not None else jax.tree_util.keystr((head,))
    return first + jax.tree_util.keystr(rest)
