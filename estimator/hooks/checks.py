"""Checks of the hooks and listeners given to ``Estimator`` methods (TF's messages)."""

from __future__ import annotations

from estimator.hooks.checkpoint_saver import CheckpointSaverListener
from estimator.hooks.session_run_hook import SessionRunHook

__all__ = ["check_hooks", "check_listeners"]


def check_hooks(hooks) -> list:
    """``hooks`` as a list; TypeError (TF's message) for anything not a SessionRunHook.

    Event handlers (``estimator.handlers``) are SessionRunHooks; each is checked as it is
    attached (``estimator.handlers.check_handler``: its event methods' signatures).
    """
    from estimator.handlers.events import check_handler  # the package imports this module

    hooks = list(hooks or [])
    for hook in hooks:
        if not isinstance(hook, SessionRunHook):
            raise TypeError(
                f"Hooks must be a SessionRunHook, given: {hook} (event handlers from "
                "estimator.handlers are SessionRunHooks too)."
            )
        check_handler(hook)
    return hooks


def check_listeners(listeners) -> list:
    """``listeners`` as a list; TypeError (TF's message) for a non-listener."""
    listeners = list(listeners or [])
    for listener in listeners:
        if not isinstance(listener, CheckpointSaverListener):
            raise TypeError(
                f"saving_listeners must be a list of CheckpointSaverListener, given: {listener}"
            )
    return listeners
