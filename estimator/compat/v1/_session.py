"""What of TF 1's graph and session an Estimator program's epilogue needs: ``tf.Session``,
``tf.get_default_graph``, ``tf.reset_default_graph``.

An Estimator program builds no graph and runs no session here (the Estimator traces
``model_fn`` and runs the compiled steps). Programs still end in TF 1 idioms such as::

    tf.reset_default_graph()
    with tf.Session() as sess:
        writer = tf.summary.FileWriter(logdir, sess.graph)
        writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="acc", simple_value=a)]), step)
        writer.close()

So the default graph is one empty :class:`Graph` (``reset_default_graph`` leaves it so),
and a :class:`Session` evaluates what it is given: values are already computed, so
``run(fetches)`` returns them as NumPy values in the same structure. A ``feed_dict`` (a
graph's placeholders) has no meaning here and is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np

__all__ = ["Graph", "Session", "get_default_graph", "reset_default_graph"]


class Graph:
    """The default graph: empty (``get_operations()`` is ``[]``); TensorBoard's graph tab
    has nothing to show (``FileWriter(logdir, graph)`` writes no graph)."""

    def get_operations(self) -> list:
        return []

    def finalize(self) -> None:
        """Nothing to freeze."""

    @property
    def finalized(self) -> bool:
        return False

    @contextlib.contextmanager
    def as_default(self) -> Iterator[Graph]:
        yield self


_DEFAULT = Graph()


def get_default_graph() -> Graph:
    """``tf.get_default_graph()``: the (empty) default :class:`Graph`."""
    return _DEFAULT


def reset_default_graph() -> None:
    """``tf.reset_default_graph()``: nothing to clear (there is no graph)."""


def _fetch(value: Any) -> Any:
    if value is None or type(value).__name__ == "NoOp":  # a train op, tf.no_op(), tf.group()
        return None
    if isinstance(value, jax.Array | np.ndarray | np.generic | int | float | bool):
        return np.asarray(value)[()] if np.ndim(value) == 0 else np.asarray(value)
    if isinstance(value, bytes | str):
        return value.encode() if isinstance(value, str) else value
    raise TypeError(
        f"Session.run cannot evaluate {value!r}: only values (arrays, numbers) can be "
        "fetched here; there is no graph of operations to run. Compute it in Python, or in "
        "model_fn and read it from Estimator.evaluate/predict."
    )


class Session:
    """``tf.Session`` / ``tf.compat.v1.Session`` for a program's epilogue (see the module
    docstring).

    Args:
      target, config: accepted (no runtime to connect to or configure).
      graph: accepted; :attr:`graph` is always the default :class:`Graph`.
    """

    def __init__(self, target: str = "", graph: Graph | None = None, config: Any = None) -> None:
        del target, graph, config
        self._closed = False

    @property
    def graph(self) -> Graph:
        """The default :class:`Graph` (what ``FileWriter(logdir, sess.graph)`` takes)."""
        return _DEFAULT

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata=None):
        """``fetches`` (a value, or a list/tuple/dict of them) as NumPy values.

        Raises:
          ValueError: a ``feed_dict``.
          RuntimeError: a closed session (TF's message).
          TypeError: something that is not a value (e.g. a function).
        """
        del options, run_metadata
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        if feed_dict:
            raise ValueError(
                "Session.run(feed_dict=...) is not supported: there are no placeholders to "
                "feed. Call the computation with the values, or use Estimator.predict."
            )
        return jax.tree.map(_fetch, fetches, is_leaf=lambda x: type(x).__name__ == "NoOp")

    def close(self) -> None:
        self._closed = True

    def as_default(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext(self)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
