"""train_and_evaluate, TrainSpec, EvalSpec: TF 2.15's validation and local-mode schedule,
in-process evaluation every N steps, and the distributed task procedures."""

from __future__ import annotations

import copy
import json
import logging
import os
import pickle

import jax
import numpy as np
import pytest
from linear_model import EVAL, TRAIN, X, Y, make, reference_eval_loss

import estimator as est
from estimator import checkpoint as ckpt
from estimator.events import read_eval_metrics
from estimator.training import run as training
from estimator.training.exporter import FinalExporter, LatestExporter
from estimator.training.run import EvalSpec, TrainSpec, train_and_evaluate

RECEIVER = est.export.build_raw_serving_input_receiver_fn({"x": X})


def one_batch():
    return {"x": X}, Y


def eval_spec(**kwargs):
    kwargs.setdefault("steps", None)
    kwargs.setdefault("start_delay_secs", 0)
    kwargs.setdefault("throttle_secs", 0)
    return EvalSpec(EVAL, **kwargs)


def evaluated_steps(estimator, name=None) -> list[int]:
    path = os.path.join(estimator.eval_dir(name), "eval_results.jsonl")
    with open(path) as f:
        return [json.loads(line)["global_step"] for line in f if line.strip()]


class FakeTime:
    """``time`` for estimator.training.run: ``time()`` is set by the test, ``sleep`` recorded
    (and advances it)."""

    def __init__(self, on_sleep=None):
        self.now = 0.0
        self.sleeps = []
        self.on_sleep = on_sleep

    def time(self):
        return self.now

    def sleep(self, secs):
        self.sleeps.append(secs)
        self.now += secs
        if self.on_sleep:
            self.on_sleep()


class ClockPerStep(est.SessionRunHook):
    """Sets the fake time to the global step (seconds) before each training step."""

    def __init__(self, fake):
        self.fake = fake

    def before_run(self, run_context):
        self.fake.now = float(run_context.session.global_step + 1)


# ----- TrainSpec / EvalSpec ---------------------------------------------------------------
def test_train_spec_defaults_and_validation():
    spec = TrainSpec(TRAIN)
    assert (spec.max_steps, spec.hooks, spec.saving_listeners) == (None, (), ())
    assert TrainSpec(TRAIN, 5, [est.StopAtStepHook(1)]).hooks[0].last_step is None
    with pytest.raises(TypeError, match="`input_fn` must be callable, given: 3"):
        TrainSpec(3)
    with pytest.raises(ValueError, match="Must specify max_steps > 0, given: 0"):
        TrainSpec(TRAIN, max_steps=0)
    with pytest.raises(TypeError, match="All hooks must be `SessionRunHook` instances, given: x"):
        TrainSpec(TRAIN, hooks=["x"])
    with pytest.raises(TypeError, match="All saving_listeners must be `CheckpointSaverListener`"):
        TrainSpec(TRAIN, saving_listeners=[object()])


def test_eval_spec_defaults_and_validation():
    spec = EvalSpec(EVAL)
    assert (spec.steps, spec.name, spec.hooks, spec.exporters) == (100, None, (), ())
    assert (spec.start_delay_secs, spec.throttle_secs, spec.every_n_steps) == (120, 600, None)
    single = LatestExporter("latest", RECEIVER)
    assert EvalSpec(EVAL, exporters=single).exporters == (single,)
    with pytest.raises(TypeError, match="`input_fn` must be callable"):
        EvalSpec(None)
    with pytest.raises(ValueError, match="Must specify steps > 0, given: -1"):
        EvalSpec(EVAL, steps=-1)
    with pytest.raises(TypeError, match="`name` must be string, given: 1"):
        EvalSpec(EVAL, name=1)
    with pytest.raises(TypeError, match="All hooks must be `SessionRunHook` instances"):
        EvalSpec(EVAL, hooks=[1])
    with pytest.raises(TypeError, match="`exporters` must be an Exporter, an iterable of Exporter"):
        EvalSpec(EVAL, exporters=[single, "x"])
    with pytest.raises(TypeError, match="`exporters` must be an Exporter"):
        EvalSpec(EVAL, exporters=5)
    with pytest.raises(ValueError, match="`exporters` must have unique names.*'latest', 'latest'"):
        EvalSpec(EVAL, exporters=[single, LatestExporter("latest", RECEIVER)])
    with pytest.raises(ValueError, match="An Exporter cannot have a name that is `None` or empty"):
        EvalSpec(EVAL, exporters=[LatestExporter("", RECEIVER)])
    with pytest.raises(
        ValueError, match="An Exporter must have a string name. Given: <class 'int'>"
    ):
        EvalSpec(EVAL, exporters=[LatestExporter(7, RECEIVER)])
    with pytest.raises(ValueError, match="Must specify start_delay_secs >= 0, given: -1"):
        EvalSpec(EVAL, start_delay_secs=-1)
    with pytest.raises(ValueError, match="Must specify throttle_secs >= 0, given: -2"):
        EvalSpec(EVAL, throttle_secs=-2)
    spec = EvalSpec(one_batch, 5, "val", throttle_secs=3, every_n_steps=7)
    assert copy.copy(spec) == spec and pickle.loads(pickle.dumps(spec)) == spec
    assert pickle.loads(pickle.dumps(TrainSpec(one_batch, 3))).max_steps == 3
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match=r"Must specify every_n_steps > 0 \(an int"):
            EvalSpec(EVAL, every_n_steps=bad)


def test_train_and_evaluate_argument_types(tmp_path):
    e = make(tmp_path)
    with pytest.raises(TypeError, match="`eval_spec` must have type `estimator.EvalSpec`"):
        train_and_evaluate(e, TrainSpec(TRAIN), None)
    with pytest.raises(TypeError, match="`estimator` must have type `estimator.Estimator`"):
        train_and_evaluate(object(), TrainSpec(TRAIN), eval_spec())
    with pytest.raises(TypeError, match="`train_spec` must have type `estimator.TrainSpec`"):
        train_and_evaluate(e, {"input_fn": TRAIN}, eval_spec())


# ----- local mode ---------------------------------------------------------------------------
def test_local_mode_evaluates_after_each_new_checkpoint(tmp_path):
    e = make(tmp_path / "m", save_checkpoints_steps=4)
    metrics, exports = train_and_evaluate(e, TrainSpec(TRAIN, max_steps=10), eval_spec())
    # Checkpoints at 0 (start), 4, 8 and 10 (end); the one at the start is not evaluated.
    assert evaluated_steps(e) == [4, 8, 10]
    assert exports == []  # no exporters
    assert metrics["global_step"] == 10
    np.testing.assert_allclose(metrics["loss"], reference_eval_loss(10), rtol=1e-5)
    by_step = read_eval_metrics(e.eval_dir())
    np.testing.assert_allclose(by_step[4]["loss"], reference_eval_loss(4), rtol=1e-5)
    # The result is what evaluate() gives for the final checkpoint.
    assert metrics == e.evaluate(EVAL, name="again")


def test_throttle_secs_skips_checkpoints_with_a_fake_clock(tmp_path, monkeypatch, caplog):
    fake = FakeTime()
    monkeypatch.setattr(training, "time", fake)
    e = make(tmp_path / "m", save_checkpoints_steps=2)
    spec = TrainSpec(TRAIN, max_steps=12, hooks=[ClockPerStep(fake)])
    with caplog.at_level(logging.INFO, logger="estimator"):
        metrics, _ = train_and_evaluate(e, spec, eval_spec(throttle_secs=5))
    # Saves at steps 2, 4, ..., 12 at fake time t = step. Evaluate at 2 (the first), then
    # once 5 s have passed since the last one: 8 (8 >= 2 + 5); the final checkpoint (12)
    # is evaluated at the end although only 4 s have passed.
    assert evaluated_steps(e) == [2, 8, 12]
    assert metrics["global_step"] == 12
    # Skipped: 4, 6, 10 and 12 (which the end evaluates anyway).
    assert caplog.text.count("Skip the current checkpoint eval due to throttle secs (5") == 4


def test_every_n_steps_evaluates_in_process_without_checkpoints(tmp_path):
    e = make(tmp_path / "m")  # checkpoints every 600 s: only at the start and the end
    metrics, exports = train_and_evaluate(
        e, TrainSpec(TRAIN, max_steps=10), eval_spec(every_n_steps=4)
    )
    # Evaluated at global steps 4 and 8 from the live state, and at the end (10).
    assert evaluated_steps(e) == [4, 8, 10]
    checkpoints = sorted(n for n in os.listdir(e.model_dir) if n.startswith("model.ckpt"))
    assert checkpoints == ["model.ckpt_0", "model.ckpt_10"]
    with open(os.path.join(e.eval_dir(), "eval_results.jsonl")) as f:
        assert [json.loads(line)["checkpoint_path"] for line in f] == [None, None, None]
    by_step = read_eval_metrics(e.eval_dir())
    for step in (4, 8, 10):
        np.testing.assert_allclose(by_step[step]["loss"], reference_eval_loss(step), rtol=1e-5)
    assert metrics["global_step"] == 10 and exports == []


def test_every_n_steps_with_exporters_saves_the_checkpoints_it_exports(tmp_path):
    e = make(tmp_path / "m")
    latest = LatestExporter("latest", RECEIVER)
    final = FinalExporter("final", RECEIVER)
    metrics, exports = train_and_evaluate(
        e, TrainSpec(TRAIN, max_steps=10), eval_spec(every_n_steps=5, exporters=[latest, final])
    )
    # Evaluations at 5 and 10; a checkpoint is written at 5 to export from. Step 10 is the
    # last step: at the end the exporters are called again as final; LatestExporter does
    # not export checkpoint 10 twice, FinalExporter exports it.
    assert evaluated_steps(e) == [5, 10]
    assert ckpt.latest_checkpoint(e.model_dir).endswith("model.ckpt_10")
    assert os.path.isdir(os.path.join(e.model_dir, "model.ckpt_5"))
    latest_dir = os.path.join(e.model_dir, "export", "latest")
    steps = []
    for version in sorted(os.listdir(latest_dir)):
        with open(os.path.join(latest_dir, version, "manifest.json")) as f:
            steps.append(json.load(f)["global_step"])
    assert steps == [5, 10]
    assert exports[0] == os.path.join(latest_dir, sorted(os.listdir(latest_dir))[-1]).encode()
    assert exports[1].startswith(os.path.join(e.model_dir, "export", "final").encode())
    assert metrics["global_step"] == 10


def test_every_n_steps_exports_the_checkpoint_the_saver_hook_is_writing(tmp_path, monkeypatch):
    # At step 5 the CheckpointSaverHook starts saving (it runs before the evaluation hook),
    # then the evaluation's exporter asks for step 5's checkpoint: the same save, not a
    # second one, however long the first takes to finish (in a job of several processes a
    # second save by some processes only hung the job).
    from damage import slow_finalize

    saved = slow_finalize(monkeypatch)
    e = make(tmp_path / "m", save_checkpoints_steps=5)
    train_and_evaluate(
        e,
        TrainSpec(TRAIN, max_steps=10),
        eval_spec(every_n_steps=5, exporters=[LatestExporter("latest", RECEIVER)]),
    )
    assert saved == [0, 5, 10]
    assert evaluated_steps(e) == [5, 10]


def test_final_export_when_training_ends_before_max_steps(tmp_path):
    # Input of 2 epochs = 10 steps of 8 examples; max_steps=None. TF flags is_the_final_export
    # only when global_step >= max_steps, so its FinalExporter never exports here.
    e = make(tmp_path / "m", save_checkpoints_steps=4)
    two_epochs = est.inputs.numpy_input_fn({"x": X}, Y, batch_size=8, num_epochs=2, shuffle=False)
    metrics, exports = train_and_evaluate(
        e, TrainSpec(two_epochs), eval_spec(exporters=FinalExporter("final", RECEIVER))
    )
    assert evaluated_steps(e) == [4, 8, 10]
    assert metrics["global_step"] == 10
    (final_dir,) = os.listdir(os.path.join(e.model_dir, "export", "final"))
    assert exports == [os.path.join(e.model_dir, "export", "final", final_dir).encode()]


def test_without_checkpoints_nothing_could_trigger_an_evaluation(tmp_path):
    e = make(tmp_path / "m", save_checkpoints_steps=None, save_checkpoints_secs=None)
    with pytest.raises(ValueError, match=r"There should be a CheckpointSaverHook.*every_n_steps"):
        train_and_evaluate(e, TrainSpec(TRAIN, max_steps=3), eval_spec())


def test_max_steps_already_reached_returns_none(tmp_path, caplog):
    e = make(tmp_path / "m", save_checkpoints_steps=5)
    e.train(TRAIN, max_steps=5)
    with caplog.at_level(logging.INFO, logger="estimator"):
        result = train_and_evaluate(e, TrainSpec(TRAIN, max_steps=5), eval_spec())
    assert result == (None, None)  # as TF: training is skipped, nothing evaluated
    assert "made no evaluation (training was skipped: max_steps=5" in caplog.text
    assert not os.path.exists(e.eval_dir())


def test_user_saving_listeners_and_hooks_are_kept(tmp_path):
    saves = []

    class Listener(est.CheckpointSaverListener):
        def after_save(self, session, global_step_value):
            saves.append(global_step_value)

    e = make(tmp_path / "m", save_checkpoints_steps=3)
    stop = est.StopAtStepHook(num_steps=4)
    train_and_evaluate(
        e, TrainSpec(TRAIN, max_steps=9, hooks=[stop], saving_listeners=[Listener()]), eval_spec()
    )
    # StopAtStepHook(num_steps=4) ends training at step 4: saves at 0, 3 and the end (4).
    assert saves == [0, 3, 4]
    assert evaluated_steps(e) == [3, 4]


# ----- distributed tasks --------------------------------------------------------------------
def _set_task(monkeypatch, task_type, index=0, cluster=None):
    # One process plays a task of a TF-style cluster: joining the JAX job is stubbed out
    # (tests/distribute/test_multihost.py runs real multi-process jobs).
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kwargs: None)
    cluster = cluster or {"chief": ["localhost:1"], "worker": ["localhost:2"]}
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})
    )


@pytest.mark.parametrize("start_delay", [0, 30])
def test_evaluator_task_evaluates_new_checkpoints_until_max_steps(
    tmp_path, monkeypatch, caplog, start_delay
):
    trainer = make(tmp_path / "m", save_checkpoints_steps=4)
    progress = iter([4, 8])

    def train_while_sleeping():  # the chief trains while the evaluator sleeps
        step = next(progress, None)
        if step is not None:
            trainer.train(TRAIN, max_steps=step)

    fake = FakeTime(on_sleep=train_while_sleeping)
    fake.now = 1e9  # the "not trained yet" warning is logged at most every 600 s
    monkeypatch.setattr(training, "time", fake)
    _set_task(monkeypatch, "evaluator")
    evaluator = make(tmp_path / "m", save_checkpoints_steps=4)
    assert evaluator.config.task_type == "evaluator"
    with caplog.at_level(logging.INFO, logger="estimator"):
        metrics, exports = train_and_evaluate(
            evaluator,
            TrainSpec(TRAIN, max_steps=8),
            eval_spec(start_delay_secs=start_delay, throttle_secs=10),
        )
    if start_delay:
        # sleep(30) (trains to 4), evaluate 4, sleep(10) (trains to 8), evaluate 8,
        # sleep(10); 8 >= max_steps: exit.
        assert fake.sleeps == [30, 10, 10]
    else:
        # No checkpoint at first: a warning, sleep(10) (trains to 4), evaluate 4, ...
        assert fake.sleeps == [10, 10, 10]
        assert "Estimator is not trained yet" in caplog.text
    assert evaluated_steps(evaluator) == [4, 8]
    assert "Exiting evaluation, global_step=8 >= train max_steps=8" in caplog.text
    assert metrics["global_step"] == 8 and exports == []


def test_an_evaluator_whose_training_died_says_what_it_waits_for(tmp_path, monkeypatch, caplog):
    """The training job reached step 4 of max_steps=8 and died: the evaluator (TF's default
    throttle_secs=600) evaluates step 4, then waits for a checkpoint that never comes,
    saying so at least once a minute instead of sleeping 10 minutes in silence."""
    make(tmp_path / "m", save_checkpoints_steps=4).train(TRAIN, max_steps=4)

    class Stop(Exception):
        pass

    def give_up_after_three_throttles():
        if fake.now > 3 * 600:
            raise Stop

    fake = FakeTime(on_sleep=give_up_after_three_throttles)
    monkeypatch.setattr(training, "time", fake)
    _set_task(monkeypatch, "evaluator")
    evaluator = make(tmp_path / "m")
    with caplog.at_level(logging.INFO, logger="estimator"), pytest.raises(Stop):
        train_and_evaluate(evaluator, TrainSpec(TRAIN, max_steps=8), eval_spec(throttle_secs=600))
    assert evaluated_steps(evaluator) == [4]
    assert max(fake.sleeps) <= training.WAIT_LOG_SECS  # never a minute without a check
    waits = [r for r in caplog.records if r.getMessage().startswith("The evaluator is waiting")]
    # 1,800 s of fake time, a line at most every 60 s: at least 29 lines (the first after
    # the first 60 s); each names what it waits for.
    assert len(waits) >= 29
    assert (
        f"The evaluator is waiting for a new checkpoint in {evaluator.model_dir} (to reach "
        "max_steps=8; last evaluated global_step: 4; newest checkpoint: model.ckpt_4, written"
    ) in waits[-1].getMessage()
    assert "If the training job has stopped, no more checkpoints will come" in caplog.text


def test_chief_trains_without_evaluating_and_worker_too(tmp_path, monkeypatch):
    _set_task(monkeypatch, "chief")
    e = make(tmp_path / "chief", save_checkpoints_steps=2)
    assert train_and_evaluate(e, TrainSpec(TRAIN, max_steps=3), eval_spec()) == (None, None)
    assert ckpt.latest_checkpoint(e.model_dir).endswith("model.ckpt_3")
    assert not os.path.exists(e.eval_dir())
    _set_task(monkeypatch, "worker")
    w = make(tmp_path / "worker", save_checkpoints_steps=2)
    assert train_and_evaluate(w, TrainSpec(TRAIN, max_steps=2), eval_spec()) == (None, None)


def test_unsupported_tasks(tmp_path, monkeypatch):
    _set_task(monkeypatch, "ps", cluster={"chief": ["a:1"], "ps": ["b:1"]})
    e = make(tmp_path / "m")
    with pytest.raises(ValueError, match="Task type ps is not supported: jax-estimator trains"):
        train_and_evaluate(e, TrainSpec(TRAIN, max_steps=1), eval_spec())
    _set_task(monkeypatch, "evaluator", index=1)
    e = make(tmp_path / "m")
    with pytest.raises(ValueError, match=r"only be one `evaluator` task \(with task id 0\)"):
        train_and_evaluate(e, TrainSpec(TRAIN, max_steps=1), eval_spec())


@pytest.mark.parametrize(
    "returned, error, message",
    [
        ({}, ValueError, "Internal error: `Estimator.evaluate` should never return empty"),
        ([("loss", 1.0)], TypeError, "`Estimator.evaluate` should return dict. Given <class"),
        ({"loss": 1.0}, ValueError, "result should have `global_step` in result. Given"),
    ],
)
def test_train_and_evaluate_checks_what_evaluate_returns(tmp_path, returned, error, message):
    # TF 2.15 training.py _EvalResult: the same checks and messages.
    class Odd(est.Estimator):
        def evaluate(self, *args, **kwargs):
            super().evaluate(*args, **kwargs)
            return returned

    estimator = make(tmp_path / "m")
    estimator.__class__ = Odd
    with pytest.raises(error, match=message):
        train_and_evaluate(estimator, TrainSpec(TRAIN, max_steps=2), eval_spec())
