"""Early stopping: TF 2.15's arguments and decisions, stopping at the deciding evaluation,
and warnings instead of TF's silent never-firing hooks."""

from __future__ import annotations

import logging

import pytest
from linear_model import EVAL, TRAIN, make, reference_eval_loss

import estimator as est
from estimator import early_stopping as es
from estimator.events import read_eval_metrics, write_eval_results
from estimator.training.in_memory_evaluator import InMemoryEvaluatorHook
from estimator.training.run import EvalSpec, TrainSpec, train_and_evaluate


def eval_spec(**kwargs):
    return EvalSpec(EVAL, steps=None, start_delay_secs=0, throttle_secs=0, **kwargs)


def write_results(eval_dir, results: dict[int, dict]) -> None:
    for step, metrics in results.items():
        write_eval_results(str(eval_dir), {**metrics, "global_step": step}, None)


def last_step(e) -> int:
    return int(e.latest_checkpoint().rsplit("_", 1)[1])


# ----- arguments ------------------------------------------------------------------------
def test_argument_errors(tmp_path):
    e = make(tmp_path / "m")
    with pytest.raises(TypeError, match="`estimator` must have type `estimator.Estimator`"):
        es.make_early_stopping_hook(object(), lambda: False)
    with pytest.raises(ValueError, match="Only one of `run_every_secs` and `run_every_steps`"):
        es.make_early_stopping_hook(e, lambda: False, run_every_secs=1, run_every_steps=1)
    with pytest.raises(ValueError, match="Either every_secs or every_steps should be provided"):
        es.make_early_stopping_hook(e, lambda: False, run_every_secs=None)
    with pytest.raises(TypeError, match="`should_stop_fn` must be callable."):
        es.make_early_stopping_hook(e, "stop")
    with pytest.raises(ValueError, match="Must specify max_steps_without_decrease >= 0, given: -1"):
        es.stop_if_no_decrease_hook(e, "loss", -1)
    with pytest.raises(ValueError, match="Must specify max_steps_without_increase >= 0, given: No"):
        es.stop_if_no_increase_hook(e, "auc", None)


# ----- decisions (TF's rules) -----------------------------------------------------------
DECISIONS = [
    # name, make(estimator, eval_dir), results {step: {metric: value}}, stops
    # Best loss 0.5 at step 10; at step 30, 30 - 10 = 20 >= 20 steps without a decrease.
    (
        "no_decrease_20",
        lambda e, d: es.stop_if_no_decrease_hook(e, "loss", 20, eval_dir=d),
        {0: 1.0, 10: 0.5, 20: 0.6, 30: 0.55},
        True,
    ),
    (
        "no_decrease_21",
        lambda e, d: es.stop_if_no_decrease_hook(e, "loss", 21, eval_dir=d),
        {0: 1.0, 10: 0.5, 20: 0.6, 30: 0.55},
        False,
    ),
    # min_steps=5 ignores step 0's 0.1: best 0.5 at 10, 30 - 10 = 20 < 25; with step 0,
    # 30 - 0 = 30 >= 25.
    (
        "no_decrease_min_steps",
        lambda e, d: es.stop_if_no_decrease_hook(e, "loss", 25, eval_dir=d, min_steps=5),
        {0: 0.1, 10: 0.5, 20: 0.6, 30: 0.7},
        False,
    ),
    (
        "no_decrease_all_steps",
        lambda e, d: es.stop_if_no_decrease_hook(e, "loss", 25, eval_dir=d),
        {0: 0.1, 10: 0.5, 20: 0.6, 30: 0.7},
        True,
    ),
    # Best 0.5 at 10; 30 - 10 = 20 >= 20 steps without an increase.
    (
        "no_increase",
        lambda e, d: es.stop_if_no_increase_hook(e, "loss", 20, eval_dir=d),
        {0: 0.1, 10: 0.5, 20: 0.4, 30: 0.45},
        True,
    ),
    # Thresholds are strict: 0.5 is not higher than 0.5, nor lower.
    (
        "higher_equal",
        lambda e, d: es.stop_if_higher_hook(e, "loss", 0.5, eval_dir=d),
        {0: 0.1, 10: 0.5},
        False,
    ),
    (
        "higher",
        lambda e, d: es.stop_if_higher_hook(e, "loss", 0.49, eval_dir=d),
        {0: 0.1, 10: 0.5},
        True,
    ),
    (
        "lower_equal",
        lambda e, d: es.stop_if_lower_hook(e, "loss", 0.5, eval_dir=d),
        {0: 1.0, 10: 0.5},
        False,
    ),
    (
        "lower_min_steps",
        lambda e, d: es.stop_if_lower_hook(e, "loss", 0.5, eval_dir=d, min_steps=5),
        {0: 0.1, 10: 0.9},
        False,
    ),
    (
        "lower",
        lambda e, d: es.stop_if_lower_hook(e, "loss", 0.5, eval_dir=d),
        {0: 0.1, 10: 0.9},
        True,
    ),
]


@pytest.mark.parametrize(
    "make_hook, results, stops", [c[1:] for c in DECISIONS], ids=[c[0] for c in DECISIONS]
)
def test_decisions(tmp_path, make_hook, results, stops):
    e = make(tmp_path / "m")
    write_results(tmp_path / "results", {s: {"loss": v} for s, v in results.items()})
    hook = make_hook(e, str(tmp_path / "results"))
    assert hook._should_stop_fn() is stops


def test_a_stop_ends_training_after_the_step_that_checked(tmp_path):
    e = make(tmp_path / "m", save_checkpoints_steps=100)
    write_results(e.eval_dir(), {0: {"loss": 0.1}})
    hook = es.stop_if_lower_hook(e, "loss", 0.5, run_every_secs=None, run_every_steps=10)
    e.train(TRAIN, hooks=[hook], max_steps=50)
    assert last_step(e) == 1  # the first check (after step 1) requested the stop


# ----- stopping at the deciding evaluation ---------------------------------------------
@pytest.mark.parametrize("in_process", [False, True], ids=["checkpoints", "every_n_steps"])
def test_stops_at_the_deciding_evaluation_despite_run_every_secs_60(tmp_path, caplog, in_process):
    """TF checks at the first step and then once a minute: in a run shorter than a minute
    no check sees an evaluation and training runs to max_steps."""
    e = make(tmp_path / "m") if in_process else make(tmp_path / "m", save_checkpoints_steps=5)
    # Evaluations at steps 5 and 10; reference losses 0.927 and 0.421: a threshold between
    # them is crossed at step 10.
    threshold = (reference_eval_loss(5) + reference_eval_loss(10)) / 2
    hook = es.stop_if_lower_hook(e, "loss", threshold)  # run_every_secs=60
    spec = eval_spec(every_n_steps=5) if in_process else eval_spec()
    with caplog.at_level(logging.INFO, logger="estimator"):
        metrics, _ = train_and_evaluate(e, TrainSpec(TRAIN, max_steps=40, hooks=[hook]), spec)
    assert last_step(e) == 10 and metrics["global_step"] == 10
    assert list(read_eval_metrics(e.eval_dir())) == [5, 10]
    assert "Requesting early stopping at global step 10" in caplog.text
    assert "can never fire" not in caplog.text  # the evaluations write where it reads


def test_custom_should_stop_fn_runs_on_schedule_and_after_in_process_evaluations(tmp_path):
    e = make(tmp_path / "m")
    now = [0.0]
    calls = []

    class Clock(est.SessionRunHook):  # fake time = 3 s per step
        def before_run(self, run_context):
            now[0] = 3.0 * (run_context.session.global_step + 1)

    def should_stop():
        calls.append(now[0] / 3)  # the step being checked
        return len(calls) == 4

    hook = es.make_early_stopping_hook(e, should_stop, run_every_secs=10, clock=lambda: now[0])
    e.train(TRAIN, hooks=[Clock(), hook], steps=20)
    # Timer: step 1 (t=3, the first), then t >= 3 + 10: step 5 (t=15), t >= 25: step 9.
    assert calls == [1, 5, 9, 13] and last_step(e) == 13
    calls.clear()
    evaluator = InMemoryEvaluatorHook(e, EVAL, every_n_iter=2)
    hook = es.make_early_stopping_hook(e, should_stop, run_every_secs=100, clock=lambda: now[0])
    e.train(TRAIN, hooks=[evaluator, Clock(), hook], steps=20)
    # Resumed at 13; the timer's first check is at step 14 and the next would be at
    # t >= 42 + 100 (step 48). Evaluations after steps 15, 17, 19 (iterations 2, 4, 6)
    # trigger checks; the fourth call stops training at step 19.
    assert calls == [14, 15, 17, 19] and last_step(e) == 19


# ----- warnings instead of silence ------------------------------------------------------
def test_warns_once_when_nothing_evaluates_into_its_directory(tmp_path, caplog):
    e = make(tmp_path / "m")
    hook = es.stop_if_no_decrease_hook(e, "loss", 10, run_every_secs=None, run_every_steps=1)
    with caplog.at_level(logging.WARNING, logger="estimator"):
        e.train(TRAIN, hooks=[hook], steps=3)
    assert caplog.text.count("stop_if_no_decrease_hook can never fire") == 1
    assert f"{e.eval_dir()} holds no evaluation results and nothing evaluating" in caplog.text
    assert last_step(e) == 3


def test_warns_about_a_mismatched_evaluation_name(tmp_path, caplog):
    e = make(tmp_path / "m", save_checkpoints_steps=2)
    hook = es.stop_if_lower_hook(e, "loss", 100.0)  # would stop at once if it read results
    with caplog.at_level(logging.WARNING, logger="estimator"):
        train_and_evaluate(e, TrainSpec(TRAIN, max_steps=4, hooks=[hook]), eval_spec(name="val"))
    assert "stop_if_lower_hook can never fire" in caplog.text
    assert f"This process evaluates into {e.eval_dir('val')}" in caplog.text
    assert "pass eval_dir=estimator.eval_dir(name)" in caplog.text
    assert last_step(e) == 4


def test_warns_about_results_in_another_directory(tmp_path, caplog):
    e = make(tmp_path / "m")
    write_results(e.eval_dir("val"), {5: {"loss": 0.1}})
    hook = es.stop_if_lower_hook(e, "loss", 0.5, run_every_secs=None, run_every_steps=1)
    with caplog.at_level(logging.WARNING, logger="estimator"):
        e.train(TRAIN, hooks=[hook], steps=2)
    assert f"Evaluation results exist in {e.eval_dir('val')}" in caplog.text
    assert last_step(e) == 2


def test_warns_about_an_unknown_metric_name(tmp_path, caplog):
    e = make(tmp_path / "m")
    write_results(e.eval_dir(), {5: {"loss": 0.1, "accuracy": 0.9}})
    hook = es.stop_if_higher_hook(e, "acuracy", 0.5, run_every_secs=None, run_every_steps=1)
    with caplog.at_level(logging.WARNING, logger="estimator"):
        e.train(TRAIN, hooks=[hook], steps=3)  # TF raises KeyError mid-training
    message = 'stop_if_higher_hook: metric "acuracy" is not in the evaluation results of global'
    assert caplog.text.count(message) == 1
    assert "which has: accuracy, loss" in caplog.text  # no global_step, as TF reads them
    assert last_step(e) == 3


# ----- explicit wiring: each Estimator's evaluations reach its own hooks only ------------
class _RunContext:
    """What the hook reads of a step: the session's global step, and a stop request."""

    def __init__(self, step: int) -> None:
        self.session = type("Session", (), {"global_step": step})()
        self.stop_requested = False

    def request_stop(self) -> None:
        self.stop_requested = True


def test_two_estimators_in_one_process_do_not_see_each_others_evaluations(tmp_path):
    a, b = make(tmp_path / "a"), make(tmp_path / "b")
    step, checks = [0], {"a": [], "b": []}
    hooks = {
        name: es.make_early_stopping_hook(
            e, lambda name=name: checks[name].append(step[0]),  # never stops (None)
            run_every_secs=100, clock=lambda: 0.0,  # the timer fires at the first step only
        )
        for name, e in (("a", a), ("b", b))
    }  # fmt: skip

    def run(at: int) -> None:
        step[0] = at
        for hook in hooks.values():
            hook.after_run(_RunContext(at), None)

    for hook in hooks.values():
        hook.begin()
    run(1)
    assert checks == {"a": [1], "b": [1]}
    b.evaluations.evaluated(b.eval_dir())  # B's evaluator announces an evaluation
    run(2)
    assert checks == {"a": [1], "b": [1, 2]}  # only B's hook checked after it
    # A custom should_stop_fn reads no directory: any evaluation of its estimator counts.
    a.evaluations.evaluated(a.eval_dir("other"))
    run(3)
    assert checks == {"a": [1, 3], "b": [1, 2]}
    run(4)  # nothing announced, timer not due
    assert checks == {"a": [1, 3], "b": [1, 2]}
    for hook in hooks.values():
        hook.end(None)
    b.evaluations.evaluated(b.eval_dir())  # after end() the hook no longer listens...
    hooks["b"]._timer.update_last_triggered_step(5)  # (...and its timer is not due)
    step[0] = 6
    hooks["b"].after_run(_RunContext(6), None)
    assert checks["b"] == [1, 2]


def test_an_evaluator_counts_for_its_own_estimator_only(tmp_path, caplog):
    a, b = make(tmp_path / "a"), make(tmp_path / "b")
    evaluator = InMemoryEvaluatorHook(b, EVAL, every_n_iter=2)
    evaluator.begin()  # registers on b.evaluations
    assert b.evaluations.evaluates_into(b.eval_dir())
    assert not a.evaluations.evaluates_into(b.eval_dir())
    # A's hook reading B's directory: nothing of A evaluates there, so it warns, naming
    # no evaluator of this process (B's is not A's).
    hook = es.stop_if_lower_hook(a, "loss", 0.5, eval_dir=b.eval_dir(), run_every_steps=1,
                                 run_every_secs=None)  # fmt: skip
    hook.begin()
    with caplog.at_level(logging.WARNING, logger="estimator"):
        hook.after_run(_RunContext(1), None)
    assert "can never fire" in caplog.text and "This process evaluates into" not in caplog.text
    caplog.clear()
    hook_b = es.stop_if_lower_hook(b, "loss", 0.5, run_every_steps=1, run_every_secs=None)
    hook_b.begin()
    with caplog.at_level(logging.WARNING, logger="estimator"):
        hook_b.after_run(_RunContext(1), None)
    assert "can never fire" not in caplog.text  # B's evaluator writes where it reads
    b.evaluations.remove_evaluator(evaluator)
    assert not b.evaluations.evaluates_into(b.eval_dir())
