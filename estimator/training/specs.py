"""``TrainSpec`` and ``EvalSpec``: what ``train_and_evaluate`` trains and evaluates on
(``tf.estimator.TrainSpec``/``EvalSpec``), validated with TF 2.15's messages."""

from __future__ import annotations

import collections
from collections.abc import Callable

from estimator.hooks.checkpoint_saver import CheckpointSaverListener
from estimator.hooks.session_run_hook import SessionRunHook
from estimator.training.exporter import Exporter

__all__ = ["TrainSpec", "EvalSpec"]


# ----- validation (TF 2.15's messages) ----------------------------------------------------
def _validate_input_fn(input_fn) -> None:
    if not callable(input_fn):
        raise TypeError(f"`input_fn` must be callable, given: {input_fn}")


def _validate_hooks(hooks) -> tuple:
    hooks = tuple(hooks or [])
    for hook in hooks:
        if not isinstance(hook, SessionRunHook):
            raise TypeError(f"All hooks must be `SessionRunHook` instances, given: {hook}")
    return hooks


def _validate_saving_listeners(saving_listeners) -> tuple:
    saving_listeners = tuple(saving_listeners or [])
    for listener in saving_listeners:
        if not isinstance(listener, CheckpointSaverListener):
            raise TypeError(
                "All saving_listeners must be `CheckpointSaverListener` instances, given: "
                f"{listener}"
            )
    return saving_listeners


def _validate_exporters(exporters) -> tuple:
    if not exporters:
        return ()
    if isinstance(exporters, Exporter):
        exporters = [exporters]
    names: list[str] = []
    try:
        for exporter in exporters:
            if not isinstance(exporter, Exporter):
                raise TypeError
            if not exporter.name:
                raise ValueError(
                    "An Exporter cannot have a name that is `None` or empty. All exporter "
                    f"names: {[e.name for e in exporters]}"
                )
            if not isinstance(exporter.name, str):
                raise ValueError(
                    f"An Exporter must have a string name. Given: {type(exporter.name)}"
                )
            if exporter.name in names:
                raise ValueError(
                    "`exporters` must have unique names. Such a name cannot be `None`. All "
                    f"exporter names: {[e.name for e in exporters]}"
                )
            names.append(exporter.name)
    except TypeError:
        raise TypeError(
            f"`exporters` must be an Exporter, an iterable of Exporter, or `None`, found "
            f"{exporters}."
        ) from None
    return tuple(exporters)


class TrainSpec(
    collections.namedtuple("TrainSpec", ["input_fn", "max_steps", "hooks", "saving_listeners"])
):
    """The training part of ``train_and_evaluate`` (``tf.estimator.TrainSpec``).

    Args:
      input_fn: the training input, as for ``Estimator.train``.
      max_steps: the global step to train to; None trains until the input ends (or
        forever: ``train_and_evaluate``'s only reliable stop is ``max_steps``).
      hooks: ``SessionRunHook`` objects for training.
      saving_listeners: ``CheckpointSaverListener`` objects for training.

    Raises:
      TypeError: "`input_fn` must be callable, given: ...", "All hooks must be
        `SessionRunHook` instances, given: ...", "All saving_listeners must be
        `CheckpointSaverListener` instances, given: ...".
      ValueError: "Must specify max_steps > 0, given: ...".
    """

    def __new__(
        cls, input_fn: Callable, max_steps: int | None = None, hooks=None, saving_listeners=None
    ):
        _validate_input_fn(input_fn)
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        hooks = _validate_hooks(hooks)
        saving_listeners = _validate_saving_listeners(saving_listeners)
        return super().__new__(cls, input_fn, max_steps, hooks, saving_listeners)


class EvalSpec(
    collections.namedtuple(
        "EvalSpec",
        [
            "input_fn",
            "steps",
            "name",
            "hooks",
            "exporters",
            "start_delay_secs",
            "throttle_secs",
            "every_n_steps",
        ],
    )
):
    """The evaluation and export part of ``train_and_evaluate`` (``tf.estimator.EvalSpec``).

    Args:
      input_fn: the evaluation input, as for ``Estimator.evaluate``.
      steps: batches per evaluation; None until the input ends.
      name: evaluation name; results go to ``estimator.eval_dir(name)``.
      hooks: ``SessionRunHook`` objects for each evaluation.
      exporters: an ``Exporter`` or an iterable of them (unique names), called after each
        evaluation.
      start_delay_secs: seconds an evaluator task waits before its first evaluation
        (unused in local mode, as in TF).
      throttle_secs: do not evaluate again unless the last evaluation started at least this
        many seconds ago (evaluations happen only on new checkpoints).
      every_n_steps: keyword-only, beyond TF; evaluate in process every this many global
        steps from the live train state, instead of after checkpoints (no checkpoint is
        read; ``throttle_secs`` does not apply). With exporters, a checkpoint is saved at
        each evaluated step to export from. Applies to local training (and a ``master``
        task); an ``evaluator`` task evaluates checkpoints. None (default): TF's
        checkpoint-driven evaluation.

    Raises:
      TypeError: TF's messages for input_fn, name, hooks and exporters.
      ValueError: TF's messages ("Must specify steps > 0, given: ...", "Must specify
        start_delay_secs >= 0, given: ...", "Must specify throttle_secs >= 0, given: ...",
        exporter names); "Must specify every_n_steps > 0, given: ...".
    """

    def __new__(
        cls,
        input_fn: Callable,
        steps: int | None = 100,
        name: str | None = None,
        hooks=None,
        exporters=None,
        start_delay_secs: float = 120,
        throttle_secs: float = 600,
        *,
        every_n_steps: int | None = None,
    ):
        _validate_input_fn(input_fn)
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"`name` must be string, given: {name}")
        hooks = _validate_hooks(hooks)
        exporters = _validate_exporters(exporters)
        if start_delay_secs < 0:
            raise ValueError(f"Must specify start_delay_secs >= 0, given: {start_delay_secs}")
        if throttle_secs < 0:
            raise ValueError(f"Must specify throttle_secs >= 0, given: {throttle_secs}")
        if every_n_steps is not None and (
            isinstance(every_n_steps, bool)
            or not isinstance(every_n_steps, int)
            or every_n_steps <= 0
        ):
            raise ValueError(
                f"Must specify every_n_steps > 0 (an int of global steps), given: "
                f"{every_n_steps!r}. None evaluates after checkpoints instead."
            )
        return super().__new__(
            cls,
            input_fn,
            steps,
            name,
            hooks,
            exporters,
            start_delay_secs,
            throttle_secs,
            every_n_steps,
        )

    def __getnewargs_ex__(self):  # copy/pickle: every_n_steps is keyword-only
        return tuple(self)[:-1], {"every_n_steps": self.every_n_steps}
