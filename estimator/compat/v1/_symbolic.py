"""Gradients as ``compute_gradients`` returns them: symbolic until the Estimator's step.

TF 1.x code often edits gradients between ``compute_gradients`` and ``apply_gradients``::

    grads_and_vars = optimizer.compute_gradients(loss)
    grads, variables = zip(*grads_and_vars)
    grads, _ = tf.clip_by_global_norm(grads, 5.0)
    train_op = optimizer.apply_gradients(zip(grads, variables), global_step=global_step)

Here the Estimator differentiates the loss itself, after ``model_fn`` returns, so inside
``model_fn`` a gradient is a :class:`SymbolicGradient`: the name of the variable plus the
edits made to it (``clip_by_value``, ``clip_by_norm``, ``clip_by_global_norm``, scaling by
a number). ``apply_gradients`` turns them into the first part of the ``train_op``, which
replays the edits on the real gradients in the step. A symbolic gradient cannot be used as
an array (a summary of it, say): that raises a ``TypeError`` saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp

__all__ = ["Symbolic", "SymbolicGradient", "SymbolicNorm", "is_symbolic", "evaluate"]

_AS_ARRAY = (
    "{what} is symbolic here: the Estimator computes gradients after model_fn returns, so "
    "inside model_fn they can be clipped (tf.clip_by_value, tf.clip_by_norm, "
    "tf.clip_by_global_norm), scaled by a number and passed to apply_gradients, but not used "
    "as arrays (summaries, arithmetic with tensors). Log gradient norms with a hook on the "
    "checkpoint's variables instead."
)


class Symbolic:
    """Base of values known only inside the train step (internal)."""

    _what = "This value"

    def __array__(self, *args, **kwargs):
        raise TypeError(_AS_ARRAY.format(what=self._what))

    def __jax_array__(self):
        raise TypeError(_AS_ARRAY.format(what=self._what))

    def __bool__(self):
        raise TypeError(_AS_ARRAY.format(what=self._what))


Step = Callable[[Any, Callable[["SymbolicGradient"], Any]], Any]


class SymbolicGradient(Symbolic):
    """The gradient of the loss with respect to variable ``source``, then ``steps``.

    Attributes:
      source: the variable's full name (``"dense/kernel"``).
      steps: functions ``(array, value_of) -> array`` applied in order; ``value_of`` gives
        the value of another symbolic gradient (for global-norm clipping).
      loss_key: identifies the loss it is the gradient of (within one ``model_fn`` run).
    """

    _what = "A gradient from compute_gradients/tf.gradients"

    __slots__ = ("source", "steps", "loss_key")

    def __init__(self, source: str, steps: tuple[Step, ...] = (), loss_key: int | None = None):
        self.source = source
        self.steps = steps
        self.loss_key = loss_key

    def then(self, step: Step) -> SymbolicGradient:
        """This gradient followed by ``step``."""
        return SymbolicGradient(self.source, self.steps + (step,), self.loss_key)

    def __mul__(self, other):
        if isinstance(other, Symbolic):
            return NotImplemented
        return self.then(lambda g, _: g * other)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, Symbolic):
            return NotImplemented
        return self.then(lambda g, _: g / other)

    def __neg__(self):
        return self.then(lambda g, _: -g)

    def __repr__(self) -> str:
        return f"SymbolicGradient({self.source!r}, {len(self.steps)} step(s))"


class SymbolicNorm(Symbolic):
    """The global norm of several symbolic gradients (``tf.global_norm``'s result)."""

    _what = "A gradient norm (tf.global_norm / tf.clip_by_global_norm)"

    def __init__(self, members: Sequence[SymbolicGradient | None]) -> None:
        self.members = tuple(m for m in members if m is not None)

    def value(self, value_of: Callable[[SymbolicGradient], Any]):
        """``sqrt(Σ ||g||²)`` over the members, in the step."""
        return jnp.sqrt(sum(jnp.sum(jnp.square(value_of(m))) for m in self.members))


def is_symbolic(*values: Any) -> bool:
    """Whether any value (or list element) is symbolic."""
    for value in values:
        if isinstance(value, Symbolic):
            return True
        if isinstance(value, (list, tuple)) and is_symbolic(*value):
            return True
    return False


def evaluate(gradients: Sequence[SymbolicGradient], grads: dict[str, Any]) -> list[Any]:
    """The values of ``gradients`` given the real gradients ``{variable name: array}``."""
    memo: dict[int, Any] = {}

    def value_of(symbol: SymbolicGradient):
        key = id(symbol)
        if key not in memo:
            x = grads[symbol.source]
            for step in symbol.steps:
                x = step(x, value_of)
            memo[key] = x
        return memo[key]

    return [value_of(g) for g in gradients]
