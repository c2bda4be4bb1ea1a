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
When an input ends while a handler still wants epochs (its ``wants_another_pass()`` says
so: :class:`~estimator.handlers.StoppingHandler` before ``max_epoch``), ``input_fn`` is called
again for the next pass (Gluon's one-pass ``DataLoader`` per epoch).

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

:class:`Dispatcher` is the loop above as an object (Keras's ``CallbackList``): built once
per ``train()``/``evaluate()``/``predict()`` call from its hooks and handlers, it owns their
order, the per-event lists, the stop request and the question "another pass?"; the
engine's loop calls it at fixed points and knows no hook or handler class.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable

from estimator.hooks.session_run_hook import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)

__all__ = [
    "BatchBegin",
    "BatchEnd",
    "Dispatcher",
    "EVENTS",
    "EpochBegin",
    "EpochEnd",
    "EventHandler",
    "TRAIN_PREFIX",
    "TrainBegin",
    "TrainEnd",
    "check_handler",
    "check_hooks",
    "order",
    "priority_of",
]

#: Training metrics are ``session.logs[TRAIN_PREFIX + name]`` (and fetchable by that name).
TRAIN_PREFIX = "train/"


class EventHandler(SessionRunHook):
    """The base of the event classes (Gluon's ``EventHandler``); a ``SessionRunHook``.

    Attributes:
      priority: where the handler runs in the loop's list (see :func:`order`): lower
        first; 0 by default, as for hooks.
    """

    priority: float = 0

    def wants_another_pass(self) -> bool:
        """Asked when the input ends: True to read it again (``input_fn`` is called anew)
        for another epoch. The default, False, lets the end of the input end training, as
        in TF."""
        return False


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


def check_hooks(hooks) -> list:
    """``hooks`` (hooks and handlers given to an ``Estimator`` method) as a list, each
    checked when attached: TypeError (TF's message) for anything not a
    ``SessionRunHook``, and each handler's event methods (:func:`check_handler`)."""
    hooks = list(hooks or [])
    for hook in hooks:
        if not isinstance(hook, SessionRunHook):
            raise TypeError(
                f"Hooks must be a SessionRunHook, given: {hook} (event handlers from "
                "estimator.handlers are SessionRunHooks too)."
            )
        check_handler(hook)
    return hooks


_NO_ARGS = SessionRunArgs(None)
_NO_RESULTS = SessionRunValues(None)
#: In a call list, the index of a handler's event (a hook's index is its place in the list).
_EVENT = -1


def _overrides(participant, name: str, base: type = SessionRunHook) -> bool:
    """Whether ``participant`` defines ``name`` beyond ``base``'s method that does nothing
    (such methods are not called: nothing observable changes, and it keeps the per-step
    host work small)."""
    method = getattr(type(participant), name, None)  # None: a mock's method is its own
    return method is not getattr(base, name) or name in vars(participant)


def _calls(participants: list, method: str, event: type) -> list:
    """``[(index, participant)]`` in list order: a hook's ``method`` with its index in the
    list, and a handler's ``event`` method with :data:`_EVENT`; one that is both comes
    twice, the hook method first."""
    calls = []
    for index, participant in enumerate(participants):
        if _overrides(participant, method):
            calls.append((index, participant))
        if isinstance(participant, event):
            calls.append((_EVENT, participant))
    return calls


def _fetches(hook, args):
    """``args.fetches`` of a hook's ``before_run`` result, checked."""
    if not isinstance(args, SessionRunArgs):
        raise TypeError(
            f"{type(hook).__name__}.before_run returned {args!r}; expected None or "
            "a SessionRunArgs. (A mock hook: MagicMock(wraps=SessionRunHook(), "
            "spec=SessionRunHook) returns None, as TF's own tests use it.)"
        )
    if args.feed_dict:
        raise ValueError(
            f"{type(hook).__name__}.before_run returned a feed_dict; feeding values "
            "into a step is not supported (there is no graph to feed)."
        )
    return args.fetches


class Dispatcher:
    """The hooks and handlers of one loop, called at the loop's fixed points (Keras's
    ``CallbackList``): the loop of this module's docstring as an object.

    Built once per ``train()``/``evaluate()``/``predict()`` call: each handler is checked
    (:func:`check_handler`), the list ordered (:func:`order`), and the calls of every
    event listed once, so a step costs one pass over the participants that take part in
    it. Hooks that keep ``SessionRunHook``'s empty ``before_run``/``after_run`` are left
    out of those passes.

    The loop calls, in this order: :meth:`begin`; :meth:`after_create_session` (the state
    exists); per step :meth:`epoch_begin` (when an epoch starts and a batch follows),
    :meth:`before_run`, the step, :meth:`after_run`, :meth:`epoch_end` (the epoch's last
    batch, or a stop); :meth:`end` when the loop ends normally.

    Args:
      participants: the hooks and handlers, in any order.
      training: whether the loop trains (``train_begin``/``train_end`` are called).

    Attributes:
      participants: the hooks and handlers in call order.
      epochs: whether some handler wants epoch events (the loop then looks for the
        input's epoch boundaries).
      sees_batch: whether some handler's ``batch_begin`` wants the batch before its step.
      sees_batch_end: whether some handler's ``batch_end`` is called (the loop then makes
        its keyword arguments).
      epoch_open: whether an epoch has begun and not ended.
      stop_requested: whether a hook (``run_context.request_stop()``) or a handler (True
        from ``batch_end``/``epoch_end``) asked the loop to stop after this step.
      reads_passes: whether some handler may want another pass over the input
        (:meth:`another_pass`).

    Raises:
      TypeError: a handler :func:`check_handler` refuses.
    """

    def __init__(self, participants, *, training: bool = False) -> None:
        participants = list(participants)
        for participant in participants:
            check_handler(participant)
        self.participants = order(participants)
        ordered = self.participants
        self.training = training
        self._before = _calls(ordered, "before_run", BatchBegin)
        self._after = _calls(ordered, "after_run", BatchEnd)
        self._epoch_begin = [h for h in ordered if isinstance(h, EpochBegin)]
        self._epoch_end = [h for h in ordered if isinstance(h, EpochEnd)]
        self._train_end = {id(h) for h in ordered if isinstance(h, TrainEnd)} if training else ()
        self._passes = [
            h
            for h in ordered
            if isinstance(h, EventHandler) and _overrides(h, "wants_another_pass", EventHandler)
        ]
        self.epochs = bool(self._epoch_begin or self._epoch_end)
        self.sees_batch = any(index == _EVENT for index, _ in self._before)
        self.sees_batch_end = any(index == _EVENT for index, _ in self._after)
        self.reads_passes = bool(self._passes)
        self.epoch_open = False
        self.stop_requested = False
        self._context = self._session = None  # the step's, set by before_run

    def begin(self) -> None:
        """Every participant's ``begin()`` (``model_fn`` has been traced)."""
        for participant in self.participants:
            participant.begin()

    def after_create_session(self, session) -> None:
        """Every participant's ``after_create_session(session, None)`` and, in training,
        each handler's ``train_begin(session)`` in the same pass."""
        for participant in self.participants:
            participant.after_create_session(session, None)
            if self.training and isinstance(participant, TrainBegin):
                participant.train_begin(session)

    def epoch_begin(self, session) -> None:
        """Opens an epoch: the handlers' ``epoch_begin`` (nothing if none wants epochs)."""
        if not self.epochs:
            return
        for handler in self._epoch_begin:
            handler.epoch_begin(session)
        self.epoch_open = True

    def before_run(self, session, batch=None) -> dict | None:
        """Before a step: each hook's ``before_run`` and handler's ``batch_begin`` (with
        ``batch``), in list order. Returns ``{index in participants: fetches}`` of the hooks
        that asked for values, or None.

        Raises:
          TypeError, ValueError: a ``before_run`` result that is not a ``SessionRunArgs``,
            or one with a ``feed_dict``.
        """
        context = self._context = SessionRunContext(_NO_ARGS, session)
        self._session = session
        requests = None
        for index, participant in self._before:
            if index < 0:  # _EVENT
                participant.batch_begin(session, batch=batch)
                continue
            args = participant.before_run(context)
            if args is not None:
                if requests is None:
                    requests = {}
                requests[index] = _fetches(participant, args)
        return requests

    def after_run(self, results: dict, batch_end: dict | None) -> None:
        """After the step: each hook's ``after_run`` with its values from ``results``
        (``{index: value}`` for :meth:`before_run`'s requests) and handler's
        ``batch_end(**batch_end)``, in list order; records a stop request."""
        context, no_results = self._context, _NO_RESULTS
        stop = False
        for index, participant in self._after:
            if index < 0:  # _EVENT
                stop = bool(participant.batch_end(self._session, **batch_end)) or stop
            elif index in results:
                participant.after_run(context, SessionRunValues(results[index]))
            else:
                participant.after_run(context, no_results)
        if stop or context.stop_requested:
            self.stop_requested = True

    def epoch_end(self, session) -> None:
        """Ends the open epoch (also one a stop cut short): the handlers' ``epoch_end``
        (True from any stops training); ``session.epoch`` counts it."""
        if not self.epoch_open:
            return
        stop = False
        for handler in self._epoch_end:
            stop = bool(handler.epoch_end(session)) or stop
        session.epoch += 1
        self.epoch_open = False
        self.stop_requested = self.stop_requested or stop

    def end(self, session) -> None:
        """The loop ended normally: each participant's ``end(session)`` and, in training,
        each handler's ``train_end(session)``, in one pass."""
        for participant in self.participants:
            participant.end(session)
            if id(participant) in self._train_end:
                participant.train_end(session)

    def another_pass(self) -> bool:
        """Whether some handler wants the input read again (its ``wants_another_pass``)."""
        return any(handler.wants_another_pass() for handler in self._passes)
