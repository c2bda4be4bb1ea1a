"""Records in one buffer (internal): the TFRecord reader's chunks, which the input engine
shuffles and batches and ``parse_example`` parses, without a ``bytes`` object per record.

A :class:`Records` is a uint8 array and each record's start and length in it (in any order,
possibly sharing the buffer with other ``Records``). It is a sequence of ``bytes`` for
whoever wants them (``records[i]``, iteration, :meth:`Records.tolist`), at a copy each;
the input engine and the parser use the arrays.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["Records"]


class Records:
    """Records ``data[starts[i] : starts[i] + lengths[i]]``.

    Args:
      data: uint8 [bytes] (or a ``bytes`` object, viewed without a copy).
      starts, lengths: int64 [n].
    """

    __slots__ = ("data", "starts", "lengths")

    def __init__(self, data, starts: np.ndarray, lengths: np.ndarray) -> None:
        self.data = data if isinstance(data, np.ndarray) else np.frombuffer(data, np.uint8)
        self.starts = starts
        self.lengths = lengths

    @classmethod
    def from_list(cls, records: Sequence[bytes]) -> Records:
        """The records of a list of ``bytes``, copied into one buffer."""
        lengths = np.fromiter(map(len, records), np.int64, len(records))
        return cls(b"".join(records), np.cumsum(lengths) - lengths, lengths)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i):
        """Record ``i`` as ``bytes``; a slice gives a :class:`Records`."""
        if isinstance(i, slice):
            return self.take(i)
        start = int(self.starts[i])
        return self.data[start : start + int(self.lengths[i])].tobytes()

    def __iter__(self) -> Iterator[bytes]:
        data = self.data
        for start, length in zip(self.starts.tolist(), self.lengths.tolist(), strict=True):
            yield data[start : start + length].tobytes()

    def tolist(self) -> list[bytes]:
        return list(self)

    def take(self, index) -> Records:
        """The records at ``index`` (a slice or an index array), sharing the buffer."""
        return Records(self.data, self.starts[index], self.lengths[index])

    @staticmethod
    def concat(parts: Sequence[Records]) -> Records:
        """The records of ``parts``, in order, as one :class:`Records` in a new buffer (one
        part is returned as is). Parts that use most of their buffers (a reader's chunks in
        order) have the buffers joined whole, a ``memcpy`` each; others (records drawn from
        many buffers) have their records gathered one by one."""
        parts = [p for p in parts if len(p)] or list(parts[:1])
        if len(parts) == 1:
            return parts[0]
        buffers: dict[int, np.ndarray] = {id(p.data): p.data for p in parts}
        used = sum(int(p.lengths.sum()) for p in parts)
        if sum(len(b) for b in buffers.values()) <= 2 * used:
            return Records._joined(parts, buffers)
        from estimator.io import _kernels

        lengths = np.concatenate([p.lengths for p in parts])
        starts = np.cumsum(lengths) - lengths
        data = np.empty(used, np.uint8)
        lo = 0
        for part in parts:
            hi = lo + len(part)
            _kernels.copy_records(part.data, part.starts, part.lengths, data, starts[lo:hi])
            lo = hi
        data.flags.writeable = False  # as a reader's buffer: one type for the compiled loops
        return Records(data, starts, lengths)

    @staticmethod
    def _joined(parts: Sequence[Records], buffers: dict[int, np.ndarray]) -> Records:
        """The parts with their buffers joined whole, each once; records keep their place."""
        offsets, size = {}, 0
        for key, buffer in buffers.items():
            offsets[key] = size
            size += len(buffer)
        data = np.concatenate(list(buffers.values()))
        data.flags.writeable = False
        starts = np.concatenate([p.starts + offsets[id(p.data)] for p in parts])
        return Records(data, starts, np.concatenate([p.lengths for p in parts]))
