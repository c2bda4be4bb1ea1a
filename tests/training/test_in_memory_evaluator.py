"""InMemoryEvaluatorHook: TF 2.15's arguments and schedule, evaluating the live train state."""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest
from linear_model import EVAL, TRAIN, make, reference_eval_loss

from estimator.events import read_eval_metrics
from estimator.training.in_memory_evaluator import InMemoryEvaluatorHook


def test_argument_errors(tmp_path, monkeypatch):
    e = make(tmp_path / "m")
    with pytest.raises(ValueError, match=r"invalid every_n_iter=0\."):
        InMemoryEvaluatorHook(e, EVAL, every_n_iter=0)
    with pytest.raises(ValueError, match=r"invalid every_n_iter=None\."):
        InMemoryEvaluatorHook(e, EVAL, every_n_iter=None)
    with pytest.raises(ValueError, match="Must specify steps > 0, given: 0"):
        InMemoryEvaluatorHook(e, EVAL, steps=0)
    with pytest.raises(TypeError, match="`estimator` must have type `estimator.Estimator`"):
        InMemoryEvaluatorHook(object(), EVAL)
    with pytest.raises(TypeError, match="Hooks must be a SessionRunHook, given: 1"):
        InMemoryEvaluatorHook(e, EVAL, hooks=[1])
    # One process plays a task of a TF-style cluster: joining the JAX job is stubbed out
    # (tests/distribute/test_multihost.py runs real multi-process jobs).
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kwargs: None)
    cluster = {"chief": ["a:1"], "worker": ["b:1"]}
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})
    )
    distributed = make(tmp_path / "d")
    # TF refuses a distributed config; here every process evaluates its shard
    # (tests/distribute/test_multihost.py::test_in_training_evaluation_of_a_job_is_the_whole_sets).
    assert InMemoryEvaluatorHook(distributed, EVAL).eval_result is None
    with pytest.raises(ValueError, match=r"invalid every_n_secs=0\."):
        InMemoryEvaluatorHook(e, EVAL, every_n_secs=0)


def test_evaluates_the_live_state_at_start_every_n_iter_and_at_the_end(tmp_path):
    e = make(tmp_path / "m")  # checkpoints every 600 s: only at steps 0 and 7
    hook = InMemoryEvaluatorHook(e, EVAL, name="mem", every_n_iter=3)
    e.train(TRAIN, hooks=[hook], steps=7)
    by_step = read_eval_metrics(e.eval_dir("mem"))
    assert list(by_step) == [0, 3, 6, 7]  # before training, after steps 3 and 6, at the end
    for step, metrics in by_step.items():
        np.testing.assert_allclose(metrics["loss"], reference_eval_loss(step), rtol=1e-5)
    assert not os.path.exists(os.path.join(e.model_dir, "model.ckpt_3"))
    assert hook.eval_result["global_step"] == 7
    np.testing.assert_allclose(hook.eval_result["loss"], reference_eval_loss(7), rtol=1e-5)


def test_iterations_count_per_train_call_and_the_end_is_not_repeated(tmp_path):
    e = make(tmp_path / "m")
    hook = InMemoryEvaluatorHook(e, EVAL, every_n_iter=3, steps=1)
    e.train(TRAIN, hooks=[hook], steps=6)
    # Step 6 was just evaluated (iteration 6): the end does not evaluate it again.
    path = os.path.join(e.eval_dir(), "eval_results.jsonl")
    with open(path) as f:
        assert [json.loads(line)["global_step"] for line in f] == [0, 3, 6]
    e.train(TRAIN, hooks=[hook], steps=4)
    # A new train() call counts from 0 again (TF): at its start (6), iteration 3 (9), end (10).
    with open(path) as f:
        assert [json.loads(line)["global_step"] for line in f] == [0, 3, 6, 6, 9, 10]


def test_every_n_secs_evaluates_by_time(tmp_path):
    e = make(tmp_path / "m")
    hook = InMemoryEvaluatorHook(e, EVAL, name="secs", every_n_iter=1000, every_n_secs=1e-9)
    e.train(TRAIN, hooks=[hook], steps=3)
    # Any time at all has passed between steps: every step is evaluated (and the start).
    assert list(read_eval_metrics(e.eval_dir("secs"))) == [0, 1, 2, 3]
