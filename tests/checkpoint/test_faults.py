"""Faults around model_dir: two writers, damaged checkpoint files."""

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import optax
import pytest

import estimator as est

X = np.ones((8, 3), np.float32)
Y = np.ones(8, np.float32)


def model_fn(features, labels, mode):
    logits = est.layers.dense(features["x"], 1, name="logits")[:, 0]
    loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
    train_op = optax.sgd(0.1, momentum=0.9)  # a state with arrays: opt_state/ is written
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op, predictions={"l": logits})


def feed():
    return est.inputs.numpy_input_fn({"x": X}, Y, batch_size=8, shuffle=False, num_epochs=None)


@pytest.mark.slow
def test_a_second_writer_in_another_process_gets_a_clear_error(tmp_path):
    # A child process holds model_dir's lock (as a train() in progress would); our train()
    # refuses at once instead of interleaving checkpoints with it, and names the holder.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from estimator.checkpoint.lock import ModelDirLock
                with ModelDirLock({str(tmp_path)!r}):
                    print("locked", flush=True)
                    sys.stdin.readline()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        e = est.Estimator(model_fn, str(tmp_path))
        with pytest.raises(est.ModelDirBusyError) as info:
            e.train(feed(), steps=2)
        message = str(info.value)
        assert f"{tmp_path} is being trained by another process (pid {holder.pid} on " in message
        assert "train into another model_dir" in message
        assert e.latest_checkpoint() is None  # nothing was written
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)
    # The holder ended: the lock is gone with it.
    e.train(feed(), steps=2)
    assert os.path.basename(e.latest_checkpoint()) == "model.ckpt_2"


@pytest.mark.slow
def test_a_killed_writer_leaves_no_stale_lock(tmp_path):
    code = (
        "import os, signal\n"
        "from estimator.checkpoint.lock import ModelDirLock\n"
        f"with ModelDirLock({str(tmp_path)!r}):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == -9
    est.Estimator(model_fn, str(tmp_path)).train(feed(), steps=1)


def test_a_second_writer_in_the_same_process_gets_a_clear_error(tmp_path):
    class TrainAgain(est.SessionRunHook):
        def begin(self):
            with pytest.raises(est.ModelDirBusyError, match="is being trained by another"):
                est.Estimator(model_fn, str(tmp_path)).train(feed(), steps=1)
            self.checked = True

    hook = TrainAgain()
    est.Estimator(model_fn, str(tmp_path)).train(feed(), steps=1, hooks=[hook])
    assert hook.checked


def test_evaluate_while_training_takes_no_lock(tmp_path):
    e = est.Estimator(model_fn, str(tmp_path))
    e.train(feed(), steps=1)

    class EvaluateMeanwhile(est.SessionRunHook):
        def begin(self):
            self.result = est.Estimator(model_fn, str(tmp_path)).evaluate(feed(), steps=1)

    hook = EvaluateMeanwhile()
    e.train(feed(), steps=1, hooks=[hook])
    assert hook.result["global_step"] == 1


@pytest.mark.parametrize(
    "item, content, named",
    [
        ("meta/metadata", b"\xff\xfe\x00", "meta/metadata cannot be read (UnicodeDecodeError"),
        ("meta/metadata", b'{"global_step": 2', "meta/metadata cannot be read (JSONDecodeError"),
        ("meta/metadata", b"[1, 2]", "meta/metadata cannot be read (ValueError: expected"),
        ("variables/_METADATA", b"\xff\x00", "variables cannot be read (UnicodeDecodeError"),
        ("opt_state/_METADATA", b"\xff\x00", "opt_state cannot be read (UnicodeDecodeError"),
    ],
)
def test_damaged_checkpoint_files_are_named(tmp_path, item, content, named):
    e = est.Estimator(model_fn, str(tmp_path))
    e.train(feed(), steps=2)
    checkpoint = os.path.join(str(tmp_path), "model.ckpt_2")
    with open(os.path.join(checkpoint, item), "wb") as f:
        f.write(content)
    with pytest.raises(ValueError) as info:
        est.Estimator(model_fn, str(tmp_path)).train(feed(), steps=1)
    message = str(info.value)
    assert message.startswith(f"The checkpoint {checkpoint} is corrupt: ")
    previous = os.path.join(str(tmp_path), "model.ckpt_0")
    assert named in message
    assert f"Delete or move {checkpoint} (training then resumes from the previous " in message
    assert f"checkpoint, {previous}; RunConfig(restore_fallback=True)" in message
    # Following the advice resumes from the previous checkpoint (step 0).
    shutil.rmtree(checkpoint)
    e2 = est.Estimator(model_fn, str(tmp_path))
    e2.train(feed(), steps=1)
    assert os.path.basename(e2.latest_checkpoint()) == "model.ckpt_1"


def test_a_missing_item_or_a_checkpoint_gone_is_said_plainly(tmp_path):
    e = est.Estimator(model_fn, str(tmp_path))
    e.train(feed(), steps=2)
    checkpoint = os.path.join(str(tmp_path), "model.ckpt_2")
    shutil.rmtree(os.path.join(checkpoint, "variables"))
    # orbax's own error here: "AttributeError: 'NoneType' object has no attribute 'tree'".
    with pytest.raises(est.checkpoint.DataLossError) as info:
        est.checkpoint.verify_checkpoint(checkpoint)
    assert str(info.value).startswith(
        f"The checkpoint {checkpoint} is corrupt: {checkpoint}/variables is missing. "
        f"Delete or move {checkpoint} (training then resumes from the previous checkpoint"
    )
    shutil.rmtree(checkpoint)  # as another process's restore_fallback moves it aside
    with pytest.raises(est.checkpoint.DataLossError) as info:
        est.checkpoint.verify_checkpoint(checkpoint)
    assert str(info.value) == (
        f"The checkpoint {checkpoint} is gone: it was moved or deleted after it was found."
    )


def test_a_width_change_on_the_same_estimator_gets_the_fresh_estimators_message(tmp_path):
    # The state kept in memory after train() must not meet a model
    # whose variables changed shape (it gave JAX's "Argument types differ ...").
    def feed_width(width):
        x = np.ones((8, width), np.float32)
        return est.inputs.numpy_input_fn({"x": x}, Y, batch_size=8, shuffle=False)

    e = est.Estimator(model_fn, str(tmp_path))
    e.train(feed_width(3))
    messages = []
    for call in (
        lambda: e.train(feed_width(4)),
        lambda: est.Estimator(model_fn, str(tmp_path)).train(feed_width(4)),
        lambda: e.evaluate(feed_width(4)),
    ):
        with pytest.raises(ValueError) as info:
            call()
        messages.append(str(info.value))
    assert messages[0] == messages[1] == messages[2]
    assert "shape differs for logits/kernel: model [4, 1], checkpoint [3, 1]" in messages[0]
    e.train(feed_width(3))  # the old width still trains, from the kept state
    assert e.get_variable_value("global_step") == 2
