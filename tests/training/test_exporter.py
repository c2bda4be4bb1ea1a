"""Exporters: TF 2.15's arguments and messages, LatestExporter's garbage collection,
FinalExporter, and BestExporter remembering the best model across restarts."""

from __future__ import annotations

import json
import os

import linear_model
import numpy as np
import pytest
from linear_model import EVAL, TRAIN, X, sgd_reference

import estimator as est
from estimator.events import read_eval_metrics
from estimator.training.exporter import (
    BestExporter,
    Exporter,
    FinalExporter,
    LatestExporter,
    _loss_smaller,
)
from estimator.training.run import EvalSpec, TrainSpec, train_and_evaluate

RECEIVER = est.export.build_raw_serving_input_receiver_fn({"x": X})


def make(model_dir, lr=0.1, **config):
    return linear_model.make(model_dir, params={"lr": lr}, **config)


@pytest.fixture(scope="module")
def trained(trained_estimator):
    """An Estimator with checkpoints at steps 1, 2 and 3."""
    return trained_estimator(steps=3, save_checkpoints_steps=1, log_step_count_steps=None)


def checkpoint(e, step):
    return os.path.join(e.model_dir, f"model.ckpt_{step}")


def versions(path):
    return sorted(n for n in os.listdir(path) if n.isdigit())


def exported_step(export_dir) -> int:
    with open(os.path.join(os.fsdecode(export_dir), "manifest.json")) as f:
        return json.load(f)["global_step"]


# ----- construction ---------------------------------------------------------------------
def test_exporter_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        Exporter()


def test_argument_errors():
    with pytest.raises(ValueError, match="`exports_to_keep`, if provided, must be positive"):
        LatestExporter("latest", RECEIVER, exports_to_keep=0)
    with pytest.raises(ValueError, match="`compare_fn` must not be None."):
        BestExporter(serving_input_receiver_fn=RECEIVER, compare_fn=None)
    with pytest.raises(ValueError, match="must include best_eval_result argument"):
        BestExporter(serving_input_receiver_fn=RECEIVER, compare_fn=lambda current_eval_result: 1)
    with pytest.raises(ValueError, match="must include current_eval_result argument"):
        BestExporter(serving_input_receiver_fn=RECEIVER, compare_fn=lambda best_eval_result: 1)
    with pytest.raises(ValueError, match=r"has following not expected args: \['extra'\]"):
        BestExporter(
            serving_input_receiver_fn=RECEIVER,
            compare_fn=lambda best_eval_result, current_eval_result, extra: 1,
        )
    with pytest.raises(ValueError, match="must be a positive number. Got -1"):
        BestExporter(serving_input_receiver_fn=RECEIVER, exports_to_keep=-1)
    with pytest.raises(ValueError, match="BestExporter needs serving_input_receiver_fn"):
        BestExporter()
    assert BestExporter(serving_input_receiver_fn=RECEIVER).name == "best_exporter"


def test_loss_smaller():
    assert _loss_smaller({"loss": 2.0}, {"loss": 1.0})
    assert not _loss_smaller({"loss": 1.0}, {"loss": 1.0})  # strictly smaller
    with pytest.raises(ValueError, match="best_eval_result cannot be empty or no loss"):
        _loss_smaller({"accuracy": 1.0}, {"loss": 1.0})
    with pytest.raises(ValueError, match="current_eval_result cannot be empty or no loss"):
        _loss_smaller({"loss": 1.0}, {})


# ----- Latest / Final -------------------------------------------------------------------
def test_latest_exporter_keeps_the_newest_and_skips_repeats(trained, tmp_path):
    exporter = LatestExporter("latest", RECEIVER, exports_to_keep=2)
    path = str(tmp_path / "latest")
    results = [
        exporter.export(trained, path, checkpoint(trained, s), {"loss": 0.0}, False)
        for s in (1, 2, 3)
    ]
    kept = versions(path)
    assert len(kept) == 2  # the export of checkpoint 1 was deleted
    assert [os.path.join(path, v).encode() for v in kept] == results[1:]
    assert [exported_step(r) for r in results[1:]] == [2, 3]
    # The same checkpoint again: no new export, the same path back.
    assert exporter.export(trained, path, checkpoint(trained, 3), {}, True) == results[2]
    assert versions(path) == kept


def test_final_exporter_exports_only_the_final_evaluation(trained, tmp_path):
    exporter = FinalExporter("final", RECEIVER)
    path = str(tmp_path / "final")
    assert exporter.export(trained, path, checkpoint(trained, 2), {}, False) is None
    assert not os.path.exists(path)
    result = exporter.export(trained, path, checkpoint(trained, 3), {}, True)
    assert exported_step(result) == 3 and len(versions(path)) == 1


# ----- Best -----------------------------------------------------------------------------
def test_best_exporter_exports_only_improvements(trained, tmp_path):
    exporter = BestExporter(serving_input_receiver_fn=RECEIVER, exports_to_keep=None)
    path = str(tmp_path / "best")
    calls = [(1, 3.0), (2, 2.0), (3, 2.5)]
    results = [
        exporter.export(trained, path, checkpoint(trained, s), {"loss": v, "global_step": s}, False)
        for s, v in calls
    ]
    # 3.0: the first, exported; 2.0 < 3.0 exported; 2.5 > 2.0 not.
    assert [r is not None for r in results] == [True, True, False]
    assert [exported_step(r) for r in results[:2]] == [1, 2]
    assert exporter.best_eval_result == {"loss": 2.0, "global_step": 2}
    with open(os.path.join(path, "best_eval_result.json")) as f:
        record = json.load(f)
    assert record["eval_result"] == {"loss": 2.0, "global_step": 2}
    assert record["export_dir"] == os.fsdecode(results[1])
    assert record["checkpoint_path"] == checkpoint(trained, 2)
    # Asked again for the checkpoint it exported last (train_and_evaluate's final call):
    # no new export, that export's path back.
    again = exporter.export(trained, path, checkpoint(trained, 2), {"loss": 2.0}, True)
    assert again == results[1] and len(versions(path)) == 2


def test_best_exporter_without_an_eval_result_exports_as_tf(trained, tmp_path):
    # TF 2.15's BestExporter.export: no best yet -> export, and the best stays None, so the
    # next call exports too (it compares only against a best result).
    exporter = BestExporter(serving_input_receiver_fn=RECEIVER, exports_to_keep=None)
    path = str(tmp_path / "best")
    first = exporter.export(trained, path, checkpoint(trained, 1), None, False)
    assert exported_step(first) == 1 and exporter.best_eval_result is None
    second = exporter.export(trained, path, checkpoint(trained, 2), {"loss": 1.0}, False)
    assert exported_step(second) == 2 and exporter.best_eval_result == {"loss": 1.0}


def test_best_exporter_keeps_exports_to_keep(trained, tmp_path):
    exporter = BestExporter(serving_input_receiver_fn=RECEIVER, exports_to_keep=1)
    path = str(tmp_path / "best")
    for step, loss in [(1, 3.0), (2, 2.0)]:
        exporter.export(trained, path, checkpoint(trained, step), {"loss": loss}, False)
    (kept,) = versions(path)
    assert exported_step(os.path.join(path, kept)) == 2  # the newest export is the best one


def test_best_exporter_remembers_the_best_across_a_restart(trained, tmp_path):
    path = str(tmp_path / "best")
    first = BestExporter(serving_input_receiver_fn=RECEIVER)
    assert first.export(trained, path, checkpoint(trained, 1), {"loss": 1.0}, False)
    # A new process: a new Estimator and exporter on the same directories. TF 2.15 exports
    # its first evaluation unconditionally (``not self._has_exported``), even if worse.
    again = make(trained.model_dir)
    second = BestExporter(serving_input_receiver_fn=RECEIVER)
    assert second.export(again, path, checkpoint(trained, 2), {"loss": 1.5}, False) is None
    assert second.best_eval_result == {"loss": 1.0}
    assert len(versions(path)) == 1
    assert second.export(again, path, checkpoint(trained, 3), {"loss": 0.5}, False)
    assert len(versions(path)) == 2


def test_best_exporter_recovers_from_eval_results_without_its_record(tmp_path):
    # Killed between an export and writing best_eval_result.json: the best is recovered
    # from the evaluation results of the exported checkpoint's global step.
    e = make(tmp_path / "m", save_checkpoints_steps=2)
    e.train(TRAIN, max_steps=4)
    at_2 = e.evaluate(EVAL, checkpoint_path=checkpoint(e, 2))  # written to eval/
    path = os.path.join(e.model_dir, "export", "best")
    BestExporter(serving_input_receiver_fn=RECEIVER).export(e, path, checkpoint(e, 2), at_2, False)
    os.remove(os.path.join(path, "best_eval_result.json"))
    restarted = BestExporter(serving_input_receiver_fn=RECEIVER)
    worse = dict(at_2, loss=at_2["loss"] + 1.0)
    assert restarted.export(e, path, checkpoint(e, 4), worse, False) is None
    assert restarted.best_eval_result["loss"] == pytest.approx(at_2["loss"])
    # With event_file_pattern=None there is nothing to recover from: it exports.
    blind = BestExporter(serving_input_receiver_fn=RECEIVER, event_file_pattern=None)
    assert blind.export(e, path, checkpoint(e, 4), worse, False) is not None


def test_train_and_evaluate_restart_never_exports_a_worse_model(tmp_path):
    """The TF pain: after a restart, BestExporter exported whatever came first."""
    model_dir = tmp_path / "m"

    def spec():  # a new BestExporter each time, as in a new process
        best = BestExporter(serving_input_receiver_fn=RECEIVER, exports_to_keep=None)
        return EvalSpec(EVAL, steps=None, exporters=best, start_delay_secs=0, throttle_secs=0)

    e = make(model_dir, save_checkpoints_steps=2)
    metrics, exports = train_and_evaluate(e, TrainSpec(TRAIN, max_steps=4), spec())
    # Evaluated at 2 and 4 with decreasing loss (SGD, lr 0.1): both exported.
    export_dir = os.path.join(e.model_dir, "export", "best_exporter")
    assert [exported_step(os.path.join(export_dir, v)) for v in versions(export_dir)] == [2, 4]
    best_loss = metrics["loss"]
    # Restart in a new process with a learning rate that makes the model worse: lr 1.0
    # diverges on this data (the input restarts at its first batch).
    w4, b4, loss4 = sgd_reference(steps=4)
    *_, loss6 = sgd_reference(w4, b4, lr=1.0, steps=2)
    *_, loss8 = sgd_reference(w4, b4, lr=1.0, steps=4)
    assert loss4 < loss6 < loss8  # 1.52 < 7.88 < 18.17
    restarted = make(model_dir, lr=1.0, save_checkpoints_steps=2)
    metrics, exports = train_and_evaluate(restarted, TrainSpec(TRAIN, max_steps=8), spec())
    assert metrics["global_step"] == 8
    np.testing.assert_allclose([best_loss, metrics["loss"]], [loss4, loss8], rtol=1e-4)
    assert read_eval_metrics(restarted.eval_dir())[6]["loss"] == pytest.approx(loss6, rel=1e-4)
    # TF 2.15.1, same run: exports the step-6 model (its first evaluation after restart).
    assert exports == [None]
    assert [exported_step(os.path.join(export_dir, v)) for v in versions(export_dir)] == [2, 4]
