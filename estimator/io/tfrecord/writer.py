"""Writing TFRecord files (``tf.io.TFRecordWriter``), atomically (internal; public through
``estimator.io.tfrecord``)."""

from __future__ import annotations

import gzip
import logging
import struct
import zlib
from collections.abc import Iterable
from typing import IO

from estimator.io import fs
from estimator.io.tfrecord.framing import _CRC, TFRecordOptions, masked_crc32c

logger = logging.getLogger("estimator")


class TFRecordWriter:
    """Writes records to a TFRecord file (``tf.io.TFRecordWriter``).

    The file is written under a temporary name beside ``path`` and renamed to ``path`` by
    :meth:`close` (or the end of a ``with`` block): readers never see a partial file, and a
    write that fails (or a ``with`` block that raises) leaves nothing at ``path``. (TF
    writes in place.)

    Args:
      path: the file to write.
      options: a :class:`TFRecordOptions` or a compression type (``""``, ``"GZIP"``,
        ``"ZLIB"``).

    Raises:
      ValueError: a bad compression type, or a URL whose protocol is not available
        (``estimator.io.fs``; a URL's object is uploaded by :meth:`close`).
    """

    def __init__(self, path, options=None) -> None:
        self.path = str(path)
        opts = options if isinstance(options, TFRecordOptions) else TFRecordOptions(options)
        self._compression = opts.compression_type
        level = 6 if opts.compression_level is None else int(opts.compression_level)
        self._context = fs.atomic_write(self.path)
        self._raw = self._context.__enter__()
        if self._compression == "GZIP":
            self._out: IO[bytes] = gzip.GzipFile(
                fileobj=self._raw, mode="wb", compresslevel=level, mtime=0
            )
        elif self._compression == "ZLIB":
            self._deflate = zlib.compressobj(level)
            self._out = self._raw
        else:
            self._out = self._raw
        self._closed = False

    def write(self, record: bytes) -> None:
        """Appends one record (``bytes``).

        Raises:
          TypeError: ``record`` is not bytes.
          ValueError: the writer is closed.
        """
        if self._closed:
            raise ValueError(f"{self.path}: write() on a closed TFRecordWriter.")
        if isinstance(record, str):
            raise TypeError(
                "TFRecordWriter.write takes bytes; got str. Write "
                "example.SerializeToString() (or text.encode())."
            )
        data = bytes(record)
        length = struct.pack("<Q", len(data))
        frame = b"".join(
            (
                length,
                _CRC.pack(masked_crc32c(length)),
                data,
                _CRC.pack(masked_crc32c(data)),
            )
        )
        if self._compression == "ZLIB":
            frame = self._deflate.compress(frame)
        self._out.write(frame)

    def flush(self) -> None:
        """Flushes buffered data to the temporary file (the file appears at ``close``)."""
        self._out.flush()

    def close(self) -> None:
        """Finishes the file and moves it to ``path``."""
        if self._closed:
            return
        self._closed = True
        if self._compression == "GZIP":
            self._out.close()
        elif self._compression == "ZLIB":
            self._raw.write(self._deflate.flush())
        self._context.__exit__(None, None, None)

    def _abort(self, exc: BaseException) -> None:
        self._closed = True
        try:
            if self._compression == "GZIP":
                self._out.close()
        finally:
            self._context.__exit__(type(exc), exc, exc.__traceback__)

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is None:
            self.close()
        elif not self._closed:
            try:
                self._abort(exc)
            except BaseException as again:
                if again is not exc:
                    raise

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            logger.warning(
                "TFRecordWriter for %s was never closed: nothing was written there. Call "
                "close() or use it in a with block.",
                self.path,
            )
            try:
                self._abort(RuntimeError("not closed"))
            except BaseException:  # noqa: S110 (best effort in a finalizer)
                pass


def write_records(path, records: Iterable[bytes], options=None) -> int:
    """Writes ``records`` to a TFRecord file at ``path`` (atomically); returns the count."""
    n = 0
    with TFRecordWriter(path, options) as writer:
        for record in records:
            writer.write(record)
            n += 1
    return n
