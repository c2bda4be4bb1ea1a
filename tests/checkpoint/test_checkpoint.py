"""Checkpoints: layout, metadata without the model code, mismatches, kill during a save."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
import pytest
from damage import slow_finalize
from etils import epath

import estimator as est
from estimator import checkpoint as ckpt
from estimator.checkpoint import tree_form

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
    # Adam's state, described leaf by leaf in its saved form (io.tree_form): chain index
    # 0 of optax.adam (scale_by_adam's state), its count and two moments per variable.
    assert sorted(tuple(names) for names, _, _ in meta["opt_state"]) == [
        ("0", "count"),
        ("0", "mu", "dense/bias"),
        ("0", "mu", "dense/kernel"),
        ("0", "nu", "dense/bias"),
        ("0", "nu", "dense/kernel"),
    ]
    assert [["0", "mu", "dense/kernel"], [3, 2], "float32"] in meta["opt_state"]
    assert meta["sparse_candidates"] == []  # no table looked up (sparse updates)


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
    path = os.path.join(str(tmp_path), "model.ckpt_3")
    with pytest.raises(ValueError) as info:
        e.train(lambda: (x, np.ones((4, 2), np.float32)), steps=1)
    assert str(info.value).startswith(
        f"The optimizer state in {path} does not match train_op's state (was the optimizer "
        "changed?): opt_state/0/count: only in the checkpoint;"
    )


def test_an_optimizer_with_state_replacing_one_without_is_reported(tmp_path):
    # optax.sgd's state has no arrays: no opt_state item is written, the metadata
    # describes it (an empty list). Resuming it with Adam is an optimizer change, not a
    # checkpoint saved without its optimizer state.
    def sgd_model_fn(features, labels, mode):
        return model_fn(features, labels, mode)._replace(train_op=optax.sgd(0.1))

    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    feed = lambda: (x, np.ones((4, 2), np.float32))  # noqa: E731
    est.Estimator(sgd_model_fn, str(tmp_path)).train(feed, steps=2)
    path = os.path.join(str(tmp_path), "model.ckpt_2")
    assert not os.path.exists(os.path.join(path, "opt_state"))
    assert ckpt.read_meta(path)["opt_state"] == []
    with pytest.raises(ValueError) as info:
        est.Estimator(model_fn, str(tmp_path)).train(feed, steps=1)
    assert str(info.value).startswith(
        f"The optimizer state in {path} does not match train_op's state (was the optimizer "
        "changed?): opt_state/0/count: ([], 'int32') in train_op's state, None in the "
        "checkpoint;"
    )


def test_a_checkpoint_written_in_optax_structure_without_its_description_resumes(tmp_path):
    # Checkpoints written before the optimizer state was saved in its saved form hold
    # optax's own structure (NamedTuples, tuples) and their metadata does not describe
    # it: training resumes from them (model_fn's init run gives the structure) exactly as
    # from the same state saved today.
    calls = []

    def counting(features, labels, mode):
        calls.append(mode)
        return model_fn(features, labels, mode)

    new = trained(tmp_path / "new")
    variables, saved = ckpt.read_checkpoint(new.latest_checkpoint())
    trainable = {k: jnp.asarray(v) for k, v in variables["trainable"].items()}
    template = optax.adam(0.01).init(trainable)  # what old versions saved
    state = est.engine.TrainState(
        trainable,
        {k: jnp.asarray(v) for k, v in variables["non_trainable"].items()},
        tree_form.structured(saved, template, "the new checkpoint"),
        jnp.int32(3),
        jnp.int32(-1),
    )
    saver = ckpt.Checkpointer(str(tmp_path / "old"))
    saver.save(3, state)
    saver.wait()
    old_path = os.path.join(str(tmp_path / "old"), "model.ckpt_3")
    meta_file = os.path.join(old_path, "meta", "metadata")
    with open(meta_file) as f:
        meta = json.load(f)
    del meta["opt_state"]
    with open(meta_file, "w") as f:
        json.dump(meta, f)
    recorded = ocp.StandardCheckpointHandler().metadata(epath.Path(old_path, "opt_state")).tree
    assert isinstance(recorded, list)  # optax's tuples, as orbax recorded them
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    results = {}
    for name in ("new", "old"):
        calls.clear()
        e = est.Estimator(counting, str(tmp_path / name), config=est.RunConfig(tf_random_seed=1))
        e.train(lambda: (x, np.ones((4, 2), np.float32)), steps=2)
        results[name] = (len(calls), e.get_variable_value("dense/kernel"))
    assert results["new"][0] == 1  # the step alone: the metadata describes the state
    assert results["old"][0] == 2  # init (for the structure), then the step
    np.testing.assert_array_equal(results["old"][1], results["new"][1])


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


def test_a_step_being_written_is_not_written_again_after_a_reload(tmp_path, monkeypatch):
    # runtime.saver() re-lists model_dir before each use. Listed while step 3 was still
    # being written, the step was dropped from the list and the next save(3) wrote it again;
    # in a job of two processes whether it did depended on each one's timing, and the one
    # that saved waited forever for the other (the every_n_steps job of
    # tests/distribute/test_multihost.py).
    saved = slow_finalize(monkeypatch)
    state = est.engine.TrainState({"w": jnp.ones(3)}, {}, None, jnp.int32(3), jnp.int32(-1))
    saver = ckpt.Checkpointer(str(tmp_path))
    path = saver.save(3, state)
    saver.reload()  # waits for step 3, then lists it
    assert saver.save(3, state) == path == os.path.join(str(tmp_path), "model.ckpt_3")
    saver.wait()
    assert saved == [3]
    assert ckpt.latest_checkpoint(str(tmp_path)) == path
