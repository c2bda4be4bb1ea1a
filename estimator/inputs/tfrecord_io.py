"""``tfrecord_input_fn``: training and evaluation from TFRecord files of ``tf.Example``.

The native way to feed an Estimator from files, in one call::

    columns = [...]  # canned.feature_column columns
    train_input_fn = est.inputs.tfrecord_input_fn(
        "data/train-*.tfrecord.gz", columns, label_key="label", batch_size=512,
        num_epochs=5, shuffle=True, compression_type="GZIP")
    estimator.train(train_input_fn)

It does what TF's recommended ``tf.data`` pipeline does (``list_files`` → ``interleave`` of
``TFRecordDataset``s → ``shuffle`` → ``batch`` → ``tf.io.parse_example`` → ``prefetch``)
with ``estimator.io``: the parsed features are what the columns' host phase reads
(``make_parse_example_spec(columns)`` → parse → columns), exactly as in TF.

Reading, shuffling and batching run in a background thread and parsing in a pool of
``num_parallel_calls`` threads, a block of several batches (about 4,096 records) at a time,
at least ``prefetch_batches`` batches ahead, so the host work overlaps the device's steps;
the Estimator's loop only takes finished batches.
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import itertools
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from estimator.io import (
    FixedLenFeature,
    RaggedValue,
    SparseValue,
    VarLenFeature,
    parse_example,
)
from estimator.io._parse import check_specs
from estimator.io.tfrecord import ReadStats, list_files, read_record_chunks
from estimator.preprocessing._specs import _merge_specs

__all__ = ["tfrecord_input_fn"]

_END = object()
_BLOCK = 4096  # records parsed together (whole batches; at least one)


def _feature_spec(features: Any) -> dict:
    """A parsing spec from a spec dict or from feature columns (their
    ``parse_example_spec``, merged as ``make_parse_example_spec`` does)."""
    if isinstance(features, Mapping):
        return dict(features)
    if isinstance(features, Iterable) and not isinstance(features, str | bytes):
        spec: dict = {}
        for column in features:
            part = getattr(column, "parse_example_spec", None)
            if part is None:
                raise TypeError(
                    f"features must be a dict of parsing specs or a list of feature columns; "
                    f"{column!r} has no parse_example_spec."
                )
            _merge_specs(spec, part)
        if spec:
            return spec
    raise ValueError(
        "features must be a non-empty dict {key: FixedLenFeature | VarLenFeature | ...} or a "
        f"list of feature columns; got {features!r}."
    )


def rows(value: Any, lo: int, hi: int, varlen: frozenset = frozenset(), key=None) -> Any:
    """Rows ``[lo, hi)`` of a parsed (or transformed) batch: arrays, :class:`SparseValue`,
    :class:`RaggedValue`, and dicts/tuples of them. The dense width of a ``VarLenFeature``'s
    sparse value (its key in ``varlen``) is the longest row of the slice, as
    ``parse_example`` gives for those rows alone."""
    if isinstance(value, dict):
        return {k: rows(v, lo, hi, varlen, k) for k, v in value.items()}
    if isinstance(value, tuple) and not isinstance(value, SparseValue | RaggedValue):
        return tuple(rows(v, lo, hi, varlen, key) for v in value)
    if isinstance(value, SparseValue):
        keep = (value.indices[:, 0] >= lo) & (value.indices[:, 0] < hi)
        indices = value.indices[keep].copy()
        indices[:, 0] -= lo
        shape = value.dense_shape.copy()
        shape[0] = hi - lo
        if key in varlen:
            shape[1] = int(indices[:, 1].max()) + 1 if len(indices) else 0
        return SparseValue(indices, value.values[keep], shape)
    if isinstance(value, RaggedValue):
        splits = list(value.nested_row_splits)
        outer = splits[0][lo : hi + 1]
        first, last = int(outer[0]), int(outer[-1])
        new = [outer - first]
        for inner in splits[1:]:
            part = inner[first : last + 1]
            new.append(part - part[0])
            first, last = int(part[0]), int(part[-1])
        return RaggedValue(value.values[first:last], tuple(new))
    if value is None:
        return None
    return value[lo:hi]


def _work(parse: Callable, fn: Callable | None, varlen: frozenset, block: list) -> list:
    """Parses a block of batches at once (and maps it through ``fn``), then cuts it back
    into the batches."""
    parsed = parse([r for batch in block for r in batch])
    if fn is not None:
        parsed = fn(parsed)
    out, lo = [], 0
    for batch in block:
        out.append(rows(parsed, lo, lo + len(batch), varlen))
        lo += len(batch)
    return out


class _ShuffleBuffer:
    """TF's shuffle buffer (``Dataset.shuffle``) for chunks of records: the buffer fills to
    ``size``; then each incoming record takes the place of a uniformly drawn one, which goes
    out; at the end the buffer drains in random order. The draws run compiled over indices
    (``estimator.io._kernels.shuffle_draws``), so a record costs no Python operation."""

    def __init__(self, size: int, rng: np.random.Generator) -> None:
        self.size = size
        self.rng = rng
        self.records: list | np.ndarray = []  # a list while filling, then an object array

    def add(self, chunk: list) -> list:
        """The records going out as ``chunk`` comes in (none while the buffer fills)."""
        if isinstance(self.records, list):
            room = self.size - len(self.records)
            self.records += chunk[:room]
            if room >= len(chunk):
                return []
            full = np.empty(self.size, dtype=object)
            full[:] = self.records
            self.records, chunk = full, chunk[room:]
        from estimator.io import _kernels  # deferred with the reader's, which loaded it

        incoming = np.empty(len(chunk), dtype=object)
        incoming[:] = chunk
        slots = np.arange(self.size)  # slot j holds index slots[j]: < size, the old record
        out = _kernels.shuffle_draws(slots, self.size, self.rng.integers(0, self.size, len(chunk)))
        records = np.empty(len(chunk), dtype=object)
        old = out < self.size
        records[old] = self.records[out[old]]
        records[~old] = incoming[out[~old] - self.size]
        taken = np.flatnonzero(slots >= self.size)
        self.records[taken] = incoming[slots[taken] - self.size]
        return records.tolist()

    def drain(self) -> list:
        """The buffer's records in random order, emptying it."""
        records = list(self.records)
        self.rng.shuffle(records)
        self.records = []
        return records


def _put(q: queue.Queue, stop: threading.Event, item) -> bool:
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _run(produce, work, pool, q: queue.Queue, stop: threading.Event, stats) -> None:
    """The reading thread: blocks of records to the parsing pool, futures to the queue."""
    try:
        for block in produce(stats, stop):
            if stop.is_set() or not _put(q, stop, pool.submit(work, block)):
                return
        _put(q, stop, _END)
    except BaseException as err:  # handed to the consumer, raised there
        _put(q, stop, err)


class TFRecordBatches:
    """The batches of a ``tfrecord_input_fn`` call: an iterator of ``(features, labels)``
    (or ``features`` without a label key), filled by background threads.

    Records are parsed a block of several batches at a time (fewer, larger NumPy
    operations) and the block is cut back into the batches, each equal to parsing that
    batch alone. The threads start at the first batch taken.

    Attributes:
      stats: a :class:`~estimator.io.tfrecord.ReadStats`: records read, and the damaged
        files skipped with ``ignore_errors=True``.
    """

    def __init__(
        self, produce: Callable, parse: Callable, workers: int, depth: int, varlen: frozenset
    ) -> None:
        self.stats = ReadStats()
        self._varlen = varlen
        self._produce = produce
        self._parse = parse
        self._fn: Callable | None = None
        self._workers = workers
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._ready: collections.deque = collections.deque()
        self._done = False

    def map_rows(self, fn: Callable) -> TFRecordBatches:
        """The same batches of ``fn(batch)``, with ``fn`` (the Estimator's row-by-row host
        phase: feature columns) run in the parsing threads on whole blocks
        (``estimator.engine.input_pipeline.batch_pipeline``).

        Raises:
          RuntimeError: batches were taken already.
        """
        if self._pool is not None or self._fn is not None:
            raise RuntimeError("map_rows() after reading batches or mapping them.")
        self._fn = fn
        return self

    def _start(self) -> None:
        # The threads hold what they need, not ``self``: an iterator dropped before its end
        # is collected, and ``__del__`` stops them.
        self._pool = concurrent.futures.ThreadPoolExecutor(self._workers, "tfrecord_parse")
        work = functools.partial(_work, self._parse, self._fn, self._varlen)
        args = (self._produce, work, self._pool, self._queue, self._stop, self.stats)
        threading.Thread(target=_run, args=args, name="tfrecord_read", daemon=True).start()

    def __iter__(self) -> TFRecordBatches:
        return self

    def __next__(self):
        if self._ready:
            return self._ready.popleft()
        if self._done:
            raise StopIteration
        if self._pool is None:
            self._start()
        item = self._queue.get()
        if item is _END:
            self.close()
            raise StopIteration
        if isinstance(item, BaseException):
            self.close()
            raise item
        try:
            self._ready.extend(item.result())
        except BaseException:
            self.close()
            raise
        return self._ready.popleft()

    def close(self) -> None:
        """Stops the background threads (also done at the end of the input)."""
        self._done = True
        self._stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def __del__(self) -> None:
        if not getattr(self, "_done", True):
            self.close()


def tfrecord_input_fn(
    file_pattern: str | Sequence[str],
    features: Any,
    label_key: str | Sequence[str] | None = None,
    batch_size: int = 128,
    num_epochs: int | None = 1,
    shuffle: bool | None = None,
    compression_type: str | None = None,
    *,
    shuffle_buffer_size: int = 10_000,
    cycle_length: int = 1,
    num_parallel_calls: int = 2,
    prefetch_batches: int = 4,
    drop_remainder: bool = False,
    ignore_errors: bool = False,
) -> Callable[..., TFRecordBatches]:
    """An ``input_fn`` reading batches of ``tf.Example`` from TFRecord files.

    Args:
      file_pattern: a glob pattern (``"data/train-*.tfrecord.gz"``), a path, or a list of
        them.
      features: the parsing spec ``{key: FixedLenFeature | VarLenFeature | ...}``, or the
        feature columns (their ``make_parse_example_spec``).
      label_key: the feature holding the label (removed from the features and returned as
        ``labels``), a list of keys (``labels`` is then a dict), or None (no labels). When
        ``features`` are columns, the label's spec is added as ``FixedLenFeature([1],
        int64)`` unless given in a spec dict.
      batch_size: examples per batch.
      num_epochs: passes over the files; None repeats forever.
      shuffle: required, as in ``numpy_input_fn``: True shuffles the file order each pass
        and the records through a buffer of ``shuffle_buffer_size`` (TF's
        ``Dataset.shuffle``); False reads in order.
      compression_type: ``""``/None, ``"GZIP"`` or ``"ZLIB"``.
      shuffle_buffer_size: records in the shuffle buffer.
      cycle_length: files read at once (``interleave``).
      num_parallel_calls: threads parsing batches.
      prefetch_batches: parsed batches kept ready, at least (rounded up to whole blocks of
        about 4,096 records).
      drop_remainder: drop a last batch smaller than ``batch_size``.
      ignore_errors: skip the rest of a damaged file instead of raising (counted in the
        batches' ``stats``).

    Returns:
      ``input_fn(config=None, input_context=None)`` returning a :class:`TFRecordBatches`
      iterator. Shuffling is seeded by ``config.random_seed`` when the Estimator has one;
      with an ``input_context`` (several input pipelines) each pipeline reads its own shard
      (by file when there are enough files, else by record).

    Raises:
      ValueError: ``shuffle`` not a bool; bad sizes; a label key missing from the spec;
        no file matching the pattern (when ``input_fn`` is called).
    """
    if not isinstance(shuffle, bool):
        raise ValueError(
            "shuffle must be provided and explicitly set as boolean (it is recommended to set "
            f"it as True for training); got {shuffle}"
        )
    for name, value in (
        ("batch_size", batch_size),
        ("shuffle_buffer_size", shuffle_buffer_size),
        ("num_parallel_calls", num_parallel_calls),
        ("prefetch_batches", prefetch_batches),
    ):
        if int(value) < 1:
            raise ValueError(f"{name} must be >= 1; got {value}.")
    if num_epochs is not None and int(num_epochs) < 1:
        raise ValueError(f"num_epochs must be >= 1 or None (forever); got {num_epochs}.")
    columns_given = not isinstance(features, Mapping)
    spec = _feature_spec(features)
    if label_key is None:
        label_keys = []
    else:
        label_keys = [label_key] if isinstance(label_key, str) else list(label_key)
    for key in label_keys:
        if key not in spec:
            if not columns_given:
                raise ValueError(
                    f"label_key {key!r} is not in the feature spec (keys: {sorted(spec)}); add "
                    "its spec, e.g. FixedLenFeature([1], np.int64)."
                )
            spec[key] = FixedLenFeature([1], "int64")
    check_specs(spec)
    calls = itertools.count()

    def parse(records: list[bytes]):
        parsed = parse_example(records, spec)
        if not label_keys:
            return parsed
        labels = {key: parsed.pop(key) for key in label_keys}
        return parsed, labels[label_keys[0]] if isinstance(label_key, str) else labels

    def input_fn(config=None, input_context=None) -> TFRecordBatches:
        files = list_files(file_pattern)
        seed = getattr(config, "random_seed", None)
        rng = np.random.default_rng(None if seed is None else [seed % 2**64, next(calls)])
        shards = getattr(input_context, "num_input_pipelines", 1)
        index = getattr(input_context, "input_pipeline_id", 0)

        def produce(stats: ReadStats, stop: threading.Event) -> Iterator[list[list[bytes]]]:
            block: list[list[bytes]] = []
            for batch in batches(stats, stop):
                block.append(batch)
                if len(block) * batch_size >= _BLOCK:
                    yield block
                    block = []
            if block:
                yield block

        def batches(stats: ReadStats, stop: threading.Event) -> Iterator[list[bytes]]:
            epochs = itertools.count() if num_epochs is None else range(int(num_epochs))
            buffer = _ShuffleBuffer(shuffle_buffer_size, rng)
            pending: list[bytes] = []  # records in order, not yet in a batch
            for _ in epochs:
                order = list(files)
                if shuffle:
                    rng.shuffle(order)
                chunks = read_record_chunks(
                    order,
                    compression_type,
                    cycle_length=cycle_length,
                    num_shards=shards,
                    shard_index=index,
                    ignore_errors=ignore_errors,
                    stats=stats,
                )
                for chunk in chunks:
                    if stop.is_set():
                        return
                    if shuffle:
                        chunk = buffer.add(chunk)
                    pending += chunk
                    while len(pending) >= batch_size:
                        yield pending[:batch_size]
                        del pending[:batch_size]
            pending += buffer.drain()  # at the end, as TF's
            for lo in range(0, len(pending), batch_size):
                batch = pending[lo : lo + batch_size]
                if len(batch) == batch_size or not drop_remainder:
                    yield batch

        varlen = frozenset(k for k, v in spec.items() if isinstance(v, VarLenFeature))
        return TFRecordBatches(
            produce,
            parse,
            int(num_parallel_calls),
            -(-prefetch_batches * batch_size // _BLOCK),
            varlen,
        )

    return input_fn
