"""Checks of the listeners given to ``Estimator.train`` (TF's messages).

The hooks and handlers given to a call are checked by ``estimator.handlers.events.check_hooks``
(a handler's event methods are part of that check).
"""

from __future__ import annotations

from estimator.hooks.checkpoint_saver import CheckpointSaverListener

__all__ = ["check_listeners"]


def check_listeners(listeners) -> list:
    """``listeners`` as a list; TypeError (TF's message) for a non-listener."""
    listeners = list(listeners or [])
    for listener in listeners:
        if not isinstance(listener, CheckpointSaverListener):
            raise TypeError(
                f"saving_listeners must be a list of CheckpointSaverListener, given: {listener}"
            )
    return listeners
