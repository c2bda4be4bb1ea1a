"""TensorBoard event files, written synchronously with tensorboardX's record writer and
summary protos (no TensorFlow): :class:`EventWriter` and the process's writer per
directory, :func:`writer_for` (TF's ``FileWriterCache``).

A directory may be a storage URL (``estimator.io.fs``). Object stores cannot append, so
there the events are written to a local file and the whole file is uploaded over the
object at every ``flush`` and at ``close`` (TensorBoard reads it as it grows: each upload
replaces the object with a longer one).

tensorboardX is imported through :func:`tensorboardx_module`, with the cloud clients its
record writer would import deferred (``estimator.events.clients``)."""

from __future__ import annotations

import atexit
import importlib
import itertools
import logging
import os
import threading
import time

import numpy as np

from estimator.events import clients
from estimator.io import fs

__all__ = [
    "EventWriter",
    "FLUSH_SECS",
    "add_text",
    "flush_writers",
    "tensorboardx_module",
    "writer_for",
]

logger = logging.getLogger("estimator")

FLUSH_SECS = 120  # seconds between event-file flushes (tf.compat.v1.summary.FileWriter)


def tensorboardx_module(name: str):
    """The tensorboardX module ``name`` (``"tensorboardX.event_file_writer"``), imported
    with the clients of ``clients.TENSORBOARDX_CLIENTS`` that are installed and not yet
    imported deferred first (``estimator.events.clients``).

    Raises:
      ImportError: tensorboardX (a dependency) or that module is missing."""
    for client in clients.TENSORBOARDX_CLIENTS:
        clients.defer(client)
    return importlib.import_module(name)


# NumPy dtype -> TF DataType enum (tensorflow/core/framework/types.proto).
_TF_DTYPES = {"float32": 1, "float64": 2, "int32": 3, "int64": 9, "bool": 10, "float16": 19}


class EventWriter:
    """Writes TensorBoard event files synchronously, with tensorboardX's record writer and
    summary protos (the ``tf.compat.v1.summary.FileWriter`` calls the hooks use).

    tensorboardX's ``SummaryWriter`` writes from a background thread whose ``flush()`` does
    not wait for queued events, so a file read right after ``train()`` could miss the last
    ones; this writes each event before returning. Each writer has its own file,
    ``events.out.tfevents.<time>.<host>.<pid>.<n>`` (two writers never share a name).

    Args:
      logdir: the directory (created if missing), or a storage URL (the file is written
        locally and uploaded at each ``flush``).
    """

    _count = itertools.count()

    def __init__(self, logdir: str) -> None:
        events_writer = tensorboardx_module("tensorboardX.event_file_writer").EventsWriter
        self.logdir = fs.as_str(logdir)
        self._mirror = fs.Mirror(self.logdir)  # a URL's events: a local file, uploaded
        atexit.register(self._mirror.discard)  # writers live as long as the process
        local = self._mirror.path
        suffix = f".{os.getpid()}.{next(self._count)}"
        self._writer = events_writer(os.path.join(local, "events"), suffix)
        # Hooks write from the loop's thread and from the summary thread
        # (estimator.hooks.summary): one record at a time.
        self._lock = threading.Lock()

    def _add(self, summary, step: int) -> None:
        from tensorboardX.proto.event_pb2 import Event

        event = Event(summary=summary, wall_time=time.time(), step=int(step))
        with self._lock:
            self._writer.write_event(event)

    def add_summary(self, summary, step: int) -> None:
        """A ``Summary`` proto (tensorboardX's, TF's wire format) at ``step``."""
        self._add(summary, step)

    def add_scalar(self, tag: str, value, step: int) -> None:
        """A scalar (``float(value)``) at ``step``."""
        from tensorboardX import summary as proto

        self._add(proto.scalar(tag, float(value)), step)

    def add_tensor(self, tag: str, value, step: int) -> None:
        """An array as a tensor summary (TF's ``_write_dict_to_summary`` for ``np.ndarray``
        eval results: ``tensor`` set, ``node_name`` = tag; TensorBoard shows it only with
        a plugin, as TF logs)."""
        from tensorboardX.proto.summary_pb2 import Summary
        from tensorboardX.proto.tensor_pb2 import TensorProto
        from tensorboardX.proto.tensor_shape_pb2 import TensorShapeProto

        array = np.ascontiguousarray(value)
        dtype = _TF_DTYPES.get(array.dtype.name)
        if dtype is None:
            logger.warning("Skipping summary for %s: dtype %s has no TF type.", tag, array.dtype)
            return
        tensor = TensorProto(
            dtype=dtype,
            tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=d) for d in array.shape]),
            tensor_content=array.astype(array.dtype.newbyteorder("<")).tobytes(),
        )
        self._add(Summary(value=[Summary.Value(tag=tag, node_name=tag, tensor=tensor)]), step)

    def add_histogram_raw(
        self,
        tag: str,
        min,  # noqa: A002 - tensorboardX's SummaryWriter.add_histogram_raw's names
        max,  # noqa: A002
        num,
        sum,  # noqa: A002
        sum_squares,
        bucket_limits,
        bucket_counts,
        global_step: int,
    ) -> None:
        """A histogram given as bucket counts (tensorboardX's ``add_histogram_raw``; the
        fields of ``estimator.events.histograms.proto_fields``) at ``global_step``."""
        from tensorboardX.proto.summary_pb2 import HistogramProto, Summary

        histogram = HistogramProto(
            min=min,
            max=max,
            num=num,
            sum=sum,
            sum_squares=sum_squares,
            bucket_limit=bucket_limits,
            bucket=bucket_counts,
        )
        self._add(Summary(value=[Summary.Value(tag=tag, histo=histogram)]), global_step)

    def add_text(self, tag: str, text: str, step: int) -> None:
        """A text summary under ``tag`` (TF's tag; tensorboardX's own ``add_text`` appends
        ``/text_summary``)."""
        from tensorboardX import summary as proto

        summary = proto.text(tag, text)
        summary.value[0].tag = tag
        self._add(summary, step)

    def flush(self) -> None:
        with self._lock:
            self._writer.flush()
            self._mirror.sync()

    def close(self) -> None:
        with self._lock:
            self._writer.close()
            self._mirror.close()


_WRITERS: dict[str, EventWriter] = {}
_LOCK = threading.Lock()


def writer_for(logdir: str) -> EventWriter:
    """The process's :class:`EventWriter` for ``logdir`` (TF's ``FileWriterCache``)."""
    logdir = fs.as_str(logdir)
    with _LOCK:
        writer = _WRITERS.get(logdir)
        if writer is None:
            writer = EventWriter(logdir)
            _WRITERS[logdir] = writer
        return writer


def flush_writers() -> None:
    """Flushes every writer of :func:`writer_for` (TF's ``FileWriterCache.clear`` flushes
    and drops them; the Estimator's hooks keep using theirs, so they stay open)."""
    with _LOCK:
        writers = list(_WRITERS.values())
    for writer in writers:
        writer.flush()


def add_text(writer, tag: str, value: str, step: int) -> None:
    """Writes a text summary with ``writer`` (an :class:`EventWriter`, or any writer with
    ``add_text``, e.g. a tensorboardX ``SummaryWriter`` given to a hook)."""
    writer.add_text(tag, value, step)
