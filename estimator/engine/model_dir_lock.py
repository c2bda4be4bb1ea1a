"""One writer per ``model_dir``: the lock ``Estimator.train`` holds while it trains.

TF lets two processes train into one ``model_dir``; their checkpoints interleave (each
resumes from whatever the other saved last) and orbax's checkpoint manager can wait
forever on the other's temporary directories. ``train()`` here takes an exclusive
``flock`` on ``<model_dir>/.train.lock`` first, without waiting: a second writer gets a
clear error naming the holder. The operating system drops the lock when its process
ends, however it ends, so a killed run never leaves a stale lock. Readers (``evaluate``,
``predict``, export, a separate evaluator process) take no lock.

``flock`` holds on local file systems and on NFS (through its lock manager); on file
systems without locks (some FUSE mounts) taking it fails and training goes on unguarded,
with a warning. On platforms without ``fcntl`` (Windows) there is no lock.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import time

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

__all__ = ["ModelDirLock", "ModelDirBusyError"]

LOCK_FILE = ".train.lock"
logger = logging.getLogger("estimator")


class ModelDirBusyError(RuntimeError):
    """Raised by ``Estimator.train`` when another ``train()`` holds ``model_dir``."""


class ModelDirLock:
    """An exclusive, non-blocking lock on ``model_dir`` for the duration of a ``with``.

    Args:
      model_dir: the directory (created if absent).

    Raises:
      ModelDirBusyError: on entering, if another process (or another ``train()`` in this
        one) holds it; the message names its pid, host and start time.
    """

    def __init__(self, model_dir) -> None:
        self.path = os.path.join(os.fspath(model_dir), LOCK_FILE)
        self._fd: int | None = None

    def __enter__(self) -> ModelDirLock:
        if fcntl is None:
            return self
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _read_holder(fd)
            os.close(fd)
            if err.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise ModelDirBusyError(
                    f"{os.path.dirname(self.path)} is being trained by another process "
                    f"({holder}); two writers would interleave their checkpoints. Wait for it "
                    "to finish, stop it, or train into another model_dir. (The lock is "
                    f"{self.path}; it is released when that process ends.)"
                ) from None
            logger.warning(
                "Could not lock %s (%s): this file system has no locks, so nothing stops a "
                "second process from training into the same model_dir.",
                self.path,
                err,
            )
            return self
        os.ftruncate(fd, 0)
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        os.write(fd, json.dumps(info).encode())
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["since"]))
        return f"pid {info['pid']} on {info['host']}, since {since}"
    except (ValueError, KeyError, TypeError, OSError):
        return "holder unknown"
