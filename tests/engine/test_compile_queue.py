"""``estimator.engine.compile_queue`` and ``compile_policy`` alone, with fake programs: one
compile per key and use, one lock discipline (claim, lower on the caller, compile, publish),
failures retried by the next caller, a program compiled for fewer uses replaced."""

import threading
import time

import pytest

from estimator.engine.compile_policy import FEW, MANY, ONCE, RunPlan
from estimator.engine.compile_queue import CompileQueue


class FakeLowered:
    """What ``lower()`` returns: compiles to a string, optionally after a gate or failing."""

    def __init__(self, name, gate=None, fail=False):
        self.name, self.gate, self.fail = name, gate, fail
        self.compiled_in = None

    def compile(self, compiler_options=None):
        self.compiled_in = threading.current_thread().name
        if self.gate is not None:
            assert self.gate.wait(10)
        if self.fail:
            raise RuntimeError(f"XLA failed on {self.name}")
        return f"{self.name} compiled with {compiler_options}"


def lowering(name, log, **kwargs):
    def lower():
        log.append((name, threading.current_thread().name))
        return FakeLowered(name, **kwargs), {"meta": name}, {"runs": name}

    return lower


def test_a_program_is_lowered_and_compiled_once_then_cached():
    queue, log = CompileQueue(), []
    first = queue.program(("step", "a"), MANY, lowering("a", log))
    again = queue.program(("step", "a"), MANY, lowering("a", log))
    assert again is first and first.executable == "a compiled with {'runs': 'a'}"
    assert first.meta == {"meta": "a"} and log == [("a", threading.current_thread().name)]
    assert queue.compiled["step"] == 1 and queue.known(("step", "a"))


def test_fewer_uses_are_served_by_a_program_compiled_for_more_and_not_the_reverse():
    queue, log = CompileQueue(), []
    once = queue.program(("step", "a"), ONCE, lowering("once", log))
    assert once.runs == ONCE
    many = queue.program(("step", "a"), MANY, lowering("many", log))  # compiled again
    assert many.runs == MANY and queue.program(("step", "a"), FEW, lowering("x", log)) is many
    assert [name for name, _ in log] == ["once", "many"] and queue.runs() == {("step", "a"): MANY}


def test_lowering_happens_in_the_caller_and_a_background_compile_is_awaited():
    queue, log, gate = CompileQueue(), [], threading.Event()
    assert (
        queue.program(("init", "a"), MANY, lowering("a", log, gate=gate), background=True) is None
    )
    assert queue.in_flight() == 1 and log == [("a", threading.current_thread().name)]
    # A second request does not lower again: it waits for the compile in flight.
    waiter = threading.Thread(
        target=lambda: results.append(queue.program(("init", "a"), MANY, None))
    )
    results = []
    waiter.start()
    gate.set()
    waiter.join(10)
    assert results[0].executable.startswith("a compiled") and queue.in_flight() == 0
    assert queue.compiled == {"init": 1}


def test_a_programs_meta_is_given_while_it_compiles():
    # meta() lowers in the caller and returns what the lowering said while XLA compiles
    # (gated here); the program itself is waited for by the call that runs it.
    queue, log, gate = CompileQueue(), [], threading.Event()
    assert queue.meta(("step", "a"), MANY, lowering("a", log, gate=gate)) == {"meta": "a"}
    assert queue.in_flight() == 1 and queue.compiled["step"] == 0
    # Asked again (the compile still gated): the same meta, nothing lowered again.
    assert queue.meta(("step", "a"), MANY, lowering("b", log)) == {"meta": "a"}
    assert log == [("a", threading.current_thread().name)]
    gate.set()
    program = queue.program(("step", "a"), MANY, lowering("c", log))
    assert program.executable.startswith("a compiled") and queue.compiled["step"] == 1
    assert queue.meta(("step", "a"), FEW, lowering("d", log)) == {"meta": "a"}  # cached
    # A failed compile raises in the call that runs the program, not in meta().
    assert queue.meta(("step", "f"), MANY, lowering("f", log, fail=True)) == {"meta": "f"}
    with pytest.raises(RuntimeError, match="XLA failed on f"):
        queue.program(("step", "f"), MANY, lowering("f", log, fail=True))


def test_concurrent_callers_compile_once():
    queue, log, gate = CompileQueue(), [], threading.Event()
    results = []

    def ask():
        results.append(queue.program(("step", "k"), MANY, lowering("k", log, gate=gate)))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    gate.set()
    for thread in threads:
        thread.join(10)
    assert len(log) == 1 and len({id(r) for r in results}) == 1 and queue.compiled["step"] == 1


def test_a_failed_background_compile_is_raised_to_the_next_caller_which_lowers_again():
    queue, log = CompileQueue(), []
    queue.program(("step", "a"), MANY, lowering("a", log, fail=True), background=True)
    deadline = time.monotonic() + 10
    while queue.in_flight() and time.monotonic() < deadline:  # the failure clears the claim
        time.sleep(0.01)
    with pytest.raises(RuntimeError, match="XLA failed on a"):
        queue.program(("step", "a"), MANY, lowering("a", log, fail=True))
    assert len(log) == 2 and queue.in_flight() == 0 and not queue.known(("step", "a"))
    ok = queue.program(("step", "a"), MANY, lowering("a", log))
    assert ok.executable.startswith("a compiled") and queue.compiled["step"] == 1


def test_a_caller_waiting_on_a_failing_compile_gets_its_error():
    queue, log, gate = CompileQueue(), [], threading.Event()
    queue.program(("step", "a"), MANY, lowering("a", log, gate=gate, fail=True), background=True)
    threading.Timer(0.5, gate.set).start()  # the compile fails after this caller waits on it
    with pytest.raises(RuntimeError, match="XLA failed on a"):
        queue.program(("step", "a"), MANY, lowering("b", log))
    assert [name for name, _ in log] == ["a"]  # the waiter did not lower again


def test_a_failed_lowering_is_raised_in_the_caller_and_clears_the_claim():
    queue = CompileQueue()

    def broken():
        raise ValueError("model_fn raised")

    assert queue.program(("step", "a"), MANY, broken, background=True) is None
    with pytest.raises(ValueError, match="model_fn raised"):
        queue.program(("step", "a"), MANY, broken)
    assert queue.in_flight() == 0


def test_a_run_plan_says_how_each_signature_is_used():
    plan = RunPlan(few_runs=True, once=("last",))
    assert [plan.runs(("last",)), plan.runs(("full",))] == [ONCE, FEW]
    assert RunPlan().runs(("full",)) == MANY
