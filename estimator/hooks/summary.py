"""``SummarySaverHook``: writes the summaries ``model_fn`` records (``estimator.summary``)
and the training loss to TensorBoard event files every N steps or seconds.

The summary ops register each summary's name and kind here (:func:`register`) when
``model_fn`` is traced; the hook fetches those names from the step's outputs and writes
each as its kind. See ``estimator.summary`` for how steps are labelled.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from estimator.events import histograms
from estimator.events.files import FLUSH_SECS, add_text, writer_for
from estimator.hooks.session_run_hook import SessionRunArgs, SessionRunHook
from estimator.hooks.timers import SecondOrStepTimer
from estimator.keys import LOSS
from estimator.mode_keys import ModeKeys

__all__ = ["SummarySaverHook"]

SCALAR = "scalar"
HISTOGRAM = "histogram"
TEXT = "text"
ROW_MASK = "row_mask"  # a padded batch's row mask, for the histogram of the same name
ROW_MASK_SUFFIX = "/__row_mask__"
_KINDS: dict[str, str] = {}  # summary name -> kind (names are static, kinds too)


# One thread writes every hook's summaries, in the order they were fetched: the files'
# work is host work that the loop would otherwise do with the device idle (see
# SummarySaverHook.after_run).
_WRITES = ThreadPoolExecutor(max_workers=1, thread_name_prefix="estimator-summaries")


def register(name: str, kind: str) -> None:
    """Records that the step output ``name`` is a summary of ``kind`` (``SCALAR``,
    ``HISTOGRAM``, ``TEXT`` or ``ROW_MASK``; internal, called by ``estimator.summary``)."""
    _KINDS[name] = kind


def kind_of(name: str) -> str | None:
    """The kind of summary the step output ``name`` is (``SCALAR``, ``HISTOGRAM``, ``TEXT``,
    ``ROW_MASK``), or None for another output."""
    return _KINDS.get(name)


def write(writer, values: dict, step: int) -> None:
    """Writes the summaries among ``values`` (name -> fetched value) at ``step``. A
    histogram's value is its bucket counts (``estimator.events.histograms.counts``, binned
    by the step's summary program), or its values (a multi-process job's step outputs
    them), binned here."""
    for name, value in values.items():
        kind = _KINDS.get(name)
        if kind == ROW_MASK:
            continue
        if kind == HISTOGRAM:
            if not isinstance(value, dict):
                value = histograms.host_counts(value, values.get(name + ROW_MASK_SUFFIX))
            fields = histograms.proto_fields(value)
            if fields is not None:
                writer.add_histogram_raw(name, **fields, global_step=step)
        elif kind == TEXT:
            add_text(writer, name, bytes(np.asarray(value, np.uint8)).decode("utf-8"), step)
        else:
            writer.add_scalar(name, float(value), step)


class SummarySaverHook(SessionRunHook):
    """Writes the step's summaries every N steps or seconds (``tf.estimator.SummarySaverHook``).

    Writes every summary recorded in ``model_fn`` (``scalar``, ``histogram``, ``text``) and,
    in training, the ``loss`` (TF's Estimator adds a ``loss`` summary). The first step of a
    session is always written, then one every ``save_steps`` global steps or ``save_secs``
    seconds; values are fetched only at those steps. See the module docstring for how steps
    are labelled.

    Args:
      save_steps: steps between writes.
      save_secs: seconds between writes (exactly one of the two).
      output_dir: the event-file directory.
      summary_writer: a writer with ``add_scalar``/``add_histogram_raw``/``add_text``
        (tensorboardX's ``SummaryWriter``); overrides output_dir.
      scaffold, summary_op: accepted for TF compatibility; every summary recorded in
        ``model_fn`` is written.

    Raises:
      ValueError: from ``SecondOrStepTimer`` when not exactly one interval is given.
    """

    def __init__(
        self,
        save_steps=None,
        save_secs=None,
        output_dir=None,
        summary_writer=None,
        scaffold=None,
        summary_op=None,
    ) -> None:
        del scaffold, summary_op
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._output_dir = output_dir
        self._writer = summary_writer
        self._names: list[str] | None = None
        self._request = False
        self._step = 0
        self._written: Future | None = None  # the last write handed to _WRITES

    def begin(self) -> None:
        self._timer.reset()
        self._names = None
        self._last_flush = time.time()

    def before_run(self, run_context):
        session = run_context.session
        if self._names is None:
            train = session.mode == ModeKeys.TRAIN
            self._names = [n for n in session.output_names if n in _KINDS or (train and n == LOSS)]
            if self._names and self._writer is None and self._output_dir is not None:
                self._writer = writer_for(self._output_dir)
        self._step = session.global_step  # the step about to run
        self._request = bool(self._names) and self._timer.should_trigger_for_step(self._step)
        return SessionRunArgs(self._names) if self._request else None

    def after_run(self, run_context, run_values) -> None:
        if not self._request:
            return
        self._timer.update_last_triggered_step(self._step)
        if self._writer is None:
            return
        values = dict(zip(self._names, run_values.results, strict=True))
        # Flushing syncs the file to disk: at most every FLUSH_SECS (TF's FileWriter
        # default), and at the end, not at every write.
        now = time.time()
        flush = now - self._last_flush >= FLUSH_SECS
        if flush:
            self._last_flush = now
        # The values are on the host already; the writing (histograms' binning, the file)
        # runs on the summary thread while the loop dispatches the next steps. The previous
        # write's error, if any, raises here.
        self._wait()
        self._written = _WRITES.submit(self._write, values, self._step, flush)

    def _write(self, values: dict, step: int, flush: bool) -> None:
        write(self._writer, values, step)
        if flush:
            self._writer.flush()

    def _wait(self) -> None:
        written, self._written = self._written, None
        if written is not None:
            written.result()

    def end(self, session) -> None:
        """Waits for the summaries handed to the summary thread, then flushes: the events
        are in the file when ``train()`` returns.

        Raises:
          Exception: the error that writing the last summaries raised (e.g. ``OSError``).
        """
        self._wait()
        if self._writer is not None:
            self._writer.flush()
            self._last_flush = time.time()


def make_summary_hook(model_dir: str, save_steps: int):
    """The ``SummarySaverHook`` ``train()`` adds (internal)."""
    return SummarySaverHook(save_steps=save_steps, output_dir=model_dir)
