"""How ``python -m estimator.serve`` runs calls without batching (``estimator.serve._app.
runner``): at most ``--tensorflow_inter_op_parallelism`` at once, the others in arrival
order (``benchmarks/serving_load.py`` measures what that does to throughput and p99)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from estimator.serve import __main__ as serve_cli
from estimator.serve._app import runner


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
