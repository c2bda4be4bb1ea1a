"""The event-handler protocol (MXNet Gluon's Fit API) on the Estimator's loop.

A handler inherits the event classes of the events it needs and defines their methods;
each method takes the loop's session first (Gluon passes its ``estimator`` there) and
keyword arguments::

    class PrintLoss(est.handlers.BatchEnd):
        def batch_end(self, session, *, loss, **kwargs):
            print(session.global_step, float(loss))   # a fetch: one transfer

    estimator.train(input_fn, hooks=[PrintLoss(), est.StopAtStepHook(last_step=100)])

Every handler is a ``SessionRunHook`` (whose hook methods do nothing), so handlers and
hooks share one list (``train(hooks=...)``, ``evaluate(hooks=...)``,
``EstimatorSpec.training_hooks``, ``InMemoryEvaluatorHook(hooks=...)``) and one loop, and a
``SessionRunHook`` goes wherever handlers go. The list runs in the order of
:func:`order`: by ``priority``, lower first, list order among equals (Gluon's rule;
``MetricHandler`` and ``ValidationHandler`` are at -1000 so that everything else reads
this step's metrics, ``LoggingHandler`` at +inf so that it logs them; hooks and other
handlers are at 0, so TF's hooks keep TF's order). The loop, over that one list::

    for each: hook.begin()
    the state is created or restored
    for each: hook.after_create_session(session, None); handler.train_begin(session)
    for each epoch:
      for each: handler.epoch_begin(session)
      for each batch of the epoch:
        for each: hook.before_run(run_context); handler.batch_begin(session, batch=batch)
        the step (RunConfig.steps_per_execution may run it together with later ones)
        for each: hook.after_run(run_context, values)
                  handler.batch_end(session, batch=, label=, outputs=, loss=)
        a True from batch_end, or run_context.request_stop(), ends the epoch here
      for each: handler.epoch_end(session)          # also for an epoch a stop cut short
      a True from epoch_end stops training
    for each: hook.end(session); handler.train_end(session)

``train_begin``/``train_end`` happen in ``train()`` only; ``evaluate()`` and ``predict()``
run their input as the epochs it marks (one, usually). ``end``/``train_end`` are skipped
when an exception ends the loop (TF's rule for ``end``).

Epochs come from the input: ``numpy_input_fn`` and ``estimator.compat.v1.data`` pipelines
with ``repeat(n)`` mark each pass over their data, and the end of any input ends an epoch.
An input marks an epoch by setting ``ends_epoch = True`` on its iterator right before
``__next__`` returns the epoch's last batch (the protocol ``estimator.engine.epochs`` reads).
When an input ends while a :class:`~estimator.handlers.StoppingHandler` still wants epochs,
``input_fn`` is called again for the next pass (Gluon's one-pass ``DataLoader`` per epoch).

``batch_end``'s ``outputs`` (the step's named values: ``"loss"``, ``estimator.identity``
names, summaries) and ``loss`` are lazy: nothing leaves the device, and queued steps are
not run, unless the handler reads one (``float(loss)``, ``np.asarray(outputs["x"])``).
Reading one runs the steps queued up to this batch (``steps_per_execution`` then fuses
fewer steps) and transfers it; read it inside ``batch_end`` (afterwards later steps have
replaced it). ``batch`` is ``(features, labels)`` as fed to the step, ``label`` its labels.

A handler is checked when it is attached (``train()``/``evaluate()`` called, or
:func:`check_handler`), not when an event first reaches it: each event method must accept
the session and the event's keyword arguments, and a method of an event the handler does
not inherit (which would never be called) is refused.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable

from estimator.hooks.session_run_hook import SessionRunHook

__all__ = [
    "BatchBegin",
    "BatchEnd",
    "EVENTS",
    "EpochBegin",
    "EpochEnd",
    "EventHandler",
    "TrainBegin",
    "TrainEnd",
    "check_handler",
    "order",
    "priority_of",
]


class EventHandler(SessionRunHook):
    """The base of the event classes (Gluon's ``EventHandler``); a ``SessionRunHook``.

    Attributes:
      priority: where the handler runs in the loop's list (see :func:`order`): lower
        first; 0 by default, as for hooks.
    """

    priority: float = 0


class TrainBegin(EventHandler):
    """Called once, after the state is created or restored (``train()`` only)."""

    def train_begin(self, session, *args, **kwargs) -> None:
        """``session``: the loop's session (``global_step``, ``model_dir``, ``logs``, ...)."""


class TrainEnd(EventHandler):
    """Called once when training ends normally (a stop, the end of the input)."""

    def train_end(self, session, *args, **kwargs) -> None:
        """``session``: the loop's session."""


class EpochBegin(EventHandler):
    """Called before the first batch of each epoch."""

    def epoch_begin(self, session, *args, **kwargs) -> None:
        """``session``: the loop's session (``session.epoch``: this epoch's index)."""


class EpochEnd(EventHandler):
    """Called after the last batch of each epoch (or the batch a stop cut it at)."""

    def epoch_end(self, session, *args, **kwargs) -> bool:
        """Returns True to stop training."""
        return False


class BatchBegin(EventHandler):
    """Called before each step."""

    def batch_begin(self, session, *args, **kwargs) -> None:
        """Keyword arguments: ``batch`` (``(features, labels)`` as fed to the step)."""


class BatchEnd(EventHandler):
    """Called after each step, every step of a fused call (``steps_per_execution``)."""

    def batch_end(self, session, *args, **kwargs) -> bool:
        """Keyword arguments: ``batch``, ``label``, ``outputs`` (lazy mapping of the
        step's named values), ``loss`` (lazy scalar). Returns True to stop training after
        this step."""
        return False


#: ``(event class, method, keyword arguments the loop passes)``, in the loop's order.
EVENTS: tuple[tuple[type, str, tuple[str, ...]], ...] = (
    (TrainBegin, "train_begin", ()),
    (EpochBegin, "epoch_begin", ()),
    (BatchBegin, "batch_begin", ("batch",)),
    (BatchEnd, "batch_end", ("batch", "label", "outputs", "loss")),
    (EpochEnd, "epoch_end", ()),
    (TrainEnd, "train_end", ()),
)


def priority_of(participant) -> float:
    """A hook's or handler's ``priority`` (0 when it has none)."""
    return getattr(participant, "priority", 0)


def order(participants: Iterable) -> list:
    """The hooks and handlers in the order the loop calls them: by ``priority``, lower
    first, keeping the given order among equal priorities (Gluon's
    ``event_handlers.sort(key=priority)``, a stable sort)."""
    return sorted(participants, key=priority_of)


def check_handler(handler) -> None:
    """Checks an event handler when it is attached (ignite's habit): its ``priority`` is a
    number, each event method it inherits accepts ``(session, **the event's keywords)``,
    and it defines no method of an event it does not inherit. Not a handler: nothing.

    Raises:
      TypeError: naming the handler, the method, its signature and the fix.
    """
    if not isinstance(handler, EventHandler):
        return
    name = type(handler).__name__
    priority = priority_of(handler)
    if isinstance(priority, bool) or not isinstance(priority, (int, float)):
        raise TypeError(f"{name}.priority must be a number (lower runs first), got {priority!r}.")
    if math.isnan(priority):
        raise TypeError(f"{name}.priority is NaN; give a number (lower runs first).")
    for event, method_name, keywords in EVENTS:
        method = getattr(handler, method_name, None)
        if not isinstance(handler, event):
            if callable(method):
                raise TypeError(
                    f"{name} defines {method_name}() but does not inherit "
                    f"estimator.handlers.{event.__name__}, so the loop would never call it: "
                    f"declare it, e.g. class {name}(..., {event.__name__})."
                )
            continue
        try:
            signature = inspect.signature(method)
        except (TypeError, ValueError):
            continue  # a builtin or C callable: nothing to check
        try:
            signature.bind(None, **dict.fromkeys(keywords))
        except TypeError as err:
            wanted = ", ".join(["session", *(f"{k}=..." for k in keywords)])
            raise TypeError(
                f"{name}.{method_name}{signature} cannot be called as "
                f"{method_name}({wanted}) ({err}). Define it as "
                f"`def {method_name}(self, session, **kwargs)` (or name the keywords it "
                "uses and end with **kwargs)."
            ) from None
