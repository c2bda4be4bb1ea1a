"""The exclusive lock on a path, of the kind its storage allows: an OS file lock on a local
disk, a lease on a store (both are ``estimator.io.locks``')."""

from __future__ import annotations

from estimator.io.fs._files import read_bytes, remove
from estimator.io.fs._paths import _local, _remote, check
from estimator.io.fs._writes import write_bytes


def exclusive_lock(path, holder: dict):
    """An exclusive, non-blocking lock on ``path``, held while a ``with`` block runs:
    ``filelock``'s OS file lock on a local disk (the operating system drops it when its
    process ends), a renewed lease object on a store (``estimator.io.locks``). ``holder``
    (JSON-serializable: pid, host, ...) is written into the lock for whoever finds it held.

    Raises:
      estimator.io.locks.LockHeld: on entering, when another holder has it.
    """
    from estimator.io import locks

    if _remote(path) is None:
        return locks.LocalLock(_local(path), holder)
    return locks.Lease(check(path, "lock"), (read_bytes, write_bytes, remove), holder)
