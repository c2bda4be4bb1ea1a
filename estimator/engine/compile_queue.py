"""Compiled programs by key, each compiled once, with one lock discipline (internal).

Every program the engine runs (a mode's step per batch signature, its initial state, the
evaluation's finalize) goes through :class:`CompileQueue.program`:

1. **claim** (under the lock): the cached program when it was compiled for at least the
   uses asked (``estimator.engine.compile_policy``: ``ONCE`` < ``FEW`` < ``MANY``), else a
   compile of it in flight, else a new claim;
2. **trace and lower** in the calling thread, outside the lock (``model_fn`` runs in the
   thread that asked, never in two threads at once for one claim); what the lowering said
   of the program (its ``meta``) is available from then on (:meth:`CompileQueue.meta`), while
   it compiles;
3. **compile**, in the calling thread or in a background thread (XLA compiles without the
   GIL, on another core), outside the lock;
4. **publish** (under the lock): the program replaces one compiled for fewer uses; every
   caller waiting on the claim gets it, or its error. A failure clears the claim, so the next
   call that needs the program lowers it again, in its own thread, and raises there.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import jax

__all__ = ["CompileQueue", "Program", "start_thread"]


class Program(NamedTuple):
    """A compiled program and what its lowering said of it."""

    executable: jax.stages.Compiled
    meta: Any  # what ``lower()`` returned beside the lowered program (e.g. its StepInfo)
    runs: int  # the uses it was compiled for (compile_policy: ONCE, FEW or MANY)


#: ``lower() -> (lowered, meta, compiler_options)``: traces and lowers a program.
Lower = Callable[[], tuple[jax.stages.Lowered, Any, dict | None]]


def start_thread(target: Callable[[], None], name: str) -> None:
    """Runs ``target`` (an XLA compile) in a background thread that the interpreter waits
    for at exit. A daemon thread would be torn down by the interpreter's shutdown when it
    returns from XLA into Python, unwinding through C++ frames: the process died by SIGABRT
    ("FATAL: exception not rethrown") or SIGSEGV whenever a call raised (a damaged
    checkpoint in ``evaluate()``) while one of its programs was still compiling."""
    threading.Thread(target=target, name=name, daemon=False).start()


class CompileQueue:
    """Programs by key (``(kind, signature)``), compiled once each (see the module doc).

    Attributes:
      compiled: ``Counter`` of programs compiled so far, by kind (``key[0]``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._programs: dict = {}
        self._pending: dict = {}  # (key, runs) -> Future of the Program
        self._metas: dict = {}  # (key, runs) -> Future of the meta, set once lowered
        self.compiled: collections.Counter = collections.Counter()

    def known(self, key) -> bool:
        """Whether a program of ``key`` is compiled (for any uses)."""
        with self._lock:
            return key in self._programs

    def keys(self) -> list:
        """The keys of the compiled programs."""
        with self._lock:
            return list(self._programs)

    def runs(self) -> dict:
        """``{key: runs}``: the uses each compiled program was compiled for."""
        with self._lock:
            return {key: program.runs for key, program in self._programs.items()}

    def in_flight(self) -> int:
        """How many compiles are claimed and not yet published."""
        with self._lock:
            return len(self._pending)

    def program(self, key, runs: int, lower: Lower, *, background: bool = False):
        """The program of ``key`` compiled for at least ``runs`` uses.

        From the cache; else from a compile in flight (waited for); else ``lower()`` runs in
        this thread and the result compiles here or, with ``background``, in a background
        thread.

        Returns:
          The :class:`Program`; None with ``background`` unless it was cached.

        Raises:
          Whatever lowering or compiling raised (not with ``background``: the next call
          that needs the program lowers it again and raises).
        """
        future, owner = self._claim(key, runs)
        if not owner:
            if isinstance(future, Program):
                return future
            return None if background else future.result()
        lowered, meta, options = self._lower(key, runs, future, lower, background)
        if lowered is None:
            return None

        self._compile(key, runs, future, lowered, meta, options, background=background)
        return None if background else future.result()

    def meta(self, key, runs: int, lower: Lower):
        """What the lowering of the program of ``key`` (compiled for at least ``runs`` uses)
        said of it, without waiting for its compile: from the cached program; else from a
        compile in flight once it is lowered; else ``lower()`` runs in this thread and the
        program compiles in a background thread (a call that runs it waits for it there).

        Raises:
          Whatever lowering raised (a compile's failure raises in the call that needs the
          program).
        """
        future, owner = self._claim(key, runs)
        if not owner:
            if isinstance(future, Program):
                return future.meta
            with self._lock:
                pending = self._metas.get(self._pending_key(future))
            if pending is None:  # published since the claim
                return future.result().meta
            return pending.result()
        lowered, meta, options = self._lower(key, runs, future, lower, background=False)
        self._compile(key, runs, future, lowered, meta, options, background=True)
        return meta

    def _lower(self, key, runs: int, future, lower: Lower, background: bool) -> tuple:
        """``lower()`` for a claim, its meta published to :meth:`meta`'s callers;
        ``(None, None, None)`` when it failed in the background."""
        try:
            lowered, meta, options = lower()
        except BaseException as err:
            self._fail(key, runs, future, err)
            if background:
                return None, None, None
            raise
        with self._lock:
            self._metas[(key, runs)].set_result(meta)
        return lowered, meta, options

    def _compile(self, key, runs, future, lowered, meta, options, *, background: bool) -> None:
        def compile_and_publish() -> None:
            try:
                executable = lowered.compile(compiler_options=options)
            except BaseException as err:  # noqa: BLE001 - raised to the callers waiting
                self._fail(key, runs, future, err)
                return
            self._publish(key, runs, future, Program(executable, meta, runs))

        if background:
            start_thread(compile_and_publish, f"compile {key[0]}")
        else:
            compile_and_publish()

    def _pending_key(self, future):
        for claim, pending in self._pending.items():
            if pending is future:
                return claim
        return None

    def _claim(self, key, runs: int) -> tuple[Any, bool]:
        """``(program or future, owner)``: a program compiled for at least ``runs``, else
        the future of such a compile in flight, else a new claim (``owner``)."""
        with self._lock:
            program = self._programs.get(key)
            if program is not None and program.runs >= runs:
                return program, False
            in_flight = [r for k, r in self._pending if k == key and r >= runs]
            if in_flight:
                return self._pending[(key, max(in_flight))], False
            future = self._pending[(key, runs)] = concurrent.futures.Future()
            self._metas[(key, runs)] = concurrent.futures.Future()
        return future, True

    def _fail(self, key, runs: int, future, err: BaseException) -> None:
        with self._lock:
            del self._pending[(key, runs)]  # a later call tries again
            meta = self._metas.pop((key, runs))
        if not meta.done():
            meta.set_exception(err)
        future.set_exception(err)

    def _publish(self, key, runs: int, future, program: Program) -> None:
        with self._lock:
            known = self._programs.get(key)
            if known is None or known.runs < runs:
                self._programs[key] = program
            del self._pending[(key, runs)]
            del self._metas[(key, runs)]
            self.compiled[key[0]] += 1
        future.set_result(program)
