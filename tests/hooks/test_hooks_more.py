"""More hooks: ProfilerHook, FinalOpsHook, GlobalStepWaiterHook and
the default progress bar.

The model is linear_model.py's scalar one: w = 0, 0.4, 0.72, 0.976, 1.1808, 1.34464 after
0..5 steps.
"""

from __future__ import annotations

import functools
import io
import os
import sys
import types

import jax.numpy as jnp
import numpy as np
import pytest
from linear_model import make_estimator, scalar_input, scalar_model_fn

import estimator as est
from estimator import checkpoint as ckpt
from estimator.engine.steps import TrainState
from estimator.hooks import FinalOpsHook, GlobalStepWaiterHook, progress
from estimator.hooks.profiler import ProfilerHook
from estimator.hooks.progress import ProgressBarHook

# The scalar model of linear_model.py, four examples a batch; no step-rate log nor summaries.
make = functools.partial(
    make_estimator, model_fn=scalar_model_fn, log_step_count_steps=None, save_summary_steps=None
)
feed = functools.partial(scalar_input, batch_size=4, examples=4)


def context(**session):
    """A run context on a fake session (what the hooks read of it)."""
    session.setdefault("mode", est.ModeKeys.TRAIN)
    session.setdefault("model_dir", None)
    session.setdefault("output_names", ("loss",))
    return est.SessionRunContext(est.SessionRunArgs(None), types.SimpleNamespace(**session))


# ----- ProfilerHook ---------------------------------------------------------------------
def runs(output_dir) -> dict[str, list[str]]:
    root = os.path.join(output_dir, "plugins", "profile")
    return {name: sorted(os.listdir(os.path.join(root, name))) for name in os.listdir(root)}


def test_profiler_traces_every_n_steps_and_a_step_range(tmp_path):
    every = ProfilerHook(save_steps=2, output_dir=str(tmp_path / "every"), show_memory=True)
    # One trace at a time (jax.profiler): the range ends before the periodic trace starts.
    ranged = ProfilerHook(output_dir=str(tmp_path / "range"), profile_steps=(0, 1))
    make(tmp_path / "model").train(feed(), steps=5, hooks=[every, ranged])
    # As TF, not the first step (0); then the steps run at global steps 2 and 4.
    found = runs(str(tmp_path / "every"))
    assert sorted(found) == ["step_2", "step_4"]
    for files in found.values():
        assert any(f.endswith(".xplane.pb") for f in files)
        assert any(f.endswith(".trace.json.gz") for f in files)  # Chrome trace format
        assert "memory.prof" in files  # show_memory
    assert sorted(runs(str(tmp_path / "range"))) == ["step_0-1"]
    assert ranged.traces == [str(tmp_path / "range" / "plugins" / "profile" / "step_0-1")]


def test_profiler_arguments():
    with pytest.raises(ValueError, match="Either every_secs or every_steps should be provided"):
        ProfilerHook()
    with pytest.raises(ValueError, match="give profile_steps or one of save_steps/save_secs"):
        ProfilerHook(save_steps=10, profile_steps=(1, 2))
    with pytest.raises(ValueError, match=r"0 <= first <= last; given \(5, 2\)"):
        ProfilerHook(profile_steps=(5, 2))


# ----- FinalOpsHook ---------------------------------------------------------------------
def test_final_ops_hook_fetches_the_last_steps_values(tmp_path):
    hook = FinalOpsHook({"loss": "loss", "w": "w_value", "step": "global_step"})
    assert hook.final_ops_values is None
    estimator = make(tmp_path).train(feed(), steps=5, hooks=[hook])
    # The last step ran at w = 1.1808 (after 4 steps): loss (2 - 1.1808)^2 = 0.67108864; the
    # global step after it is 5.
    values = hook.final_ops_values
    assert values["step"] == 5
    assert values["w"] == pytest.approx(1.1808, rel=1e-6)
    assert values["loss"] == pytest.approx(0.67108864, rel=1e-6)
    evaluation = FinalOpsHook(["loss"])
    estimator.evaluate(feed(epochs=1), hooks=[evaluation])
    # One batch at w = 1.34464: (2 - 1.34464)^2 = 0.4294967296.
    assert evaluation.final_ops_values[0] == pytest.approx(0.4294967296, rel=1e-6)
    with pytest.raises(ValueError, match=r"final_ops_feed_dict=...\) is not supported"):
        FinalOpsHook("loss", final_ops_feed_dict={"x": 1})


# ----- GlobalStepWaiterHook -------------------------------------------------------------
def test_global_step_waiter_waits_only_while_behind():
    steps = iter([0, 3, 7, 10, 99])
    slept = []
    hook = GlobalStepWaiterHook(
        10, global_step_fn=lambda session: next(steps), sleep=slept.append, poll_secs=0.25
    )
    hook.begin()
    assert hook.before_run(context(global_step=0)) is None
    assert slept == [0.25, 0.25, 0.25]  # at 0, 3 and 7; 10 lets it start
    assert hook.before_run(context(global_step=1)) is None  # started: no more checks
    assert next(steps) == 99

    ahead = GlobalStepWaiterHook(5, sleep=slept.append)
    ahead.begin()
    ahead.before_run(context(global_step=5))  # this loop is at the step already
    never = GlobalStepWaiterHook(0, global_step_fn=lambda s: pytest.fail("no check"))
    never.begin()
    never.before_run(context(global_step=0))
    assert slept == [0.25, 0.25, 0.25]


def test_global_step_waiter_reads_model_dir_checkpoints_and_times_out(tmp_path):
    # Another process's checkpoint at step 7 in model_dir counts as the global step.
    saver = ckpt.Checkpointer(str(tmp_path))
    trainable = {"w": jnp.zeros(1)}
    saver.save(7, TrainState(trainable, {}, None, jnp.int32(7), jnp.int32(-1)))
    saver.wait()
    saver.close()
    slept = []
    hook = GlobalStepWaiterHook(7, sleep=slept.append)
    hook.begin()
    hook.before_run(context(global_step=0, model_dir=str(tmp_path)))
    assert slept == []
    late = GlobalStepWaiterHook(8, sleep=slept.append, poll_secs=1.0, timeout_secs=2.0)
    late.begin()
    with pytest.raises(TimeoutError, match=r"waited 2 s for global step 8; it is still 7"):
        late.before_run(context(global_step=0, model_dir=str(tmp_path)))
    assert slept == [1.0, 1.0]


# ----- ProgressBarHook ------------------------------------------------------------------
def test_progress_bar_counts_steps_and_batches(tmp_path):
    out = io.StringIO()
    estimator = make(tmp_path).train(
        feed(), steps=6, hooks=[ProgressBarHook(6, file=out, every_n_secs=0.0)]
    )
    assert "train: 100%" in out.getvalue() and "6/6" in out.getvalue()
    assert "loss=" in out.getvalue()  # fetched at every step with every_n_secs=0
    out = io.StringIO()
    estimator.train(feed(), max_steps=8, hooks=[ProgressBarHook(last_step=8, file=out)])
    assert "8/8" in out.getvalue()  # resumed at 6: the bar runs from 6 to 8
    out = io.StringIO()
    list(estimator.predict(feed(epochs=3, batch_size=2), hooks=[ProgressBarHook(file=out)]))
    assert "predict: 6batch" in out.getvalue()  # 3 epochs of 4 examples in batches of 2
    assert "loss=" not in out.getvalue()


def test_progress_bar_fetches_the_loss_only_at_its_interval():
    now = [0.0]
    out = io.StringIO()
    hook = ProgressBarHook(file=out, every_n_secs=1.0, clock=lambda: now[0])
    hook.begin()
    hook.after_create_session(context(global_step=0).session, None)
    fetched = []
    for step in range(10):
        now[0] = 0.3 * step  # 0.0, 0.3, ..., 2.7 s
        run_context = context(global_step=step)
        args = hook.before_run(run_context)
        fetched.append(args is not None)
        hook.after_run(run_context, est.SessionRunValues(0.5 if args else None))
    # Fetches once a second has passed since the last (the bar started at 0 s): at 1.2 s
    # (step 4), then at 2.4 s (step 8).
    assert [i for i, f in enumerate(fetched) if f] == [4, 8]
    assert hook.bar.postfix == "loss=0.5"
    hook.end(types.SimpleNamespace(run=lambda name: {"loss": 0.25}[name]))  # and at the end
    assert "10step" in out.getvalue() and "loss=0.25" in out.getvalue()
    quiet = ProgressBarHook(file=io.StringIO(), show_loss=False, every_n_secs=0.0)
    quiet.after_create_session(context(global_step=0).session, None)
    assert quiet.before_run(context(global_step=0)) is None


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_default_progress_bar_switches(monkeypatch):
    monkeypatch.delenv(progress.ENV_VAR, raising=False)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progress.default_hook([]) is None  # not a terminal
    monkeypatch.setenv(progress.ENV_VAR, "1")
    assert isinstance(progress.default_hook([]), ProgressBarHook)  # forced on
    monkeypatch.setattr(sys, "stderr", Terminal())
    monkeypatch.delenv(progress.ENV_VAR)
    assert isinstance(progress.default_hook([]), ProgressBarHook)
    assert progress.default_hook([ProgressBarHook(disable=True)]) is None  # the user's own
    for off in ("0", "off", "False"):
        monkeypatch.setenv(progress.ENV_VAR, off)
        assert progress.default_hook([]) is None
    monkeypatch.delenv(progress.ENV_VAR)
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert progress.default_hook([]) is None


def test_train_evaluate_predict_show_a_bar_on_a_terminal(tmp_path, monkeypatch):
    monkeypatch.delenv(progress.ENV_VAR, raising=False)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    estimator = make(tmp_path).train(feed(), steps=3)
    estimator.evaluate(feed(), steps=2)
    list(estimator.predict(feed(epochs=1)))
    shown = terminal.getvalue()
    assert "train: 100%" in shown and "3/3" in shown
    assert "evaluate: 100%" in shown and "2/2" in shown
    assert "predict: 1batch" in shown
    terminal.truncate(0)
    estimator.train(feed(), steps=1, hooks=[ProgressBarHook(disable=True)])
    assert "train" not in terminal.getvalue()


def test_hooks_compose_in_one_training_run(tmp_path):
    # The new hooks run together with the default ones without changing the result.
    hooks = [
        GlobalStepWaiterHook(0),
        FinalOpsHook("w_value"),
        ProgressBarHook(file=io.StringIO()),
    ]
    estimator = make(tmp_path, steps_per_execution=4).train(feed(), steps=5, hooks=hooks)
    np.testing.assert_allclose(estimator.get_variable_value("w"), [1.34464], rtol=1e-6)
    assert hooks[1].final_ops_values == pytest.approx(1.1808, rel=1e-6)


def test_feed_fn_hook_exists_and_names_the_alternative():
    # tf.estimator.FeedFnHook feeds placeholders; a compiled step has none.
    with pytest.raises(ValueError, match=r"feeds placeholders.*Put the values into what input_fn"):
        est.FeedFnHook(lambda: {"x": 1})
    assert issubclass(est.FeedFnHook, est.SessionRunHook)
