"""Estimator: constructor checks, train/evaluate/predict semantics as TF 2.15's."""

from __future__ import annotations

import json
import logging
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from linear_model import X, Y, make_estimator

import estimator as est
from estimator import checkpoint as ckpt
from estimator.engine import compile_policy as policy
from estimator.engine import compile_queue


# linear_model.py's data (y = 2 * x0 - x1 + 1 on a fixed grid: a linear model learns it
# exactly) and model, with one more prediction and an evaluation metric.
def linear_model_fn(features, labels, mode, params):
    w = est.get_variable("w", [2], initializer=est.initializers.zeros_initializer())
    b = est.get_variable("b", [], initializer=est.initializers.zeros_initializer())
    pred = features["x"] @ w + b
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions={"pred": pred, "double": 2 * pred})
    loss = jnp.mean((pred - labels) ** 2)
    return est.EstimatorSpec(
        mode,
        loss=loss,
        predictions={"pred": pred},
        train_op=optax.sgd(params.get("lr", 0.1)),
        eval_metric_ops={"mae": est.metrics.mean_absolute_error(labels, pred)},
    )


def make(tmp_path, model_fn=linear_model_fn, params=None, **config):
    params = {"lr": 0.1} if params is None else params
    return make_estimator(tmp_path / "model", model_fn, params=params, **config)


def train_input(batch_size=8, epochs=None, shuffle=False):
    return est.inputs.numpy_input_fn(
        {"x": X}, Y, batch_size=batch_size, num_epochs=epochs, shuffle=shuffle
    )


def eval_input(batch_size=16):
    return est.inputs.numpy_input_fn({"x": X}, Y, batch_size=batch_size, shuffle=False)


# ----- constructor ------------------------------------------------------------------------
def test_model_fn_argument_checks(tmp_path):
    with pytest.raises(ValueError, match=r"must include features argument"):
        est.Estimator(lambda x, labels: None, str(tmp_path))
    with pytest.raises(ValueError, match=r"has following not expected args: \['extra'\]"):
        est.Estimator(lambda features, extra: None, str(tmp_path))
    with pytest.raises(ValueError, match=r"does not include params argument, but params"):
        est.Estimator(lambda features, labels: None, str(tmp_path), params={"a": 1})
    with pytest.raises(ValueError, match="model_fn must be provided to Estimator."):
        est.Estimator(None, str(tmp_path))


def test_model_fn_without_labels_but_input_with_labels(tmp_path):
    def model_fn(features, mode):
        return est.EstimatorSpec(mode, predictions=features["x"])

    e = est.Estimator(model_fn, str(tmp_path))
    with pytest.raises(ValueError, match="model_fn does not take labels, but input_fn returns"):
        e.train(train_input(), steps=1)


def test_model_fn_must_return_spec(tmp_path):
    e = est.Estimator(lambda features, labels: {"loss": 0.0}, str(tmp_path))
    with pytest.raises(ValueError, match="model_fn should return an EstimatorSpec"):
        e.train(train_input(), steps=1)


def test_config_and_model_dir(tmp_path, caplog):
    with pytest.raises(ValueError, match="config must be an instance of `RunConfig`"):
        est.Estimator(linear_model_fn, str(tmp_path), config={"model_dir": "x"})
    with pytest.raises(ValueError, match="`model_dir` are set both in constructor and"):
        est.Estimator(
            linear_model_fn,
            str(tmp_path / "a"),
            config=est.RunConfig(model_dir=str(tmp_path / "b")),
        )
    e = est.Estimator(linear_model_fn, config=est.RunConfig(model_dir=str(tmp_path / "c")))
    assert e.model_dir == str(tmp_path / "c") and e.config.model_dir == e.model_dir
    with caplog.at_level(logging.WARNING, logger="estimator"):
        e = est.Estimator(linear_model_fn, params={"lr": 1.0})
    assert os.path.isdir(e.model_dir)
    assert "Using temporary folder as model directory: " + e.model_dir in caplog.text
    assert e.eval_dir() == os.path.join(e.model_dir, "eval")
    assert e.eval_dir("val") == os.path.join(e.model_dir, "eval_val")


def test_params_are_copied(tmp_path):
    params = {"lr": 0.1, "nested": [1]}
    e = make(tmp_path, params=params)
    params["nested"].append(2)
    assert e.params == {"lr": 0.1, "nested": [1]}
    e.params["nested"].append(3)
    assert e.params["nested"] == [1]


# ----- train ------------------------------------------------------------------------------
def test_train_argument_errors(tmp_path):
    e = make(tmp_path)
    with pytest.raises(ValueError, match="Can not provide both steps and max_steps."):
        e.train(train_input(), steps=1, max_steps=2)
    with pytest.raises(ValueError, match=r"Must specify steps > 0, given: 0"):
        e.train(train_input(), steps=0)
    with pytest.raises(ValueError, match=r"Must specify max_steps > 0, given: -1"):
        e.train(train_input(), max_steps=-1)
    with pytest.raises(TypeError, match="Hooks must be a SessionRunHook, given: 3"):
        e.train(train_input(), hooks=[3], steps=1)
    with pytest.raises(TypeError, match="saving_listeners must be a list of"):
        e.train(train_input(), steps=1, saving_listeners=["x"])


def test_steps_relative_max_steps_absolute_and_resume(tmp_path, caplog):
    e = make(tmp_path)
    e.train(train_input(), steps=3)
    assert ckpt.checkpoint_step(e.latest_checkpoint()) == 3
    w3 = e.get_variable_value("w")
    e.train(train_input(), steps=4)  # relative: 3 + 4
    assert ckpt.checkpoint_step(e.latest_checkpoint()) == 7
    e.train(train_input(), max_steps=10)  # absolute
    assert ckpt.checkpoint_step(e.latest_checkpoint()) == 10
    with caplog.at_level(logging.INFO, logger="estimator"):
        e.train(train_input(), max_steps=10)
    assert "Skipping training since max_steps has already saved." in caplog.text
    # A new Estimator on the same model_dir resumes from the checkpoint.
    again = make(tmp_path)
    again.train(train_input(), steps=1)
    assert ckpt.checkpoint_step(again.latest_checkpoint()) == 11
    assert not np.allclose(w3, again.get_variable_value("w"))


def test_resume_continues_from_saved_variables(tmp_path):
    # Two runs of 3 + 3 steps end where one run of 6 steps ends (the same batches: each
    # train() call restarts input_fn, so feed the same first batch repeatedly).
    one_batch = lambda: ({"x": X[:8]}, Y[:8])  # noqa: E731
    a = make(tmp_path / "a")
    a.train(one_batch, steps=3)
    a = make(tmp_path / "a")  # fresh object: must read the checkpoint, not reinitialise
    a.train(one_batch, steps=3)
    b = make(tmp_path / "b")
    b.train(one_batch, steps=6)
    np.testing.assert_allclose(a.get_variable_value("w"), b.get_variable_value("w"), rtol=1e-6)


def test_input_exhaustion_stops_cleanly_and_saves(tmp_path):
    events = []

    class Recorder(est.SessionRunHook):
        def end(self, session):
            events.append(("end", session.global_step))

    e = make(tmp_path)
    e.train(train_input(batch_size=16, epochs=1), hooks=[Recorder()])
    # 40 examples in batches of 16: 16 + 16 + 8 -> three steps, then a final save.
    assert events == [("end", 3)]
    assert ckpt.checkpoint_step(e.latest_checkpoint()) == 3


def test_empty_input_warns(tmp_path, caplog):
    e = make(tmp_path)
    with caplog.at_level(logging.WARNING, logger="estimator"):
        e.train(lambda: iter([]))
    assert "Training with estimator made no steps." in caplog.text
    assert e.latest_checkpoint() is None


def test_training_learns_the_linear_function(tmp_path):
    e = make(tmp_path, params={"lr": 0.3})
    e.train(train_input(), steps=300)
    np.testing.assert_allclose(e.get_variable_value("w"), [2.0, -1.0], atol=1e-3)
    np.testing.assert_allclose(e.get_variable_value("b"), 1.0, atol=1e-3)


def test_steps_per_execution_gives_the_same_result(tmp_path):
    # Queued steps run in one lax.fori_loop; the arithmetic is the same step by step.
    results = []
    for k in (1, 16):
        e = make(tmp_path / f"k{k}", steps_per_execution=k)
        e.train(train_input(), steps=37)
        results.append(e.get_variable_value("w"))
        # 37 = 16 + 16 + 5 steps: one program for every call, one step or sixteen.
        assert e.runtime.compile_counts()["train"] == 1
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5)


def test_loss_for_final_step_is_logged(tmp_path, caplog):
    e = make(tmp_path)
    with caplog.at_level(logging.INFO, logger="estimator"):
        e.train(train_input(), steps=2)
    assert "Loss for final step:" in caplog.text
    assert "loss = " in caplog.text and "step = 0" in caplog.text


# ----- evaluate ---------------------------------------------------------------------------
def test_evaluate_loss_is_mean_of_batch_losses(tmp_path):
    def model_fn(features, labels, mode):
        est.get_variable("unused", [1])
        # The loss of a batch is the mean of its labels.
        loss = jnp.mean(labels)
        return est.EstimatorSpec(mode, loss=loss, eval_metric_ops={"m": est.metrics.mean(labels)})

    e = est.Estimator(model_fn, str(tmp_path))
    labels = np.array([1, 1, 1, 4], np.float32)
    # Batches of 3: [1, 1, 1] (loss 1) and [4] (loss 4): TF's loss is the mean of the
    # per-batch losses (1 + 4) / 2 = 2.5, the metric mean is per example 7 / 4 = 1.75.
    results = e.evaluate(
        est.inputs.numpy_input_fn({"x": labels}, labels, batch_size=3, shuffle=False)
    )
    assert results["loss"] == pytest.approx(2.5)
    assert results["m"] == pytest.approx(1.75)
    assert results["global_step"] == 0
    assert isinstance(results["loss"], float) and isinstance(results["global_step"], int)


def test_evaluate_without_checkpoint_logs_and_uses_initial_values(tmp_path, caplog):
    e = make(tmp_path)
    with caplog.at_level(logging.INFO, logger="estimator"):
        results = e.evaluate(eval_input())
    assert "Could not find trained model in model_dir" in caplog.text
    # Zero weights predict 0: the MAE is the mean |y|.
    assert results["mae"] == pytest.approx(float(np.mean(np.abs(Y))), rel=1e-6)


def test_evaluate_after_training_and_steps(tmp_path):
    e = make(tmp_path)
    e.train(train_input(), steps=5)
    full = e.evaluate(eval_input(batch_size=16))
    assert full["global_step"] == 5
    first = e.evaluate(eval_input(batch_size=16), steps=1)  # only the first 16 examples
    w, b = e.get_variable_value("w"), e.get_variable_value("b")
    pred = X @ w + b
    assert full["mae"] == pytest.approx(float(np.mean(np.abs(pred - Y))), rel=1e-5)
    assert first["mae"] == pytest.approx(float(np.mean(np.abs(pred[:16] - Y[:16]))), rel=1e-5)
    with pytest.raises(ValueError, match=r"Must specify steps > 0, given: 0"):
        e.evaluate(eval_input(), steps=0)


def test_evaluate_reserved_metric_names(tmp_path):
    def model_fn(features, labels, mode):
        w = est.get_variable("w", [1])
        loss = jnp.sum(w) * 0.0
        return est.EstimatorSpec(
            mode, loss=loss, eval_metric_ops={"loss": est.metrics.mean(labels)}
        )

    e = est.Estimator(model_fn, str(tmp_path))
    with pytest.raises(ValueError, match='Metric with name "loss" is not allowed'):
        e.evaluate(eval_input())

    def step_metric(features, labels, mode):
        spec = model_fn(features, labels, mode)
        return spec._replace(eval_metric_ops={"global_step": est.metrics.mean(labels)})

    # TF 2.15's estimator.py quotes this one with backticks (and "loss" with quotes).
    e = est.Estimator(step_metric, str(tmp_path / "step"))
    with pytest.raises(ValueError, match=r"^Metric with name `global_step` is not allowed, "):
        e.evaluate(eval_input())


def test_evaluate_given_checkpoint(tmp_path):
    e = make(tmp_path, save_checkpoints_steps=2, save_checkpoints_secs=None)
    e.train(train_input(), steps=4)
    path2 = ckpt.step_dir(e.model_dir, 2)
    assert e.evaluate(eval_input(), checkpoint_path=path2)["global_step"] == 2
    assert e.evaluate(eval_input(), checkpoint_path=e.model_dir)["global_step"] == 4
    with pytest.raises(ValueError, match="Couldn't find trained model at|Could not find trained"):
        e.evaluate(eval_input(), checkpoint_path=str(tmp_path / "nowhere"))


class CountingModelFn:
    """``linear_model_fn`` counting its calls (as TF 2.15's tests count ``model_fn`` calls)."""

    def __init__(self, hooks=False, table=False, whole=False, dense_optimizer=False, ids=1):
        self.calls, self.hooks, self.table = 0, hooks, table
        self.whole, self.dense_optimizer, self.ids = whole, dense_optimizer, ids

    def __call__(self, features, labels, mode, params):
        self.calls += 1
        spec = linear_model_fn(features, labels, mode, params)
        if self.table:  # a lookup table: its rows are trained row by row
            table = est.get_variable("table", [256, 1], initializer=np.ones((256, 1), np.float32))
            # self.ids rows of 2 ids, all row 0: the other rows are never looked up; 256 rows
            # (over engine.sparse.WHOLE_ROWS_PER_ID per id) keep the table on the row-by-row path.
            rows = est.layers.embedding_lookup(table, jnp.zeros((self.ids, 2), jnp.int32))
            if spec.loss is not None:
                loss = spec.loss + rows.sum()
                if self.whole:  # also read whole (updated densely), or in a jitted function
                    l2 = lambda t: 0.01 * jnp.sum(t**2)  # noqa: E731
                    loss = loss + (jax.jit(l2) if self.whole == "in a jit" else l2)(table)
                train_op = spec.train_op and est.sparse_updates(spec.train_op)
                if self.dense_optimizer:  # not row-wise: updated densely
                    train_op = spec.train_op and optax.sgd(params["lr"])
                spec = spec._replace(loss=loss, train_op=train_op)
        if self.hooks:
            hooks = [est.SessionRunHook()]
            spec = spec._replace(
                training_hooks=hooks, evaluation_hooks=hooks, prediction_hooks=hooks
            )
        return spec


def edit_metadata(checkpoint: str, change) -> None:
    """Rewrites a checkpoint's metadata as ``change(meta)`` (which edits it in place)."""
    meta_file = os.path.join(checkpoint, "meta", "metadata")
    with open(meta_file) as f:
        meta = json.load(f)
    change(meta)
    with open(meta_file, "w") as f:
        json.dump(meta, f)


def drop_metadata(checkpoint: str, *keys: str) -> None:
    """Removes ``keys`` from a checkpoint's metadata (as a checkpoint written before them)."""
    edit_metadata(checkpoint, lambda meta: [meta.pop(key) for key in keys])


def test_model_fn_runs_twice_for_a_first_call_and_never_per_step(tmp_path):
    """When and why model_fn runs (Estimator's docstring): once abstractly to create the
    variables (init) and once to build the step, for a first train() in an input
    signature; never again for that signature; evaluation and prediction take their
    variables from training's state or the checkpoint's metadata (one run). TF runs it
    once per call (its graph creates and uses the variables in one pass)."""
    model_fn = CountingModelFn()
    e = make(tmp_path, model_fn=model_fn)
    # 40 examples in batches of 8: no shorter last batch, one program.
    e.train(train_input(epochs=1), steps=5)
    assert (model_fn.calls, e.trace_count) == (2, 2)  # init + the train step
    assert e.runtime.compile_counts() == {"train": 1}
    e.train(train_input(epochs=1), steps=5)
    assert model_fn.calls == 2  # the same signature: nothing traced again
    e.evaluate(eval_input(batch_size=8))
    assert model_fn.calls == 3  # the evaluation step alone (training's variables)
    e.evaluate(eval_input(batch_size=8))
    list(e.predict(eval_input(batch_size=8)))
    assert model_fn.calls == 4  # the prediction step alone
    list(e.predict(eval_input(batch_size=8)))
    assert model_fn.calls == 4
    # A new Estimator on the checkpoint: the step alone, its variables from the
    # checkpoint's metadata.
    fresh_fn = CountingModelFn()
    fresh = make(tmp_path, model_fn=fresh_fn)
    fresh.evaluate(eval_input(batch_size=8))
    assert fresh_fn.calls == 1
    fresh.evaluate(eval_input(batch_size=8))
    assert fresh_fn.calls == 1
    predictor_fn = CountingModelFn()
    list(make(tmp_path, model_fn=predictor_fn).predict(eval_input(batch_size=8)))
    assert predictor_fn.calls == 1
    # Resuming training: the step alone; the variables and the optimizer state's
    # structure (its saved form) come from the checkpoint's metadata, and the step
    # rebuilds optax's structure from train_op in its trace.
    trainer_fn = CountingModelFn()
    trainer = make(tmp_path, model_fn=trainer_fn)
    trainer.train(train_input(epochs=1), steps=5)
    assert trainer_fn.calls == 1
    assert trainer.get_variable_value("global_step") == 15


@pytest.mark.parametrize("compiles", ["in the background", "at once"])
def test_model_fn_returning_hooks_runs_once_per_call_as_in_tf(tmp_path, monkeypatch, compiles):
    # Hooks made inside model_fn are new objects on every call, as TF's: a call whose
    # program was traced by an earlier call runs model_fn once more, forward and
    # abstractly, for them. A program this call traced has them already, also when its
    # background compile finished before the call asked for it ("at once": it used to
    # count as an earlier call's program, and model_fn ran a third time).
    if compiles == "at once":
        monkeypatch.setattr(compile_queue, "start_thread", lambda target, name: target())
    model_fn = CountingModelFn(hooks=True)
    e = make(tmp_path, model_fn=model_fn)
    e.train(train_input(epochs=1), steps=5)
    assert model_fn.calls == 2
    e.train(train_input(epochs=1), steps=5)
    assert model_fn.calls == 3
    assert e.runtime.compile_counts() == {"train": 1}


def test_a_model_with_a_row_wise_table_plans_it_in_the_init_run(tmp_path):
    # The init run's trace shows that the table is read only through lookups (sparse
    # updates): init + the step, as for any model.
    model_fn = CountingModelFn(table=True)
    e = make(tmp_path, model_fn=model_fn)
    e.train(train_input(epochs=1), steps=5)
    assert model_fn.calls == 2
    assert e.runtime.compiler("train").info.row_tables == ("table",)
    # Resuming on a fresh Estimator: the checkpoint's metadata names the table looked up
    # under a row-wise train_op and records the plan for this input signature (2 ids a
    # step); the step is traced with it at once and its trace checked: one run.
    meta = ckpt.read_meta(e.latest_checkpoint())
    assert meta["sparse_candidates"] == ["table"]
    assert list(meta["sparse_plans"].values()) == [{"table": 2}]
    resumed_fn = CountingModelFn(table=True)
    resumed = make(tmp_path, model_fn=resumed_fn)
    resumed.train(train_input(epochs=1), steps=5)
    assert resumed_fn.calls == 1
    assert resumed.runtime.compiler("train").info.row_tables == ("table",)
    assert resumed.get_variable_value("global_step") == 10
    # Without the recorded plan (a checkpoint written before it): model_fn runs to plan,
    # then in the step.
    drop_metadata(resumed.latest_checkpoint(), "sparse_plans")
    unplanned_fn = CountingModelFn(table=True)
    unplanned = make(tmp_path, model_fn=unplanned_fn)
    unplanned.train(train_input(epochs=1), steps=5)
    assert unplanned_fn.calls == 2
    assert unplanned.runtime.compiler("train").info.row_tables == ("table",)
    # Without the candidates either: the step's first trace finds the lookup and is
    # traced again with the plan.
    drop_metadata(unplanned.latest_checkpoint(), "sparse_candidates", "sparse_plans")
    unrecorded_fn = CountingModelFn(table=True)
    unrecorded = make(tmp_path, model_fn=unrecorded_fn)
    unrecorded.train(train_input(epochs=1), steps=5)
    assert unrecorded_fn.calls == 3
    assert unrecorded.runtime.compiler("train").info.row_tables == ("table",)


@pytest.mark.parametrize("steps_per_execution, train_metrics", [(1, False), (3, False), (1, True)])
def test_a_resumed_training_checks_the_recorded_plan_in_its_one_trace(
    tmp_path, steps_per_execution, train_metrics
):
    # The step's one trace uses the recorded plan and is checked: also when the step is
    # replayed in a multi-step loop or computes training metrics.
    config = {"steps_per_execution": steps_per_execution}
    if train_metrics:
        config["train_metrics_steps"] = 2
    make(tmp_path, model_fn=CountingModelFn(table=True), **config).train(
        train_input(epochs=1), steps=5
    )
    resumed_fn = CountingModelFn(table=True)
    resumed = make(tmp_path, model_fn=resumed_fn, **config)
    resumed.train(train_input(epochs=1), steps=5)
    assert resumed_fn.calls == 1
    compiler = resumed.runtime.compiler("train", metrics=train_metrics)
    assert compiler.info.row_tables == ("table",)
    assert resumed.get_variable_value("global_step") == 10


@pytest.mark.parametrize("whole", [True, "in a jit"])
def test_a_recorded_plan_the_model_now_contradicts_is_dropped(tmp_path, whole):
    # The first training updates the table row by row and records that plan. The resumed
    # model_fn also reads the table whole (an L2 term), directly or inside a jitted
    # function of its own: the step's trace contradicts the plan, which is dropped; the
    # table is planned again (dense) and the step traced again: three runs. The L2
    # term's gradient reaches the rows never looked up (all but row 0), which a kept plan
    # would have left at 1: SGD at lr 0.1 on 0.01 * t**2 gives t <- t - 0.1 * 0.02 * t =
    # 0.998 t per step, 0.998**5 = 0.990039920... after 5 steps.
    first = make(tmp_path, model_fn=CountingModelFn(table=True))
    first.train(train_input(epochs=1), steps=5)
    np.testing.assert_array_equal(first.get_variable_value("table")[1:], 1.0)
    resumed_fn = CountingModelFn(table=True, whole=whole)
    resumed = make(tmp_path, model_fn=resumed_fn)
    resumed.train(train_input(epochs=1), steps=5)
    assert resumed_fn.calls == 3
    assert resumed.runtime.compiler("train").info.row_tables == ()
    np.testing.assert_allclose(resumed.get_variable_value("table")[1:], 0.998**5, rtol=1e-6)
    # The next checkpoint records the new plan (the table dense: no entry).
    assert list(ckpt.read_meta(resumed.latest_checkpoint())["sparse_plans"].values()) == [{}]


def test_a_recorded_plan_with_another_number_of_ids_is_dropped(tmp_path):
    # The resumed model_fn looks up 4 ids a step where the plan recorded 2 (more rows), or
    # 2 where it recorded 4 (fewer): the plan is dropped, model_fn runs to plan again and
    # in the step, and the next checkpoint records the new count.
    make(tmp_path, model_fn=CountingModelFn(table=True)).train(train_input(epochs=1), steps=5)
    for ids, global_step in ((2, 10), (1, 15)):
        resumed_fn = CountingModelFn(table=True, ids=ids)
        resumed = make(tmp_path, model_fn=resumed_fn)
        resumed.train(train_input(epochs=1), steps=5)
        assert resumed_fn.calls == 3
        assert resumed.runtime.compiler("train").info.row_tables == ("table",)
        assert resumed.get_variable_value("global_step") == global_step
        plans = ckpt.read_meta(resumed.latest_checkpoint())["sparse_plans"]
        assert list(plans.values()) == [{"table": 2 * ids}]


@pytest.mark.parametrize("damage", ["a string count", "a negative count", "a list"])
def test_a_malformed_recorded_plan_is_not_used(tmp_path, damage):
    # A damaged record under the input signature's own digest is ignored: the resumed
    # step plans as without one (two runs) and trains row by row with the right count.
    first = make(tmp_path, model_fn=CountingModelFn(table=True))
    first.train(train_input(epochs=1), steps=5)
    (digest,) = ckpt.read_meta(first.latest_checkpoint())["sparse_plans"]
    damaged = {
        "a string count": {digest: {"table": "2"}},
        "a negative count": {digest: {"table": -2}},
        "a list": [digest],
    }[damage]
    edit_metadata(first.latest_checkpoint(), lambda meta: meta.update(sparse_plans=damaged))
    resumed_fn = CountingModelFn(table=True)
    resumed = make(tmp_path, model_fn=resumed_fn)
    resumed.train(train_input(epochs=1), steps=5)
    assert resumed_fn.calls == 2
    assert resumed.runtime.compiler("train").info.row_tables == ("table",)
    plans = ckpt.read_meta(resumed.latest_checkpoint())["sparse_plans"]
    assert plans == {digest: {"table": 2}}


class ShiftingLookups(CountingModelFn):
    """Looks up ``first`` rows of ids in its first run and ``later`` rows afterwards."""

    def __init__(self, first, later):
        super().__init__(table=True, ids=first)
        self.later = later

    def __call__(self, features, labels, mode, params):
        spec = super().__call__(features, labels, mode, params)
        self.ids = self.later
        return spec


@pytest.mark.parametrize(
    "first, later, what", [(1, 2, "more rows of table"), (2, 1, "fewer table rows")]
)
def test_a_model_fn_whose_lookups_change_between_its_runs_is_refused(tmp_path, first, later, what):
    # Without a recorded plan, a resumed training plans in one run and traces the step in
    # another; a model_fn that looks up other shapes in the second would train wrong rows.
    make(tmp_path, model_fn=CountingModelFn(table=True)).train(train_input(epochs=1), steps=5)
    drop_metadata(make(tmp_path).latest_checkpoint(), "sparse_plans")
    shifting = make(tmp_path, model_fn=ShiftingLookups(first, later))
    with pytest.raises(RuntimeError) as raised:
        shifting.train(train_input(epochs=1), steps=5)
    assert str(raised.value) == (
        f"model_fn looked up {what} in this trace than in the previous one: it must look "
        "up the same tables with the same id shapes on every call."
    )
    assert shifting.get_variable_value("global_step") == 5  # the checkpoint is untouched


@pytest.mark.parametrize(
    "kind, runs",
    [("whole", 2), ("dense_optimizer", 1)],
    ids=["read whole", "not row-wise"],
)
def test_a_resumed_table_updated_densely_runs_model_fn_as_the_metadata_says(tmp_path, kind, runs):
    # A table looked up under a row-wise train_op but also read whole is updated densely;
    # the metadata still names it a candidate, so a resume checks it (the plan) and runs
    # the step: two runs, not an abandoned trace first (three). Under a train_op that is
    # not row-wise it is no candidate: the resumed step's one trace is the step.
    first = make(tmp_path, model_fn=CountingModelFn(table=True, **{kind: True}))
    first.train(train_input(epochs=1), steps=5)
    assert first.runtime.compiler("train").info.row_tables == ()
    candidates = ckpt.read_meta(first.latest_checkpoint())["sparse_candidates"]
    assert candidates == (["table"] if kind == "whole" else [])
    resumed_fn = CountingModelFn(table=True, **{kind: True})
    resumed = make(tmp_path, model_fn=resumed_fn)
    resumed.train(train_input(epochs=1), steps=5)
    assert resumed_fn.calls == runs
    assert resumed.runtime.compiler("train").info.row_tables == ()


def test_evaluate_compiles_its_program_while_the_checkpoint_is_read(tmp_path, monkeypatch):
    make(tmp_path).train(train_input(), steps=2)
    e = make(tmp_path)  # a new Estimator: evaluate() reads the checkpoint
    seen = []
    original = ckpt.restore

    def restore(*args, **kwargs):
        compiler = e.runtime.compiler("eval")
        seen.append(compiler.compiling() + len(compiler.compiled_signatures()))  # started
        return original(*args, **kwargs)

    monkeypatch.setattr(ckpt, "restore", restore)
    assert e.evaluate(eval_input())["global_step"] == 2
    # 40 examples in batches of 16: the full batches' program and the last batch's (8).
    assert seen == [2]
    assert e.runtime.compile_counts()["eval"] == 2


def test_evaluate_and_predict_do_not_retrace_or_reload(tmp_path, monkeypatch):
    e = make(tmp_path)
    e.train(train_input(), steps=2)
    reads = []
    original = ckpt.restore
    monkeypatch.setattr(ckpt, "restore", lambda *a, **k: reads.append(1) or original(*a, **k))
    first = e.evaluate(eval_input())
    traces = e.trace_count
    compiles = e.runtime.compile_counts()
    for _ in range(3):
        assert e.evaluate(eval_input()) == first
    assert e.trace_count == traces
    assert e.runtime.compile_counts() == compiles
    list(e.predict(eval_input()))
    traces = e.trace_count
    for _ in range(3):
        list(e.predict(eval_input()))
    assert e.trace_count == traces
    # The final training state is kept in memory: no checkpoint read at all.
    assert reads == []
    e.train(train_input(), steps=1)  # a new checkpoint: evaluate sees it
    assert e.evaluate(eval_input())["global_step"] == 3


# ----- predict ----------------------------------------------------------------------------
def test_predict_single_examples_batches_and_keys(tmp_path):
    e = make(tmp_path)
    e.train(train_input(), steps=3)
    w, b = e.get_variable_value("w"), e.get_variable_value("b")
    feed = est.inputs.numpy_input_fn({"x": X[:5]}, batch_size=2, shuffle=False)
    rows = list(e.predict(feed))
    assert len(rows) == 5 and set(rows[0]) == {"pred", "double"}
    np.testing.assert_allclose([r["pred"] for r in rows], X[:5] @ w + b, rtol=1e-5)
    batches = list(e.predict(feed, yield_single_examples=False))
    assert [len(x["pred"]) for x in batches] == [2, 2, 1]
    only = list(e.predict(feed, predict_keys=["double"]))
    assert set(only[0]) == {"double"}
    with pytest.raises(ValueError, match="Expected to run at least one output from"):
        list(e.predict(feed, predict_keys=["nope"]))


def test_predict_non_dict_predictions(tmp_path):
    def model_fn(features, mode):
        w = est.get_variable("w", [2], initializer=est.initializers.ones_initializer())
        return est.EstimatorSpec(mode, predictions=features @ w)

    e = est.Estimator(model_fn, str(tmp_path))
    feed = est.inputs.numpy_input_fn(X[:3], batch_size=2, shuffle=False)
    np.testing.assert_allclose(list(e.predict(feed)), X[:3].sum(axis=1), rtol=1e-6)
    with pytest.raises(ValueError, match="predict_keys argument is not valid"):
        list(e.predict(feed, predict_keys=["a"]))


def test_predict_batch_length_mismatch(tmp_path):
    def model_fn(features, mode):
        est.get_variable("w", [1])
        return est.EstimatorSpec(mode, predictions={"a": features["x"][:, 0], "b": jnp.zeros(1)})

    e = est.Estimator(model_fn, str(tmp_path))
    with pytest.raises(ValueError, match="Batch length of predictions should be same"):
        list(e.predict(est.inputs.numpy_input_fn({"x": X[:4]}, batch_size=4, shuffle=False)))


# ----- variables, checkpoints ------------------------------------------------------------
def test_variable_names_and_values(tmp_path):
    e = make(tmp_path)
    with pytest.raises(ValueError, match="Could not find trained model in model_dir"):
        e.get_variable_names()
    e.train(train_input(), steps=1)
    assert e.get_variable_names() == ["b", "global_step", "w"]
    assert e.get_variable_value("global_step") == 1
    with pytest.raises(ValueError, match=r"Variable nope not found in checkpoint .*It has: b, w"):
        e.get_variable_value("nope")


def test_checkpoint_mismatch_lists_differences(tmp_path):
    e = make(tmp_path)
    e.train(train_input(), steps=1)

    def renamed(features, labels, mode, params):
        w = est.get_variable("weights", [2])
        b = est.get_variable("b", [1])  # reshaped: [] -> [1]
        if mode == est.ModeKeys.PREDICT:
            return est.EstimatorSpec(mode, predictions=features["x"] @ w + b)
        loss = jnp.mean((features["x"] @ w + b - labels) ** 2)
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1))

    # Training runs model_fn in init mode first; evaluation and prediction first try the
    # checkpoint's variables, and the model's request for others sends them the same way.
    for call in (
        lambda e: e.train(train_input(), steps=1),
        lambda e: e.evaluate(eval_input()),
        lambda e: list(e.predict(eval_input())),
    ):
        with pytest.raises(ValueError) as info:
            call(make(tmp_path, model_fn=renamed))
        message = str(info.value)
        assert "in the model, not in the checkpoint: weights [2]" in message
        assert "shape differs for b: model [1], checkpoint []" in message
        assert "in the checkpoint, not in the model: w [2]" in message


def test_a_model_using_some_of_a_checkpoints_variables_evaluates_from_it(tmp_path):
    # TF's Saver restores the graph's variables and ignores the others; evaluation, whose
    # variables come from the checkpoint's metadata, too.
    make(tmp_path).train(train_input(), steps=1)

    def without_bias(features, labels, mode, params):
        w = est.get_variable("w", [2])
        loss = jnp.mean((features["x"] @ w - labels) ** 2)
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1))

    e = make(tmp_path, model_fn=without_bias)
    w = e.get_variable_value("w")
    # The loss of the checkpoint's w alone, computed here.
    expected = np.mean((np.asarray(X[:16], np.float32) @ w - Y[:16]) ** 2)
    assert e.evaluate(eval_input(), steps=1)["loss"] == pytest.approx(expected, rel=1e-5)


def test_strings_without_input_transform(tmp_path):
    e = make(tmp_path)
    bad = lambda: ({"x": X[:2], "s": np.array(["a", "b"])}, Y[:2])  # noqa: E731
    with pytest.raises(TypeError, match=r"features\['s'\] holds strings .*input_transform"):
        e.train(bad, steps=1)


def test_input_fn_arguments_and_dataset_like(tmp_path):
    seen = {}

    class FakeDataset:
        def as_numpy_iterator(self):
            return iter([({"x": X[:8]}, Y[:8]), ({"x": X[8:16]}, Y[8:16])])

    def input_fn(mode, params, config):
        seen.update(mode=mode, params=params, config=config)
        return FakeDataset()

    e = make(tmp_path)
    e.train(input_fn)
    assert seen["mode"] == est.ModeKeys.TRAIN and seen["params"] == {"lr": 0.1}
    assert seen["config"] is e.config
    assert ckpt.checkpoint_step(e.latest_checkpoint()) == 2


def test_batch_norm_moving_averages_are_updated_by_training(tmp_path):
    def model_fn(features, labels, mode):
        h = est.layers.batch_normalization(
            features["x"], training=mode == est.ModeKeys.TRAIN, momentum=0.5
        )
        out = est.layers.dense(h, 1)[:, 0]
        loss = jnp.mean((out - labels) ** 2)
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.0))

    e = est.Estimator(model_fn, str(tmp_path))
    batch = lambda: ({"x": X[:8]}, Y[:8])  # noqa: E731
    e.train(batch, steps=2)
    # moving_mean: 0 -> 0.5 * m -> 0.5 * (0.5 * m) + 0.5 * m = 0.75 * m (same batch twice).
    m = X[:8].mean(axis=0)
    np.testing.assert_allclose(
        e.get_variable_value("batch_normalization/moving_mean"), 0.75 * m, rtol=1e-5
    )


def test_dropout_randomness_is_seeded(tmp_path):
    def model_fn(features, labels, mode):
        w = est.get_variable("w", [2], initializer=est.initializers.ones_initializer())
        h = est.layers.dropout(features["x"], 0.5, training=mode == est.ModeKeys.TRAIN)
        loss = jnp.mean((h @ w - labels) ** 2)
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1))

    values = []
    for run in ("a", "b"):
        e = est.Estimator(model_fn, str(tmp_path / run), config=est.RunConfig(tf_random_seed=7))
        e.train(train_input(), steps=3)
        values.append(e.get_variable_value("w"))
    np.testing.assert_array_equal(values[0], values[1])


def test_mesh_training_and_evaluation_match_one_device(tmp_path):
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]), ("data",))
    single = make(tmp_path / "one")
    sharded = make(tmp_path / "mesh", mesh=mesh)
    for e in (single, sharded):
        e.train(train_input(batch_size=8), steps=5)
    np.testing.assert_allclose(
        single.get_variable_value("w"), sharded.get_variable_value("w"), rtol=1e-5
    )
    # 40 examples in batches of 12: the last batch (4) is replicated, not sharded.
    a = single.evaluate(eval_input(batch_size=12))
    b = sharded.evaluate(eval_input(batch_size=12))
    assert a["mae"] == pytest.approx(b["mae"], rel=1e-6)
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-6)


def test_evaluate_counts_each_example_once_with_one_extra_compile(tmp_path):
    def model_fn(features, labels, mode):
        est.get_variable("w", [1])
        return est.EstimatorSpec(
            mode,
            loss=jnp.mean(labels),
            eval_metric_ops={
                "mean": est.metrics.mean(labels),
                "count": est.metrics.mean(jnp.ones_like(labels), weights=None),
                "sum_weights": est.metrics.true_positives(
                    jnp.ones_like(labels), jnp.ones_like(labels)
                ),
            },
        )

    e = est.Estimator(model_fn, str(tmp_path))
    labels = np.arange(10, dtype=np.float32)
    # Batches of 4: 4 + 4 + 2. The mean over examples is 45 / 10 = 4.5; the true positives
    # count (every label and prediction 1) is the number of examples seen: 10.
    results = e.evaluate(
        est.inputs.numpy_input_fn({"x": labels}, labels, batch_size=4, shuffle=False)
    )
    assert results["mean"] == pytest.approx(4.5)
    assert results["sum_weights"] == 10
    # Per-batch losses 1.5, 5.5, 8.5 -> loss (1.5 + 5.5 + 8.5) / 3.
    assert results["loss"] == pytest.approx((1.5 + 5.5 + 8.5) / 3)
    assert e.runtime.compile_counts()["eval"] == 2  # the full batch and the last one


def test_tf_style_metric_tuple_is_refused_with_the_replacement(tmp_path):
    def model_fn(features, labels, mode):
        w = est.get_variable("w", [1])
        return est.EstimatorSpec(
            mode, loss=jnp.sum(w), eval_metric_ops={"acc": (jnp.zeros(()), jnp.zeros(()))}
        )

    e = est.Estimator(model_fn, str(tmp_path))
    with pytest.raises(TypeError, match=r"\(metric_value, update_op\) tuple.*estimator\.metrics"):
        e.evaluate(eval_input())


def test_predict_generator_survives_a_train_call(tmp_path):
    # The in-memory state shared by evaluate/predict is copied before a train step donates
    # it: a predict generator consumed after more training still reads its variables.
    e = make(tmp_path)
    e.train(train_input(), steps=2)
    rows = e.predict(est.inputs.numpy_input_fn({"x": X[:6]}, batch_size=2, shuffle=False))
    first = next(rows)
    e.train(train_input(), steps=2)
    rest = list(rows)
    assert len(rest) == 5 and np.isfinite(first["pred"])


def test_a_second_train_call_takes_the_state_over_without_a_copy(tmp_path):
    # A model with large tables must not need twice its memory: the state kept in memory
    # after train() is donated to the next train() as it is.
    class Last(est.SessionRunHook):
        def end(self, session):
            self.variables = session.state.trainable

    e = make(tmp_path)
    hook = Last()
    e.train(train_input(), steps=2, hooks=[hook])
    kept = jax.tree.leaves(hook.variables)
    assert not any(x.is_deleted() for x in kept)
    e.train(train_input(), steps=2)
    assert all(x.is_deleted() for x in kept)  # consumed by the train step: no copy made
    # With a predict() generator still reading them, training takes a copy instead.
    hook = Last()
    e.train(train_input(), steps=2, hooks=[hook])
    rows = e.predict(est.inputs.numpy_input_fn({"x": X[:4]}, batch_size=2, shuffle=False))
    next(rows)
    e.train(train_input(), steps=2)
    assert not any(x.is_deleted() for x in jax.tree.leaves(hook.variables))
    assert len(list(rows)) == 3


def test_hooks_from_model_fn_start_fresh_on_every_call(tmp_path):
    # TF calls model_fn on each train(): a StopAtStepHook(num_steps=10) in training_hooks
    # stops at 10, then at 20 (from TF 2.15.1: global steps 10 and 20).
    def model_fn(features, labels, mode):
        spec = linear_model_fn(features, labels, mode, {"lr": 0.1})
        return spec._replace(training_hooks=[est.StopAtStepHook(num_steps=10)])

    e = est.Estimator(model_fn, str(tmp_path))
    e.train(train_input())
    assert ckpt.checkpoint_step(e.latest_checkpoint()) == 10
    e.train(train_input())
    assert ckpt.checkpoint_step(e.latest_checkpoint()) == 20


def test_hooks_in_the_spec_are_the_callers_objects(tmp_path):
    """As TF 2.15 (``MonitoredSession`` runs the hook list it is given): hooks passed through
    ``EstimatorSpec.training_hooks``/``evaluation_hooks``/``prediction_hooks`` are the very
    objects called, so a ``FinalOpsHook`` the caller keeps gets its values (it stayed
    ``None`` when the loop ran copies), on every call."""
    train_hook = est.FinalOpsHook({"loss": "loss"})
    eval_hook = est.FinalOpsHook({"loss": "loss"})
    predict_hook = est.FinalOpsHook({"step": "global_step"})

    def model_fn(features, labels, mode):
        spec = linear_model_fn(features, labels, mode, {"lr": 0.1})
        return spec._replace(
            training_hooks=[train_hook],
            evaluation_hooks=[eval_hook],
            prediction_hooks=[predict_hook],
        )

    e = est.Estimator(model_fn, str(tmp_path))
    e.train(train_input(), steps=2)
    first = train_hook.final_ops_values["loss"]
    assert np.isfinite(first)
    e.train(train_input(), steps=2)  # a later call: the same object is called again
    assert train_hook.final_ops_values["loss"] != first
    e.evaluate(train_input(epochs=1), steps=1)
    assert np.isfinite(eval_hook.final_ops_values["loss"])
    list(e.predict(lambda: {"x": np.ones((2, 2), np.float32)}))
    assert predict_hook.final_ops_values["step"] == 4


def test_removed_model_dir_is_written_again(tmp_path):
    import shutil

    e = make(tmp_path)
    e.train(train_input(), steps=3)
    shutil.rmtree(e.model_dir)
    e.train(train_input(), steps=3)
    # A fresh start (the checkpoints are gone) saved at steps 0 and 3 again.
    assert ckpt.checkpoint_step(e.latest_checkpoint()) == 3


def test_the_last_batchs_program_is_compiled_while_the_others_run(tmp_path, monkeypatch):
    # 40 rows, batches of 16, one epoch: 16, 16 and a last batch of 8, whose size
    # numpy_input_fn knows in advance; its program compiles in the background.
    fn = est.inputs.numpy_input_fn({"x": X}, Y, batch_size=16, num_epochs=1, shuffle=False)
    assert fn().last_batch_size == 8 and fn().batch_count == 3
    whole = est.inputs.numpy_input_fn({"x": X}, Y, batch_size=8, num_epochs=1, shuffle=False)
    assert whole().last_batch_size is None  # 40 = 5 x 8: no shorter batch
    assert whole().batch_count == 5
    endless = est.inputs.numpy_input_fn({"x": X}, Y, 16, num_epochs=None, shuffle=True)()
    assert endless.last_batch_size is None and endless.batch_count is None

    class BeforeTheLast(est.SessionRunHook):
        def before_run(self, run_context):
            if run_context.session.global_step == 2:  # the last batch is next
                compiler = e.runtime.compiler(est.ModeKeys.TRAIN)
                deadline = time.monotonic() + 20
                while compiler.compile_count < 2 and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.compiled = compiler.compile_count

    options = []  # the compiler options of each train program's compile
    compile_lowered = jax.stages.Lowered.compile

    def recording(lowered, compiler_options=None):
        if "train_step" in lowered.as_text()[:300]:
            options.append(compiler_options)
        return compile_lowered(lowered, compiler_options=compiler_options)

    monkeypatch.setattr(jax.stages.Lowered, "compile", recording)
    e = make(tmp_path, log_step_count_steps=None, steps_per_execution=1)
    hook = BeforeTheLast()
    e.train(fn, hooks=[hook])
    assert hook.compiled == 2  # ready before the last batch arrived
    # The last batch's program runs once: compiled for compile speed (XLA's backend
    # optimization level 0, its older loop emitters); the full batches' for run speed
    # (XLA's defaults).
    fast = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
    assert sorted(options, key=bool) == [None, fast]
    assert e.get_variable_value("global_step") == 3
    assert e.runtime.compile_counts()["train"] == 2


def test_a_call_that_stops_before_the_last_batch_compiles_no_program_for_it(tmp_path):
    # 40 rows in batches of 16: 16, 16 and 8. A call that stops within the first two
    # batches (train's steps or max_steps, evaluate's steps) never runs the program of 8.
    def fn():
        return est.inputs.numpy_input_fn({"x": X}, Y, batch_size=16, num_epochs=1, shuffle=False)

    e = make(tmp_path, log_step_count_steps=None)
    e.train(fn(), steps=2)
    e.train(fn(), max_steps=4)  # from step 2: 2 steps
    e.train(fn(), hooks=[est.StopAtStepHook(num_steps=1)])
    e.evaluate(fn(), steps=2)
    assert e.get_variable_value("global_step") == 5
    assert e.runtime.compile_counts() == {"train": 1, "eval": 1}
    # Calls that can reach it compile it: 3 steps from step 5, and evaluate's whole input.
    e.train(fn(), max_steps=8)
    e.evaluate(fn(), steps=3)
    assert e.get_variable_value("global_step") == 8
    assert e.runtime.compile_counts() == {"train": 2, "eval": 2}


def test_programs_run_a_few_times_are_compiled_for_compile_speed(tmp_path, monkeypatch):
    # Each program's XLA options, by the jitted function's name: the training step runs
    # thousands of times (XLA's defaults); a short evaluation and prediction a few times
    # per call (XLA's older, faster-compiling loop emitters); the initial state and
    # evaluation's finalize once (level 0 as well).
    options = {}
    compile_lowered = jax.stages.Lowered.compile

    def recording(lowered, compiler_options=None):
        name = lowered.as_text()[:300].split("module @")[1].split()[0]
        options.setdefault(name, compiler_options)
        return compile_lowered(lowered, compiler_options=compiler_options)

    monkeypatch.setattr(jax.stages.Lowered, "compile", recording)
    e = make(tmp_path)
    e.train(train_input(), steps=3)
    e.evaluate(est.inputs.numpy_input_fn({"x": X}, Y, batch_size=8, shuffle=False))
    list(e.predict(est.inputs.numpy_input_fn({"x": X}, batch_size=8, shuffle=False)))
    few = {"xla_cpu_use_fusion_emitters": False}
    once = {**few, "xla_backend_optimization_level": 0}
    assert options == {
        "jit_train_steps": None,
        "jit_init_state": once,
        "jit_eval_steps": few,  # 5 batches
        "jit_finalize": once,
        "jit_predict_step": few,
    }
    # A long evaluation (80 batches) of the same batch size compiles the program again,
    # for run speed, and a short one after it keeps that program; a long evaluation of
    # unknown length (a generator) runs at XLA's defaults too, a short one (steps) not.
    long = est.inputs.numpy_input_fn({"x": X}, Y, batch_size=8, num_epochs=16, shuffle=False)
    assert long().batch_count == 80 > policy.FEW_BATCHES
    for input_fn, steps, expected in [
        (long, None, {"jit_eval_steps": None}),
        (est.inputs.numpy_input_fn({"x": X}, Y, 8, shuffle=False), None, {}),
        (lambda: endless(4), 70, {"jit_eval_steps": None}),  # 70 > FEW_BATCHES
        (lambda: endless(2), 3, {"jit_eval_steps": few}),
    ]:
        options.clear()
        e.evaluate(input_fn, steps=steps)
        assert options == expected


def endless(rows):
    while True:
        yield {"x": X[:rows]}, Y[:rows]


def test_a_last_batch_compiled_for_compile_speed_is_compiled_again_for_a_long_run(tmp_path):
    # One epoch of 40 rows in batches of 16: the last batch of 8 runs once, compiled for
    # compile speed. Training at batch 8 then compiles its program again, for run speed.
    e = make(tmp_path, log_step_count_steps=None)
    e.train(est.inputs.numpy_input_fn({"x": X}, Y, batch_size=16, num_epochs=1, shuffle=False))
    train = e.runtime.compiler(est.ModeKeys.TRAIN)
    assert sorted(train.compiled_signatures().values()) == [policy.ONCE, policy.MANY]
    e.train(est.inputs.numpy_input_fn({"x": X}, Y, batch_size=8, num_epochs=1, shuffle=False))
    assert list(train.compiled_signatures().values()) == [policy.MANY, policy.MANY]
    assert e.runtime.compile_counts()["train"] == 3


def test_steps_are_fused_without_logging(tmp_path):
    e = make(tmp_path, log_step_count_steps=None, steps_per_execution=8)
    e.train(train_input(), steps=17)
    compiler = e.runtime.compiler("train")
    assert compiler.call_count == 3  # 17 = 8 + 8 + 1: the queue ran as fused calls
    assert compiler.compile_count == 1


def test_model_fn_property_is_tfs_wrapper(tmp_path):
    # From TF 2.15.1: inspect.signature(Estimator(mf, ...).model_fn) is
    # (features, labels, mode, config), and calling it returns the EstimatorSpec.
    import inspect

    e = make(tmp_path)
    wrapper = e.model_fn
    assert list(inspect.signature(wrapper).parameters) == ["features", "labels", "mode", "config"]
    spec = wrapper({"x": X[:4]}, Y[:4], est.ModeKeys.EVAL, e.config)
    assert isinstance(spec, est.EstimatorSpec)
    # Initial variables (w = 0, b = 0): loss = mean(y^2).
    np.testing.assert_allclose(float(spec.loss), np.mean(Y[:4] ** 2), rtol=1e-6)


@pytest.mark.filterwarnings("error:Python iterable type:DeprecationWarning")
def test_a_generator_of_batches_is_read_not_flattened(tmp_path):
    # An input_fn may return a generator of (features, labels) batches. It is read as
    # batches and never passed to a pytree function, which warns (and will refuse, JAX
    # says) when it meets an iterator.
    def batches():
        return (({"x": X[i : i + 8]}, Y[i : i + 8]) for i in range(0, len(X), 8))

    e = make(tmp_path)
    e.train(batches, steps=3)
    assert e.get_variable_value("global_step") == 3
    assert e.evaluate(batches)["global_step"] == 3


def test_a_resumed_training_with_a_table_updated_whole_runs_model_fn_once(tmp_path):
    # A table of 4 rows, 2 ids a step (at most engine.sparse.WHOLE_ROWS_PER_ID rows per id):
    # updated whole under a row mask. The checkpoint's recorded plan holds on a resume,
    # checked in the step's one trace, as for a table updated row by row.
    class SmallTable(CountingModelFn):
        def __call__(self, features, labels, mode, params):
            self.calls += 1
            spec = linear_model_fn(features, labels, mode, params)
            table = est.get_variable("table", [4, 1], initializer=np.ones((4, 1), np.float32))
            rows = est.layers.embedding_lookup(table, jnp.zeros((1, 2), jnp.int32))
            if spec.loss is not None:
                train_op = spec.train_op and est.sparse_updates(spec.train_op)
                spec = spec._replace(loss=spec.loss + rows.sum(), train_op=train_op)
            return spec

    make(tmp_path, model_fn=SmallTable(table=True)).train(train_input(epochs=1), steps=5)
    resumed_fn = SmallTable(table=True)
    resumed = make(tmp_path, model_fn=resumed_fn)
    resumed.train(train_input(epochs=1), steps=5)
    assert resumed_fn.calls == 1
    # Row 0, looked up twice a step, has gradient 2 a step; SGD at lr 0.1 over the 10 steps
    # of both calls: 1 - 10 * 0.2 = -1. Rows 1-3 are never looked up and stay at 1.
    np.testing.assert_allclose(resumed.get_variable_value("table")[:, 0], [-1.0, 1, 1, 1])
