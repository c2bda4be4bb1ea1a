"""The names of the values the session loop always resolves for hooks
(``SessionRunArgs(fetches=...)``, ``LoggingTensorHook``'s tensors, the ``loss`` a
``NanTensorHook`` watches): the global step, the loss, and the first step whose loss was not
finite. A bottom-layer module, so that the engine and the hooks share the names without
either importing the other (see ``estimator.hooks.session_run_hook``)."""

__all__ = ["GLOBAL_STEP", "LOSS", "NON_FINITE_STEP"]

GLOBAL_STEP = "global_step"
LOSS = "loss"
NON_FINITE_STEP = "non_finite_step"
