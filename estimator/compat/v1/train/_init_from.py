"""``tf.train.init_from_checkpoint``: variables initialised from a checkpoint.

TF's ``init_from_checkpoint(ckpt_dir_or_file, assignment_map)`` replaces the initializers
of the mapped variables (``tensorflow/python/training/checkpoint_utils.py``): when the
Estimator starts without a checkpoint of its own, those variables take the checkpoint's
values; a later run restores its own checkpoint and the call changes nothing. It is what
BERT's fine-tuning code calls (in ``model_fn``, or in a ``TPUEstimator``'s
``scaffold_fn``). Here the call does the same inside ``model_fn``: in the run that creates
the variables (the Estimator's *init* run) their initial values are read from the
checkpoint; in every other run it only checks the mapping.

``assignment_map`` as TF's: ``{"checkpoint/name": "variable/name"}`` (or the variable
itself, the value ``tf.get_variable`` returned), ``{"old_scope/": "new_scope/"}`` for every
variable under a scope, ``{"/": "scope/"}`` for the checkpoint's root. TF's errors and
messages for a name missing from the checkpoint, a shape mismatch and a malformed scope
mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from estimator import checkpoint as _checkpoint
from estimator.model import variables as _variables

__all__ = ["init_from_checkpoint"]


def _path(ckpt_dir_or_file: str) -> str:
    path = _checkpoint.latest_checkpoint(ckpt_dir_or_file)
    return path if path is not None else ckpt_dir_or_file


def _set(frame: _variables.Frame, name: str, path: str, tensor_name: str) -> None:
    if frame.kind != _variables.INIT:  # restored or trained values stay
        return
    store = frame.trainable if name in frame.trainable else frame.non_trainable
    old = store[name]
    value = jnp.asarray(np.asarray(_checkpoint.load_variable(path, tensor_name)), old.dtype)
    store[name] = value
    frame.by_id[id(value)] = name


def init_from_checkpoint(ckpt_dir_or_file: str, assignment_map: Any) -> None:
    """``tf.train.init_from_checkpoint`` (see the module docstring).

    Args:
      ckpt_dir_or_file: a checkpoint, or a directory (its latest checkpoint).
      assignment_map: a dict (or ``(key, value)`` pairs) from checkpoint names or scopes to
        variable names, variables or scopes.

    Raises:
      ValueError: TF's messages: a tensor not in the checkpoint, a shape mismatch, a scope
        mapped to a name; a value that is not a variable of the model.
      RuntimeError: outside ``model_fn``.
    """
    frame = _variables.require_frame("tf.train.init_from_checkpoint")
    path = _path(ckpt_dir_or_file)
    shapes = {name: tuple(shape) for name, shape in _checkpoint.list_variables(path)}
    store = {**frame.trainable, **frame.non_trainable}
    pairs = assignment_map.items() if isinstance(assignment_map, Mapping) else assignment_map
    for tensor_name, current in sorted(pairs, key=lambda pair: pair[0]):
        name = _variable_name(frame, store, tensor_name, current)
        if name is not None:
            _check_tensor(shapes, tensor_name, name, store, ckpt_dir_or_file)
            _set(frame, name, path, tensor_name)
        else:
            for var_name, full in _scope_pairs(
                store, tensor_name, current, shapes, ckpt_dir_or_file
            ):
                _set(frame, var_name, path, full)


def _variable_name(frame, store: dict, tensor_name: str, current: Any) -> str | None:
    """The model variable ``current`` names (a name or the value ``get_variable``
    returned), or None for a scope."""
    if isinstance(current, str):
        return current.removesuffix(":0") if current.removesuffix(":0") in store else None
    name = frame.by_id.get(id(current))
    if name is None:
        raise ValueError(
            f"assignment_map[{tensor_name!r}] is a {type(current).__name__}, not a variable of "
            "this model: give the value tf.get_variable returned, or the variable's name."
        )
    return name


def _check_tensor(shapes: dict, tensor_name: str, name: str, store: dict, where: str) -> None:
    """TF's errors for a tensor missing from the checkpoint or of another shape."""
    if tensor_name not in shapes:
        raise ValueError(f"Tensor {tensor_name} is not found in {where} checkpoint {shapes}")
    if tuple(store[name].shape) != shapes[tensor_name]:
        raise ValueError(
            f"Shape of variable {name}:0 ({tuple(store[name].shape)}) doesn't match with shape "
            f"of tensor {tensor_name} ({shapes[tensor_name]}) from checkpoint reader."
        )


def _scope_pairs(store: dict, tensor_name: str, current: str, shapes: dict, where: str):
    """``(variable, checkpoint tensor)`` for every variable under the scope ``current``
    mapped to the checkpoint scope ``tensor_name`` (``"/"``: the root), TF's errors."""
    scopes = current[: current.rindex("/")] if "/" in current else ""
    if not tensor_name.endswith("/"):
        raise ValueError(
            f"Assignment map with scope only name {scopes} should map to scope only "
            f"{tensor_name}. Should be 'scope/': 'other_scope/'."
        )
    for var_name in sorted(v for v in store if not scopes or v.startswith(scopes + "/")):
        full = var_name[len(scopes) :]
        if current != "/":
            full = full[1:]
        if tensor_name != "/":
            full = tensor_name + full
        if full not in shapes:
            raise ValueError(
                f"Tensor {full} ({var_name[len(scopes) + 1 :]} in {tensor_name}) is not found "
                f"in {where} checkpoint"
            )
        yield var_name, full
