"""Event handlers with epochs and an order (MXNet Gluon's Fit API), on the Estimator's loop.

::

    import estimator as est
    from estimator import handlers

    estimator = est.Estimator(model_fn, model_dir, est.RunConfig(train_metrics_steps=100))
    validation = handlers.ValidationHandler(eval_input_fn, epoch_period=1)
    estimator.train(
        est.inputs.numpy_input_fn({"x": x}, y, batch_size=64, num_epochs=None, shuffle=True),
        hooks=[
            handlers.StoppingHandler(max_epoch=10),
            validation,
            handlers.EarlyStoppingHandler("validation/accuracy", patience=2),
            handlers.LoggingHandler(log_interval=50),
        ],
    )

The hooks layer: handlers see the loop through its session, as hooks do, and import
nothing of the model or the engine.

* ``events`` — the protocol: ``TrainBegin``, ``EpochBegin``, ``BatchBegin``, ``BatchEnd``,
  ``EpochEnd``, ``TrainEnd``, the order (:func:`order`), the checks made when a handler is
  attached; the module docstring is the loop as pseudo-code, and its ``Dispatcher`` the
  object the engine's loop calls (hooks and handlers in one list).
* ``stopping`` — ``StoppingHandler``, ``EarlyStoppingHandler``.
* ``metric`` — ``MetricHandler``: the training metrics (``RunConfig.train_metrics_steps``).
* ``validation`` — ``ValidationHandler``: evaluation of the live state.
* ``logging_handler`` — ``LoggingHandler``; ``checkpoint`` — ``CheckpointHandler``.
"""

from estimator.handlers.checkpoint import CheckpointHandler as CheckpointHandler
from estimator.handlers.events import TRAIN_PREFIX as TRAIN_PREFIX
from estimator.handlers.events import BatchBegin as BatchBegin
from estimator.handlers.events import BatchEnd as BatchEnd
from estimator.handlers.events import EpochBegin as EpochBegin
from estimator.handlers.events import EpochEnd as EpochEnd
from estimator.handlers.events import EventHandler as EventHandler
from estimator.handlers.events import TrainBegin as TrainBegin
from estimator.handlers.events import TrainEnd as TrainEnd
from estimator.handlers.events import check_handler as check_handler
from estimator.handlers.events import order as order
from estimator.handlers.logging_handler import LoggingHandler as LoggingHandler
from estimator.handlers.metric import MetricHandler as MetricHandler
from estimator.handlers.stopping import EarlyStoppingHandler as EarlyStoppingHandler
from estimator.handlers.stopping import StoppingHandler as StoppingHandler
from estimator.handlers.validation import VALIDATION_PREFIX as VALIDATION_PREFIX
from estimator.handlers.validation import ValidationHandler as ValidationHandler

__all__ = [
    "BatchBegin",
    "BatchEnd",
    "CheckpointHandler",
    "EarlyStoppingHandler",
    "EpochBegin",
    "EpochEnd",
    "EventHandler",
    "LoggingHandler",
    "MetricHandler",
    "StoppingHandler",
    "TRAIN_PREFIX",
    "TrainBegin",
    "TrainEnd",
    "VALIDATION_PREFIX",
    "ValidationHandler",
    "check_handler",
    "order",
]
