"""Reading TFRecord files: records in order, CRC-checked, through any storage URL, and
the files a pattern names (``tf.data.TFRecordDataset``'s reader, without TensorFlow)."""

from __future__ import annotations

import gzip
import io
import itertools
import logging
import random
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO

import numpy as np

from estimator.io import fs
from estimator.io._records import Records
from estimator.io.tfrecord.framing import (
    _CHUNK,
    _CRC,
    _HEADER,
    _LENGTH,
    CorruptRecordError,
    _compression,
    _mask,
    masked_crc32c,
)

__all__ = ["ReadStats", "list_files", "read_record_chunks", "read_records", "tf_record_iterator"]

logger = logging.getLogger("estimator")


@dataclass
class ReadStats:
    """What ``ignore_errors=True`` skipped: one ``(path, offset, reason)`` per damaged file
    (the rest of each from ``offset`` on), and the number of records read."""

    records: int = 0
    skipped: list[tuple[str, int, str]] = field(default_factory=list)


class _ZlibReader(io.RawIOBase):
    """A zlib-format stream (TF's ``ZLIB`` compression) read through ``decompressobj``."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._inflate = zlib.decompressobj()
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            if self._inflate.eof:
                return 0
            chunk = self._raw.read(_CHUNK)
            if not chunk:
                self._pending = self._inflate.flush()
                if not self._pending:
                    if not self._inflate.eof:
                        raise zlib.error("incomplete or truncated stream")
                    return 0
                break
            self._pending = self._inflate.decompress(chunk)
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def _open_read(path: str, compression: str) -> IO[bytes]:
    raw = fs.open_file(path, "rb")
    if compression == "GZIP":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "ZLIB":
        return io.BufferedReader(_ZlibReader(raw), _CHUNK)
    return raw


def _hint(path: str, compression: str) -> str:
    try:
        with fs.open_file(path, "rb") as f:
            magic = f.read(2)
    except OSError:
        return ""
    if compression == "" and magic == b"\x1f\x8b":
        return " The file starts with gzip's magic bytes: pass compression_type='GZIP'."
    if compression == "" and len(magic) == 2 and (magic[0] * 256 + magic[1]) % 31 == 0:
        if magic[0] & 0x0F == 8:
            return " The file starts like a zlib stream: pass compression_type='ZLIB'."
    return ""


def _record_chunks(path: str, compression: str) -> Iterator[Records]:
    """The records of one file, a :class:`~estimator.io._records.Records` per megabyte
    read; raises :class:`CorruptRecordError` (after yielding the good records before the
    bad one).

    The (decompressed) stream is read a megabyte at a time; compiled loops
    (``estimator.io._kernels``) cut the chunk's frames and compute the data's CRC32Cs, and
    the CRCs are compared as arrays (the lengths' once per distinct length). A record costs
    no Python operation: the records stay in the chunk's buffer."""
    # Deferred: numba's import (~0.3 s) is only needed to read.
    from estimator.io import _kernels

    base = 0  # the stream offset of buf[0]
    try:
        with _open_read(path, compression) as f:
            buf, need = b"", _CHUNK
            while True:
                more = f.read(max(_CHUNK, need))
                buf += more
                arr = np.frombuffer(buf, np.uint8)
                starts, lengths, length_crcs, data_crcs, stop = _kernels.frames(arr)
                good = _checked(arr, starts, lengths, length_crcs, data_crcs)
                if good:
                    yield Records(arr, starts[:good], lengths[:good])
                if good < len(starts):
                    at = int(starts[good]) - 12
                    frame = buf[at : at + 16 + int(lengths[good])]
                    raise _corrupt(path, base + at, compression, frame)
                buf, base = buf[stop:], base + stop
                if len(buf) >= 12:  # a frame cut by the chunk's end: check its length now
                    length, length_crc = _HEADER.unpack_from(buf)
                    if masked_crc32c(buf[:8]) != length_crc:
                        raise _corrupt(path, base, compression)
                    need = 16 + length - len(buf)
                if not more:
                    if buf:
                        needed = 16 + length if len(buf) >= 12 else 12
                        raise _truncated(path, base, needed, len(buf), compression)
                    return
    except (gzip.BadGzipFile, zlib.error, EOFError) as err:
        kind = {"GZIP": "gzip", "ZLIB": "zlib"}.get(compression, "")
        raise CorruptRecordError(
            f"{path}: cannot decompress the {kind} stream after byte offset {base} of the "
            f"uncompressed data ({type(err).__name__}: {err}). The file is truncated or "
            "damaged, or it is not compressed that way: check compression_type ('' for "
            "uncompressed files). Re-copy or re-write it, or pass ignore_errors=True.",
            path,
            base,
        ) from None


def _checked(arr: np.ndarray, starts, lengths, length_crcs, data_crcs) -> int:
    """How many of the frames at ``starts`` come before the first whose CRCs do not match
    (``len(starts)`` when all match)."""
    from estimator.io import _kernels

    distinct, which = np.unique(lengths, return_inverse=True)
    expected = np.array([masked_crc32c(_LENGTH.pack(n)) for n in distinct.tolist()], np.uint64)
    computed = _mask(_kernels.record_crcs(arr, starts, lengths).astype(np.uint64))
    bad = np.flatnonzero((expected[which] != length_crcs) | (computed != data_crcs))
    return int(bad[0]) if len(bad) else len(starts)


def _corrupt(path, offset, compression, frame: bytes | None = None) -> CorruptRecordError:
    """The error for the frame at ``offset``: its length's CRC does not match, or (with the
    ``frame``'s bytes given) its data's."""
    if frame is not None and masked_crc32c(frame[:8]) == _CRC.unpack_from(frame, 8)[0]:
        length = len(frame) - 16
        stored = _CRC.unpack_from(frame, 12 + length)[0]
        return CorruptRecordError(
            f"{path}: corrupt record at byte offset {offset}: the CRC32C of its {length} bytes "
            f"of data does not match (masked CRC 0x{stored:08x} stored, "
            f"0x{masked_crc32c(frame[12:-4]):08x} computed): the file is damaged. Re-copy or "
            "re-write it, or pass ignore_errors=True to skip the rest of a damaged file.",
            path,
            offset,
        )
    return CorruptRecordError(
        f"{path}: corrupt record at byte offset {offset}: the CRC32C of the length does not "
        "match, so this is not a TFRecord frame (a damaged file, or not a TFRecord file, or "
        f"read with the wrong compression_type {compression!r}).{_hint(path, compression)} "
        "Re-copy or re-write the file, or pass ignore_errors=True to skip the rest of a "
        "damaged file.",
        path,
        offset,
    )


def _truncated(path, offset, needed, got, compression) -> CorruptRecordError:
    where = "of the uncompressed stream " if compression else ""
    return CorruptRecordError(
        f"{path}: truncated record at byte offset {offset} {where}: the record needs {needed} "
        f"bytes but the file ends after {got}. The file was cut short (an interrupted copy, "
        "or a writer that was never closed); re-copy or re-write it, or pass "
        "ignore_errors=True to skip the rest of a damaged file.",
        path,
        offset,
    )


def tf_record_iterator(path, options=None) -> Iterator[bytes]:
    """The records of one TFRecord file, in order (``tf.compat.v1.io.tf_record_iterator``).

    Args:
      path: the file.
      options: a :class:`TFRecordOptions` or a compression type (``""``, ``"GZIP"``,
        ``"ZLIB"``).

    Raises:
      CorruptRecordError: a truncated or corrupt record (names the file and offset).
    """
    compression = _compression(options)
    for chunk in _record_chunks(str(path), compression):
        yield from chunk


def list_files(file_pattern, shuffle: bool = False, seed: int | None = None) -> list[str]:
    """The files matching one pattern or a list of patterns, as ``tf.data.Dataset.list_files``
    (sorted; shuffled with ``shuffle``).

    Args:
      file_pattern: a glob pattern (``"data/train-*.tfrecord.gz"``), a path, or a list of
        them.
      shuffle: shuffle the file names (with ``seed``).
      seed: the shuffle's seed.

    Returns:
      The matching paths, each once.

    Raises:
      ValueError: when nothing matches (TF's "No files matched pattern: ...").
    """
    patterns = [file_pattern] if isinstance(file_pattern, str | bytes) else list(file_pattern)
    patterns = [p.decode() if isinstance(p, bytes) else str(p) for p in patterns]
    if not patterns:
        raise ValueError("file_pattern is empty: give a pattern or a list of paths.")
    found: list[str] = []
    for pattern in patterns:
        matches = fs.glob(fs.check(pattern, "file pattern"))
        if not matches:
            raise ValueError(
                f"No files matched pattern: {pattern}. Check the directory and the pattern "
                "(glob syntax: *, ?, [...])."
            )
        found += matches
    found = sorted(dict.fromkeys(found))
    if shuffle:
        random.Random(seed).shuffle(found)
    return found


def _shard(files: list[str], num_shards: int, index: int) -> tuple[list[str], int, int]:
    """Files of shard ``index``, and the record sharding left to apply: by file when there
    are at least as many files as shards (TF's ``AutoShardPolicy.FILE``), else every
    ``num_shards``-th record (``DATA``)."""
    if not 0 <= index < num_shards:
        raise ValueError(
            f"Shard index {index} is not in [0, {num_shards}): input_pipeline_id must be less "
            "than num_input_pipelines."
        )
    if num_shards == 1:
        return files, 1, 0
    if len(files) >= num_shards:
        return files[index::num_shards], 1, 0
    return files, num_shards, index


def read_records(
    files: str | Sequence[str],
    compression_type: str | None = None,
    *,
    cycle_length: int = 1,
    block_length: int = 1,
    num_shards: int = 1,
    shard_index: int = 0,
    ignore_errors: bool = False,
    stats: ReadStats | None = None,
) -> Iterator[bytes]:
    """The records of TFRecord files: a file pattern, a path or a list of them.

    Files are read ``cycle_length`` at a time, ``block_length`` records from each in turn
    (``tf.data.Dataset.interleave`` of ``TFRecordDataset``s; ``cycle_length=1`` reads them
    one after the other). With ``num_shards > 1`` only shard ``shard_index`` is read, as a
    multi-host job's ``InputContext`` asks: every ``num_shards``-th file when there are at
    least as many files as shards, else every ``num_shards``-th record
    (``tf.data``'s ``AutoShardPolicy.AUTO``); the shards are disjoint and cover the files.

    Args:
      files: a glob pattern, a path, or a list of patterns/paths (see :func:`list_files`).
      compression_type: ``""``/None, ``"GZIP"``, ``"ZLIB"`` or a :class:`TFRecordOptions`.
      cycle_length: files read at once (interleaved).
      block_length: records taken from a file before moving to the next.
      num_shards: the number of input pipelines (``InputContext.num_input_pipelines``).
      shard_index: this pipeline's index (``InputContext.input_pipeline_id``).
      ignore_errors: skip the rest of a damaged file (logged, and counted in ``stats``)
        instead of raising.
      stats: a :class:`ReadStats` to fill (records read, files skipped).

    Yields:
      Each record's bytes.

    Raises:
      ValueError: nothing matches a pattern; bad arguments.
      CorruptRecordError: a damaged file (without ``ignore_errors``).
    """
    for chunk in read_record_chunks(
        files,
        compression_type,
        cycle_length=cycle_length,
        block_length=block_length,
        num_shards=num_shards,
        shard_index=shard_index,
        ignore_errors=ignore_errors,
        stats=stats,
    ):
        yield from chunk


def read_record_chunks(
    files: str | Sequence[str],
    compression_type: str | None = None,
    *,
    cycle_length: int = 1,
    block_length: int = 1,
    num_shards: int = 1,
    shard_index: int = 0,
    ignore_errors: bool = False,
    stats: ReadStats | None = None,
) -> Iterator[Records]:
    """:func:`read_records`' records in :class:`~estimator.io._records.Records` (one per
    megabyte read, or per ``block_length`` records when interleaving), for readers that take
    records in bulk."""
    compression = _compression(compression_type)
    if cycle_length < 1 or block_length < 1:
        raise ValueError(
            f"cycle_length and block_length must be >= 1; got {cycle_length}, {block_length}."
        )
    names, every, offset = _shard(list_files(files), int(num_shards), int(shard_index))
    stats = ReadStats() if stats is None else stats

    def one_file(path: str) -> Iterator[Records]:
        return _file_chunks(path, compression, ignore_errors, stats)

    if cycle_length == 1:
        chunks = (chunk for path in names for chunk in one_file(path))
    else:
        chunks = _interleaved(names, one_file, cycle_length, block_length)
    for chunk in _every(chunks, every, offset):
        stats.records += len(chunk)
        if len(chunk):
            yield chunk


def _file_chunks(path: str, compression: str, ignore_errors: bool, stats: ReadStats):
    """The chunks of one file; with ``ignore_errors`` a damaged file ends at the damage
    (logged and recorded in ``stats``)."""
    try:
        yield from _record_chunks(path, compression)
    except CorruptRecordError as err:
        if not ignore_errors:
            raise
        stats.skipped.append((err.path, err.offset, str(err)))
        logger.warning("Skipping the rest of %s from byte %d: %s", err.path, err.offset, err)


class _Blocks:
    """A file's records ``block_length`` at a time, across its chunks."""

    def __init__(self, chunks: Iterator[Records], block_length: int) -> None:
        self._chunks = chunks
        self._block = block_length
        self._chunk: Records | None = None
        self._at = 0

    def take(self) -> Records:
        parts, need = [], self._block
        while need:
            if self._chunk is None or self._at == len(self._chunk):
                self._chunk, self._at = next(self._chunks, None), 0
                if self._chunk is None:
                    break
            part = self._chunk.take(slice(self._at, self._at + need))
            self._at += len(part)
            need -= len(part)
            parts.append(part)
        return Records.concat(parts) if parts else Records(b"", _NONE, _NONE)


_NONE = np.zeros(0, np.int64)


def _interleaved(names, one_file, cycle_length: int, block_length: int) -> Iterator[Records]:
    """``cycle_length`` files at a time, ``block_length`` records from each in turn; a
    finished file is replaced by the next (``tf.data.Dataset.interleave``)."""
    pending = iter(names)
    active = [_Blocks(one_file(p), block_length) for p in itertools.islice(pending, cycle_length)]
    while active:
        still = []
        for reader in active:
            block = reader.take()
            if len(block):
                yield block
            if len(block) == block_length:
                still.append(reader)
                continue
            replacement = next(pending, None)
            if replacement is not None:
                still.append(_Blocks(one_file(replacement), block_length))
        active = still


def _every(chunks: Iterator[Records], every: int, offset: int) -> Iterator[Records]:
    """Every ``every``-th record of the stream from ``offset`` on (sharding by record)."""
    if every == 1:
        yield from chunks
        return
    seen = 0  # records before this chunk
    for chunk in chunks:
        first = (offset - seen) % every
        seen += len(chunk)
        yield chunk.take(slice(first, None, every))
