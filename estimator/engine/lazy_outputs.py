"""A step's values for ``batch_end`` handlers, fetched only when read.

``batch_end`` is called after every step, also the steps that ``steps_per_execution`` queues
to run several in one device call. Its ``outputs`` and ``loss`` must not force those steps
to run or their values to the host: they are lazy. Reading one runs the steps queued up to
this batch (the queue holds no later batch yet) and gives the device array; converting it
(``float(loss)``, ``np.asarray``) transfers it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import jax
import numpy as np

from estimator.engine.session import not_fetched

__all__ = ["LazyValue", "StepOutputs"]


class StepOutputs(Mapping):
    """The named values of step ``step`` of the loop (``"loss"``, ``estimator.identity``
    names, summaries), as device arrays, computed and read on access.

    Args:
      session: the loop's ``Session``.
      step: the number of steps run once this step has run (its position in the loop).

    Raises (on access):
      RuntimeError: the step's values were replaced by a later step's (read them within
        ``batch_end``).
    """

    def __init__(self, session, step: int) -> None:
        self._session = session
        self._step = step

    def _outputs(self) -> dict:
        runner = self._session.runner
        runner.flush()
        if runner.steps_run != self._step:
            raise RuntimeError(
                f"The values of step {self._step} of this loop were replaced by those of step "
                f"{runner.steps_run}: read a step's outputs or loss inside its batch_end, or "
                "keep a copy there (np.asarray(loss))."
            )
        return runner.outputs

    def __getitem__(self, name: str) -> jax.Array:
        outputs = self._outputs()
        if name not in outputs and name in self._session.apart:
            raise not_fetched(name)
        return outputs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._session.output_names)

    def __len__(self) -> int:
        return len(self._session.output_names)

    def __contains__(self, name) -> bool:
        return name in self._session.output_names


class LazyValue:
    """One value of :class:`StepOutputs`, read on use: ``float(v)``, ``int(v)``,
    ``np.asarray(v)``, ``jnp`` operations, formatting, comparisons, ``v.item()``; ``v.value``
    is the device array."""

    def __init__(self, outputs: StepOutputs, name: str) -> None:
        self._outputs = outputs
        self._name = name

    @property
    def value(self) -> jax.Array:
        return self._outputs[self._name]

    def item(self):
        return np.asarray(self.value).item()

    def __float__(self) -> float:
        return float(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.value, dtype=dtype)

    def __jax_array__(self) -> jax.Array:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.item(), spec)

    def __repr__(self) -> str:
        return f"LazyValue({self._name!r})"

    def __lt__(self, other):
        return self.item() < other

    def __le__(self, other):
        return self.item() <= other

    def __gt__(self, other):
        return self.item() > other

    def __ge__(self, other):
        return self.item() >= other

    def __getattr__(self, name: str):  # shape, dtype, ...
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.value, name)
