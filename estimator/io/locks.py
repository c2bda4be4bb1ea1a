"""Exclusive locks on a path, on any storage (internal; ``estimator.io.fs.exclusive_lock``
chooses one): :class:`LocalLock` on a local disk, :class:`Lease` on an object store.

Both are non-blocking: taking a lock that another holder has raises :class:`LockHeld`,
naming the holder (what it wrote into the lock: pid, host, start time) and how the lock
goes away, so the caller can say who is in the way.

* :class:`LocalLock` is ``filelock``'s ``FileLock`` (``flock`` on POSIX, ``LockFileEx`` on
  Windows, a soft lock file where the file system has no locks): the operating system drops
  it when its process ends, however it ends, so a killed process never leaves a stale lock.
  The holder's description is written into the lock file after it is taken.
* :class:`Lease` is for object storage, which has no locks, and where fsspec offers no
  create-if-absent that every store honours: the object names its holder (pid, host, a
  random token) and the time of its last renewal, renewed every :data:`LEASE_RENEW_SECS`
  by a background thread. A lease renewed within :data:`LEASE_SECS` is held, unless its
  holder is a process of this host that no longer exists (a killed run: taken over at
  once; from another host it expires after ``LEASE_SECS``). What it guarantees: a second
  taker that starts while the first holds it is refused. What it cannot: two that start
  within the same second (between one's read and its write) may both write it; each then
  reads the lease back and the one whose token is not there refuses, which closes most of
  that window but not all of it on a store whose reads lag its writes.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid

__all__ = ["LEASE_RENEW_SECS", "LEASE_SECS", "Lease", "LocalLock", "LockHeld", "describe"]

#: A lease on object storage not renewed for this long is stale (seconds).
LEASE_SECS = 60.0
#: How often the holder renews its lease (seconds).
LEASE_RENEW_SECS = 15.0
logger = logging.getLogger("estimator")


class LockHeld(Exception):
    """Another holder has the lock.

    Attributes:
      holder: what the holder wrote into the lock (``pid``, ``host``, ``since``; ``{}`` when
        it cannot be read).
      lock: the lock and how it goes away, as a clause (``"<path>; it is released when that
        process ends"``).
    """

    def __init__(self, holder: dict, lock: str) -> None:
        super().__init__(f"held by {describe(holder)} ({lock})")
        self.holder = holder
        self.lock = lock


def describe(holder: dict) -> str:
    """``"pid <pid> on <host>, since <local start time, %Y-%m-%d %H:%M:%S>"``, or
    ``"holder unknown"``."""
    if "pid" not in holder:
        return "holder unknown"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("since", 0)))
    return f"pid {holder['pid']} on {holder.get('host')}, since {since}"


def _identity() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}


class LocalLock:
    """An OS file lock (``filelock.FileLock``) on a local path; see the module docstring.

    Args:
      path: the lock file (its directory is created).
      holder: extra fields written into the lock beside pid, host and start time.
    """

    def __init__(self, path: str, holder: dict | None = None) -> None:
        import filelock

        self.path = path
        self.info = {**_identity(), **(holder or {})}
        self._lock = filelock.FileLock(path, timeout=0)

    def _held(self) -> LockHeld:
        try:
            with open(self.path, "rb") as f:
                holder = json.loads(f.read() or b"{}")
        except (OSError, ValueError):
            holder = {}
        holder = holder if isinstance(holder, dict) else {}
        return LockHeld(holder, f"{self.path}; it is released when that process ends")

    def __enter__(self) -> LocalLock:
        import filelock

        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        try:
            self._lock.acquire()
        except filelock.Timeout:
            raise self._held() from None
        with open(self.path, "r+b") as f:  # the lock is on the inode: rewriting it is safe
            f.truncate(0)
            f.write(json.dumps(self.info).encode())
        return self

    def __exit__(self, *exc) -> None:
        self._lock.release()


def _pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError, OSError):
        return True  # exists (or cannot tell): treat as alive
    return True


class Lease:
    """A lease object on storage without locks; see the module docstring.

    Args:
      url: the lease object.
      store: ``(read_bytes, write_bytes, remove)`` of the storage (``estimator.io.fs``'s).
      holder: extra fields written into the lease beside pid, host, token and start time.
    """

    def __init__(self, url: str, store: tuple, holder: dict | None = None) -> None:
        self.path = url
        self._read_bytes, self._write_bytes, self._remove = store
        self.info = {**_identity(), "token": uuid.uuid4().hex, **(holder or {})}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _held(self, holder: dict | None) -> LockHeld:
        lock = f"the lease {self.path}; a lease not renewed for {LEASE_SECS:.0f} s is stale"
        return LockHeld(holder or {}, lock)

    def _read(self) -> dict | None:
        try:
            info = json.loads(self._read_bytes(self.path))
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
        self._write_bytes(self.path, json.dumps({**self.info, "renewed": time.time()}).encode())

    def __enter__(self) -> Lease:
        held = self._read()
        if held is not None and held.get("token") != self.info["token"] and self._live(held):
            raise self._held(held)
        if held is not None and held.get("token") != self.info["token"]:
            logger.warning("Taking over the stale lease %s (%s).", self.path, describe(held))
        self._write()
        now = self._read()
        if now is None or now.get("token") != self.info["token"]:
            raise self._held(now)
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew, name="lease", daemon=True)
        self._thread.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(LEASE_RENEW_SECS):
            try:
                self._write()
            except Exception as err:  # a failed renewal is retried at the next interval
                logger.warning("Could not renew the lease %s: %s", self.path, err)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            held = self._read()
            if held is not None and held.get("token") == self.info["token"]:
                self._remove(self.path)
        except Exception as err:  # the lease then expires by itself
            logger.warning("Could not release the lease %s: %s", self.path, err)
