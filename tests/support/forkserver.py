"""The suite's ``multiprocessing`` forkserver: test processes forked from a server that has
imported JAX, this package and the test modules whose functions run in them, so that a
process starts in a few hundredths of a second instead of the seconds an interpreter takes
to import them (the jobs of ``tests/distribute/test_multihost.py``, the cases of
``tests/checkpoint/test_checkpoint_fuzz.py``). The server starts no JAX backend: each forked
process starts its own.

``multiprocessing`` keeps one server per process, and the first start fixes what it has
imported; so the preload list is one, here, for every test file that forks.

Two things of the standard library are worked around:

* Python 3.11's server does not take the caller's ``sys.path`` (3.12 passes it): it is
  started with their folders on ``PYTHONPATH``, or it could not import the test modules;
* a module of the list that fails to import is skipped silently, and each forked process
  would then import it itself (with pytest: 0.15-0.2 s a process). :func:`context` checks,
  in a forked process, that every module of the list is there.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import sys

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The folders of the modules of PRELOAD (Python 3.11's server does not take sys.path).
PATH = [os.path.join(TESTS, folder) for folder in ("support", "jobs", "distribute", "checkpoint")]
PRELOAD = (
    "estimator",
    "estimator.export",
    # tensorboardX imports boto3 and google-cloud-storage when installed (~0.5 s).
    "tensorboardX",
    "multihost_job",
    "test_multihost",
    "test_checkpoint_integrity",
    "test_checkpoint_fuzz",
)
_checked = False


def context() -> multiprocessing.context.ForkServerContext:
    """The forkserver context, its server started (once per process) with :data:`PRELOAD`
    imported.

    Raises:
      AssertionError: a module of :data:`PRELOAD` is not imported in a forked process.
    """
    global _checked
    ctx = multiprocessing.get_context("forkserver")
    if _checked:
        return ctx
    ctx.set_forkserver_preload(list(PRELOAD))
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (*PATH, saved) if p)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    queue = ctx.Queue()
    process = ctx.Process(target=_missing, args=(queue,))
    process.start()
    missing = queue.get(timeout=120)
    process.join()
    assert not missing, f"the forkserver could not import {missing}"
    _checked = True
    return ctx


def _missing(queue) -> None:
    queue.put([name for name in PRELOAD if name not in sys.modules])
