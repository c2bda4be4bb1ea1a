"""Training metrics (``RunConfig(train_metrics_steps=N)``): the
``eval_metric_ops`` of the training batches, accumulated in the compiled step, reported and
reset every N steps."""

import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from tensorboardX.proto.event_pb2 import Event

import estimator as est
from estimator import handlers
from estimator.engine import session as session_lib

RNG = np.random.default_rng(7)
X = RNG.normal(size=(64, 3)).astype(np.float32)
Y = (X @ np.array([1.0, -2.0, 0.5], np.float32) + RNG.normal(size=64) * 0.5 > 0).astype(np.float32)
BATCH = 16  # 4 batches a pass; batch g is rows 16*(g % 4) ... (shuffle=False)


def _metrics(labels, p):
    return {
        "accuracy": est.metrics.accuracy(labels, (p > 0.5).astype(jnp.float32)),
        "auc": est.metrics.auc(labels, p),
    }


def model_fn(features, labels, mode):
    logits = est.layers.dense(features["x"], 1)[:, 0]
    p = jax.nn.sigmoid(logits)
    loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
    return est.EstimatorSpec(
        mode, loss=loss, predictions=p, train_op=optax.sgd(0.5), eval_metric_ops=_metrics(labels, p)
    )


def eval_only_metrics_model_fn(features, labels, mode):
    """TF's habit: eval_metric_ops in EVAL mode only."""
    spec = model_fn(features, labels, mode)
    if mode == est.ModeKeys.TRAIN:
        return est.EstimatorSpec(mode, loss=spec.loss, train_op=spec.train_op)
    return spec


def train_input(num_epochs=None):
    return est.inputs.numpy_input_fn(
        {"x": X}, Y, batch_size=BATCH, num_epochs=num_epochs, shuffle=False
    )


def make(tmp_path, fn=model_fn, **config):
    config = {
        "tf_random_seed": 3,
        "train_metrics_steps": 4,
        "save_checkpoints_steps": None,
        "save_checkpoints_secs": None,
        "log_step_count_steps": None,
        "save_summary_steps": 0,
        **config,
    }
    return est.Estimator(fn, str(tmp_path), est.RunConfig(**config))


class Reports(handlers.BatchEnd, handlers.EpochEnd, handlers.TrainEnd):
    """Keeps each report of the training metrics in ``session.logs``, by global step (it
    runs after the MetricHandler: priority 0 > -1000)."""

    def __init__(self):
        self.by_step = {}
        self._last = None

    def _look(self, session):
        values = {k[6:]: v for k, v in session.logs.items() if k.startswith("train/")}
        if values and values != self._last:
            self.by_step[session.global_step] = self._last = values
        return False

    def batch_end(self, session, **kwargs):
        return self._look(session)

    def epoch_end(self, session, **kwargs):
        return self._look(session)

    def train_end(self, session, **kwargs):
        self._look(session)


class RecordVariables(est.SessionRunHook):
    """The variables each step starts from (read before it runs)."""

    def __init__(self):
        self.seen = []

    def before_run(self, run_context):
        self.seen.append(jax.device_get(run_context.session.state.trainable))


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def reference(variables, first_step, steps, tmp_path):
    """The independent computation: each batch's predictions from the variables it saw
    (a NumPy forward pass), then ``evaluate()`` of those predictions over the window, and
    the mean of the batches' losses (NumPy)."""
    predictions, labels, losses = [], [], []
    for step in range(first_step, first_step + steps):
        rows = slice(BATCH * (step % 4), BATCH * (step % 4) + BATCH)
        w = variables[step]
        z = X[rows] @ w["dense/kernel"][:, 0] + w["dense/bias"][0]
        p = _sigmoid(z.astype(np.float32)).astype(np.float32)
        y = Y[rows]
        # sigmoid cross-entropy = max(z, 0) - z*y + log(1 + exp(-|z|)), averaged per batch
        losses.append(np.mean(np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))))
        predictions.append(p)
        labels.append(y)

    def passthrough(features, labels, mode):
        p = features["p"]
        return est.EstimatorSpec(mode, loss=jnp.zeros(()), eval_metric_ops=_metrics(labels, p))

    evaluator = est.Estimator(passthrough, str(tmp_path / f"ref_{first_step}"))
    p, y = np.concatenate(predictions), np.concatenate(labels)
    results = evaluator.evaluate(
        est.inputs.numpy_input_fn({"p": p}, y, batch_size=len(y), shuffle=False)
    )
    return {"accuracy": results["accuracy"], "auc": results["auc"], "loss": float(np.mean(losses))}


@pytest.mark.parametrize(
    "fn", [model_fn, eval_only_metrics_model_fn], ids=["train_spec", "eval_spec"]
)
def test_reported_metrics_equal_evaluate_of_the_same_batches_with_the_variables_they_saw(
    tmp_path, fn
):
    recorder, reports = RecordVariables(), Reports()
    e = make(tmp_path / "m", fn, steps_per_execution=1)
    e.train(train_input(), hooks=[recorder, reports], steps=8)
    assert sorted(reports.by_step) == [4, 8]  # every 4 steps
    for end in (4, 8):
        expected = reference(recorder.seen, end - 4, 4, tmp_path)
        got = reports.by_step[end]
        for key in ("accuracy", "auc", "loss"):
            assert got[key] == pytest.approx(expected[key], abs=1e-6), (end, key)


def test_fused_steps_accumulate_every_step_without_a_sync(tmp_path, monkeypatch):
    """steps_per_execution=4: one device call per 4 steps and one transfer per report, and
    the same values as one step per call."""
    single = Reports()
    make(tmp_path / "one", steps_per_execution=1).train(train_input(), hooks=[single], steps=8)
    transfers = []
    original = session_lib.to_host
    monkeypatch.setattr(
        session_lib, "to_host", lambda tree: transfers.append(tree) or original(tree)
    )
    fused = Reports()
    e = make(tmp_path / "four", steps_per_execution=4)
    e.train(train_input(), hooks=[fused], steps=8)
    # The two reports, and the NaN guard's record at the first step and at the end (its
    # own schedule, as without training metrics): nothing else left the device.
    kinds = [sorted(t[0]) if isinstance(t, tuple) else sorted(t) for t in transfers]
    assert kinds == [["non_finite_step"], ["accuracy", "auc"], ["accuracy", "auc"]] + [
        ["non_finite_step"]
    ]
    # Device calls: step 1 alone (the NaN guard fetches at the first step), steps 2-4 and
    # 5-8 fused: a report runs the queue up to its step, no further.
    assert e.runtime.compiler(est.ModeKeys.TRAIN, metrics=True).call_count == 3
    for step in (4, 8):
        for key in ("accuracy", "auc", "loss"):
            assert fused.by_step[step][key] == pytest.approx(single.by_step[step][key], abs=1e-6)
    # Compiled once: a second train() call of the same input compiles nothing.
    e.train(train_input(), steps=8)
    assert e.runtime.compile_counts() == {"train_metrics": 1}


def test_metrics_are_merged_across_the_devices_of_a_mesh(tmp_path):
    one = Reports()
    make(tmp_path / "one").train(train_input(), hooks=[one], steps=8)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]), ("data",))
    four = Reports()
    make(tmp_path / "mesh", mesh=mesh).train(train_input(), hooks=[four], steps=8)
    for step in (4, 8):
        for key in ("accuracy", "auc", "loss"):
            assert four.by_step[step][key] == pytest.approx(one.by_step[step][key], abs=1e-6)


def test_logged_written_to_tensorboard_and_fetchable_by_name(tmp_path, caplog):
    fetched = {}

    class Fetch(est.SessionRunHook):
        def before_run(self, run_context):
            return est.SessionRunArgs(["train/accuracy", "train/loss"])

        def after_run(self, run_context, run_values):
            fetched[run_context.session.global_step] = run_values.results

    reports = Reports()
    e = make(tmp_path / "m")
    with caplog.at_level(logging.INFO, logger="estimator"):
        e.train(train_input(), hooks=[Fetch(), reports], steps=8)
    lines = [r.getMessage() for r in caplog.records if "Training metrics" in r.getMessage()]
    assert lines[0].startswith("Training metrics for global step 4 (4 steps): accuracy = ")
    assert "loss = " in lines[0] and len(lines) == 2
    # A hook's fetch at a report step sees the reported values (the window before reset).
    assert fetched[4][0] == pytest.approx(reports.by_step[4]["accuracy"], abs=1e-7)
    assert fetched[8][1] == pytest.approx(reports.by_step[8]["loss"], abs=1e-6)
    (events,) = [os.path.join(e.model_dir, f) for f in os.listdir(e.model_dir) if "tfevents" in f]
    scalars = _scalars(events)
    assert {"accuracy", "auc"} <= set(scalars)
    assert [step for step, _ in scalars["auc"]] == [4, 8]
    assert scalars["auc"][1][1] == pytest.approx(reports.by_step[8]["auc"], abs=1e-6)


def _scalars(path: str) -> dict:
    """``{tag: [(step, value)]}`` of an event file: TFRecord frames (8-byte length, its
    CRC, the ``Event`` proto, its CRC), read without TensorBoard (which would import
    TensorFlow, seconds, when it is installed)."""
    out: dict = {}
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at < len(data):
        length = int.from_bytes(data[at : at + 8], "little")
        event = Event.FromString(data[at + 12 : at + 12 + length])
        at += 12 + length + 4
        for value in event.summary.value:
            out.setdefault(value.tag, []).append((event.step, value.simple_value))
    return out


def test_reported_and_reset_at_epoch_ends(tmp_path):
    """Windows restart at each epoch: 2 passes of 4 batches with reports every 3 steps:
    at steps 3 and 4 (the epoch's end), then 7 and 8."""
    reports = Reports()
    make(tmp_path / "m", train_metrics_steps=3).train(train_input(num_epochs=2), hooks=[reports])
    assert sorted(reports.by_step) == [3, 4, 7, 8]


def test_canned_estimators_report_their_heads_metrics(tmp_path):
    import canned

    columns = [canned.feature_column.numeric_column("x", shape=(3,))]
    classifier = canned.LinearClassifier(
        columns,
        model_dir=str(tmp_path / "linear"),
        config=est.RunConfig(tf_random_seed=1, train_metrics_steps=4, save_summary_steps=0),
    )
    reports = Reports()
    classifier.train(train_input(), hooks=[reports], steps=4)
    evaluated = classifier.evaluate(train_input(num_epochs=1))
    reported = reports.by_step[4]
    # The head's own metrics, from the TRAIN run (accuracy, auc, precision, recall,
    # label/mean, average_loss, ...): evaluate()'s names, and the mean loss.
    assert set(reported) == set(evaluated) - {"global_step"}
    assert 0.0 <= reported["auc"] <= 1.0
    assert classifier.trace_count == 3  # init, the train step, evaluate: no EVAL run in training


def test_errors_say_what_to_do(tmp_path):
    with pytest.raises(ValueError, match="train_metrics_steps must be None or an integer >= 1"):
        est.RunConfig(train_metrics_steps=0)
    e = make(tmp_path / "m")
    with pytest.raises(KeyError, match=r"\['nope'\] not among the training metrics"):
        e.train(train_input(), hooks=[handlers.MetricHandler(["nope"], batch_period=2)], steps=2)

    class ReadsMetrics(handlers.TrainBegin):
        def train_begin(self, session, **kwargs):
            session.train_metrics()

    plain = make(tmp_path / "plain", train_metrics_steps=None)
    with pytest.raises(RuntimeError, match=r"accumulates no training metrics: set RunConfig"):
        plain.train(train_input(), hooks=[ReadsMetrics()], steps=1)

    def reserved(features, labels, mode):
        spec = model_fn(features, labels, mode)
        metrics = {"loss": est.metrics.mean(spec.loss)}
        return est.EstimatorSpec(
            mode, loss=spec.loss, train_op=spec.train_op, eval_metric_ops=metrics
        )

    with pytest.raises(ValueError, match='Metric with name "loss" is not allowed'):
        make(tmp_path / "r", reserved).train(train_input(), steps=1)
