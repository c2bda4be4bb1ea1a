"""``tf.placeholder`` in a ``serving_input_receiver_fn``, and the ops applied to it.

A TF 1 receiver builds its features from placeholders with ordinary ops::

    inputs = {"x": tf.placeholder(tf.float32, [None])}
    features = {"x": tf.expand_dims(inputs["x"], -1)}
    return tf.estimator.export.ServingInputReceiver(features, inputs)

Here a placeholder is a :class:`Placeholder` (a ``jax.ShapeDtypeStruct``, what
``estimator.export`` takes as an input spec). An op of the namespace given one (or a value
made from one) does not run: it returns a :class:`Deferred` recording the op and its
arguments (``estimator.compat.v1._base.op`` does this for every op it wraps; ``+``, ``*``,
``/``, ... on both work too). ``tf.estimator.export.ServingInputReceiver`` then turns such
features into a function of the receiver tensors, which the export traces like any other
op (:func:`receiver_function`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

__all__ = ["Deferred", "Placeholder", "is_symbolic", "receiver_function"]


def _defer(function: Callable, reverse: bool = False) -> Callable:
    def method(self, other):
        args = (other, self) if reverse else (self, other)
        return Deferred(function, args, {})

    return method


class _Operators:
    """Python's operators on placeholders and deferred values: deferred."""

    __add__ = _defer(operator.add)
    __radd__ = _defer(operator.add, reverse=True)
    __sub__ = _defer(operator.sub)
    __rsub__ = _defer(operator.sub, reverse=True)
    __mul__ = _defer(operator.mul)
    __rmul__ = _defer(operator.mul, reverse=True)
    __truediv__ = _defer(operator.truediv)
    __rtruediv__ = _defer(operator.truediv, reverse=True)
    __pow__ = _defer(operator.pow)
    __getitem__ = _defer(operator.getitem)

    def __neg__(self):
        return Deferred(operator.neg, (self,), {})


class Placeholder(_Operators, jax.ShapeDtypeStruct):
    """``tf.placeholder(dtype, shape)``: an input spec (``None`` dimensions are symbolic in
    the export) on which ops are deferred."""

    __hash__ = jax.ShapeDtypeStruct.__hash__


class Deferred(_Operators):
    """An op applied to placeholders: ``function(*args, **kwargs)`` once the placeholders
    have values (:meth:`evaluate`)."""

    def __init__(self, function: Callable, args: tuple, kwargs: dict) -> None:
        self.function = function
        self.args = args
        self.kwargs = kwargs

    def evaluate(self, values: dict[int, Any]) -> Any:
        """The op's value, given ``{id(placeholder): value}``."""
        args, kwargs = jax.tree.map(
            lambda x: _value(x, values), (self.args, self.kwargs), is_leaf=is_symbolic
        )
        return self.function(*args, **kwargs)

    def placeholders(self) -> list[Placeholder]:
        """The placeholders the value depends on."""
        found = []
        for leaf in jax.tree.leaves((self.args, self.kwargs), is_leaf=is_symbolic):
            if isinstance(leaf, Deferred):
                found += leaf.placeholders()
            elif isinstance(leaf, jax.ShapeDtypeStruct):
                found.append(leaf)
        return found

    def __repr__(self) -> str:
        name = getattr(self.function, "__name__", repr(self.function))
        return f"<deferred {name} of a placeholder>"


def is_symbolic(x: Any) -> bool:
    """Whether ``x`` is a placeholder spec or a value deferred on one."""
    return isinstance(x, Deferred | jax.ShapeDtypeStruct)


def _value(x: Any, values: dict[int, Any]) -> Any:
    if isinstance(x, Deferred):
        return x.evaluate(values)
    if isinstance(x, jax.ShapeDtypeStruct):
        if id(x) not in values:
            raise ValueError(
                f"A feature of the serving_input_receiver_fn depends on the placeholder {x}, "
                "which is not among its receiver_tensors; pass every placeholder the features "
                "use in receiver_tensors."
            )
        return values[id(x)]
    return x


def _dummy(spec: jax.ShapeDtypeStruct, size: int) -> np.ndarray:
    shape = tuple(size if d is None else d for d in spec.shape)
    if np.dtype(spec.dtype) == object:
        return np.full(shape, b"", dtype=object)
    return np.zeros(shape, spec.dtype)


def _unit_source(value: Deferred) -> jax.ShapeDtypeStruct | None:
    """The placeholder ``value`` only adds or drops size-1 dimensions of (``expand_dims``,
    ``squeeze``, ``reshape``), or None: found by evaluating it on two batch sizes."""
    sources = {id(p): p for p in value.placeholders()}
    if len(sources) != 1:
        return None
    (source,) = sources.values()
    for size in (2, 3):
        try:
            out = np.asarray(value.evaluate({id(source): _dummy(source, size)}))
        except Exception:  # noqa: BLE001 (any op: then it is not a reshape)
            return None
        src = _dummy(source, size)
        same = [d for d in out.shape if d != 1] == [d for d in src.shape if d != 1]
        if not same or out.size != src.size:
            return None
    return source


class ReceiverFeatures:
    """The features of a receiver computed from its tensors (the export calls it with
    ``{name: array}``); ``raw_features``: the same features as the receiver tensors they
    reshape (size-1 dimensions aside), or None when some feature is another computation.
    An Estimator whose host phase (feature columns) reads raw inputs takes those, as TF's
    feature columns read ``[batch]`` and ``[batch, 1]`` alike."""

    def __init__(self, features: Any, receiver_tensors: dict[str, Any]) -> None:
        self.features = features
        self.receiver_tensors = receiver_tensors
        raw = {}
        for key, value in features.items() if isinstance(features, dict) else ():
            source = _unit_source(value) if isinstance(value, Deferred) else value
            if not isinstance(source, jax.ShapeDtypeStruct):
                raw = None
                break
            raw[key] = source
        self.raw_features = raw or None

    def __call__(self, received: dict[str, Any]) -> Any:
        values = {id(spec): received[name] for name, spec in self.receiver_tensors.items()}
        return jax.tree.map(lambda x: _value(x, values), self.features, is_leaf=is_symbolic)


def receiver_function(features: Any, receiver_tensors: Any) -> Any:
    """``features`` as ``ServingInputReceiver`` takes them: unchanged when no value is
    deferred, else a :class:`ReceiverFeatures` of the receiver tensors (``{name: spec}``,
    or one spec, named ``input``)."""
    leaves = jax.tree.leaves(features, is_leaf=is_symbolic)
    if not any(isinstance(x, Deferred) for x in leaves):
        return features
    tensors = (
        receiver_tensors if isinstance(receiver_tensors, dict) else {"input": receiver_tensors}
    )
    return ReceiverFeatures(features, tensors)
