"""One writer per ``model_dir``: the lock ``Estimator.train`` holds while it trains.

TF lets two processes train into one ``model_dir``; their checkpoints interleave (each
resumes from whatever the other saved last) and orbax's checkpoint manager can wait
forever on the other's temporary directories. ``train()`` here takes an exclusive lock on
``<model_dir>/.train.lock`` first, without waiting: a second writer gets a clear error
naming the holder. Readers (``evaluate``, ``predict``, export, a separate evaluator
process) take no lock.

The lock is the storage's (``estimator.io.fs.exclusive_lock``): on a local disk
``filelock``'s OS file lock, which the operating system drops when its process ends,
however it ends, so a killed run never leaves a stale lock (``flock`` holds on local file
systems and on NFS through its lock manager; where a file system has no locks ``filelock``
falls back to a lock file); on object storage (a ``gs://``, ``s3://``, ... ``model_dir``) a
lease renewed in the background, which a killed run of the same host leaves to be taken
over at once and one of another host after ``estimator.io.locks.LEASE_SECS`` (see
``estimator.io.locks`` for what a lease can and cannot guarantee).
"""

from __future__ import annotations

from estimator.io import fs
from estimator.io.locks import LockHeld, describe

__all__ = ["ModelDirLock", "ModelDirBusyError"]

LOCK_FILE = ".train.lock"


class ModelDirBusyError(RuntimeError):
    """Raised by ``Estimator.train`` when another ``train()`` holds ``model_dir``."""


class ModelDirLock:
    """An exclusive, non-blocking lock on ``model_dir`` for the duration of a ``with``.

    Args:
      model_dir: the directory (created if absent on a local disk).

    Raises:
      ModelDirBusyError: on entering, if another process (or another ``train()`` in this
        one) holds it; the message names its pid, host and start time.
    """

    def __init__(self, model_dir) -> None:
        self.model_dir = fs.as_str(model_dir)
        self.path = fs.join(model_dir, LOCK_FILE)
        self._lock = None

    def __enter__(self) -> ModelDirLock:
        lock = fs.exclusive_lock(self.path, {})
        try:
            lock.__enter__()
        except LockHeld as held:
            raise ModelDirBusyError(
                f"{fs.dirname(self.path)} is being trained by another process "
                f"({describe(held.holder)}); two writers would interleave their checkpoints. "
                "Wait for it to finish, stop it, or train into another model_dir. (The lock "
                f"is {held.lock}.)"
            ) from None
        self._lock = lock
        return self

    def __exit__(self, *exc) -> None:
        if self._lock is not None:
            self._lock.__exit__(*exc)
            self._lock = None
