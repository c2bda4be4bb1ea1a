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

On object storage (a ``gs://``, ``s3://``, ... ``model_dir``) there is no ``flock``, and
fsspec offers no create-if-absent that every store honours, so the lock is a **lease**:
the object ``<model_dir>/.train.lock`` names its holder (pid, host, a random token) and the
time of its last renewal, renewed every :data:`LEASE_RENEW_SECS` by a background thread.
A ``train()`` that finds a lease renewed within :data:`LEASE_SECS` refuses with
:class:`ModelDirBusyError`, unless its holder is a process of this host that no longer
exists (a killed run: its lease is taken over at once; from another host it expires after
``LEASE_SECS``). What it guarantees: a second ``train()`` that starts while the first runs
is refused. What it cannot: two that start within the same second (between one's read and
its write) may both take it; each then reads back the lease after writing it and the one
whose token is not there refuses, which closes most of that window but not all of it on a
store whose reads lag its writes.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import threading
import time
import uuid

from estimator.io import fs

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

__all__ = ["ModelDirLock", "ModelDirBusyError"]

LOCK_FILE = ".train.lock"
#: A lease on object storage not renewed for this long is stale (seconds).
LEASE_SECS = 60.0
#: How often the holder renews its lease (seconds).
LEASE_RENEW_SECS = 15.0
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
        self.path = fs.join(model_dir, LOCK_FILE)
        self._fd: int | None = None
        self._lease: _Lease | None = None

    def __enter__(self) -> ModelDirLock:
        if fs.is_url(self.path):
            self._lease = _Lease(self.path)
            self._lease.take()
            return self
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
        if self._lease is not None:
            self._lease.release()
            self._lease = None
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


def _busy(path: str, holder: str) -> ModelDirBusyError:
    return ModelDirBusyError(
        f"{fs.dirname(path)} is being trained by another process ({holder}); two writers "
        "would interleave their checkpoints. Wait for it to finish, stop it, or train into "
        f"another model_dir. (The lock is the lease {path}; a lease not renewed for "
        f"{LEASE_SECS:.0f} s is stale.)"
    )


def _describe(info: dict) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.get("since", 0)))
    return f"pid {info.get('pid')} on {info.get('host')}, since {since}"


def _pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError, OSError):
        return True  # exists (or cannot tell): treat as alive
    return True


class _Lease:
    """The lock on object storage (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "token": uuid.uuid4().hex,
            "since": time.time(),
        }
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _read(self) -> dict | None:
        try:
            info = json.loads(fs.read_bytes(self.path))
        except FileNotFoundError:
            return None
        except ValueError:  # damaged: treat as absent
            return None
        return info if isinstance(info, dict) else None

    def _live(self, info: dict) -> bool:
        if time.time() - float(info.get("renewed", 0)) > LEASE_SECS:
            return False
        if info.get("host") == self.info["host"] and not _pid_alive(info.get("pid")):
            return False  # a killed run on this host
        return True

    def _write(self) -> None:
        fs.write_bytes(self.path, json.dumps({**self.info, "renewed": time.time()}).encode())

    def take(self) -> None:
        held = self._read()
        if held is not None and held.get("token") != self.info["token"] and self._live(held):
            raise _busy(self.path, _describe(held))
        if held is not None and held.get("token") != self.info["token"]:
            logger.warning("Taking over the stale lease %s (%s).", self.path, _describe(held))
        self._write()
        now = self._read()
        if now is None or now.get("token") != self.info["token"]:
            raise _busy(self.path, _describe(now or {}))
        self._thread = threading.Thread(target=self._renew, name="model-dir-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(LEASE_RENEW_SECS):
            try:
                self._write()
            except Exception as err:  # a failed renewal is retried at the next interval
                logger.warning("Could not renew the lease %s: %s", self.path, err)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            held = self._read()
            if held is not None and held.get("token") == self.info["token"]:
                fs.remove(self.path)
        except Exception as err:  # the lease then expires by itself
            logger.warning("Could not release the lease %s: %s", self.path, err)
