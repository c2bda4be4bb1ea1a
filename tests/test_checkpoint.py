"""Checkpoints: layout, metadata without the model code, mismatches, kill during a save."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import estimator as est
from estimator import checkpoint as ckpt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def model_fn(features, labels, mode):
    w = est.get_variable("dense/kernel", [3, 2])
    b = est.get_variable("dense/bias", [2], initializer=est.initializers.zeros_initializer())
    count = est.get_variable("counter", [], jnp.int32, trainable=False)
    est.assign("counter", count + 1)
    loss = jnp.mean((features @ w + b - labels) ** 2)
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.adam(0.01))


def trained(tmp_path, steps=3):
    e = est.Estimator(model_fn, str(tmp_path), config=est.RunConfig(tf_random_seed=1))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    e.train(lambda: (x, np.ones((4, 2), np.float32)), steps=steps)
    return e


def test_layout_and_metadata(tmp_path):
    e = trained(tmp_path)
    path = e.latest_checkpoint()
    assert path == os.path.join(str(tmp_path), "model.ckpt_3")
    assert {"meta", "opt_state", "variables"} <= set(os.listdir(path))
    meta = ckpt.read_meta(path)
    assert meta["global_step"] == 3
    assert meta["variables"] == {
        "dense/kernel": {"shape": [3, 2], "dtype": "float32", "trainable": True},
        "dense/bias": {"shape": [2], "dtype": "float32", "trainable": True},
        "counter": {"shape": [], "dtype": "int32", "trainable": False},
    }
    assert ckpt.list_variables(path) == [
        ("counter", []),
        ("dense/bias", [2]),
        ("dense/kernel", [3, 2]),
        ("global_step", []),
    ]
    # The non-trainable counter was assigned once per step.
    assert int(ckpt.load_variable(path, "counter")) == 3


@pytest.mark.slow
def test_read_without_model_code(tmp_path):
    e = trained(tmp_path)
    expected = e.get_variable_value("dense/kernel")
    script = textwrap.dedent(f"""
        import numpy as np
        from estimator import checkpoint
        path = checkpoint.latest_checkpoint({str(tmp_path)!r})
        print(checkpoint.list_variables(path))
        np.save({str(tmp_path / "kernel.npy")!r}, checkpoint.load_variable(path, "dense/kernel"))
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert "('dense/kernel', [3, 2])" in out.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "kernel.npy"), expected)


def test_describe_mismatch():
    model = {
        "a": {"shape": [2], "dtype": "float32", "trainable": True},
        "b": {"shape": [3], "dtype": "float32", "trainable": True},
    }
    saved = {
        "a": {"shape": [2], "dtype": "float32", "trainable": True},
        "c": {"shape": [3], "dtype": "float32", "trainable": True},
    }
    assert ckpt.describe_mismatch("p", model, model) is None
    # Extra variables in the checkpoint alone are fine (TF's Saver ignores them).
    assert ckpt.describe_mismatch("p", {"a": model["a"]}, saved) is None
    message = ckpt.describe_mismatch("p", model, saved)
    assert "in the model, not in the checkpoint: b [3]" in message
    assert "in the checkpoint, not in the model: c [3]" in message


def test_optimizer_change_is_reported(tmp_path):
    trained(tmp_path)

    def sgd_model_fn(features, labels, mode):
        spec = model_fn(features, labels, mode)
        return spec._replace(train_op=optax.sgd(0.1))

    e = est.Estimator(sgd_model_fn, str(tmp_path))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    with pytest.raises(ValueError, match="does not match train_op's state"):
        e.train(lambda: (x, np.ones((4, 2), np.float32)), steps=1)


def test_checkpoint_step_parsing():
    assert ckpt.checkpoint_step("/a/b/model.ckpt_120") == 120
    assert ckpt.checkpoint_step("/a/b/model.ckpt_120/") == 120
    with pytest.raises(ValueError, match="is not a checkpoint: expected a directory named"):
        ckpt.checkpoint_step("/a/b/model.ckpt-120")


CHILD = textwrap.dedent("""
    import sys
    import jax.numpy as jnp, numpy as np, optax
    import estimator as est

    def model_fn(features, labels, mode):
        zeros = est.initializers.zeros_initializer()
        big = est.get_variable("big", [2500, 2500], initializer=zeros)
        w = est.get_variable("w", [3], initializer=est.initializers.zeros_initializer())
        loss = jnp.mean((features @ w - labels) ** 2) + 0.0 * big[0, 0]
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.01))

    config = est.RunConfig(save_checkpoints_steps=1, save_checkpoints_secs=None,
                           keep_checkpoint_max=3, tf_random_seed=0)
    e = est.Estimator(model_fn, sys.argv[1], config=config)
    x = np.ones((4, 3), np.float32)
    e.train(lambda: (x, np.ones(4, np.float32)), steps=10_000)
""")


@pytest.mark.slow
def test_process_killed_mid_save_resumes_from_previous_checkpoint(tmp_path):
    for attempt in range(3):
        model_dir = tmp_path / f"run{attempt}"
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(model_dir)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        caught = None
        deadline = time.time() + 120
        while time.time() < deadline and child.poll() is None:
            names = os.listdir(model_dir) if model_dir.is_dir() else []
            partial = [n for n in names if "orbax-checkpoint-tmp" in n]
            if partial and ckpt.latest_checkpoint(model_dir) is not None:
                caught = partial[0]
                child.send_signal(signal.SIGKILL)
                break
            time.sleep(0.002)
        child.wait()
        if caught and (model_dir / caught).exists():
            break
    else:
        pytest.fail("could not kill the child while a checkpoint was being written")
    latest = ckpt.latest_checkpoint(model_dir)
    partial_step = int(caught.split("model.ckpt_")[1].split(".")[0])
    # The interrupted save is ignored: the latest checkpoint is an earlier, complete one.
    assert ckpt.checkpoint_step(latest) < partial_step
    ckpt.read_meta(latest)
    # Training resumes from it.
    exec(compile(CHILD.split("config = ")[0], "child", "exec"), namespace := {})
    e = est.Estimator(namespace["model_fn"], str(model_dir), config=est.RunConfig(tf_random_seed=0))
    e.train(lambda: (np.ones((4, 3), np.float32), np.ones(4, np.float32)), steps=1)
    assert ckpt.checkpoint_step(e.latest_checkpoint()) == ckpt.checkpoint_step(latest) + 1
