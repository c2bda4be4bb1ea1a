"""What the module adapters share: names, keys, and a module's arrays as Estimator variables.

Each adapter reduces its library's module to two flat dicts keyed by the module's own
paths (``"layers/0/kernel"``): the trainable arrays and the other state (batch-norm
statistics). :func:`bind` turns them into Estimator variables under one scope
(``est.get_variable``, so checkpoints, warm start, export and sharding see ordinary
variables named ``<scope>/<module path>``) and :meth:`Binding.update` writes the state a
training call changed back with ``est.assign``, as ``est.layers.batch_normalization``
does.
"""

from __future__ import annotations

import importlib
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jax

from estimator.mode_keys import ModeKeys
from estimator.model import dtype_policy
from estimator.model.variables import (
    INIT,
    Frame,
    assign,
    get_variable,
    require_frame,
    unique_name,
    variable_scope,
)

__all__ = ["Binding", "bind", "key_path_name", "require", "snake_case", "training"]

_EXTRAS = {"flax": "Flax", "equinox": "Equinox", "keras": "Keras 3"}


def require(module: str, extra: str, adapter: str) -> Any:
    """Imports ``module`` (a library the adapter wraps), or says which extra installs it.

    Raises:
      ImportError: the library is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"estimator.modules.{adapter} needs {_EXTRAS[extra]}, which is not installed "
            f"({err}). Install it with: pip install 'jax-estimator[{extra}]'."
        ) from err


def model_frame(adapter: str) -> Frame:
    """The frame of the ``model_fn`` call in progress (``RuntimeError`` outside one)."""
    return require_frame(f"estimator.modules.{adapter}")


def training(frame: Frame) -> bool:
    """Whether ``model_fn`` runs in TRAIN mode (the module's training flag)."""
    return frame.mode == ModeKeys.TRAIN


def snake_case(name: str) -> str:
    """``"TransformerBlock"`` -> ``"transformer_block"``, ``"MLP"`` -> ``"mlp"`` (Keras' and
    TF's layer naming)."""
    name = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def scope_name(name: str | None, default: str, adapter: str) -> str:
    """The module's variable scope: ``name``, or ``default`` made unique in the current
    scope (``mlp``, ``mlp_1``, ...; counted afresh on every ``model_fn`` call, as layers).

    Raises:
      TypeError: a name that is not a non-empty string.
    """
    if name is None:
        return unique_name(default)
    if not isinstance(name, str) or not name.strip("/"):
        raise TypeError(
            f"estimator.modules.{adapter}(..., name=...) takes a non-empty string such as "
            f"'encoder'; got {name!r}."
        )
    return name.strip("/")


def key_path_name(path: Iterable[Any]) -> str:
    """A ``jax.tree_util`` key path or a tuple of keys as a variable name:
    ``(GetAttrKey('layers'), SequenceKey(0), GetAttrKey('weight'))`` -> ``"layers/0/weight"``.
    """
    parts = []
    for entry in path:
        for attr in ("name", "key", "idx"):
            if hasattr(entry, attr) and not callable(getattr(entry, attr)):
                entry = getattr(entry, attr)
                break
        parts.append(str(entry))
    return "/".join(parts)


def init_key(full_scope: str, frame: Frame) -> jax.Array:
    """The key a module's own initialisers get: the Estimator's initial key (from its seed)
    folded with the scope's name, so adding a module leaves the others' values alone."""
    return jax.random.fold_in(frame.rng, zlib.crc32(full_scope.encode()) >> 1)


class Binding:
    """A module's arrays as Estimator variables during one ``model_fn`` call.

    Attributes:
      scope: the full variable scope (``"tower/mlp"``).
      trainable: ``{module path: value}`` of the trainable variables as stored (float32).
      non_trainable: ``{module path: value}`` of the other state.
    """

    def __init__(self, scope: str, trainable: dict, non_trainable: dict, frame: Frame) -> None:
        self.scope = scope
        self.trainable = trainable
        self.non_trainable = non_trainable
        self._frame = frame

    def params(self, full_precision: Callable[[str], bool] = lambda path: False) -> dict:
        """The trainable values as the module computes with them: cast to the compute
        dtype under a mixed dtype policy (except the paths ``full_precision`` names), as
        stored otherwise."""
        return {
            path: value if full_precision(path) else dtype_policy.autocast(value)
            for path, value in self.trainable.items()
        }

    def update(self, new_state: Mapping[str, Any]) -> None:
        """Assigns the state the module changed (``{module path: new value}``; unchanged
        values, by identity, are skipped). Only a training call keeps state changes, as
        ``est.layers.batch_normalization``."""
        if not training(self._frame):
            return
        for path, value in new_state.items():
            if path in self.non_trainable and value is not self.non_trainable[path]:
                self.non_trainable[path] = assign(f"{self.scope}/{path}", value)


def bind(
    adapter: str,
    frame: Frame,
    scope: str,
    trainable: Mapping[str, Any],
    non_trainable: Mapping[str, Any],
    initial: Callable[[jax.Array], Mapping[str, Any]],
) -> Binding:
    """Creates (first call) or reads the module's variables under ``scope``.

    Args:
      adapter: the adapter's name, for messages.
      frame: the current frame.
      scope: the module's scope name (relative to the enclosing ``variable_scope``).
      trainable, non_trainable: ``{module path: array or ShapeDtypeStruct}``: the module's
        structure (shapes and dtypes).
      initial: ``key -> {module path: initial value}`` for every path, from the module's own
        initialisers; called only while the model is initialised.

    Returns:
      A :class:`Binding` with the values to run the module on.

    Raises:
      ValueError: two arrays of the module with one name, or a module whose arrays differ
        from the variables created earlier under the same name (``get_variable``'s
        messages).
    """
    clash = sorted(set(trainable) & set(non_trainable))
    if clash:
        raise ValueError(
            f"estimator.modules.{adapter}: the module has trainable and non-trainable arrays "
            f"with the same path {clash}; rename one of them in the module."
        )
    with variable_scope(scope) as full:
        values = initial(init_key(full, frame)) if frame.kind == INIT else {}
        out = []
        for group, is_trainable in ((trainable, True), (non_trainable, False)):
            created = {}
            for path, spec in group.items():
                created[path] = get_variable(
                    path,
                    tuple(spec.shape),
                    spec.dtype,
                    initializer=values.get(path),
                    trainable=is_trainable,
                )
            out.append(created)
    return Binding(full, out[0], out[1], frame)
