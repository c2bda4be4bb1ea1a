"""Where ``python -m estimator.serve`` runs a signature call: on the event loop's thread
when the same signature's recent calls with inputs of the same shapes were short, else in a
worker thread."""

import collections
import statistics
import time
import weakref

import anyio
import numpy as np

from estimator.export._loader import EXAMPLES

INLINE_SECONDS = 0.002  # a call this short (median of the recent ones) runs on the loop
_RECENT = 5  # calls remembered per signature and input shapes


class Dispatcher:
    """Runs blocking ``call(signature, columns) -> outputs`` for the event loop.

    A call whose signature's last calls with inputs of the same shapes took under
    ``inline_seconds`` at the median runs on the event loop's thread, at once; any other
    call (the first three of each signature and shapes, longer ones) runs in a worker
    thread, at most ``threads`` at once, the others waiting in arrival order.

    Why two places: a call in a worker thread hands Python's lock back and forth with the
    event loop's thread (JAX releases it while XLA runs and while results are copied back,
    and the loop takes it each time), which costs more than a small model's whole call, so
    short calls on the loop answer more requests per second (``benchmarks/serving_load.py``
    measures it; ``inline_seconds=0`` puts every call in a thread). A long call stays in a
    thread, so it never holds up the loop (other requests' I/O, health checks, new versions'
    loading) and several run while XLA computes without the lock. Shapes are part of the
    key because a signature compiles a program for each new input shape (``jax.jit``): that
    compile runs in a thread, never on the loop. The median forgets the compile after three
    calls, and one slow call does not move a signature off the loop.

    Args:
      call: the blocking call.
      threads: worker-thread calls at once (``--tensorflow_inter_op_parallelism``).
      inline_seconds: the median call time under which calls run on the loop (2 ms: the
        longest the loop is held up by one call, as a rule).
    """

    def __init__(self, call, threads: int, inline_seconds: float = INLINE_SECONDS) -> None:
        self._call = call
        self._limiter = anyio.CapacityLimiter(threads)
        self._inline_seconds = inline_seconds
        # signature -> {input shapes: recent call times}; a new version's signatures start
        # afresh (their programs compile again).
        self._seconds: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    async def __call__(self, signature, columns: dict) -> dict:
        """The outputs of ``call(signature, columns)``."""
        shapes = _shapes(signature, columns)
        recent = self._seconds.get(signature, {}).get(shapes)
        if (
            shapes is not None
            and recent
            and len(recent) >= 3
            and statistics.median(recent) < self._inline_seconds
        ):
            return self._timed(shapes, signature, columns)
        return await anyio.to_thread.run_sync(
            self._timed, shapes, signature, columns, limiter=self._limiter
        )

    def _timed(self, shapes: tuple, signature, columns: dict) -> dict:
        start = time.perf_counter()
        try:
            return self._call(signature, columns)
        finally:
            by_shapes = self._seconds.setdefault(signature, {})
            recent = by_shapes.get(shapes)
            if recent is None:
                recent = by_shapes[shapes] = collections.deque(maxlen=_RECENT)
            recent.append(time.perf_counter() - start)


def _shapes(signature, columns: dict) -> tuple | None:
    """What decides the program a call runs: each input's shape (an array's; a list's
    length and, for a list of lists, the longest, to which the signature pads them). None
    for serialized ``tf.Example``s that the signature parses itself: the parsed shapes (a
    ``VarLenFeature``'s width) are known only inside the call, so it always runs in a
    thread."""
    if getattr(signature, "accepts_examples", False) and EXAMPLES in columns:
        return None
    shapes = []
    for name, value in columns.items():
        if isinstance(value, np.ndarray):
            shapes.append((name, value.shape))
        elif isinstance(value, (list, tuple)):
            widths = [len(v) for v in value if isinstance(v, (list, tuple, np.ndarray))]
            shapes.append((name, len(value), max(widths, default=-1)))
        else:
            shapes.append((name, None))
    return tuple(sorted(shapes))  # names are unique: only they are compared
