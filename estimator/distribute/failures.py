"""A process that fails ends its multi-process job at once, and every process says why.

Left to JAX, a process whose ``input_fn``, hook or ``model_fn`` raises waits at
``jax.distributed``'s shutdown barrier (``JAX_ESTIMATOR_SHUTDOWN_SECS``) for processes that
are blocked in a collective waiting for it; when the barrier gives up, the coordination
service aborts every process (SIGABRT, exit status 134, a native stack dump) with a message
that names no task and no error. Here, in a job of several processes:

* the failing process (an exception leaves ``train``/``evaluate``/``predict``:
  :func:`reporting`) publishes its task and exception in the coordination service's
  key-value store (the job's first failure is the one kept), shuts its ``jax.distributed``
  client down, and re-raises;
* every process watches that key from a background thread (:func:`watch`: a blocking read
  on the coordination service, no cost to the steps). When another process's failure
  appears, it logs it and shuts its own client down: the processes meet at the shutdown
  barrier at once, the failing one exits, and no heartbeat timeout aborts anyone;
* the watching process's main thread, blocked in a collective with the failed process,
  gets an error as soon as that process exits (CPU collectives, gloo, see the connection
  close); it leaves the Estimator call as :class:`JobFailedError`, whose message (the
  traceback's last line) names the failed task and its exception, and the process exits
  with Python's status 1;
* a main thread that stays blocked (a collective that does not notice a dead peer) is
  ended by the watcher ``JAX_ESTIMATOR_HEARTBEAT_SECS`` later, with status 1, after the log
  line that says which task failed and why.

A process that dies without raising (killed, out of memory, a crash in native code)
publishes nothing. The others end when the coordination service declares it dead,
``JAX_ESTIMATOR_HEARTBEAT_SECS`` after its last heartbeat: JAX then aborts each of them
(SIGABRT: exit status 134, 128 + 6, and a native stack trace) after its line "Terminating
process because the JAX distributed service detected fatal errors ... The following tasks
are unhealthy (stopped sending heartbeats): N", N the dead process's index. A process whose
collective failed before that logs the collective's error first (:func:`reporting`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import threading
from collections.abc import Iterator

import jax
from jax._src import distributed as jax_distributed  # the job's client, as orbax reads it

__all__ = ["JobFailedError", "reporting", "watch"]

logger = logging.getLogger("estimator")

#: The coordination service's key holding the job's first failure (JSON).
FAILURE_KEY = "jax_estimator/failure"
_LONGEST_WAIT_MS = 2**31 - 1  # blocking_key_value_get's timeout is an int32 of ms
_MESSAGE_CHARS = 2000


class JobFailedError(RuntimeError):
    """Another process of this multi-process job failed; this one stopped with it.

    Attributes:
      task: the failed process's task (``"worker:0"``, or ``"process 1"`` in a job started
        with ``jax.distributed.initialize``).
      process: its JAX process index.
      error: its exception, as ``"Type: message"``.
    """

    def __init__(self, failure: dict) -> None:
        self.task = failure["task"]
        self.process = failure["process"]
        self.error = failure["error"]
        super().__init__(
            f"{_describe(failure)} failed: {self.error}. This process stopped with it; start "
            "every process of the job again to resume from the last checkpoint."
        )


class _Watch:
    """This process's part (internal): its task, and the failure of another, once seen."""

    def __init__(self, task: str, grace_secs: float) -> None:
        self.task = task
        self.grace_secs = grace_secs
        self.process = jax.process_index()
        self.processes = jax.process_count()
        self.failure: dict | None = None  # another process's, set by the watcher thread
        self.published: BaseException | None = None  # this process's own, once published
        self.handled = threading.Event()  # the main thread raised JobFailedError
        self.lock = threading.Lock()


_watch: _Watch | None = None


def _describe(failure: dict) -> str:
    return f"{failure['task']} (process {failure['process']} of {failure['processes']})"


def _own(state: _Watch) -> dict:
    return {"task": state.task, "process": state.process, "processes": state.processes}


def watch(task: str | None, grace_secs: float) -> None:
    """Starts watching for another process's failure (once per process; nothing in a
    single process or without a ``jax.distributed`` client).

    Args:
      task: this process's task, ``"chief:0"``/``"worker:N"`` (None: ``"process N"``).
      grace_secs: how long a main thread may stay blocked after another process failed
        before the watcher ends this process.
    """
    global _watch
    client = jax_distributed.global_state.client
    if _watch is not None or client is None or jax.process_count() == 1:
        return
    _watch = _Watch(task or f"process {jax.process_index()}", grace_secs)
    thread = threading.Thread(
        target=_wait_for_failure, args=(_watch, client), name="jax_estimator-failures", daemon=True
    )
    thread.start()
    atexit.register(_stop_watching, _watch, thread)


def _stop_watching(state: _Watch, thread: threading.Thread) -> None:
    """At exit (before JAX's own exit handler, registered earlier): the job's usual
    shutdown, which ends the watcher's read, then the watcher's end. A thread still in
    that read while the interpreter finalizes would abort the process."""
    _leave_job(state)
    thread.join(timeout=10)


def _wait_for_failure(state: _Watch, client) -> None:
    """The watcher thread: waits for the failure key; another process's failure is logged,
    this process leaves the job (client shut down), and is ended if its main thread stays
    blocked."""
    while True:
        try:
            value = client.blocking_key_value_get(FAILURE_KEY, _LONGEST_WAIT_MS)
            break
        except Exception as err:  # the client shut down (the job ended), or a long wait
            if "DEADLINE_EXCEEDED" not in str(err):
                return
    failure = json.loads(value)
    if failure["process"] == state.process:
        return  # this process's own failure: its main thread handles it
    state.failure = failure
    logger.error(
        "%s failed: %s. Stopping this process (%s) too.",
        _describe(failure),
        failure["error"],
        state.task,
    )
    _leave_job(state)
    if not state.handled.wait(state.grace_secs):
        logger.error(
            "This process (%s) is still blocked %.0f s after %s failed (a collective that "
            "does not notice a dead peer); ending it with status 1. %s failed: %s",
            state.task,
            state.grace_secs,
            _describe(failure),
            _describe(failure),
            failure["error"],
        )
        logging.shutdown()
        os._exit(1)


def _leave_job(state: _Watch) -> None:
    """Shuts this process's ``jax.distributed`` client down (once): the job's shutdown
    barrier, which every process reaches at once after a failure."""
    with state.lock:
        if not jax.distributed.is_initialized():
            return
        try:
            jax.distributed.shutdown()
        except Exception as err:  # a process is gone: the barrier fails (JAX may abort)
            logger.error("Leaving the multi-process job failed: %s", err)


def _publish(state: _Watch, err: BaseException) -> dict | None:
    """Publishes ``err`` as the job's failure; returns the failure published before it by
    another process (None: this one is the job's first)."""
    client = jax_distributed.global_state.client
    if client is None:
        return state.failure
    text = f"{type(err).__name__}: {err}"
    failure = {
        **_own(state),
        "error": text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS] + " [...]",
    }
    try:
        client.key_value_set(FAILURE_KEY, json.dumps(failure))
    except Exception:  # another process's failure is there already
        try:
            return json.loads(client.key_value_try_get(FAILURE_KEY))
        except Exception:
            return state.failure
    state.published = err
    return None


@contextlib.contextmanager
def reporting() -> Iterator[None]:
    """Around an Estimator call: an exception leaving it fails the job (see the module
    docstring). ``SystemExit`` (a preemption: every process exits at the agreed step),
    ``GeneratorExit`` (a ``predict()`` left early) and exceptions in a single process pass
    unchanged.

    Raises:
      JobFailedError: from the exception, when another process of the job failed first.
    """
    try:
        yield
    except (SystemExit, GeneratorExit):
        raise
    except BaseException as err:
        state = _watch
        if state is None or isinstance(err, JobFailedError) or state.published is not None:
            raise  # a single process, or already handled by an inner call
        failure = state.failure or _publish(state, err)
        if failure is None:  # this process failed first: the others stop with it
            logger.error(
                "%s failed: %s: %s. The job's other processes stop with it.",
                _describe(_own(state)),
                type(err).__name__,
                err,
            )
            _leave_job(state)
            raise
        state.handled.set()
        _leave_job(state)  # (the watcher may not have yet)
        raise JobFailedError(failure) from err
