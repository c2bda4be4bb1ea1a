"""Epochs and event handlers (``estimator.handlers``): Gluon's
protocol on the hook loop, one list, one order."""

import ast
import io
import logging
import math
import pathlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import estimator as est
from estimator import handlers
from estimator.compat.v1.data import Dataset

X = np.arange(40, dtype=np.float32).reshape(10, 4) / 40
Y = (X.sum(1) > 0.9).astype(np.float32)


def model_fn(features, labels, mode):
    logits = est.layers.dense(features["x"], 1)[:, 0]
    loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
    p = jax.nn.sigmoid(logits)
    return est.EstimatorSpec(
        mode,
        loss=loss,
        predictions=p,
        train_op=optax.sgd(0.1),
        eval_metric_ops={"accuracy": est.metrics.accuracy(labels, (p > 0.5).astype(jnp.float32))},
    )


def make(tmp_path, **config):
    config = {
        "tf_random_seed": 1,
        "save_checkpoints_steps": None,
        "save_checkpoints_secs": None,
        "log_step_count_steps": None,
        "save_summary_steps": 0,
        **config,
    }
    return est.Estimator(model_fn, str(tmp_path), est.RunConfig(**config))


def numpy_input(batch_size=4, num_epochs=1, shuffle=False):
    return est.inputs.numpy_input_fn(
        {"x": X}, Y, batch_size=batch_size, num_epochs=num_epochs, shuffle=shuffle
    )


class Recorder(
    handlers.TrainBegin,
    handlers.EpochBegin,
    handlers.BatchBegin,
    handlers.BatchEnd,
    handlers.EpochEnd,
    handlers.TrainEnd,
):
    """Every event, with the global step it saw."""

    def __init__(self, name="r", priority=0, log=None, stop_at=None):
        self.name, self.priority = name, priority
        self.log = [] if log is None else log
        self.stop_at = stop_at

    def _note(self, event, session):
        self.log.append((self.name, event, session.global_step))

    def train_begin(self, session, **kwargs):
        self._note("train_begin", session)

    def epoch_begin(self, session, **kwargs):
        self._note("epoch_begin", session)

    def batch_begin(self, session, *, batch, **kwargs):
        self._note("batch_begin", session)

    def batch_end(self, session, *, batch, label, outputs, loss, **kwargs):
        self._note("batch_end", session)
        return session.global_step == self.stop_at

    def epoch_end(self, session, **kwargs):
        self._note("epoch_end", session)
        return False

    def train_end(self, session, **kwargs):
        self._note("train_end", session)


class Hook(est.SessionRunHook):
    def __init__(self, log):
        self.log = log

    def after_create_session(self, session, coord):
        self.log.append(("hook", "after_create_session", session.global_step))

    def before_run(self, run_context):
        self.log.append(("hook", "before_run", run_context.session.global_step))

    def after_run(self, run_context, run_values):
        self.log.append(("hook", "after_run", run_context.session.global_step))

    def end(self, session):
        self.log.append(("hook", "end", session.global_step))


def test_one_list_one_order_gluon_priorities_then_list_order():
    metric, logging_, stop = (
        handlers.MetricHandler(),
        handlers.LoggingHandler(),
        handlers.StoppingHandler(),
    )
    hook = est.StopAtStepHook(last_step=3)
    early = handlers.ValidationHandler(lambda: None)
    assert handlers.order([logging_, hook, metric, stop, early]) == [
        metric,  # -1000
        early,  # -1000, after metric: the list's order among equals
        hook,  # 0
        stop,  # 0
        logging_,  # +inf
    ]


def test_events_and_hooks_interleave_in_one_loop_in_the_documented_order(tmp_path):
    """Two epochs of 3 batches (10 rows, batch 4: a batch spans the epochs, numpy_input_fn
    as TF's queue): hook and handler calls in list order, epochs from the input, the
    handler at priority -1 before the hook, the one at +1 after it."""
    log = []
    first, second = Recorder("a", -1, log), Recorder("b", 1, log)
    make(tmp_path).train(numpy_input(num_epochs=2), hooks=[second, Hook(log), first])
    events = [(n, e, s) for n, e, s in log if n in ("a", "hook") or e != "batch_begin"]
    # Batches of rows [0:4] [4:8] [8:10 + 0:2] ends pass 1, [2:6] [6:10] ends pass 2.
    assert [(n, e, s) for n, e, s in events if n != "b"][:8] == [
        ("a", "train_begin", 0),  # each in turn: a (priority -1), then the hook (0)
        ("hook", "after_create_session", 0),
        ("a", "epoch_begin", 0),
        ("a", "batch_begin", 0),
        ("hook", "before_run", 0),
        ("a", "batch_end", 1),
        ("hook", "after_run", 1),
        ("a", "batch_begin", 1),
    ]
    ends = [(n, s) for n, e, s in log if e == "epoch_end"]
    assert ends == [("a", 3), ("b", 3), ("a", 5), ("b", 5)]
    assert [e for n, e, s in log if n == "b"].count("batch_end") == 5
    assert log[-3:] == [("a", "train_end", 5), ("hook", "end", 5), ("b", "train_end", 5)]


def test_batch_end_sees_every_batch_of_fused_steps_and_its_loss_on_demand(tmp_path):
    """steps_per_execution=8: batch_end runs for each of the 8 steps of a call; the calls
    stay fused while nobody reads a value; reading the loss gives that batch's."""
    seen = []

    class Count(handlers.BatchEnd):
        def batch_end(self, session, **kwargs):
            seen.append(session.global_step)

    e = make(tmp_path / "fused", steps_per_execution=8)
    e.train(numpy_input(num_epochs=None), hooks=[Count()], steps=16)
    assert seen == list(range(1, 17))
    # Calls: step 1 alone (the NaN guard's first fetch), then 2-8, 9-16: still fused.
    assert e.runtime.compiler(est.ModeKeys.TRAIN).call_count == 3

    losses = {}

    class ReadLoss(handlers.BatchEnd):
        def batch_end(self, session, *, loss, outputs, **kwargs):
            if session.global_step in (3, 6):
                losses[session.global_step] = (float(loss), float(outputs["loss"]))

    make(tmp_path / "read", steps_per_execution=8).train(
        numpy_input(num_epochs=None), hooks=[ReadLoss()], steps=8
    )
    by_step = {}

    class Every(est.SessionRunHook):
        def before_run(self, run_context):
            return est.SessionRunArgs("loss")

        def after_run(self, run_context, run_values):
            by_step[run_context.session.global_step] = float(run_values.results)

    make(tmp_path / "single", steps_per_execution=1).train(
        numpy_input(num_epochs=None), hooks=[Every()], steps=8
    )
    for step in (3, 6):
        assert losses[step][0] == losses[step][1] == pytest.approx(by_step[step], rel=1e-6)


def test_a_loss_read_after_its_batch_end_says_so(tmp_path):
    kept = []

    class Keep(handlers.BatchEnd):
        def batch_end(self, session, *, loss, **kwargs):
            kept.append(loss)

    make(tmp_path).train(numpy_input(num_epochs=None), hooks=[Keep()], steps=3)
    with pytest.raises(RuntimeError, match=r"read a step's outputs or loss inside its batch_end"):
        float(kept[0])
    assert float(kept[-1]) > 0  # the last step's values are still the runner's


def test_stopping_handler_reads_a_one_pass_input_again_for_each_epoch(tmp_path):
    calls = []

    def input_fn():
        calls.append(1)
        for i in range(0, 10, 5):
            yield {"x": X[i : i + 5]}, Y[i : i + 5]

    log = []
    e = make(tmp_path)
    e.train(input_fn, hooks=[handlers.StoppingHandler(max_epoch=3), Recorder(log=log)])
    assert len(calls) == 3  # one input_fn call per pass
    assert [s for _, ev, s in log if ev == "epoch_end"] == [2, 4, 6]
    # Without a StoppingHandler the end of the input ends training, as in TF.
    log.clear()
    e.train(input_fn, hooks=[Recorder(log=log)])
    assert len(calls) == 4 and [e for _, e, _ in log].count("epoch_end") == 1
    stop = handlers.StoppingHandler(max_batch=4)
    make(tmp_path / "b").train(numpy_input(num_epochs=None), hooks=[stop])
    assert (stop.current_batch, stop.stop_training) == (4, True)


def test_epochs_of_an_endless_input_and_of_compat_datasets(tmp_path):
    """numpy_input_fn(num_epochs=None) marks every pass; estimator.compat.v1.data marks the
    passes of repeat() before batch (a batch spanning two passes ends the first) and after
    it; a generator ends its only epoch when it ends."""

    def epochs_of(input_fn, **train):
        log = []
        make(tmp_path / str(len(list(tmp_path.iterdir())))).train(
            input_fn, hooks=[Recorder(log=log)], **train
        )
        return [s for _, e, s in log if e == "epoch_end"]

    assert epochs_of(numpy_input(batch_size=5, num_epochs=None), steps=7) == [2, 4, 6, 7]

    def before(ctx=None):
        return Dataset.from_tensor_slices(({"x": X}, Y)).repeat(2).batch(4)

    def after(ctx=None):
        return Dataset.from_tensor_slices(({"x": X}, Y)).shuffle(10).batch(4).repeat(2)

    assert epochs_of(before) == [3, 5]  # rows 8:12 span the passes: batch 3 ends pass 1
    assert epochs_of(after) == [3, 6]  # 3 batches a pass (4, 4, 2), twice

    def generator():
        for i in range(3):
            yield {"x": X[i : i + 1]}, Y[i : i + 1]

    assert epochs_of(generator) == [3]


def test_a_stop_from_batch_end_or_a_hook_ends_the_epoch_then_training(tmp_path):
    log = []
    make(tmp_path / "a").train(numpy_input(num_epochs=None), hooks=[Recorder(log=log, stop_at=2)])
    assert [(e, s) for _, e, s in log if e != "batch_begin"][-4:] == [
        ("batch_end", 1),
        ("batch_end", 2),
        ("epoch_end", 2),  # the epoch a stop cut short ends too (Gluon)
        ("train_end", 2),
    ]
    log.clear()
    make(tmp_path / "b").train(numpy_input(num_epochs=None), hooks=[Recorder(log=log)], steps=4)
    assert [e for _, e, _ in log].count("epoch_end") == 2  # 3 batches a pass; steps=4 cuts #2


def test_early_stopping_handler_on_validation_results(tmp_path):
    class Worse:
        """Gluon's metric protocol: get() -> (name, value); it only rises (for min)."""

        def __init__(self):
            self.value = 0.0

        def get(self):
            self.value += 1.0
            return "validation loss", self.value

    stop = handlers.EarlyStoppingHandler(Worse(), patience=2)
    assert stop.mode == "min"
    validation = handlers.ValidationHandler(numpy_input(batch_size=5), name="val")
    on_logs = handlers.EarlyStoppingHandler("validation/accuracy", patience=100)
    make(tmp_path).train(numpy_input(num_epochs=None), hooks=[stop, validation, on_logs])
    # The first value sets the best; 2 epochs without improvement stop at the 3rd epoch.
    assert (stop.stop_training, stop.stopped_epoch, stop.wait) == (True, 2, 2)
    assert on_logs.mode == "max" and on_logs.best == validation.eval_result["accuracy"]
    # Passes of 10 rows in batches of 4 end at batches 3, 5 and 8 (rows 8:12, 16:20, 28:32).
    assert validation.eval_result["global_step"] == 8
    with pytest.raises(ValueError, match="mode must be 'auto', 'min' or 'max'"):
        handlers.EarlyStoppingHandler("validation/loss", mode="smallest")
    with pytest.raises(TypeError, match=r"monitor must be the name of a reported value"):
        handlers.EarlyStoppingHandler(3)
    missing = handlers.EarlyStoppingHandler("validation/nope")
    with pytest.warns(
        RuntimeWarning, match=r"'validation/nope' has no value at the end of epoch 0"
    ):
        make(tmp_path / "w").train(numpy_input(), hooks=[missing])


def test_checkpoint_handler_saves_each_epoch_in_model_dir(tmp_path):
    saver = handlers.CheckpointHandler(epoch_period=1)
    e = make(tmp_path / "m")
    e.train(numpy_input(num_epochs=2), hooks=[saver])
    assert [p.rsplit("_", 1)[1] for p in saver.saved] == ["3", "5"]
    assert e.latest_checkpoint().endswith("model.ckpt_5")
    with pytest.raises(ValueError, match=r"checkpoints, which live in its model_dir"):
        e.train(numpy_input(), hooks=[handlers.CheckpointHandler(str(tmp_path / "other"))])


def test_logging_handler_lines_and_progress_bar(tmp_path, caplog):
    bar = io.StringIO()
    logger = handlers.LoggingHandler(log_interval=2, progress_bar=True, file=bar)
    with caplog.at_level(logging.INFO, logger="estimator"):
        make(tmp_path, train_metrics_steps=3).train(numpy_input(num_epochs=2), hooks=[logger])
    lines = [r.getMessage() for r in caplog.records]
    assert "[Epoch 0] Begin at global step 0" in lines
    batch = next(m for m in lines if m.startswith("[Epoch 0][Batch 2][Samples 8]"))
    assert "loss = " in batch
    finished = next(m for m in lines if m.startswith("[Epoch 1] Finished in "))
    assert "train/accuracy = " in finished  # what the MetricHandler reported, logged last
    assert any(m.startswith("Train finished using total") for m in lines)
    # Epoch 1 knows its length from epoch 0 (3 batches); it ran 2 (rows 2:6 and 6:10).
    assert "epoch 1" in bar.getvalue() and "2/3" in bar.getvalue()
    with pytest.raises(
        ValueError, match="log_interval must be either a positive integer or 'epoch'"
    ):
        handlers.LoggingHandler(log_interval="batch")


def test_handlers_and_hooks_go_wherever_either_goes(tmp_path):
    """A handler in evaluate(hooks=...) sees the evaluation as one epoch; a hook in a
    ValidationHandler's event_handlers runs in its evaluations."""
    log = []
    e = make(tmp_path)
    e.train(numpy_input(), steps=2)
    e.evaluate(numpy_input(batch_size=5), hooks=[Recorder(log=log)])
    assert [ev for _, ev, _ in log if ev != "batch_begin"] == [
        "epoch_begin",
        "batch_end",
        "batch_end",
        "epoch_end",
    ]
    hook_log = []
    validation = handlers.ValidationHandler(
        numpy_input(batch_size=5), event_handlers=[Hook(hook_log)]
    )
    e.train(numpy_input(), hooks=[validation])
    assert [ev for _, ev, _ in hook_log].count("after_run") == 2


def test_a_wrong_handler_is_refused_when_attached_not_mid_training(tmp_path):
    class NoKeywords(handlers.BatchEnd):
        def batch_end(self, session):  # the loop passes batch=, label=, outputs=, loss=
            return False

    class NotDeclared(handlers.BatchEnd):
        def epoch_end(self, session, **kwargs):  # never called: not an EpochEnd
            return False

    e = make(tmp_path)
    with pytest.raises(TypeError, match=r"NoKeywords.batch_end\(session\) cannot be called as"):
        e.train(numpy_input(), hooks=[NoKeywords()])
    assert e.trace_count == 0  # refused before model_fn ran
    with pytest.raises(TypeError, match=r"defines epoch_end\(\) but does not inherit"):
        e.train(numpy_input(), hooks=[NotDeclared()])
    bad = handlers.StoppingHandler()
    bad.priority = "first"
    with pytest.raises(TypeError, match="priority must be a number"):
        e.evaluate(numpy_input(), hooks=[bad])
    with pytest.raises(ValueError, match="max_epoch must be None or an integer >= 1"):
        handlers.StoppingHandler(max_epoch=0)
    with pytest.raises(TypeError, match="Hooks must be a SessionRunHook, given: 3"):
        e.train(numpy_input(), hooks=[3])
    assert math.isinf(handlers.LoggingHandler().priority)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        handlers.check_handler(Recorder())  # a correct one passes silently


def test_any_handler_may_ask_for_another_pass_over_the_input(tmp_path):
    """ "Another epoch" is part of the protocol (``EventHandler.wants_another_pass``), not a
    property of StoppingHandler: a handler of the user's that asks twice gets three passes,
    ``input_fn`` called for each."""
    calls = []

    def input_fn():
        calls.append(1)
        for i in range(0, 10, 5):
            yield {"x": X[i : i + 5]}, Y[i : i + 5]

    class ThreePasses(handlers.EpochEnd):
        def __init__(self):
            self.ends = 0

        def epoch_end(self, session, **kwargs):
            self.ends += 1
            return False

        def wants_another_pass(self):
            return self.ends < 3

    passes = ThreePasses()
    make(tmp_path).train(input_fn, hooks=[passes])
    assert len(calls) == 3 and passes.ends == 3  # 2 batches a pass: global step 6


def test_the_dispatcher_owns_the_order_the_calls_and_the_stop(tmp_path):
    """``Dispatcher``, built from an unordered list: the priority order, each event's
    participants in it, a hook whose before_run/after_run do nothing left out of the
    per-step passes, and a stop asked by a handler's batch_end or a hook's request_stop."""
    from estimator.handlers.events import Dispatcher

    class Requests(est.SessionRunHook):
        def before_run(self, run_context):
            return est.SessionRunArgs("loss")

        def after_run(self, run_context, run_values):
            self.values = run_values.results
            run_context.request_stop()

    first, last, quiet, hook = Recorder("a", -1), Recorder("b", 1), est.SessionRunHook(), Requests()
    events = Dispatcher([last, quiet, hook, first], training=True)
    assert events.participants == [first, quiet, hook, last]
    assert (events.epochs, events.sees_batch, events.sees_batch_end) == (True, True, True)
    assert [p for _, p in events._before] == [first, hook, last]  # not the quiet hook

    class Session:
        global_step, epoch = 0, 0

    session = Session()
    assert events.before_run(session, batch=("b",)) == {2: "loss"}  # the hook's index
    events.after_run({2: 0.5}, {"batch": None, "label": None, "outputs": {}, "loss": None})
    assert hook.values == 0.5 and events.stop_requested
    assert [e for _, e, _ in first.log] == ["batch_begin", "batch_end"]
    with pytest.raises(TypeError, match="returned 3; expected None or a SessionRunArgs"):
        bad = Requests()
        bad.before_run = lambda run_context: 3
        Dispatcher([bad]).before_run(session)


def _imports(path) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every import in ``path`` (functions' too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [a.asname or a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, [a.asname or a.name.split(".")[0]]) for a in node.names]
    return found


def test_the_engine_knows_the_protocols_only_and_hooks_know_no_handlers():
    """The engine imports no handler module but the protocol (``handlers.events``) and
    asks no ``isinstance`` of a hook or handler class; ``hooks`` imports nothing of
    ``handlers`` (which sit on top of it)."""
    package = pathlib.Path(est.__file__).parent
    for path in sorted((package / "engine").glob("*.py")):
        imports = _imports(path)
        assert {m for m, _ in imports if m.startswith("estimator.handlers")} <= {
            "estimator.handlers.events"
        }, path.name
        classes = {n for m, names in imports if m.startswith("estimator.h") for n in names}
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                kinds = node.args[1]
                names = [
                    getattr(k, "id", getattr(k, "attr", None))
                    for k in getattr(kinds, "elts", [kinds])
                ]
                used = {getattr(getattr(k, "value", None), "id", None) for k in [kinds]}
                assert not (set(names) & classes) and not (used & classes), (path.name, names)
    for path in sorted((package / "hooks").glob("*.py")):
        assert not [m for m, _ in _imports(path) if m.startswith("estimator.handlers")], path
