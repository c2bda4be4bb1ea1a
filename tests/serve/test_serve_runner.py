"""How ``python -m estimator.serve`` runs calls (``estimator.serve._core.runner`` and
``_dispatch.Dispatcher``): short ones on the event loop's thread; the others in worker
threads, at most ``--tensorflow_inter_op_parallelism`` at once, the rest in arrival order
(``benchmarks/serving_load.py`` measures what both do to throughput and p99)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from estimator.serve import __main__ as serve_cli
from estimator.serve._core import runner
from estimator.serve._dispatch import Dispatcher


class _SlowSignature:
    """Stands in for a loaded signature: records how many calls run at once and which
    started when."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = self.peak = 0
        self.starts: list[int] = []

    def __call__(self, i: int) -> dict:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.starts.append(i)
        time.sleep(0.2)  # long beside thread start-up, so the order is the limiter's
        with self.lock:
            self.active -= 1
        return {"i": i}


def _run_all(run, signature, count: int) -> list[dict]:
    async def all_calls():
        return await asyncio.gather(*(run(signature, {"i": i}) for i in range(count)))

    return asyncio.run(all_calls())


def test_calls_without_batching_run_n_at_once_in_arrival_order():
    signature = _SlowSignature()
    results = _run_all(runner(num_threads=2), signature, 8)
    assert [r["i"] for r in results] == list(range(8))
    # Two at a time (a thread pool's 40 would run all 8 at once), each pair after the one
    # before it: the waiting calls start in the order they arrived.
    assert signature.peak == 2
    pairs = [sorted(signature.starts[i : i + 2]) for i in range(0, 8, 2)]
    assert pairs == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_the_default_is_the_cpu_count(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 3)
    signature = _SlowSignature()
    _run_all(runner(), signature, 7)
    assert signature.peak == 3


def test_a_negative_inter_op_parallelism_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        serve_cli.main(["--model_base_path", "unused", "--tensorflow_inter_op_parallelism", "-1"])
    assert exit_.value.code == 2
    assert (
        "--tensorflow_inter_op_parallelism must be 0 (the CPU count) or more, got -1."
        in capsys.readouterr().err
    )


class _TimedSignature:
    """Records the thread of each call; each call takes ``seconds.pop(0)`` (or nothing)."""

    def __init__(self, seconds=()) -> None:
        self.seconds = list(seconds)
        self.threads: list[int] = []

    def __call__(self, **columns) -> dict:
        self.threads.append(threading.get_ident())
        if self.seconds:
            time.sleep(self.seconds.pop(0))
        return {"n": len(columns["x"])}


def _on_loop(signature, calls) -> list[bool]:
    """Runs ``calls`` (each a row count, or a list of rows) one after another through a
    Dispatcher; for each, whether it ran on the event loop's thread."""

    async def run():
        dispatch = Dispatcher(lambda s, c: s(**c), threads=2)
        loop_thread = threading.get_ident()
        for rows in calls:
            x = [0] * rows if isinstance(rows, int) else rows
            assert await dispatch(signature, {"x": x}) == {"n": len(x)}
        return [t == loop_thread for t in signature.threads]

    return asyncio.run(run())


def test_short_calls_run_on_the_event_loop_after_three_in_threads():
    # The first call of a size may compile (here 50 ms): after three calls the median is
    # what decides, so the compile is forgotten and the rest run on the loop's thread.
    signature = _TimedSignature(seconds=[0.05])
    assert _on_loop(signature, [1] * 6) == [False, False, False, True, True, True]


def test_one_slow_call_does_not_move_a_signature_off_the_loop():
    signature = _TimedSignature(seconds=[0, 0, 0, 0.01])  # the 4th call: 10 ms (inline)
    assert _on_loop(signature, [1] * 6) == [False, False, False, True, True, True]


def test_long_calls_stay_in_worker_threads():
    # 5 ms each, over the 2 ms under which a call may hold the loop up.
    signature = _TimedSignature(seconds=[0.005] * 5)
    assert _on_loop(signature, [1] * 5) == [False] * 5


def test_each_input_shape_is_timed_on_its_own():
    # A new shape compiles a new program (jax.jit), so its first calls run in threads
    # however short the calls of other shapes were: 2 rows after 1; lists of 2 values (the
    # signature pads lists to the longest) after lists of 1.
    signature = _TimedSignature()
    calls = [1, 1, 1, 1, 2, 1, [[0]], [[0]], [[0]], [[0]], [[0, 1]], [[0]]]
    assert _on_loop(signature, calls) == [
        *(False, False, False, True),
        *(False, True),
        *(False, False, False, True),
        *(False, True),
    ]


def test_a_new_versions_signature_starts_in_threads():
    # A new version's signature compiles its programs again: its calls are timed afresh
    # (by the object, not by an id that a collected signature's successor may reuse).
    async def run():
        dispatch = Dispatcher(lambda s, c: s(**c), threads=2)
        old, new = _TimedSignature(), _TimedSignature()
        for signature in (old, old, old, old, new):
            await dispatch(signature, {"x": [0]})
        loop_thread = threading.get_ident()
        return [[t == loop_thread for t in s.threads] for s in (old, new)]

    assert asyncio.run(run()) == [[False, False, False, True], [False]]


def test_serialized_examples_parsed_by_the_signature_always_run_in_threads():
    # Their parsed shapes (a VarLenFeature's width) are known only inside the call, where a
    # new width compiles: such a call never runs on the loop, however short the last were.
    class Parsing(_TimedSignature):
        accepts_examples = True

        def __call__(self, **columns) -> dict:
            return super().__call__(x=columns["examples"])

    async def run():
        dispatch = Dispatcher(lambda s, c: s(**c), threads=2)
        signature = Parsing()
        for _ in range(5):
            await dispatch(signature, {"examples": [b""]})
        loop_thread = threading.get_ident()
        return [t == loop_thread for t in signature.threads]

    assert asyncio.run(run()) == [False] * 5
