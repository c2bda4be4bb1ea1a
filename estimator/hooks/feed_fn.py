"""``FeedFnHook``: TF's name, for a feature that has no JAX counterpart."""

from __future__ import annotations

from collections.abc import Callable

from estimator.hooks.session_run_hook import SessionRunHook

__all__ = ["FeedFnHook"]


class FeedFnHook(SessionRunHook):
    """``tf.estimator.FeedFnHook``: feeds ``feed_fn()``'s values into each step.

    TF's hook returns ``SessionRunArgs(fetches=None, feed_dict=feed_fn())`` so a graph's
    placeholders get values per step. A compiled JAX step has no placeholders: every value
    it uses arrives in the batch from ``input_fn``. The name exists so ported code fails at
    once with the way out.

    Raises:
      ValueError: always, naming the alternative.
    """

    def __init__(self, feed_fn: Callable) -> None:
        raise ValueError(
            f"FeedFnHook({feed_fn!r}) feeds placeholders through a feed_dict, and a compiled "
            "JAX step has no placeholders. Put the values into what input_fn returns (a "
            "feature, or a generator of batches: estimator.inputs reads any iterable of "
            "(features, labels)), or read them inside model_fn from params."
        )
