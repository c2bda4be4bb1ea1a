"""The features of a batch of serialized ``tf.Example``s, one column per key (internal).

``collect(records, keys)`` reads, for each requested key and each example, which list the
example holds (none, bytes, float or int64) and its values, into a :class:`Column`:
per-example kinds and counts, and the values of each kind concatenated over the examples
(CSR). ``estimator.io._parse`` turns columns into the specs' outputs with whole-array
operations.

Two readers give the same columns: :mod:`estimator.io._wire` decodes the common layout of
a batch with NumPy (every record at once, level by level of the message), and the
protobuf reader here (``Example.FromString`` per record, from the real schema) reads
every record the fast reader declines, and defines the semantics both follow: an empty
``Feature`` (no list set) is absent, as TF's parser treats it; a key repeated in a
record's map keeps its last value (protobuf's rule).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from estimator.io import protos

ABSENT, BYTES, FLOAT, INT64 = 0, 1, 2, 3
KIND_NAMES = {BYTES: "string", FLOAT: "float", INT64: "int64"}
_LISTS = {"bytes_list": BYTES, "float_list": FLOAT, "int64_list": INT64}


class Column(NamedTuple):
    """One key over a batch of examples."""

    kinds: np.ndarray  # shape=[n], int8: ABSENT, BYTES, FLOAT or INT64
    counts: np.ndarray  # shape=[n], int64: number of values (of the example's kind)
    bytes_values: np.ndarray  # shape=[sum of counts where kind == BYTES], object (bytes)
    float_values: np.ndarray  # shape=[... FLOAT], float32
    int_values: np.ndarray  # shape=[... INT64], int64

    def values(self, kind: int) -> np.ndarray:
        return (self.bytes_values, self.float_values, self.int_values)[kind - 1]


class RecordError(ValueError):
    """A record that is not a serialized ``tf.Example``; ``index`` is its position."""

    def __init__(self, index: int, record: bytes) -> None:
        super().__init__(index, record)
        self.index = index
        self.record = record


def _bytes_array(items: list) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


class _Builder:
    """Accumulates one key's column record by record."""

    def __init__(self, n: int) -> None:
        self.kinds = np.zeros(n, np.int8)
        self.counts = np.zeros(n, np.int64)
        self.parts: tuple[list, list, list] = ([], [], [])

    def add(self, i: int, kind: int, values) -> None:
        self.kinds[i] = kind
        self.counts[i] = len(values)
        self.parts[kind - 1].append(values)

    def column(self) -> Column:
        chain = itertools.chain.from_iterable
        return Column(
            self.kinds,
            self.counts,
            _bytes_array(list(chain(self.parts[0]))),
            np.fromiter(chain(self.parts[1]), np.float32),
            np.fromiter(chain(self.parts[2]), np.int64),
        )


def features_of(record: bytes, index: int):
    """The ``Features`` map of one serialized ``Example`` (protobuf).

    Raises:
      RecordError: the record does not parse as an ``Example``.
    """
    try:
        return protos.Example.FromString(record).features.feature
    except Exception:  # protobuf's DecodeError (and TypeError for non-bytes)
        raise RecordError(index, record) from None


def collect_protobuf(records: Sequence[bytes], keys: Sequence[str]) -> dict[str, Column]:
    """The columns of ``keys`` over ``records``, read with protobuf record by record."""
    return collect_protobuf_maps([features_of(r, i) for i, r in enumerate(records)], keys)


def collect_protobuf_maps(maps: Sequence, keys: Sequence[str]) -> dict[str, Column]:
    """The columns of ``keys`` over parsed ``Features.feature`` maps, one per example."""
    builders = {key: _Builder(len(maps)) for key in keys}
    for i, fmap in enumerate(maps):
        for key, builder in builders.items():
            if key in fmap:
                feature = fmap[key]
                which = feature.WhichOneof("kind")
                if which is not None:
                    builder.add(i, _LISTS[which], getattr(feature, which).value)
    return {key: builder.column() for key, builder in builders.items()}
