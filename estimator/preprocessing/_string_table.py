"""A memo of a per-string function, looked up in vectorized NumPy (internal).

Categorical string features have few distinct values, so each op keeps the values it has
seen in a sorted array and maps a batch with ``np.searchsorted``: after the first batches
no string is hashed or looked up in Python again. Values not seen yet are deduplicated
(``np.unique``) and computed once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

#: Beyond this many distinct strings the table stops growing (high-cardinality features
#: are then computed per batch, still once per distinct value).
MAX_SIZE = 1 << 17
_MIN_MERGE = 1024


class StringTable:
    """``fn`` applied to every string of an array, memoized across calls.

    Args:
      fn: ``list[str] -> array`` of one value per string (called on new strings only).
      dtype: the values' dtype.
      max_size: the most strings kept.
    """

    def __init__(self, fn: Callable[[list[str]], np.ndarray], dtype, max_size: int = MAX_SIZE):
        self._fn = fn
        self._dtype = np.dtype(dtype)
        self._max_size = max_size
        self._lock = threading.Lock()
        # (sorted keys, values): replaced as a whole, so readers need no lock.
        self._state = (np.array([], dtype=str), np.array([], dtype=self._dtype))
        # New strings wait in a dict and are merged into the sorted arrays once they number
        # half the table (at least _MIN_MERGE): each string is sorted O(1) times on
        # average, instead of the whole table being re-sorted on every batch that brings
        # new ones. Misses look in the dict (a hash lookup each) before computing.
        self._pending: dict[str, object] = {}

    def __call__(self, strings: np.ndarray) -> np.ndarray:
        """Values for a ``str`` (``U``) array of any shape; same shape."""
        keys, values = self._state
        flat = strings.ravel()
        if len(keys):
            position = np.searchsorted(keys, flat)
            np.minimum(position, len(keys) - 1, out=position)
            out = values[position]
            hit = keys[position] == flat
            if hit.all():
                return out.reshape(strings.shape)
        else:
            out = np.empty(flat.shape, self._dtype)
            hit = np.zeros(flat.shape, dtype=bool)
        miss = ~hit
        new, inverse = np.unique(flat[miss], return_inverse=True)
        pending = self._pending
        found = [pending.get(v) for v in new.tolist()]
        todo = [i for i, v in enumerate(found) if v is None]
        new_values = np.empty(len(new), self._dtype)
        if len(todo) < len(new):
            done = [i for i, v in enumerate(found) if v is not None]
            new_values[done] = [found[i] for i in done]
        if todo:
            computed = np.asarray(self._fn(new[todo].tolist()), self._dtype)
            new_values[todo] = computed
            self._remember(new[todo], computed)
        out[miss] = new_values[inverse.ravel()]
        return out.reshape(strings.shape)

    def _remember(self, new: np.ndarray, new_values: np.ndarray) -> None:
        with self._lock:
            keys, values = self._state
            if len(keys) + len(self._pending) + len(new) > self._max_size:
                return
            self._pending.update(zip(new.tolist(), new_values.tolist(), strict=True))
            if len(self._pending) < max(_MIN_MERGE, len(keys) // 2):
                return
            pending_keys = np.array(list(self._pending), dtype=str)
            pending_values = np.array(list(self._pending.values()), dtype=self._dtype)
            keys = np.concatenate([keys, pending_keys])
            values = np.concatenate([values, pending_values])
            order = np.argsort(keys, kind="stable")
            self._state = (keys[order], values[order])
            self._pending = {}
