"""Checks of input values that a compiled step cannot make: ids out of a table's range.

TF's ``tf.nn.embedding_lookup`` raises ``InvalidArgumentError`` for an id outside ``[0,
rows)`` (on CPU); a gather compiled by XLA cannot raise, and JAX's fills such rows silently.
A check inside the step would need a host callback, which costs many times the step it
guards. So ``embedding_lookup`` checks:

* concrete ids (outside a compiled step) at once;
* ids that are a feature as ``model_fn`` received it (``features["ids"]``, not computed
  from one) on the host, before each step, in the input pipeline: while ``model_fn`` is
  traced the lookup registers ``(feature, table, rows)`` here (:meth:`InputChecks.add`)
  and every later batch is checked before it is placed on the device (one ``max`` over the
  feature's array read as unsigned, so a negative id is out of range too); the batches
  prepared before the trace are checked when the check is registered.

Ids computed inside ``model_fn`` (a hash, a sum, a cast of a feature) are not checked: an
out-of-range one gives a row of zeros, as JAX's gather does.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

import numpy as np

__all__ = ["IdRangeError", "InputChecks", "check_ids", "ids_error"]


class IdRangeError(ValueError):
    """An id outside a table's rows (TF's ``InvalidArgumentError`` of ``GatherV2``)."""


def ids_error(ids: np.ndarray, rows: int, table: str, where: Any) -> IdRangeError | None:
    """TF's error for the first id of ``ids`` outside ``[0, rows)`` (None when all are
    in range): ``indices[i] = v is not in [0, rows)``, then which table and what to do
    (``where`` the ids come from: a string, or a function making it)."""
    ids = np.asarray(ids)
    if ids.size == 0:
        return None
    if ids.dtype.kind == "i":  # one pass: a negative id is a large unsigned one
        unsigned = np.dtype(f"uint{ids.dtype.itemsize * 8}")
        if ids.view(unsigned).max() < rows:
            return None
    elif ids.dtype.kind == "u" and ids.max() < rows:
        return None
    flat = ids.reshape(-1)
    i = int(np.flatnonzero((flat < 0) | (flat >= rows))[0])
    index = ",".join(map(str, np.unravel_index(i, ids.shape))) if ids.ndim else "0"
    where = where() if callable(where) else where
    return IdRangeError(
        f"indices[{index}] = {flat[i]} is not in [0, {rows}) (embedding_lookup of {table}, "
        f"{rows} rows; ids from {where}). An id outside the table's rows would read a row of "
        "zeros: map unknown values to an id of their own (an out-of-vocabulary bucket), or "
        "give the table more rows."
    )


def check_ids(ids: Any, rows: int, table: str, where: str = "the lookup's argument") -> None:
    """Raises :func:`ids_error` for concrete ``ids`` (NumPy or jax arrays)."""
    error = ids_error(np.asarray(ids), rows, table, where)
    if error is not None:
        raise error


def _path_name(path: tuple) -> str:
    keys = "".join(f"[{getattr(k, 'key', getattr(k, 'idx', k))!r}]" for k in path)
    return f"features{keys}"


class InputChecks:
    """The host checks of a model's input features (see the module docstring).

    ``add`` is called while ``model_fn`` is traced; ``__call__(features)`` checks a batch's
    host features before placement (``estimator.engine.input_pipeline``).
    """

    def __init__(self) -> None:
        self._checks: dict[tuple, tuple[int, str]] = {}  # feature path -> (rows, table)
        self._recent: collections.deque = collections.deque(maxlen=2)
        self._lock = threading.Lock()
        self._version = 0  # checks added so far

    def __bool__(self) -> bool:
        return bool(self._checks)

    def add(self, path: tuple, rows: int, table: str) -> None:
        """Checks the feature at ``path`` (a key path of ``features``) against ``[0,
        rows)`` from now on, and the batches prepared before.

        Raises:
          IdRangeError: a batch prepared before holds an id out of range.
        """
        with self._lock:
            known = self._checks.get(path)
            if known is not None and known[0] <= rows:
                return
            self._checks[path] = (int(rows), table)
            self._version += 1
            recent = list(self._recent)
        for features in recent:
            self._check(features, {path: (int(rows), table)})

    def __call__(self, features: Any) -> None:
        """Checks one batch's host ``features``.

        Raises:
          IdRangeError: an id out of a table's range (TF's message first).
        """
        with self._lock:
            checks = dict(self._checks)
            self._recent.append(features)
        self._check(features, checks)

    def check_rows(self, features: Any) -> int:
        """Checks the host ``features`` of many batches at once (an in-memory input's
        block of batches, ``estimator.engine.row_blocks``), without counting them as
        prepared: each of its batches is passed to :meth:`handed` as it is handed out.
        Returns the version of the checks they passed.

        Raises:
          IdRangeError: an id out of a table's range (its index is the block's: prepare
            the batches one by one for each one's error).
        """
        with self._lock:
            checks, version = dict(self._checks), self._version
        self._check(features, checks)
        return version

    def handed(self, features: Any, version: int) -> None:
        """Counts one batch's host ``features`` as prepared, their block having passed
        the checks of ``version`` (:meth:`check_rows`); checks them when checks were
        added since: as :meth:`__call__`.

        Raises:
          IdRangeError: as :meth:`__call__`.
        """
        with self._lock:
            self._recent.append(features)
            checks = None if version == self._version else dict(self._checks)
        if checks is not None:
            self._check(features, checks)

    @staticmethod
    def _check(features: Any, checks: dict) -> None:
        for path, (rows, table) in checks.items():
            value = features
            for key in path:
                value = value[getattr(key, "key", getattr(key, "idx", key))]
            error = ids_error(value, rows, table, lambda path=path: _path_name(path))
            if error is not None:
                raise error
