"""Summaries: ``estimator.summary.scalar/histogram/text`` in
``model_fn``; ``SummarySaverHook`` and ``StepCounterHook`` events in ``model_dir``; evaluation
events in ``eval_dir(name)``; all read back with TensorBoard's ``EventAccumulator``.

The model: ``w`` (starts at 0) fits ``y = 2`` from ``x = 1`` with loss ``(w - 2)^2`` and SGD
at 0.1, so one step is ``w += 0.2 (2 - w)``: w = 0, 0.4, 0.72, 0.976, 1.1808, 1.34464 after
0..5 steps, and the loss of a step run at w is ``(2 - w)^2``.
"""

from __future__ import annotations

import glob
import os

import jax.numpy as jnp
import numpy as np
import optax
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import estimator as est

W = [0.0, 0.4, 0.72, 0.976, 1.1808, 1.34464]  # w after 0..5 steps (module docstring)
X = np.ones((4, 1), np.float32)
Y = np.full((4,), 2.0, np.float32)


def model_fn(features, labels, mode):
    w = est.get_variable("w", [1], initializer=est.initializers.zeros_initializer())
    pred = features["x"] @ w
    loss = jnp.mean((pred - labels) ** 2)
    with est.variable_scope("model"):
        est.summary.scalar("w", w[0])  # tag "model/w": scopes prefix summary names
    est.summary.histogram("pred", pred)
    est.summary.text("note", "lr = **0.1**")
    return est.EstimatorSpec(
        mode,
        loss=loss,
        predictions={"pred": pred},
        train_op=optax.sgd(0.1),
        eval_metric_ops={"mae": est.metrics.mean_absolute_error(labels, pred)},
    )


def feed():
    return est.inputs.numpy_input_fn({"x": X}, Y, batch_size=4, num_epochs=None, shuffle=False)


def events(logdir) -> EventAccumulator:
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    assert files, f"no event file in {logdir}"
    accumulator = EventAccumulator(
        logdir, size_guidance={"scalars": 0, "tensors": 0, "histograms": 0}
    )
    accumulator.Reload()
    return accumulator


def scalars(accumulator, tag) -> list[tuple[int, float]]:
    return [(e.step, e.value) for e in accumulator.Scalars(tag)]


@pytest.fixture(scope="module")
def trained(trained_estimator):
    return trained_estimator(
        "summaries",
        steps=5,
        model_fn=model_fn,
        input_fn=feed(),
        save_summary_steps=2,
        log_step_count_steps=2,
    )


def test_training_summaries_are_written_at_the_steps_they_ran_with(trained):
    acc = events(trained.model_dir)
    # Every save_summary_steps=2 from the first step: the steps run at global steps 0, 2, 4.
    loss = scalars(acc, "loss")
    assert [s for s, _ in loss] == [0, 2, 4]
    # loss = (2 - w)^2 with w = 0, 0.72, 1.1808: 4, 1.6384, 0.67108864.
    np.testing.assert_allclose([v for _, v in loss], [4.0, 1.6384, 0.67108864], rtol=1e-6)
    w = scalars(acc, "model/w")
    np.testing.assert_allclose([v for _, v in w], [W[0], W[2], W[4]], rtol=1e-6, atol=1e-7)
    histograms = acc.Histograms("pred")
    assert [h.step for h in histograms] == [0, 2, 4]
    # 4 predictions, all equal to w: count 4, sum 4 w.
    assert [h.histogram_value.num for h in histograms] == [4, 4, 4]
    np.testing.assert_allclose(
        [h.histogram_value.sum for h in histograms], [0.0, 4 * W[2], 4 * W[4]], rtol=1e-6
    )
    texts = acc.Tensors("note")  # TF's tag (tensorboardX alone would say note/text_summary)
    assert [t.step for t in texts] == [0, 2, 4]
    assert texts[0].tensor_proto.string_val == [b"lr = **0.1**"]
    assert acc.SummaryMetadata("note").plugin_data.plugin_name == "text"


def test_step_counter_writes_global_step_per_sec_to_model_dir(trained):
    rate = scalars(events(trained.model_dir), "global_step/sec")
    # As TF: the first trigger (global step 1) only starts the clock; then every 2 steps,
    # labelled with the global step after the step (TF 2.15.1 writes 3, 5, 7 for 7 steps).
    assert [s for s, _ in rate] == [3, 5]
    assert all(v > 0 for _, v in rate)


def test_evaluation_writes_to_its_eval_dir_at_the_checkpoint_step(trained):
    results = trained.evaluate(feed(), steps=2, name="holdout")
    acc = events(trained.eval_dir("holdout"))
    assert trained.eval_dir("holdout") == os.path.join(trained.model_dir, "eval_holdout")
    # After 5 steps w = 1.34464: loss (2 - w)^2 = 0.4294967296, mae |2 - w| = 0.65536.
    assert scalars(acc, "loss") == [(5, pytest.approx(0.4294967296, rel=1e-6))]
    assert scalars(acc, "mae") == [(5, pytest.approx(0.65536, rel=1e-6))]
    assert results["loss"] == pytest.approx(0.4294967296, rel=1e-6)
    path = acc.Tensors("checkpoint_path")[0].tensor_proto.string_val[0].decode()
    assert path == os.path.join(trained.model_dir, "model.ckpt_5")


def test_resumed_training_continues_the_curve_where_evaluation_agrees(tmp_path):
    config = est.RunConfig(tf_random_seed=0, save_summary_steps=2)
    estimator = est.Estimator(model_fn, str(tmp_path), config)
    estimator.train(feed(), steps=5)
    estimator.train(feed(), steps=1)  # the first step of a session is always written
    loss = scalars(events(str(tmp_path)), "loss")
    assert [s for s, _ in loss] == [0, 2, 4, 5]
    # The training point at step 5 and an evaluation of checkpoint 5 read the same w.
    evaluated = estimator.evaluate(feed(), steps=1, checkpoint_path=str(tmp_path / "model.ckpt_5"))
    assert loss[-1][1] == pytest.approx(evaluated["loss"], rel=1e-6)


def test_summary_hook_fetches_only_at_its_steps(tmp_path):
    class Counting(est.SummarySaverHook):
        requests = 0

        def before_run(self, run_context):
            args = super().before_run(run_context)
            Counting.requests += args is not None
            return args

    config = est.RunConfig(tf_random_seed=0, save_summary_steps=None, log_step_count_steps=None)
    hook = Counting(save_steps=3, output_dir=str(tmp_path / "custom"))
    est.Estimator(model_fn, str(tmp_path), config).train(feed(), steps=7, hooks=[hook])
    assert Counting.requests == 3  # steps 0, 3, 6 of 7
    assert [s for s, _ in scalars(events(str(tmp_path / "custom")), "loss")] == [0, 3, 6]
    assert not glob.glob(os.path.join(str(tmp_path), "events.out.tfevents.*"))  # none by default


def test_text_takes_a_python_string_only():
    from estimator.model.variables import INIT, Frame, transform_context

    with transform_context(Frame(INIT, None, jnp.int32(0))) as frame:
        est.summary.text("ok", b"bytes are UTF-8")
        with pytest.raises(TypeError, match=r"summary.text\('bad'\) takes a Python str"):
            est.summary.text("bad", jnp.zeros(3))
    assert bytes(np.asarray(frame.summaries["ok"])).decode() == "bytes are UTF-8"
    with pytest.raises(RuntimeError, match="outside model_fn"):
        est.summary.text("x", "y")


def test_non_scalar_eval_results_are_written_as_tensors(tmp_path):
    """TF 2.15's ``_write_dict_to_summary`` writes an ``np.ndarray`` result as a tensor
    summary (``node_name`` = its key); ``read_eval_metrics`` returns the scalars only, with
    no ``global_step`` key (TF reads back simple values, and never writes global_step)."""
    results = {"global_step": 7, "loss": 0.5, "per_class": np.array([0.25, 0.75], np.float32)}
    eval_dir = str(tmp_path / "eval")
    est.events.write_eval_results(eval_dir, results, None)
    accumulator = EventAccumulator(eval_dir, size_guidance={"tensors": 0})
    accumulator.Reload()
    assert accumulator.Tags()["scalars"] == ["loss"]
    (event,) = accumulator.Tensors("per_class")
    assert event.step == 7
    assert event.tensor_proto.dtype == 1  # DT_FLOAT
    assert [d.size for d in event.tensor_proto.tensor_shape.dim] == [2]
    values = np.frombuffer(event.tensor_proto.tensor_content, np.float32)
    np.testing.assert_array_equal(values, [0.25, 0.75])
    assert est.events.read_eval_metrics(eval_dir) == {7: {"loss": 0.5}}


def test_summaries_are_computed_only_at_the_steps_that_fetch_them(tmp_path):
    """A summary leaves the step only when a hook asks for it in ``before_run`` (as TF runs
    a summary op only when fetched), from the variables the step ran with; a histogram
    binned. A step whose hooks did not ask has none, and reading one says why."""
    seen = {}

    class Probe(est.SessionRunHook):
        def before_run(self, run_context):
            step = run_context.session.global_step
            return est.SessionRunArgs(["pred", "model/w"]) if step == 1 else None

        def after_run(self, run_context, run_values):
            step = run_context.session.global_step - 1  # the step that ran
            if step == 1:
                seen["fetched"], seen["w"] = run_values.results
            elif step == 2:
                for name in ("pred", "model/w"):
                    with pytest.raises(KeyError) as raised:
                        run_context.session.run(name)
                    seen[name] = str(raised.value)

    config = est.RunConfig(tf_random_seed=0, save_summary_steps=None, log_step_count_steps=None)
    est.Estimator(model_fn, str(tmp_path), config).train(feed(), steps=3, hooks=[Probe()])
    # Step 1 ran with w = 0.4: 4 predictions of 0.4, one bucket of TF's buckets.
    fetched = seen["fetched"]
    assert fetched["num"] == 4 and np.count_nonzero(fetched["counts"]) == 1
    for key, value in (("min", 0.4), ("max", 0.4), ("sum", 1.6)):
        assert fetched[key] == pytest.approx(value, rel=1e-6), key
    assert seen["w"] == pytest.approx(W[1], rel=1e-6)  # a scalar summary: the value itself
    assert "'pred' is a summary" in seen["pred"] and "'model/w' is a summary" in seen["model/w"]
    assert "SessionRunArgs" in seen["pred"] and "estimator.identity" in seen["pred"]


def test_a_failed_summary_write_raises_from_train(tmp_path):
    class Failing:
        def add_scalar(self, *args, **kwargs):
            raise OSError("No space left on device")

        add_histogram_raw = add_text = add_scalar

        def flush(self):
            pass

    config = est.RunConfig(tf_random_seed=0, save_summary_steps=None, log_step_count_steps=None)
    hook = est.SummarySaverHook(save_steps=1, summary_writer=Failing())
    estimator = est.Estimator(model_fn, str(tmp_path), config)
    with pytest.raises(OSError, match="No space left"):
        estimator.train(feed(), steps=3, hooks=[hook])


def test_scalar_summaries_alone_stay_outputs_of_every_step(tmp_path):
    """Without a histogram no program of their own is compiled: a scalar summary is an
    output of every step, read by a hook that did not ask for it in ``before_run``."""

    def scalars_only(features, labels, mode):
        w = est.get_variable("w", [1], initializer=est.initializers.zeros_initializer())
        est.summary.scalar("w", w[0])
        loss = jnp.mean((features["x"] @ w - labels) ** 2)
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1))

    read = {}

    class Reader(est.SessionRunHook):
        def after_run(self, run_context, run_values):
            step = run_context.session.global_step - 1
            read[step] = float(run_context.session.run("w"))

    config = est.RunConfig(tf_random_seed=0, save_summary_steps=None, log_step_count_steps=None)
    est.Estimator(scalars_only, str(tmp_path), config).train(feed(), steps=3, hooks=[Reader()])
    # The step run at global step s read w = W[s] (module docstring).
    assert read == {s: pytest.approx(W[s], rel=1e-6, abs=1e-7) for s in range(3)}


def test_summaries_kept_in_the_step_write_the_same_histograms(tmp_path, monkeypatch):
    """A multi-process job keeps summaries among the step's outputs
    (``estimator.engine.steps._apart`` gives none there) and bins the fetched values on the
    summary thread: the same event file as the one-process summary program's."""
    from estimator.engine import steps

    def histograms_of(model_dir):
        config = est.RunConfig(tf_random_seed=0, save_summary_steps=2)
        est.Estimator(model_fn, model_dir, config).train(feed(), steps=5)
        return [
            (h.step, h.histogram_value.num, h.histogram_value.sum, h.histogram_value.bucket)
            for h in events(model_dir).Histograms("pred")
        ]

    apart = histograms_of(str(tmp_path / "apart"))
    monkeypatch.setattr(steps, "_apart", lambda frame: ())
    kept = histograms_of(str(tmp_path / "kept"))
    assert [h[0] for h in kept] == [0, 2, 4]
    assert kept == apart
