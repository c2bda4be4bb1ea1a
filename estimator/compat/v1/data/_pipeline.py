"""What a ``tf.data`` pipeline is made of, shared by the dataset and its two executors."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Op", "Source", "around_batch", "call_map", "vectorizing", "is_vectorizing"]

_VECTORIZING = {"active": False}


@dataclasses.dataclass(frozen=True)
class Op:
    """One operation of a pipeline: ``kind`` (``"map"``, ``"batch"``, ...) and its
    arguments."""

    kind: str
    args: tuple = ()


@dataclasses.dataclass(frozen=True)
class Source:
    """The source of a pipeline.

    ``kind`` is ``"slices"`` (``value``: ``(tree of NumPy arrays, length)``, sliced along
    axis 0) or ``"generator"`` (``value``: a zero-argument callable returning a new
    iterator of elements for each pass: generators, text files).
    """

    kind: str
    value: Any


def around_batch(ops: tuple[Op, ...]) -> tuple[list[Op], Op, list[Op]] | None:
    """``(ops before, the batch, ops after)`` of a pipeline with exactly one ``batch``, else
    None (what the columnar and streaming plans take)."""
    kinds = [op.kind for op in ops]
    if kinds.count("batch") != 1:
        return None
    split = kinds.index("batch")
    return list(ops[:split]), ops[split], list(ops[split + 1 :])


def call_map(fn: Callable, element: Any) -> Any:
    """``fn`` on an element as TF calls it: a tuple element is unpacked into arguments."""
    if isinstance(element, tuple):
        return fn(*element)
    return fn(element)


@contextlib.contextmanager
def vectorizing() -> Iterator[None]:
    """Marks the tracing of a ``Dataset.map`` function for the columnar executor."""
    _VECTORIZING["active"] = True
    try:
        yield
    finally:
        _VECTORIZING["active"] = False


def is_vectorizing() -> bool:
    """Whether a ``Dataset.map`` function is being traced to run batch-wise (random ops
    refuse then, so such maps run element by element)."""
    return _VECTORIZING["active"]
