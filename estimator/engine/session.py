"""``Session``: what hooks and handlers see of a running loop (TF's ``session``), and the
one place values move from the device to the host (:meth:`Session.run`)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from estimator import keys
from estimator.engine.eval_results import host_value
from estimator.engine.steps import TrainState
from estimator.handlers.events import TRAIN_PREFIX
from estimator.mode_keys import ModeKeys
from estimator.model.strings import to_host

__all__ = ["Session", "needs_device", "not_fetched"]


class Session:
    """What hooks see of the running loop (TF's ``session``).

    Attributes:
      mode: the ``ModeKeys`` value of the loop.
      model_dir: the Estimator's model directory.
      global_step: the global step (a host ``int``; exact without a device sync).
      state: the current :class:`TrainState` (device arrays; reading it runs any
        deferred steps first). Valid until the next step, which donates its input state:
        a hook that keeps values copies them (``jax.device_get``), as TF hooks receive
        copies from ``session.run``.
      outputs: the last step's named outputs (device arrays; likewise).
      output_names: the names every step outputs (what hooks may fetch besides
        ``global_step``).
      apart: those of them that a step computes only when a hook fetches them in its
        ``before_run`` (summaries: ``estimator.engine.steps.summary_step``).
      non_finite_step: training: the first global step whose loss was not finite, as
        last seen on the host, or -1. Every transfer :meth:`run` makes in training also
        brings the device's record, so this is current whenever anything was fetched,
        at no extra sync.
      is_chief: whether this process is the job's chief (the one that logs and writes).
      epoch: the index of the current epoch of this loop (epochs completed so far).
      logs: values handlers reported for those after them: ``"train/<name>"`` (training
        metrics, ``estimator.handlers.MetricHandler``), ``"validation/<name>"``
        (``ValidationHandler``).
    """

    def __init__(
        self,
        mode: str,
        model_dir: str,
        runner,
        global_step: int,
        output_names: tuple = (),
        *,
        apart: tuple = (),
        is_chief: bool = True,
        evaluate=None,
        save_checkpoint=None,
    ) -> None:
        self.mode = mode
        self.model_dir = model_dir
        self.runner = runner
        self.global_step = global_step
        self.output_names = output_names
        self.apart = frozenset(apart)
        self.non_finite_step = -1
        self.is_chief = is_chief
        self.epoch = 0
        self.logs: dict = {}
        self._evaluate = evaluate
        self._save_checkpoint = save_checkpoint

    @property
    def state(self) -> TrainState:
        self.runner.flush()
        return self.runner.state

    @property
    def outputs(self) -> dict:
        self.runner.flush()
        return self.runner.outputs

    # ----- what handlers use ----------------------------------------------------------------
    def train_metrics(self) -> dict:
        """The training metrics over the steps since the last reset, as host values
        (``{name: value, "loss": mean loss}``): one transfer. See
        ``RunConfig.train_metrics_steps``.

        Raises:
          RuntimeError: this loop accumulates no training metrics.
        """
        metrics, loss = to_host(self._metrics_runner().metric_values())
        values = {k: host_value(v) for k, v in metrics.items()}
        values["loss"] = float(loss)
        return values

    def reset_train_metrics(self) -> None:
        """Starts a new window of training metrics (the queued steps count in the old)."""
        self._metrics_runner().reset_metrics()

    def _metrics_runner(self):
        if getattr(self.runner, "metrics", None) is None:
            raise RuntimeError(
                "This loop accumulates no training metrics: set "
                "RunConfig(train_metrics_steps=N), or pass an estimator.handlers."
                "MetricHandler to train(hooks=...)."
            )
        return self.runner

    def evaluate(self, input_fn, steps=None, hooks=None, name=None) -> dict:
        """Evaluates the live state (no checkpoint) as ``Estimator.evaluate`` does, writing
        to ``eval_dir(name)``; in a multi-process job every process must call it at the
        same step (each evaluates its shard; the results are merged). Training only."""
        if self._evaluate is None:
            raise RuntimeError("session.evaluate() exists in training loops only.")
        return self._evaluate(self, input_fn, steps, hooks, name)

    def save_checkpoint(self) -> str | None:
        """Saves the current state as the Estimator's checkpoint of this global step
        (asynchronously; collective in a multi-process job); returns its path."""
        if self._save_checkpoint is None:
            raise RuntimeError("session.save_checkpoint() exists in training loops only.")
        return self._save_checkpoint(self)

    def _lookup(self, name: str, step: int | None):
        if name == keys.GLOBAL_STEP:
            return np.int64(self.global_step if step is None else step)
        if name == keys.NON_FINITE_STEP:
            return self.state.non_finite_step
        if name.startswith(TRAIN_PREFIX) and getattr(self.runner, "metrics", None) is not None:
            metrics, loss = self.runner.metric_values()
            key = name[len(TRAIN_PREFIX) :]
            if key == keys.LOSS:
                return loss
            if key in metrics:
                return metrics[key]
        outputs = self.outputs
        if name in outputs:
            return outputs[name]
        if name in self.apart:
            raise not_fetched(name)
        known = ", ".join(sorted([keys.GLOBAL_STEP, *map(str, outputs)]))
        raise KeyError(
            f"A hook asked for {name!r}, but no value of that name exists in this step. Known "
            f"names: {known}. Name an array inside model_fn with "
            f"estimator.identity(x, name={name!r})."
        )

    def fetches_apart(self, fetches) -> bool:
        """Whether ``fetches`` (as :meth:`run` takes them) name a value in :attr:`apart`."""
        return bool(self.apart) and any(_strip(n) in self.apart for n in _fetch_names(fetches))

    def run(self, fetches, *, step: int | None = None):
        """Values for ``fetches`` (a name or a nested list/tuple/dict of names) from the
        last step, as NumPy (one device -> host transfer for all of them)."""
        names = {_strip(n): None for n in _fetch_names(fetches)}
        values = {name: self._lookup(name, step) for name in names}
        on_device = {k: v for k, v in values.items() if not isinstance(v, np.generic)}
        if on_device:  # one transfer for everything requested in this step
            training = self.mode == ModeKeys.TRAIN
            if training:  # the NaN record rides along: a scalar in the same transfer
                on_device.setdefault(keys.NON_FINITE_STEP, self.state.non_finite_step)
            host = to_host(on_device)
            if training:
                self.non_finite_step = int(host[keys.NON_FINITE_STEP])
            values.update(host)

        def build(f):
            if isinstance(f, str):
                return values[_strip(f)]
            if isinstance(f, dict):
                return type(f)((k, build(v)) for k, v in f.items())
            if isinstance(f, (list, tuple)):
                return type(f)(build(v) for v in f)
            return None

        return build(fetches)

    def checkpoint_state(self, step: int) -> tuple[int, TrainState]:
        """``(global_step, state)`` to save as the checkpoint for ``step``.

        After a non-finite loss at global step k, the train step changes nothing (see
        ``StepCompiler``), so the state is the one of step k: it is saved as step k, never
        under a later step's number. Reads the device's record (one scalar; a save
        transfers the state anyway).
        """
        if self.mode == ModeKeys.TRAIN:
            bad = int(self.run(keys.NON_FINITE_STEP))
            if 0 <= bad < step:
                return bad, self.state
        return step, self.state


def not_fetched(name: str) -> KeyError:
    """The error for reading a summary (``Session.apart``) of a step whose hooks did not
    fetch it."""
    return KeyError(
        f"{name!r} is a summary: a step computes it only when a hook asks for it in "
        "before_run (return SessionRunArgs([...]) naming it), and no hook of this step did. "
        "Fetch it there, or name the array with estimator.identity, which every step "
        "outputs."
    )


def _strip(name: str) -> str:
    return name[:-2] if name.endswith(":0") else name


def _fetch_names(fetches) -> Iterator[str]:
    if isinstance(fetches, str):
        yield fetches
    elif isinstance(fetches, dict):
        for value in fetches.values():
            yield from _fetch_names(value)
    elif isinstance(fetches, (list, tuple)):
        for value in fetches:
            yield from _fetch_names(value)
    elif fetches is not None:
        raise TypeError(
            f"Fetches must be names (str) or lists/tuples/dicts of names; got {fetches!r}."
        )


def needs_device(requests: dict) -> bool:
    return any(_strip(n) != keys.GLOBAL_STEP for n in _fetch_names(requests))
