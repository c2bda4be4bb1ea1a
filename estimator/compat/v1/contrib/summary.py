"""``tf.contrib.summary`` (TF 1.15): what a ``TPUEstimatorSpec`` ``host_call`` writes with.

The TPU idiom (TF 1.15's TPU ResNet and MNIST samples)::

    def host_call_fn(gs, loss, lr):
        gs = gs[0]
        with tf.contrib.summary.create_file_writer(model_dir).as_default():
            with tf.contrib.summary.always_record_summaries():
                tf.contrib.summary.scalar("loss", loss[0], step=gs)
                tf.contrib.summary.scalar("learning_rate", lr[0], step=gs)
                return tf.contrib.summary.all_summary_ops()

Here the host call runs inside ``model_fn`` and ``scalar``/``histogram`` record summaries
the Estimator writes to ``model_dir`` at the global step (``estimator.summary``); the file
writer and recording contexts are accepted (the Estimator owns the event files and writes
every ``save_summary_steps``), ``step`` is the global step already, and
``all_summary_ops()`` returns an empty list.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1 import summary as _summary

__all__ = [
    "create_file_writer",
    "always_record_summaries",
    "never_record_summaries",
    "record_summaries_every_n_global_steps",
    "scalar",
    "histogram",
    "all_summary_ops",
]

__getattr__ = module_getattr("tf.contrib.summary", __name__)


class _Writer:
    """What ``create_file_writer`` returns: ``as_default()`` / ``set_as_default()``."""

    def __init__(self, logdir) -> None:
        self.logdir = logdir

    @contextlib.contextmanager
    def as_default(self) -> Iterator[_Writer]:
        yield self

    def set_as_default(self) -> None:
        """Nothing to set: the Estimator writes the summaries."""

    def flush(self) -> None:
        """Nothing to flush here."""

    def close(self) -> None:
        """Nothing to close here."""


def create_file_writer(logdir, max_queue=None, flush_millis=None, filename_suffix=None, name=None):
    """``tf.contrib.summary.create_file_writer``: accepted (see the module docstring)."""
    return _Writer(logdir)


@contextlib.contextmanager
def always_record_summaries() -> Iterator[None]:
    """``tf.contrib.summary.always_record_summaries``: a no-op context."""
    yield


@contextlib.contextmanager
def never_record_summaries() -> Iterator[None]:
    """``tf.contrib.summary.never_record_summaries``: a no-op context."""
    yield


@contextlib.contextmanager
def record_summaries_every_n_global_steps(n, global_step=None) -> Iterator[None]:
    """``tf.contrib.summary.record_summaries_every_n_global_steps``: a no-op context (the
    Estimator writes every ``RunConfig.save_summary_steps``)."""
    yield


def scalar(name, tensor, family=None, step=None):
    """``tf.contrib.summary.scalar``: ``tf.summary.scalar(name, tensor, family=family)``."""
    _summary.scalar(name, tensor, family=family)


def histogram(name, tensor, family=None, step=None):
    """``tf.contrib.summary.histogram``: ``tf.summary.histogram``."""
    _summary.histogram(name, tensor, family=family)


def all_summary_ops() -> list:
    """``tf.contrib.summary.all_summary_ops``: ``[]`` (the Estimator writes them)."""
    return []
