"""TensorBoard summaries: ``scalar``/``histogram``/``text`` inside ``model_fn``, event files out.

Inside ``model_fn``, ``estimator.summary.scalar("accuracy", acc)`` names a value the way
``tf.compat.v1.summary.scalar`` does. During training ``SummarySaverHook``
(``estimator.hooks.summary``, wired by ``train()`` every ``RunConfig.save_summary_steps``)
fetches every summary of that step, plus the training ``loss`` as TF's Estimator adds it,
and writes them to ``model_dir`` as TensorBoard event files; ``StepCounterHook`` writes
``global_step/sec`` there too and ``evaluate()`` writes its results to ``eval_dir(name)``
(``estimator.events.eval_history``). Event files are written with
tensorboardX (no TensorFlow) and read by TensorBoard as TF's are (same tags; text as
TensorBoard text summaries).

Steps: a training summary is labelled with the global step the step ran with, so the first
is at step 0 (the initial loss) and then every ``save_summary_steps``; a point at step
``s`` of the training curve and an evaluation of the checkpoint of step ``s`` read the
same variables. TF labels the same values one step later (its first point is at step 1).
"""

from __future__ import annotations

import logging

import jax.numpy as jnp
import numpy as np

from estimator.hooks.summary import HISTOGRAM, ROW_MASK, ROW_MASK_SUFFIX, SCALAR, TEXT, register
from estimator.model.padding import row_mask
from estimator.model.variables import require_frame, scope_prefix

__all__ = ["scalar", "histogram", "text"]

logger = logging.getLogger("estimator")


def _record(kind: str, name: str, value) -> None:
    frame = require_frame(f"summary.{kind}")
    full = scope_prefix(frame) + name
    frame.summaries[full] = jnp.asarray(value)
    register(full, kind)


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

    The values are binned into TF's buckets on the device, and only at the steps whose
    hooks fetch the name (``SummarySaverHook``'s, every ``save_summary_steps``): as in TF,
    the summary costs nothing at the other steps (``estimator.engine.steps``). A hook that
    fetches the name gets the bucket counts (``estimator.events.histograms.counts``; TF's
    hook would get a serialized ``Summary``); to fetch the values, name them with
    ``estimator.identity``.

    Raises:
      RuntimeError: outside ``model_fn``.
    """
    _record(HISTOGRAM, name, values)
    mask = row_mask() if per_example else None
    if mask is not None and jnp.ndim(values) and jnp.shape(values)[:1] == mask.shape:
        _record(ROW_MASK, name + ROW_MASK_SUFFIX, mask)


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
