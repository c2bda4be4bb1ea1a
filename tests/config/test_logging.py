"""What a training prints at INFO: the Estimator's lines, and next to none of its
dependencies' (orbax's absl chatter, JAX's backend search), unless the user asks for them."""

from __future__ import annotations

import logging
import os
import re
import sys

import forkserver
import pytest

from estimator.config import platform


def _train_at_info(style: str, queue) -> None:
    """In a fresh process: 1,000 steps of a tiny model, a checkpoint every 100 steps, one
    evaluation, with INFO turned on the way a user would after ``import estimator``; puts
    what the process printed to stderr and the names of the loggers of the records made."""
    import tempfile

    import numpy as np
    import optax

    capture = tempfile.TemporaryFile(mode="w+")
    os.dup2(capture.fileno(), 2)  # all the process prints to stderr, whoever's handler
    names = []
    make_record = logging.getLogRecordFactory()

    def noting_record(name, *args, **kwargs):
        names.append(name)  # a record is made once a logger's level lets it through
        return make_record(name, *args, **kwargs)

    logging.setLogRecordFactory(noting_record)
    import estimator as est

    def model_fn(features, labels, mode):
        logits = est.layers.dense(features["x"], 1)[:, 0]
        loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
        accuracy = est.metrics.accuracy(labels, (logits > 0).astype(np.float32))
        return est.EstimatorSpec(
            mode,
            loss=loss,
            predictions={"logits": logits},
            train_op=optax.sgd(0.1),
            eval_metric_ops={"accuracy": accuracy},
        )

    def main(_=None):
        x = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
        y = (x[:, 0] > 0).astype(np.float32)
        config = est.RunConfig(save_checkpoints_steps=100, tf_random_seed=0)
        model = est.Estimator(model_fn, model_dir=tempfile.mkdtemp(), config=config)
        model.train(
            est.inputs.numpy_input_fn({"x": x}, y, batch_size=16, num_epochs=None, shuffle=True),
            steps=1000,
        )
        model.evaluate(est.inputs.numpy_input_fn({"x": x}, y, batch_size=64, shuffle=False))

    if style == "basicConfig":
        logging.basicConfig(level=logging.INFO)
        main()
    else:  # a TF 1 program: tf.logging at INFO, main run by tf.app.run (absl's handler)
        import estimator.compat.v1 as tf

        tf.logging.set_verbosity(tf.logging.INFO)
        try:
            tf.app.run(main, argv=["program"])
        except SystemExit:
            pass
    sys.stderr.flush()
    capture.seek(0)
    queue.put((capture.read().splitlines(), names))


@pytest.mark.slow
@pytest.mark.parametrize("style", ["basicConfig", "compat"])
def test_training_at_info_shows_the_estimators_lines_and_few_others(style):
    """``logging.basicConfig(level=INFO)`` after ``import estimator``, or a TF 1 program's
    ``tf.logging.set_verbosity(INFO)`` and ``tf.app.run``: a 1,000-step training with a
    checkpoint every 100 steps prints TF's loss/step lines, steps/sec, the checkpoint saves
    and the evaluation's results, and at most 10 lines of other loggers (orbax's absl lines
    alone were a dozen a save; after ``import estimator``, ``basicConfig`` printed
    nothing at all)."""
    ctx = forkserver.context()
    queue = ctx.Queue()
    child = ctx.Process(target=_train_at_info, args=(style, queue))
    child.start()
    lines, names = queue.get(timeout=300)
    child.join(60)
    assert child.exitcode == 0
    ours = [n for n in names if n == "estimator" or n.startswith("estimator.")]
    assert len(names) - len(ours) <= 10, sorted(set(names))
    assert len(lines) - len(ours) <= 10, "\n".join(lines)  # one line a record of ours
    # log_step_count_steps=100: the loss at steps 0, 100, ..., 900 (TF's format), and the
    # rate between each two of them.
    assert sum(bool(re.search(r"loss = [0-9.]+, step = \d+", line)) for line in lines) == 10
    assert sum("global_step/sec: " in line for line in lines) >= 5
    saves = [line for line in lines if "Saving checkpoints for " in line]
    assert len(saves) == 11  # steps 0, 100, ..., 1000
    assert any("Saving dict for global step 1000: accuracy = " in line for line in lines)


def test_dependency_loggers_are_quieted_unless_their_level_was_set(monkeypatch):
    """A dependency logger without a level of its own goes to WARNING; one whose level
    the user set (higher or lower) keeps it, and a second call changes nothing."""
    names = ("test_logging.unset", "test_logging.chatty", "test_logging.silent")
    monkeypatch.setattr(platform, "DEPENDENCY_LOGGERS", names)
    unset, chatty, silent = (logging.getLogger(n) for n in names)
    for logger, level in ((unset, logging.NOTSET), (chatty, logging.INFO), (silent, 50)):
        monkeypatch.setattr(logger, "level", level)
    assert platform.quiet_dependency_logs() == ["test_logging.unset"]
    assert (unset.level, chatty.level, silent.level) == (logging.WARNING, logging.INFO, 50)
    assert platform.quiet_dependency_logs() == []


def test_tf_logging_prints_each_record_once_whoever_configures_the_root_logger(capsys):
    import estimator.compat.v1 as tf

    root = logging.getLogger()
    saved = root.handlers[:]
    estimator_logger = logging.getLogger("estimator")
    saved_level = estimator_logger.level
    try:
        root.handlers = []
        tf.logging.set_verbosity(tf.logging.INFO)
        estimator_logger.info("alone")  # nothing configured: tf.logging's handler prints
        assert capsys.readouterr().err.count("alone") == 1
        root.addHandler(logging.StreamHandler(sys.stderr))  # basicConfig, or absl's run
        estimator_logger.info("configured")  # printed by the root's handler only
        assert capsys.readouterr().err.count("configured") == 1
    finally:
        root.handlers = saved
        estimator_logger.setLevel(saved_level)
        for logger in (estimator_logger, logging.getLogger("tensorflow")):
            logger.handlers = [h for h in logger.handlers if type(h).__name__ != "_UntilConfigured"]
