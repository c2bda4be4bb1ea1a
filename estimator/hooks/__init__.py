"""Session run hooks: TF's ``SessionRunHook`` protocol and the hooks TF ships.

The layer just above the base (``docs/architecture.md``): hooks see a session
(``estimator.engine.session.Session``) through the protocol and import nothing of the model
or the engine.

* ``session_run_hook`` — the protocol (``begin``, ``after_create_session``,
  ``before_run``, ``after_run``, ``end``) and its argument types.
* ``timers`` — ``SecondOrStepTimer`` and the multi-process ``SyncedTimer``.
* ``basic`` — TF's basic hooks (``StopAtStepHook``, ``LoggingTensorHook``,
  ``NanTensorHook``, ``StepCounterHook``, ``FinalOpsHook``, ...).
* ``checkpoint_saver`` — ``CheckpointSaverHook`` and ``CheckpointSaverListener``.
* ``summary`` — ``SummarySaverHook`` (the summary ops are ``estimator.summary``'s).
* ``early_stopping`` — the hook of ``estimator.early_stopping``'s ``stop_if_*_hook`` functions
  and the per-estimator channel through which evaluators announce evaluations to it.
* ``progress``, ``profiler`` — a progress bar and a JAX profiler trace.
* ``feed_fn`` — ``FeedFnHook``, TF's name, refused with the alternative (no feeds here).
* ``checks`` — argument checks for listener lists (internal).

Event handlers (``estimator.handlers``, Gluon's protocol) are hooks too and share the list
and the loop.
"""

from estimator.hooks.basic import FinalOpsHook as FinalOpsHook
from estimator.hooks.basic import GlobalStepWaiterHook as GlobalStepWaiterHook
from estimator.hooks.basic import LoggingTensorHook as LoggingTensorHook
from estimator.hooks.basic import NanLossDuringTrainingError as NanLossDuringTrainingError
from estimator.hooks.basic import NanTensorHook as NanTensorHook
from estimator.hooks.basic import StepCounterHook as StepCounterHook
from estimator.hooks.basic import StopAtStepHook as StopAtStepHook
from estimator.hooks.checkpoint_saver import CheckpointSaverHook as CheckpointSaverHook
from estimator.hooks.checkpoint_saver import CheckpointSaverListener as CheckpointSaverListener
from estimator.hooks.feed_fn import FeedFnHook as FeedFnHook
from estimator.hooks.profiler import ProfilerHook as ProfilerHook
from estimator.hooks.progress import ProgressBarHook as ProgressBarHook
from estimator.hooks.session_run_hook import SessionRunArgs as SessionRunArgs
from estimator.hooks.session_run_hook import SessionRunContext as SessionRunContext
from estimator.hooks.session_run_hook import SessionRunHook as SessionRunHook
from estimator.hooks.session_run_hook import SessionRunValues as SessionRunValues
from estimator.hooks.summary import SummarySaverHook as SummarySaverHook
from estimator.hooks.timers import SecondOrStepTimer as SecondOrStepTimer

__all__ = [
    "CheckpointSaverHook",
    "CheckpointSaverListener",
    "FeedFnHook",
    "FinalOpsHook",
    "GlobalStepWaiterHook",
    "LoggingTensorHook",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "ProfilerHook",
    "ProgressBarHook",
    "SecondOrStepTimer",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "StepCounterHook",
    "StopAtStepHook",
    "SummarySaverHook",
]
