"""TensorBoard summaries: ``scalar``/``histogram``/``text`` inside ``model_fn``, event files out.

Inside ``model_fn``, ``estimator.summary.scalar("accuracy", acc)`` names a value the way
``tf.compat.v1.summary.scalar`` does. During training :class:`SummarySaverHook` (wired
by ``train()`` every ``RunConfig.save_summary_steps``) fetches every summary of that step,
plus the training ``loss`` as TF's Estimator adds it, and writes them to ``model_dir`` as
TensorBoard event files; ``StepCounterHook`` writes ``global_step/sec`` there too and
``evaluate()`` writes its results to ``eval_dir(name)``. Event files are written with
tensorboardX (no TensorFlow) and read by TensorBoard as TF's are (same tags; text as
TensorBoard text summaries).

Steps: a training summary is labelled with the global step the step ran with, so the first
is at step 0 (the initial loss) and then every ``save_summary_steps``; a point at step
``s`` of the training curve and an evaluation of the checkpoint of step ``s`` read the
same variables. TF labels the same values one step later (its first point is at step 1).
"""

from __future__ import annotations

import json
import logging
import time

import jax.numpy as jnp
import numpy as np

from estimator.event_files import FLUSH_SECS, add_text, writer_for
from estimator.hooks.session_run_hook import SessionRunArgs, SessionRunHook
from estimator.hooks.timers import SecondOrStepTimer
from estimator.io import fs
from estimator.keys import LOSS
from estimator.mode_keys import ModeKeys
from estimator.model.padding import row_mask
from estimator.model.variables import require_frame, scope_prefix

__all__ = ["scalar", "histogram", "text", "SummarySaverHook", "read_eval_metrics"]

logger = logging.getLogger("estimator")

SCALAR = "scalar"
HISTOGRAM = "histogram"
TEXT = "text"
ROW_MASK = "row_mask"  # a padded batch's row mask, for the histogram of the same name
_ROW_MASK_SUFFIX = "/__row_mask__"
_KINDS: dict[str, str] = {}  # summary name -> kind (names are static, kinds too)


def _record(kind: str, name: str, value) -> None:
    frame = require_frame(f"summary.{kind}")
    full = scope_prefix(frame) + name
    frame.summaries[full] = jnp.asarray(value)
    _KINDS[full] = kind


def scalar(name: str, tensor) -> None:
    """Records a scalar summary (``tf.compat.v1.summary.scalar``).

    Args:
      name: the tag, prefixed by the current variable scope.
      tensor: a real scalar (shape ``[]`` or ``[1]``).

    Raises:
      ValueError: for a non-scalar value.
      RuntimeError: outside ``model_fn``.
    """
    value = jnp.asarray(tensor)
    if value.size != 1:
        raise ValueError(f"summary.scalar({name!r}) needs a scalar; got shape {value.shape}.")
    _record(SCALAR, name, value.reshape(()))


def histogram(name: str, values, *, per_example: bool = False) -> None:
    """Records a histogram summary of ``values`` (``tf.compat.v1.summary.histogram``).

    Args:
      name: the tag, prefixed by the current variable scope.
      values: a real array of any shape; its elements are binned as TF does.
      per_example: keyword-only, not in TF: ``values`` has one row per example of the
        batch (``[batch_size, ...]``), so that a padded batch's padding rows
        (``estimator.model.padding``) are left out of the histogram.

    Raises:
      RuntimeError: outside ``model_fn``.
    """
    _record(HISTOGRAM, name, values)
    mask = row_mask() if per_example else None
    if mask is not None and jnp.ndim(values) and jnp.shape(values)[:1] == mask.shape:
        _record(ROW_MASK, name + _ROW_MASK_SUFFIX, mask)


def text(name: str, data: str | bytes) -> None:
    """Records a text summary (``tf.compat.v1.summary.text``), shown in TensorBoard's Text
    dashboard (Markdown).

    Strings cannot be traced by JAX, so ``data`` is a static Python string, fixed when
    ``model_fn`` is traced (format it from Python values: ``f"learning rate {lr}"``). It is
    written with the other summaries every ``save_summary_steps``.

    Args:
      name: the tag, prefixed by the current variable scope.
      data: a ``str`` (or UTF-8 ``bytes``).

    Raises:
      TypeError: for anything but a Python string (an array, a traced value).
      RuntimeError: outside ``model_fn``.
    """
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    if not isinstance(data, str):
        raise TypeError(
            f"summary.text({name!r}) takes a Python str, given {type(data).__name__}. Strings "
            "cannot be traced: format the text in Python (summary.text(name, f'lr = {lr}')) "
            "or record numbers with summary.scalar."
        )
    _record(TEXT, name, np.frombuffer(data.encode("utf-8"), np.uint8))


def _write(writer, values: dict, step: int) -> None:
    for name, value in values.items():
        kind = _KINDS.get(name)
        if kind == ROW_MASK:
            continue
        if kind == HISTOGRAM:
            mask = values.get(name + _ROW_MASK_SUFFIX)
            if mask is not None:
                value = np.asarray(value)[np.asarray(mask) > 0]
            writer.add_histogram(name, value, step)
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
      summary_writer: a writer with ``add_scalar``/``add_histogram``/``add_text``
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
        if self._writer is not None:
            values = dict(zip(self._names, run_values.results, strict=True))
            _write(self._writer, values, self._step)
            # Flushing syncs the file to disk: at most every FLUSH_SECS (TF's FileWriter
            # default), and at the end, not at every write.
            now = time.time()
            if now - self._last_flush >= FLUSH_SECS:
                self._writer.flush()
                self._last_flush = now

    def end(self, session) -> None:
        if self._writer is not None:
            self._writer.flush()
            self._last_flush = time.time()


def make_summary_hook(model_dir: str, save_steps: int):
    """The ``SummarySaverHook`` ``train()`` adds (internal)."""
    return SummarySaverHook(save_steps=save_steps, output_dir=model_dir)


EVAL_RESULTS = "eval_results.jsonl"


def _jsonable(value):
    try:
        return float(value) if np.ndim(value) == 0 else np.asarray(value).tolist()
    except (TypeError, ValueError):
        return str(value)


def write_eval_results(eval_dir: str, results: dict, checkpoint_path: str | None) -> None:
    """Records ``evaluate()``'s results in ``eval_dir``: one JSON line per evaluation in
    ``eval_results.jsonl`` (read back by :func:`read_eval_metrics`, e.g. for early
    stopping and ``BestExporter``), and the scalars as TensorBoard events at their global
    step."""
    fs.makedirs(eval_dir)
    step = int(results["global_step"])
    record = {
        "global_step": step,
        "checkpoint_path": checkpoint_path,
        "time": time.time(),
        "metrics": {k: _jsonable(v) for k, v in results.items()},
    }
    line = json.dumps(record, sort_keys=True) + "\n"
    fs.append_bytes(fs.join(eval_dir, EVAL_RESULTS), line.encode("utf-8"))
    writer = writer_for(eval_dir)
    for key, value in results.items():
        if key == "global_step":
            continue
        if np.ndim(value) == 0:
            writer.add_scalar(key, float(value), step)
        else:
            writer.add_tensor(key, np.asarray(value), step)
    if checkpoint_path:
        add_text(writer, "checkpoint_path", str(checkpoint_path), step)
    writer.flush()


def read_eval_metrics(eval_dir: str) -> dict[int, dict]:
    """Evaluation results written to ``eval_dir``, by global step, in step order
    (``tf.estimator.experimental.read_eval_metrics``): each step's scalar metrics, as TF
    reads them back from the events' simple values (so no ``global_step`` key and no
    arrays). A step evaluated twice keeps its latest results. Missing directory: empty."""
    path = fs.join(eval_dir, EVAL_RESULTS)
    try:
        text = fs.read_bytes(path).decode("utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return {}
    by_step: dict[int, dict] = {}
    for line in text.splitlines():
        line = line.strip()
        if line:
            record = json.loads(line)
            by_step[int(record["global_step"])] = {
                k: v
                for k, v in record["metrics"].items()
                if k != "global_step" and isinstance(v, int | float)
            }
    return dict(sorted(by_step.items()))
