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

It runs on the input engine (``estimator.inputs.engine``) that ``estimator.compat``'s
``tf.data`` runs on: reading, decompression, CRC checks and the shuffle buffer in a
background thread, the records kept in the reader's buffers; parsing (and the columns'
host phase, when the Estimator fuses it with ``map_rows``) in a pool of
``num_parallel_calls`` threads, a block of several batches (about 4,096 records) at a time,
at least ``prefetch_batches`` batches ahead, so the host work overlaps the device's steps.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from estimator.inputs import engine
from estimator.io import FixedLenFeature, VarLenFeature, parse_example
from estimator.io._parse import check_specs, parse_for_host_phase
from estimator.io.tfrecord import ReadStats, list_files, read_record_chunks
from estimator.preprocessing._specs import _merge_specs

__all__ = ["tfrecord_input_fn"]


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


def _check_arguments(shuffle, sizes: dict, num_epochs) -> None:
    if not isinstance(shuffle, bool):
        raise ValueError(
            "shuffle must be provided and explicitly set as boolean (it is recommended to set "
            f"it as True for training); got {shuffle}"
        )
    for name, value in sizes.items():
        if int(value) < 1:
            raise ValueError(f"{name} must be >= 1; got {value}.")
    if num_epochs is not None and int(num_epochs) < 1:
        raise ValueError(f"num_epochs must be >= 1 or None (forever); got {num_epochs}.")


def _label_keys(label_key, spec: dict, columns_given: bool) -> list[str]:
    """The label keys, each added to ``spec`` as ``FixedLenFeature([1], int64)`` when the
    features are columns (a spec dict must hold them)."""
    if label_key is None:
        return []
    keys = [label_key] if isinstance(label_key, str) else list(label_key)
    for key in keys:
        if key in spec:
            continue
        if not columns_given:
            raise ValueError(
                f"label_key {key!r} is not in the feature spec (keys: {sorted(spec)}); add "
                "its spec, e.g. FixedLenFeature([1], np.int64)."
            )
        spec[key] = FixedLenFeature([1], "int64")
    return keys


@dataclasses.dataclass(frozen=True)
class _Reading:
    """What one ``input_fn`` reads and how (the options of :func:`tfrecord_input_fn`)."""

    file_pattern: Any
    compression_type: str | None
    num_epochs: int | None
    shuffle: bool
    shuffle_buffer_size: int
    cycle_length: int
    ignore_errors: bool

    def chunks(self, rng, shards: int, index: int, stats: ReadStats) -> Iterator:
        """The records of every epoch, the files in a new random order each epoch when
        shuffling."""
        files = list_files(self.file_pattern)
        epochs = itertools.count() if self.num_epochs is None else range(int(self.num_epochs))
        for _ in epochs:
            order = list(files)
            if self.shuffle:
                rng.shuffle(order)
            yield from read_record_chunks(
                order,
                self.compression_type,
                cycle_length=self.cycle_length,
                num_shards=shards,
                shard_index=index,
                ignore_errors=self.ignore_errors,
                stats=stats,
            )


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
) -> Callable[..., engine.Batches]:
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
      shuffle: required, as in ``numpy_input_fn``: True reads the files in a new random
        order each epoch and the records through a shuffle buffer of
        ``shuffle_buffer_size`` records (TF's ``Dataset.shuffle``; ``estimator.inputs.engine``
        says what each shuffle means); False reads in order.
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
      ``input_fn(config=None, input_context=None)`` returning an iterator of batches
      (``estimator.inputs.engine.Batches``; its ``stats`` is a
      :class:`~estimator.io.tfrecord.ReadStats`). Shuffling is seeded by
      ``config.random_seed`` when the Estimator has one; with an ``input_context`` (several
      input pipelines) each pipeline reads its own shard (by file when there are enough
      files, else by record).

    Raises:
      ValueError: ``shuffle`` not a bool; bad sizes; a label key missing from the spec;
        no file matching the pattern (when ``input_fn`` is called).
    """
    _check_arguments(
        shuffle,
        {
            "batch_size": batch_size,
            "shuffle_buffer_size": shuffle_buffer_size,
            "num_parallel_calls": num_parallel_calls,
            "prefetch_batches": prefetch_batches,
        },
        num_epochs,
    )
    spec = _feature_spec(features)
    label_keys = _label_keys(label_key, spec, columns_given=not isinstance(features, Mapping))
    check_specs(spec)
    reading = _Reading(
        file_pattern,
        compression_type,
        num_epochs,
        shuffle,
        int(shuffle_buffer_size),
        int(cycle_length),
        ignore_errors,
    )
    varlen = frozenset(k for k, v in spec.items() if isinstance(v, VarLenFeature))
    single = isinstance(label_key, str)
    calls = itertools.count()

    def parse(records, for_host_phase: bool = False):
        read = parse_for_host_phase if for_host_phase else parse_example
        parsed = read(records, spec)
        if not label_keys:
            return parsed
        labels = {key: parsed.pop(key) for key in label_keys}
        return parsed, labels[label_keys[0]] if single else labels

    def input_fn(config=None, input_context=None) -> engine.Batches:
        seed = getattr(config, "random_seed", None)
        rng = np.random.default_rng(None if seed is None else [seed % 2**64, next(calls)])
        shards = getattr(input_context, "num_input_pipelines", 1)
        index = getattr(input_context, "input_pipeline_id", 0)
        stats = ReadStats()
        list_files(file_pattern)  # no file: the error now, not in the reading thread

        def build(fn: Callable | None):
            def work(block: engine.Block):
                if fn is None:
                    return parse(block.items)
                return fn(parse(block.items, for_host_phase=True))

            ds = engine.Source(lambda: reading.chunks(rng, shards, index, stats))
            if shuffle:
                block = max(1, engine.BLOCK_ROWS // batch_size) * batch_size
                ds = engine.Shuffle(ds, reading.shuffle_buffer_size, lambda: rng, emit=block)
            ds = engine.Blocks(ds, batch_size, drop_remainder=drop_remainder)
            ds = engine.prefetch(ds, 2)
            depth = -(-prefetch_batches * batch_size // engine.BLOCK_ROWS)
            ds = engine.ParallelMap(
                ds, work, workers=num_parallel_calls, depth=max(depth, num_parallel_calls) + 1
            )
            return engine.Unblock(ds, varlen)

        return engine.Batches(build, stats)

    return input_fn
