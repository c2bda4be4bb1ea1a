"""An in-memory input's blocks of batches (``estimator.engine.row_blocks``): prepared a block
at a time, a fused call handed the block itself, and the same training, hooks and errors as
the same batches read one by one (a generator of them: the independent path)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest
from linear_model import make_estimator

import estimator as est
from estimator.engine import compiler as compiler_module
from estimator.model.input_checks import IdRangeError

# 390 rows in batches of 4: the first batch alone, then 3 blocks of 32 batches (384 rows),
# then the last 2 rows, padded to 4 (the model masks padding).
ROWS, BATCH = 390, 4
RNG = np.random.default_rng(7)
X = RNG.normal(size=(ROWS, 2)).astype(np.float32)
IDS = RNG.integers(0, 10, size=(ROWS, 1))  # int64: narrowed to int32 on the host
Y = (X @ np.array([1.5, -2.0]) + IDS[:, 0] / 10).astype(np.float32)


@est.masks_padding
def model_fn(features, labels, mode):
    zeros = est.initializers.zeros_initializer()
    table = est.get_variable("table", [10, 1], initializer=zeros)
    w = est.get_variable("w", [2], initializer=zeros)
    pred = features["x"] @ w + est.layers.embedding_lookup(table, features["ids"])[:, 0, 0]
    mask = est.row_mask()
    loss = jnp.sum(mask * (pred - labels) ** 2) / jnp.sum(mask)
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1))


def _input(ids=IDS):
    return est.inputs.numpy_input_fn(
        {"x": X, "ids": ids}, Y, batch_size=BATCH, num_epochs=1, shuffle=True
    )


def _estimator(path):
    # Hooks fetch every 10 steps: calls end inside blocks, and summaries run apart.
    return make_estimator(
        path, model_fn, tf_random_seed=3, save_summary_steps=10, log_step_count_steps=10
    )


def _one_by_one(estimator, ids=IDS):
    """The batches the Estimator's input gives (its first call's order), as a generator's."""
    batches = list(_input(ids)(config=estimator.config))
    return lambda: iter(batches)


class _Steps(est.SessionRunHook):
    def __init__(self):
        self.after = 0

    def after_run(self, run_context, run_values):
        self.after += 1


def test_fused_calls_are_handed_the_block_and_train_as_batch_by_batch(tmp_path, monkeypatch):
    arguments = compiler_module.StepCompiler._arguments
    calls = []  # (steps, handed a block, the stacked leaves own their memory)

    def spy(self, leading, batches, stacked, rows=None):
        result = arguments(self, leading, batches, stacked, rows)
        block = rows is not None and rows[0].count == self.steps_per_call
        if stacked and self.mode == est.ModeKeys.TRAIN:
            features = result[-2][0]
            leaves = [features["x"], features["ids"]]
            calls.append((len(batches), block, any(v.flags.owndata for v in leaves)))
        return result

    monkeypatch.setattr(compiler_module.StepCompiler, "_arguments", spy)
    blocks = _estimator(tmp_path / "blocks")
    blocks.train(_input())
    reference = _estimator(tmp_path / "one_by_one")
    monkeypatch.setattr(compiler_module.StepCompiler, "_arguments", arguments)
    reference.train(_one_by_one(reference))
    # 98 steps: 96 of them (3 blocks of 32 batches) run handed their block, in calls that
    # end where a hook fetches (every 10 steps), and the block is not copied.
    assert blocks.get_variable_value("global_step") == 98
    assert sum(n for n, block, _ in calls if block) == 96
    assert not any(owns for _, block, owns in calls if block)
    assert sum(n for n, block, _ in calls if not block) >= 2  # the first and the last
    for name in ("w", "table"):
        np.testing.assert_array_equal(
            blocks.get_variable_value(name), reference.get_variable_value(name)
        )


@pytest.mark.parametrize("bad", [20, 40])
def test_an_id_out_of_range_in_a_block_stops_at_its_batch_as_batch_by_batch(tmp_path, bad):
    # One bad id in row 1 of batch ``bad`` (0-based: batch 20 is in the first block, of
    # batches 1..32, prepared before model_fn's trace adds the check; batch 40 in the
    # second, prepared after): the error names that row of that batch (TF's message), and
    # is raised where reading the batches one by one raises it: while the batch is
    # prepared, right after step ``bad`` (on batch ``bad - 1``) is queued, before that
    # step's after_run: ``bad - 1`` after_run calls.
    probe = _estimator(tmp_path / "probe")
    features = list(_input()(config=probe.config))[bad][0]
    source = int(np.flatnonzero((X == features["x"][1]).all(axis=1))[0])
    ids = IDS.copy()
    ids[source, 0] = 10
    message = r"^indices\[1,0\] = 10 is not in \[0, 10\) \(embedding_lookup of table"
    counted = []
    for name in ("blocks", "one_by_one"):
        estimator = _estimator(tmp_path / name)
        input_fn = _input(ids) if name == "blocks" else _one_by_one(estimator, ids)
        steps = _Steps()
        with pytest.raises(IdRangeError, match=message):
            estimator.train(input_fn, hooks=[steps])
        counted.append(steps.after)
    assert counted == [bad - 1, bad - 1]


def test_blocks_with_fewer_batches_than_a_call_are_stacked_across_blocks(tmp_path, monkeypatch):
    # Rows of 256 KiB and a label in batches of 4: a block holds GATHER_BYTES (4 MiB) over
    # a batch's 1 MiB and 16 bytes, 3 batches, fewer than a call's 8 slots, so no call is
    # handed a block: the 17 batches (the first alone, then blocks of 3, 3, 3, 3, 3 and 1)
    # run in calls of up to 8, across blocks.
    wide = np.random.default_rng(0).normal(size=(68, 1 << 16)).astype(np.float32)

    def wide_model_fn(features, labels, mode):
        w = est.get_variable("w", [1 << 16], initializer=est.initializers.zeros_initializer())
        loss = jnp.mean((features["x"] @ w - labels) ** 2)
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(1e-6))

    arguments = compiler_module.StepCompiler._arguments
    calls = []

    def spy(self, leading, batches, stacked, rows=None):
        calls.append(len(batches))
        return arguments(self, leading, batches, stacked, rows)

    monkeypatch.setattr(compiler_module.StepCompiler, "_arguments", spy)
    estimator = make_estimator(tmp_path, wide_model_fn, steps_per_execution=8)
    estimator.train(est.inputs.numpy_input_fn({"x": wide}, wide[:, 0], batch_size=4, shuffle=True))
    assert estimator.get_variable_value("global_step") == 17
    assert max(calls) == 8
