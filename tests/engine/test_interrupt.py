"""Ctrl-C and SIGTERM during train()/evaluate() (estimator.engine.interrupt).

In-process tests raise the signal from a hook at a known step; the stress test sends
SIGINT/SIGTERM to a training subprocess at random moments and checks that it exits
promptly and leaves only complete checkpoints. ``INTERRUPT_STRESS_RUNS=50`` runs 50.

A shell that starts a job in the background (``cmd &``, ``nohup``, cron, some CI runners)
leaves SIGINT ignored in it and in its children, and the library rightly leaves an ignored
SIGINT alone: every test that relies on Ctrl-C's usual effect sets that disposition itself
(the ``sigint_as_in_a_terminal`` fixture here, ``signal.signal`` first thing in the children).
"""

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import weakref

import numpy as np
import optax
import pytest

import estimator as est


def model_fn(features, labels, mode):
    logits = est.layers.dense(features["x"], 1)[:, 0]
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions={"p": logits})
    loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1), predictions={"p": logits})


X = np.random.default_rng(0).normal(size=(256, 3)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.float32)


def input_fn(epochs=None):
    return est.inputs.numpy_input_fn({"x": X}, Y, batch_size=8, num_epochs=epochs, shuffle=False)


@pytest.fixture(autouse=True)
def sigint_as_in_a_terminal():
    """SIGINT raises KeyboardInterrupt (Python's handler), whatever this process inherited;
    the inherited disposition comes back afterwards."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class SignalAt(est.SessionRunHook):
    """Sends ``signum`` to this process after the step that makes global_step ``at``."""

    def __init__(self, at, signum, times=1):
        self.at, self.signum, self.times = at, signum, times

    def after_run(self, run_context, run_values):
        if run_context.session.global_step == self.at:
            for _ in range(self.times):
                signal.raise_signal(self.signum)


def _estimator(tmp_path, **config):
    config.setdefault("save_checkpoints_steps", 1000)
    return est.Estimator(model_fn, str(tmp_path), config=est.RunConfig(**config))


def test_sigint_stops_after_the_step_and_raises_keyboard_interrupt(tmp_path):
    e = _estimator(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        e.train(input_fn(), steps=100, hooks=[SignalAt(5, signal.SIGINT)])
    # Not saved at step 5 (TF's behaviour on Ctrl-C: only the checkpoints written so
    # far, here the one of step 0), and the handler is Python's again.
    assert e.latest_checkpoint().endswith("_0")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    e.train(input_fn(), steps=3)  # model_dir is consistent: training resumes
    assert e.get_variable_value("global_step") == 3


def test_second_sigint_raises_at_once(tmp_path):
    hook = SignalAt(4, signal.SIGINT, times=2)
    with pytest.raises(KeyboardInterrupt):
        _estimator(tmp_path).train(input_fn(), steps=100, hooks=[hook])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_saves_the_current_step_and_exits_143(tmp_path):
    e = _estimator(tmp_path)
    with pytest.raises(SystemExit) as info:
        e.train(input_fn(), steps=100, hooks=[SignalAt(7, signal.SIGTERM)])
    assert info.value.code == 143  # 128 + SIGTERM (15)
    # save_checkpoints_steps=1000: only step 0 was due; the preemption saved step 7.
    assert e.latest_checkpoint().endswith("_7")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_sigint_during_evaluate_writes_no_results(tmp_path):
    e = _estimator(tmp_path)
    e.train(input_fn(), steps=2)
    with pytest.raises(KeyboardInterrupt):
        e.evaluate(input_fn(1), hooks=[SignalAt(2, signal.SIGINT)])
    assert not os.path.exists(os.path.join(str(tmp_path), "eval"))


def test_user_signal_handlers_are_left_alone(tmp_path):
    seen = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        _estimator(tmp_path).train(input_fn(), steps=6, hooks=[SignalAt(2, signal.SIGINT)])
        assert seen == [signal.SIGINT]  # the program's handler ran; training went on
    finally:
        signal.signal(signal.SIGINT, previous)


class _Garbage:
    pass


def _swallowed_ctrl_c():
    """Ctrl-C landing in a weakref callback, as when a finished step's garbage is freed:
    Python prints "Exception ignored in ..." and drops the KeyboardInterrupt."""
    garbage = _Garbage()
    ref = weakref.ref(garbage, lambda _: signal.raise_signal(signal.SIGINT))
    del garbage  # the callback runs here
    return ref


class SwallowedAtBegin(est.SessionRunHook):
    def begin(self):
        _swallowed_ctrl_c()


@pytest.fixture
def swallowed(monkeypatch):
    """The exceptions Python swallowed (``sys.unraisablehook``) during the test."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(type(u.exc_value)))
    return seen


def test_python_swallows_a_ctrl_c_in_a_weakref_callback(swallowed):
    # The premise of the tests below: with Python's own handler (and so in TF) this Ctrl-C
    # is lost and the program goes on.
    _swallowed_ctrl_c()
    assert swallowed == [KeyboardInterrupt]


def test_a_swallowed_ctrl_c_in_train_is_raised_at_the_first_step(tmp_path, swallowed):
    e = _estimator(tmp_path)
    steps = []

    class Count(est.SessionRunHook):
        def after_run(self, run_context, run_values):
            steps.append(run_context.session.global_step)

    recorder = sys.unraisablehook
    with pytest.raises(KeyboardInterrupt):
        e.train(input_fn(), steps=100, hooks=[SwallowedAtBegin(), Count()])
    # TF: the 100 steps run. Here the loop stops after its first step; the checkpoint of
    # step 0 is complete, and the handler is Python's again.
    assert swallowed == [KeyboardInterrupt] and steps == [1]
    assert e.latest_checkpoint().endswith("_0")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert sys.unraisablehook is recorder  # the recorders chained in are gone
    e.train(input_fn(), steps=2)
    assert e.get_variable_value("global_step") == 2


def test_a_swallowed_ctrl_c_in_evaluate_is_raised_and_writes_no_results(tmp_path, swallowed):
    e = _estimator(tmp_path)
    e.train(input_fn(), steps=2)
    with pytest.raises(KeyboardInterrupt):
        e.evaluate(input_fn(1), hooks=[SwallowedAtBegin()])
    assert swallowed == [KeyboardInterrupt]
    assert not os.path.exists(os.path.join(str(tmp_path), "eval"))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_swallowed_ctrl_c_in_predict_is_raised_with_the_batch(tmp_path, swallowed):
    e = _estimator(tmp_path)
    e.train(input_fn(), steps=2)
    features = est.inputs.numpy_input_fn({"x": X}, batch_size=8, shuffle=False)
    predictions = e.predict(features, hooks=[SwallowedAtBegin()])
    with pytest.raises(KeyboardInterrupt):
        next(predictions)  # TF: the first prediction
    assert swallowed == [KeyboardInterrupt]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    count = 0
    for _ in e.predict(features):  # the caller's code between predictions: Python's handler
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        count += 1
    assert count == len(X)


def test_preemption_checkpoint_can_be_turned_off():
    config = est.RunConfig(save_checkpoint_on_preemption=False)
    assert not config.save_checkpoint_on_preemption
    assert config.replace(save_summary_steps=7).save_checkpoint_on_preemption is False
    assert est.RunConfig().save_checkpoint_on_preemption


CHILD = textwrap.dedent(
    """
    import faulthandler, signal, sys
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the stacks, when it hangs
    if sys.argv[4] == "1":  # Ctrl-C as in a terminal, even when the suite runs in the background
        signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np, optax
    import estimator as est

    def model_fn(features, labels, mode):
        logits = est.layers.dense(features["x"], 1)[:, 0]
        if mode == est.ModeKeys.PREDICT:
            return est.EstimatorSpec(mode, predictions={"p": logits})
        loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1),
                                 predictions={"p": logits})

    class Ready(est.SessionRunHook):
        def after_create_session(self, session, coord):
            print("ready", flush=True)

    x = np.random.default_rng(0).normal(size=(512, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    model_dir, mode, preempt = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    config = est.RunConfig(save_checkpoints_steps=10, save_summary_steps=5,
                           log_step_count_steps=10, save_checkpoint_on_preemption=preempt)
    e = est.Estimator(model_fn, model_dir=model_dir, config=config)
    fn = est.inputs.numpy_input_fn({"x": x}, y, batch_size=16, num_epochs=None, shuffle=True)
    if mode == "predict":
        e.train(fn, steps=1)
        fn = est.inputs.numpy_input_fn({"x": x}, batch_size=1, shuffle=False)
        while True:
            for _ in e.predict(fn, hooks=[Ready()]):
                pass
    if mode == "eval":
        e.train(fn, steps=1)
        fn = est.inputs.numpy_input_fn({"x": x}, y, batch_size=1, shuffle=False)
        while True:
            e.evaluate(fn, hooks=[Ready()])
    if mode == "steps":  # a fixed number of steps, then exit 0
        e.train(fn, steps=int(sys.argv[5]), hooks=[Ready()])
        print("global_step", e.get_variable_value("global_step"), flush=True)
        sys.exit(0)
    while True:
        e.train(fn, steps=10**9, hooks=[Ready()])
    """
)


def _child(tmp_path, model_dir, mode, preempt=True, sigint_default=True, *extra, **popen):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    argv = [str(model_dir), mode, "1" if preempt else "0", "1" if sigint_default else "0"]
    return subprocess.Popen(
        [sys.executable, str(script), *argv, *extra], stdout=subprocess.PIPE, text=True, **popen
    )


def _interrupt(tmp_path, mode, signum, preempt=True, delay=(0.0, 1.5)):
    """Starts a child, sends ``signum`` a random delay after its loop starts; returns
    (return code, seconds from the signal to the exit, model_dir)."""
    model_dir = tmp_path / f"run{random.getrandbits(32)}"
    with open(tmp_path / "stderr.txt", "w") as err:
        child = _child(tmp_path, model_dir, mode, preempt, stderr=err)
        try:
            assert child.stdout.readline().strip() == "ready"
            time.sleep(random.uniform(*delay))
            child.send_signal(signum)
            sent = time.monotonic()
            try:
                code = child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGUSR1)  # faulthandler writes every thread's stack
                time.sleep(2)
                err.flush()
                stacks = (tmp_path / "stderr.txt").read_text()
                raise AssertionError(f"{mode}: no exit 30 s after the signal:\n{stacks}") from None
            return code, time.monotonic() - sent, model_dir
        finally:
            child.kill()
            child.wait()


def _assert_consistent(model_dir, killed_at_once=False):
    """Every complete checkpoint restores; training resumes from the latest. A kill while
    orbax deletes an old checkpoint (keep_checkpoint_max) can leave part of that old
    directory without its ``meta``; such a directory is never the latest and is skipped
    (as ``latest_checkpoint`` skips it). A process ``killed_at_once`` may die before its
    first save (step 0, asynchronous) completes: then there is no checkpoint, only orbax's
    temporary directory, which is ignored, and training starts afresh."""
    e = est.Estimator(model_fn, str(model_dir))
    steps = sorted(
        int(name.rsplit("_", 1)[1])
        for name in os.listdir(model_dir)
        if name.startswith("model.ckpt_")
        and name.rsplit("_", 1)[1].isdigit()
        and os.path.isfile(os.path.join(str(model_dir), name, "meta", "metadata"))
    )
    if killed_at_once and not steps:
        assert e.latest_checkpoint() is None, os.listdir(model_dir)
        e.train(input_fn(), steps=2)
        assert e.get_variable_value("global_step") == 2
        return None
    assert steps, os.listdir(model_dir)
    for step in steps:
        path = os.path.join(str(model_dir), f"model.ckpt_{step}")
        assert est.checkpoint.read_meta(path)["global_step"] == step
        assert np.isfinite(est.checkpoint.load_variable(path, "dense/kernel")).all()
    assert e.latest_checkpoint().endswith(f"_{steps[-1]}")
    return steps[-1]


RUNS = int(os.environ.get("INTERRUPT_STRESS_RUNS", "3"))


@pytest.mark.slow
@pytest.mark.parametrize("run", range(RUNS))
def test_stress_sigint_at_random_moments(tmp_path, run):
    mode = ("train", "eval", "predict")[run % 3]
    code, seconds, model_dir = _interrupt(tmp_path, mode, signal.SIGINT)
    assert code in (1, -signal.SIGINT), code  # KeyboardInterrupt ended the process
    assert seconds < 5, seconds
    _assert_consistent(model_dir)


@pytest.mark.slow
def test_an_inherited_ignored_sigint_is_respected(tmp_path):
    """A job started in the background inherits SIGINT ignored: Ctrl-C (a SIGINT to the
    process) must not stop its training; it runs its steps and exits 0."""

    model_dir = tmp_path / "run"
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)  # what `cmd &` does: inherited
    try:
        child = _child(tmp_path, model_dir, "steps", True, False, "300", stderr=subprocess.DEVNULL)
    finally:
        signal.signal(signal.SIGINT, ignored)
    try:
        assert child.stdout.readline().strip() == "ready"
        for _ in range(3):
            child.send_signal(signal.SIGINT)
            time.sleep(0.05)
        out, _ = child.communicate(timeout=120)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 0
    assert "global_step 300" in out
    assert est.Estimator(model_fn, str(model_dir)).latest_checkpoint().endswith("_300")


@pytest.mark.slow
def test_stress_sigterm_saves_at_the_current_step(tmp_path):
    code, seconds, model_dir = _interrupt(tmp_path, "train", signal.SIGTERM)
    assert code == 143 and seconds < 5, (code, seconds)
    log = (tmp_path / "stderr.txt").read_text()
    saved = int(log.split("Preempted: saving checkpoints for ")[1].split(".")[0])
    assert _assert_consistent(model_dir) == saved


@pytest.mark.slow
def test_stress_sigterm_without_preemption_checkpoint_is_tf_behaviour(tmp_path):
    code, _, model_dir = _interrupt(tmp_path, "train", signal.SIGTERM, preempt=False)
    assert code == -signal.SIGTERM  # the default action: killed at once
    _assert_consistent(model_dir, killed_at_once=True)
