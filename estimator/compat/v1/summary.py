"""``tf.summary`` (TF 1.15's ``tf.compat.v1.summary``): ``scalar``, ``histogram``, ``text``
inside ``model_fn``, written to TensorBoard by the Estimator (``estimator.summary``).

``collections``/``family`` are accepted; ``family`` prefixes the tag as TF does
(``family/name``). ``merge_all`` returns None: the Estimator's ``SummarySaverHook`` writes
every summary of the step. Outside ``model_fn`` the functions do nothing (TF's summaries
there would never be run by an Estimator either).

For writing events by hand (a program's epilogue): ``FileWriter`` writes ``Summary`` protos
(``tf.Summary``, TF's wire format, from tensorboardX's schema) to an event file;
``FileWriterCache.get(logdir)`` is the process's writer of a directory, the one the
Estimator writes with, and ``FileWriterCache.clear()`` flushes them all.
"""

from __future__ import annotations

from typing import Any

from estimator import events as _events
from estimator import summary as _summary
from estimator.compat._unsupported import module_getattr
from estimator.compat.v1._base import in_model_fn
from estimator.events.files import EventWriter as _EventWriter
from estimator.events.files import tensorboardx_module as _tensorboardx_module
from estimator.hooks import SummarySaverHook as SummarySaverHook

__all__ = [
    "scalar",
    "histogram",
    "text",
    "merge_all",
    "merge",
    "FileWriter",
    "FileWriterCache",
    "Summary",
    "SummarySaverHook",
]

__getattr__ = module_getattr("tf.summary", __name__)

Summary = _tensorboardx_module("tensorboardX.proto.summary_pb2").Summary


def _tag(name: str, family: str | None) -> str:
    return f"{family}/{name}" if family else name


def scalar(name, tensor, collections=None, family=None):
    """``tf.summary.scalar``: a scalar summary (e.g. ``accuracy[1]`` of ``tf.metrics``).

    Raises:
      ValueError: a value that is not a scalar.
    """
    del collections
    if in_model_fn():
        _summary.scalar(_tag(name, family), tensor)


def histogram(name, values, collections=None, family=None):
    """``tf.summary.histogram``: a histogram summary of ``values``."""
    del collections
    if in_model_fn():
        _summary.histogram(_tag(name, family), values)


def text(name, tensor, collections=None):
    """``tf.summary.text``: a text summary; the text is a Python string fixed when
    ``model_fn`` is traced (strings cannot be traced).

    Raises:
      TypeError: for anything but a Python string.
    """
    del collections
    if in_model_fn():
        _summary.text(name, tensor)


def merge_all(key=None, scope=None, name=None):
    """``tf.summary.merge_all``: None (the Estimator writes every summary)."""
    return None


def merge(inputs, collections=None, name=None):
    """``tf.summary.merge``: None (the Estimator writes every summary)."""
    return None


class FileWriter:
    """``tf.summary.FileWriter(logdir, graph=None)``: writes ``Summary`` protos to a new
    event file in ``logdir`` (created if missing; a storage URL is uploaded at each
    ``flush``). ``graph`` and ``add_graph`` write nothing (there is no graph).

    Args:
      logdir: the directory.
      graph, max_queue, flush_secs, filename_suffix, session: accepted (events are written
        when added).
    """

    def __init__(
        self,
        logdir,
        graph=None,
        max_queue=10,
        flush_secs=120,
        graph_def=None,
        filename_suffix=None,
        session=None,
    ) -> None:
        del graph, max_queue, flush_secs, graph_def, filename_suffix, session
        self._writer = _EventWriter(logdir)
        self._logdir = self._writer.logdir

    @classmethod
    def _of(cls, writer) -> FileWriter:
        self = cls.__new__(cls)
        self._writer = writer
        self._logdir = writer.logdir
        return self

    def get_logdir(self) -> str:
        return self._logdir

    def add_summary(self, summary: Any, global_step: int | None = None) -> None:
        """Writes ``summary`` (a ``tf.Summary`` or its serialized bytes) at ``global_step``
        (0 when None)."""
        if isinstance(summary, bytes):
            summary = Summary.FromString(summary)
        if not isinstance(summary, Summary):
            raise TypeError(
                f"add_summary takes a tf.Summary proto (or its bytes); got "
                f"{type(summary).__name__}. Build one as tf.Summary(value=[tf.Summary.Value("
                "tag=..., simple_value=...)])."
            )
        self._writer.add_summary(summary, 0 if global_step is None else int(global_step))

    def add_graph(self, graph, global_step=None, graph_def=None) -> None:
        """Nothing to write: there is no graph."""

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def reopen(self) -> None:
        """Nothing to reopen: events are written when added."""

    def __enter__(self) -> FileWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class FileWriterCache:
    """``tf.summary.FileWriterCache``: the process's writer per directory."""

    @staticmethod
    def get(logdir) -> FileWriter:
        """The writer of ``logdir`` (the Estimator's own for its directories): adding to it
        appends to the Estimator's event file."""
        return FileWriter._of(_events.writer_for(logdir))

    @staticmethod
    def clear() -> None:
        """Flushes every cached writer (TF closes and drops them; the Estimator's hooks keep
        using theirs here, so they stay open and are written out)."""
        _events.flush_writers()
