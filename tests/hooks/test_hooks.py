"""Hooks and the driver loop: TF's call order, fetches, stopping, NaN handling."""

from __future__ import annotations

import functools
import json
import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from linear_model import make_estimator

import estimator as est
from estimator import checkpoint as ckpt
from estimator.engine import session as session_lib

X = np.stack([np.linspace(-1, 1, 48), np.sin(np.arange(48))], axis=1).astype(np.float32)
Y = (X[:, 0] - 2 * X[:, 1]).astype(np.float32)


def model_fn(features, labels, mode, params):
    w = est.get_variable("w", [2], initializer=est.initializers.zeros_initializer())
    pred = features["x"] @ w
    loss = jnp.mean((pred - labels) ** 2)
    est.identity(jnp.sum(w), name="w_sum")
    hooks = params.get("make_hooks", lambda loss: [])(loss)
    return est.EstimatorSpec(
        mode,
        loss=loss,
        predictions={"pred": pred},
        train_op=optax.sgd(0.1),
        training_hooks=hooks,
        eval_metric_ops={"mse": est.metrics.mean_squared_error(labels, pred)},
    )


make = functools.partial(make_estimator, model_fn=model_fn)


def feed(batch_size=8, epochs=None):
    return est.inputs.numpy_input_fn(
        {"x": X}, Y, batch_size=batch_size, num_epochs=epochs, shuffle=False
    )


class Recorder(est.SessionRunHook):
    def __init__(self, log, name="rec", stop_after=None, fetches=None):
        self.log, self.name, self.stop_after, self.fetches = log, name, stop_after, fetches
        self.runs = 0
        self.results = []

    def begin(self):
        self.log.append((self.name, "begin"))

    def after_create_session(self, session, coord):
        self.log.append((self.name, "after_create_session", session.global_step))

    def before_run(self, run_context):
        self.log.append((self.name, "before_run"))
        return None if self.fetches is None else est.SessionRunArgs(self.fetches)

    def after_run(self, run_context, run_values):
        self.runs += 1
        self.results.append(run_values.results)
        self.log.append((self.name, "after_run"))
        if self.stop_after is not None and self.runs >= self.stop_after:
            run_context.request_stop()

    def end(self, session):
        self.log.append((self.name, "end", session.global_step))


# ----- timer --------------------------------------------------------------------------------
def test_second_or_step_timer_with_fake_clock():
    now = [100.0]
    timer = est.SecondOrStepTimer(every_secs=10, clock=lambda: now[0])
    assert timer.should_trigger_for_step(0)  # the first step always triggers
    assert timer.update_last_triggered_step(0) == (None, None)
    assert not timer.should_trigger_for_step(0)  # same step never twice
    now[0] = 105.0
    assert not timer.should_trigger_for_step(7)
    now[0] = 110.0
    assert timer.should_trigger_for_step(8)
    assert timer.update_last_triggered_step(8) == (10.0, 8)
    steps = est.SecondOrStepTimer(every_steps=3)
    steps.update_last_triggered_step(1)
    assert [steps.should_trigger_for_step(s) for s in (2, 3, 4)] == [False, False, True]
    with pytest.raises(ValueError, match="Either every_secs or every_steps should be provided."):
        est.SecondOrStepTimer()
    with pytest.raises(ValueError, match="Can not provide both every_secs and every_steps."):
        est.SecondOrStepTimer(1, 1)


# ----- call order -----------------------------------------------------------------------
def test_hook_call_order_and_request_stop(tmp_path):
    log = []
    user = Recorder(log, "user", stop_after=2)
    inner = []
    e = make(
        tmp_path,
        params={"make_hooks": lambda loss: inner or inner.append(Recorder(log, "spec")) or inner},
    )
    e.train(feed(), hooks=[user])
    user_log = [entry for entry in log if entry[0] == "user"]
    assert user_log == [
        ("user", "begin"),
        ("user", "after_create_session", 0),
        ("user", "before_run"),
        ("user", "after_run"),
        ("user", "before_run"),
        ("user", "after_run"),
        ("user", "end", 2),
    ]
    # A hook from EstimatorSpec.training_hooks runs after the user's, in the same protocol.
    first_run = log.index(("user", "before_run"))
    assert log[first_run + 1] == ("spec", "before_run")
    assert ckpt.checkpoint_step(e.latest_checkpoint()) == 2


def test_step_error_skips_after_run_and_end(tmp_path):
    log = []
    hook = Recorder(log)

    def bad_input():
        yield {"x": X[:8]}, Y[:8]
        yield {"x": np.ones((8, 3), np.float32)}, Y[:8]  # wrong width: step 2 fails

    e = make(tmp_path, steps_per_execution=1)
    with pytest.raises(ValueError, match="Feature 'x' changed shape at step 2"):
        e.train(bad_input, hooks=[hook])
    assert log.count(("rec", "before_run")) == 2
    assert log.count(("rec", "after_run")) == 1
    assert not any(entry[1] == "end" for entry in log)


def test_stop_at_step_hook(tmp_path):
    with pytest.raises(ValueError, match="One of num_steps or last_step must be specified."):
        est.StopAtStepHook()
    with pytest.raises(ValueError, match="Only one of num_steps or last_step can be specified."):
        est.StopAtStepHook(1, 2)
    e = make(tmp_path)
    e.train(feed(), hooks=[est.StopAtStepHook(num_steps=3)])
    assert ckpt.checkpoint_step(e.latest_checkpoint()) == 3
    e.train(feed(), hooks=[est.StopAtStepHook(last_step=5)])
    assert ckpt.checkpoint_step(e.latest_checkpoint()) == 5


# ----- fetches ----------------------------------------------------------------------------
def test_fetch_by_name_and_hook_held_arrays(tmp_path, caplog):
    log = []
    by_name = Recorder(log, fetches={"s": "w_sum", "step": "global_step", "l": "loss:0"})
    made = []

    def make_hooks(loss):
        hook = est.LoggingTensorHook({"inner_loss": loss}, every_n_iter=1)
        made.append(hook)
        return [hook]

    e = make(tmp_path, params={"make_hooks": make_hooks})
    with caplog.at_level(logging.INFO, logger="estimator"):
        e.train(feed(), hooks=[by_name], steps=3)
    steps = [r["step"] for r in by_name.results]
    assert steps == [0, 1, 2]  # global_step as the step ran with it, as TF
    assert by_name.results[0]["s"] == 0.0  # w starts at zero
    # Step 0's loss with w = 0 is mean(y^2) of the first batch.
    assert by_name.results[0]["l"] == pytest.approx(float(np.mean(Y[:8] ** 2)), rel=1e-6)
    assert caplog.text.count("inner_loss = ") == 3


def test_unknown_fetch_name(tmp_path):
    e = make(tmp_path)
    with pytest.raises(KeyError, match=r"asked for 'nope'.*Known names: global_step, loss, w_sum"):
        e.train(feed(), hooks=[Recorder([], fetches="nope")], steps=1)


def test_feed_dict_is_refused(tmp_path):
    class Feeder(est.SessionRunHook):
        def before_run(self, run_context):
            return est.SessionRunArgs("loss", feed_dict={"x": 1})

    with pytest.raises(ValueError, match="returned a feed_dict"):
        make(tmp_path).train(feed(), hooks=[Feeder()], steps=1)


def test_only_requested_values_leave_the_device(tmp_path, monkeypatch):
    transfers = []
    original = session_lib.to_host
    monkeypatch.setattr(
        session_lib, "to_host", lambda tree: transfers.append(sorted(tree)) or original(tree)
    )
    e = make(tmp_path, log_step_count_steps=5)
    e.train(feed(), steps=20)
    # The logging and NaN hooks fetch at steps 0, 5, 10, 15 (one transfer each); the
    # checkpoint saves (steps 0 and 20) and the NaN hook's end read the record. No other step
    # moves a value to the host.
    record = [["non_finite_step"]]
    assert transfers == record + [["loss", "non_finite_step"]] * 4 + record * 2


# ----- NaN --------------------------------------------------------------------------------
def nan_batches(nan_at):
    def input_fn():
        for i in range(6):
            labels = Y[i * 8 : (i + 1) * 8].copy()
            if i == nan_at:
                labels[0] = np.nan
            yield {"x": X[i * 8 : (i + 1) * 8]}, labels

    return input_fn


def _nan_batches(nan_at, count=6):
    def input_fn():
        for i in range(count):
            labels = Y[(i % 6) * 8 : (i % 6 + 1) * 8].copy()
            if i == nan_at:
                labels[0] = np.nan
            yield {"x": X[(i % 6) * 8 : (i % 6 + 1) * 8]}, labels

    return input_fn


def _first_batches(n):
    def input_fn():
        for i in range(n):
            yield {"x": X[(i % 6) * 8 : (i % 6 + 1) * 8]}, Y[(i % 6) * 8 : (i % 6 + 1) * 8]

    return input_fn


def test_nan_loss_stops_the_model_at_that_step_and_saves_it_as_that_step(tmp_path):
    e = make(tmp_path / "nan")
    with pytest.raises(est.NanLossDuringTrainingError, match="global step 3") as info:
        e.train(nan_batches(3))
    assert info.value.global_step == 3
    # Steps 3, 4, 5 changed nothing (TF: the NaN step is applied and training goes on): the
    # variables are those of training on batches 0, 1, 2, saved as the checkpoint of step 3.
    clean = make(tmp_path / "clean")
    clean.train(_first_batches(3))
    assert os.path.basename(e.latest_checkpoint()) == "model.ckpt_3"
    w_nan = e.get_variable_value("w")
    assert np.all(np.isfinite(w_nan))
    np.testing.assert_array_equal(w_nan, clean.get_variable_value("w"))
    assert e.get_variable_value("global_step") == 3


def test_no_checkpoint_after_a_nan_holds_later_steps(tmp_path):
    # A NaN at step 13, checks every 100 steps, saves every 10: TF trains on
    # and saves steps 20..90 built on the NaN. Here the scheduled saves after step 13 (the
    # first one reads the device's record) write the state of step 13 as step 13, and
    # training stops there, at step 20, not at the next NaN check.
    e = make(tmp_path / "nan", save_checkpoints_steps=10, save_checkpoints_secs=None)
    with pytest.raises(est.NanLossDuringTrainingError, match="global step 13"):
        e.train(_nan_batches(13, count=200))
    steps = sorted(int(n.split("_")[1]) for n in os.listdir(tmp_path / "nan") if "ckpt_" in n)
    assert steps == [0, 10, 13]
    clean = make(tmp_path / "clean", save_checkpoints_steps=10, save_checkpoints_secs=None)
    clean.train(_first_batches(13))
    np.testing.assert_array_equal(e.get_variable_value("w"), clean.get_variable_value("w"))


def test_a_nan_seen_by_any_fetch_stops_training_at_once(tmp_path):
    # A hook fetching the loss every step brings the record along (same transfer): the NaN
    # hook (checking every 100 steps itself) raises at the step after the NaN.
    class LossEveryStep(est.SessionRunHook):
        steps = 0

        def before_run(self, run_context):
            return est.SessionRunArgs("loss")

        def after_run(self, run_context, run_values):
            LossEveryStep.steps += 1

    e = make(tmp_path, save_checkpoints_steps=None, save_checkpoints_secs=None)
    with pytest.raises(est.NanLossDuringTrainingError, match="global step 13"):
        e.train(_nan_batches(13, count=200), hooks=[LossEveryStep()])
    assert LossEveryStep.steps == 14  # steps 0..13


def test_nan_tensor_hook_stops_without_failing():
    class Context:
        stopped = False

        class session:  # noqa: N801
            global_step = 8

        def request_stop(self):
            Context.stopped = True

    hook = est.NanTensorHook("loss", fail_on_nan_loss=False)
    assert hook.before_run(Context()).fetches == {"record": "non_finite_step"}
    hook.after_run(Context(), est.SessionRunValues({"record": np.int32(-1)}))
    assert not Context.stopped
    hook.after_run(Context(), est.SessionRunValues({"record": np.int32(5)}))
    assert Context.stopped
    other = est.NanTensorHook("my_loss", every_n_iter=2)
    assert other.before_run(Context()).fetches == {"record": "non_finite_step", "value": "my_loss"}
    assert other.before_run(Context()) is None
    assert other.before_run(Context()).fetches == {"record": "non_finite_step", "value": "my_loss"}
    with pytest.raises(est.NanLossDuringTrainingError, match="global step 7"):
        other.after_run(
            Context(), est.SessionRunValues({"record": np.int32(-1), "value": np.float32(np.inf)})
        )
    assert str(est.NanLossDuringTrainingError()) == "NaN loss during training."


# ----- logging ----------------------------------------------------------------------------
def test_logging_tensor_hook_arguments_and_format(tmp_path, caplog):
    with pytest.raises(ValueError, match="either at_end and/or exactly one of every_n_iter"):
        est.LoggingTensorHook(["loss"])
    with pytest.raises(ValueError, match="invalid every_n_iter=0."):
        est.LoggingTensorHook(["loss"], every_n_iter=0)
    hooks = [
        est.LoggingTensorHook(["w_sum", "loss"], every_n_iter=2),
        est.LoggingTensorHook({"z": "loss"}, at_end=True, formatter=lambda v: f"END {v['z']:.1f}"),
    ]
    with caplog.at_level(logging.INFO, logger="estimator"):
        make(tmp_path).train(feed(), hooks=hooks, steps=3)
    lines = [r.getMessage() for r in caplog.records if "w_sum = " in r.getMessage()]
    assert len(lines) == 2  # local steps 0 and 2
    assert lines[0].startswith("w_sum = 0.0, loss = ")  # a list keeps its order
    assert lines[1].endswith(" sec)")
    assert sum("END " in r.getMessage() for r in caplog.records) == 1


def test_step_counter_hook_logs_rate(tmp_path, caplog):
    with pytest.raises(ValueError, match="exactly one of every_n_steps and every_n_secs"):
        est.StepCounterHook(every_n_steps=None)
    counter = est.StepCounterHook(every_n_steps=2)
    with caplog.at_level(logging.INFO, logger="estimator"):
        make(tmp_path).train(feed(), hooks=[counter], steps=5)
    assert counter.last_rate is not None and counter.last_rate > 0
    assert "global_step/sec: " in caplog.text


# ----- checkpoint saver -----------------------------------------------------------------
class Listener(est.CheckpointSaverListener):
    def __init__(self, stop_at=None):
        self.calls, self.stop_at = [], stop_at

    def begin(self):
        self.calls.append("begin")

    def before_save(self, session, global_step_value):
        self.calls.append(("before_save", global_step_value))

    def after_save(self, session, global_step_value):
        self.calls.append(("after_save", global_step_value))
        assert ckpt.latest_checkpoint(session.model_dir) == ckpt.step_dir(
            session.model_dir, global_step_value
        )
        return self.stop_at is not None and global_step_value >= self.stop_at

    def end(self, session, global_step_value):
        self.calls.append(("end", global_step_value))


def test_checkpoint_schedule_and_listeners(tmp_path):
    listener = Listener()
    e = make(tmp_path, save_checkpoints_steps=3, save_checkpoints_secs=None, keep_checkpoint_max=2)
    e.train(feed(), steps=7, saving_listeners=[listener])
    # Saved at the start (0), every 3 steps (3, 6) and at the end (7).
    saves = [c[1] for c in listener.calls if c[0] == "after_save"]
    assert saves == [0, 3, 6, 7]
    assert listener.calls[0] == "begin" and listener.calls[-1] == ("end", 7)
    # keep_checkpoint_max=2: the two newest remain, the latest among them.
    remaining = sorted(n for n in (tmp_path.iterdir()) if n.name.startswith("model.ckpt_"))
    assert [p.name for p in remaining] == ["model.ckpt_6", "model.ckpt_7"]


def test_listener_can_stop_training(tmp_path):
    e = make(tmp_path, save_checkpoints_steps=2, save_checkpoints_secs=None)
    e.train(feed(), steps=10, saving_listeners=[Listener(stop_at=4)])
    assert ckpt.checkpoint_step(e.latest_checkpoint()) == 4


def test_add_listener_registers_once_and_checks_the_type(tmp_path):
    """``add_listener`` (beyond TF, which takes listeners only in the constructor) is how
    ``train(saving_listeners=...)`` reaches a CheckpointSaverHook the user passed."""
    first, second = Listener(), Listener()
    saver = est.CheckpointSaverHook(str(tmp_path), save_steps=100, listeners=[first])
    saver.add_listener(second)
    saver.add_listener(second)  # already there: not added twice
    assert saver.listeners == (first, second)
    with pytest.raises(TypeError, match="add_listener expects a CheckpointSaverListener"):
        saver.add_listener(object())
    e = make(tmp_path, save_checkpoints_steps=None, save_checkpoints_secs=None)
    third = Listener()
    e.train(feed(), steps=2, hooks=[saver], saving_listeners=[third])
    assert saver.listeners == (first, second, third)
    # Each listener saw the saves at the start (0) and at the end (2), once each.
    for listener in (first, second, third):
        assert [c[1] for c in listener.calls if c[0] == "after_save"] == [0, 2]


def test_listeners_need_a_saver(tmp_path):
    e = make(tmp_path, save_checkpoints_steps=None, save_checkpoints_secs=None)
    with pytest.raises(ValueError, match="There should be a CheckpointSaverHook to use"):
        e.train(feed(), steps=1, saving_listeners=[Listener()])
    e.train(feed(), steps=2)  # checkpoints disabled, as TF: nothing is written
    assert e.latest_checkpoint() is None


def test_chief_only_hooks_run_on_the_chief_alone(tmp_path, monkeypatch):
    """TF 2.15's MonitoredTrainingSession adds the checkpoint saver, step counter, summary
    saver and ``EstimatorSpec.training_chief_hooks`` only when ``is_chief``; a worker runs
    its ``training_hooks`` and writes nothing to model_dir."""
    log = []

    def with_hooks(features, labels, mode, params):
        spec = model_fn(features, labels, mode, params)
        return spec._replace(
            training_hooks=[Recorder(log, "worker")],
            training_chief_hooks=[Recorder(log, "chief")],
        )

    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps(
            {
                "cluster": {"chief": ["localhost:1"], "worker": ["localhost:2"]},
                "task": {"type": "worker", "index": 0},
            }
        ),
    )
    # One process plays a task of a TF-style cluster: joining the JAX job is stubbed out
    # (tests/distribute/test_multihost.py runs real multi-process jobs).
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kwargs: None)
    config = est.RunConfig(tf_random_seed=0, save_checkpoints_steps=2)
    assert not config.is_chief
    e = est.Estimator(with_hooks, str(tmp_path), config=config, params={})
    e.train(feed(), steps=5)
    names = {entry[0] for entry in log}
    assert "worker" in names and "chief" not in names
    assert e.latest_checkpoint() is None
    assert not [n for n in os.listdir(tmp_path) if n.startswith("events")]


def test_mock_hooks_as_tf_tests_use_them(tmp_path):
    """Users' unit tests check hook calls with
    ``mock.MagicMock(wraps=SessionRunHook(), spec=SessionRunHook)``, which TF 2.15's loop
    accepts (the mock's methods live on the instance, not its class); a before_run result
    that is not SessionRunArgs is a clear TypeError (TF fails inside session.run)."""
    from unittest import mock

    hook = mock.MagicMock(wraps=est.SessionRunHook(), spec=est.SessionRunHook)
    make(tmp_path).train(feed(), steps=3, hooks=[hook])
    assert hook.begin.call_count == 1 and hook.after_create_session.call_count == 1
    assert hook.before_run.call_count == 3 and hook.after_run.call_count == 3
    assert hook.end.call_count == 1
    with pytest.raises(TypeError, match=r"before_run returned <MagicMock.*expected None or a"):
        make(tmp_path).train(feed(), steps=1, hooks=[mock.MagicMock(spec=est.SessionRunHook)])
