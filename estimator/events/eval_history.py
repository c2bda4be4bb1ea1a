"""The record of evaluations in an ``eval_dir``: ``evaluate()`` appends its results to
``eval_results.jsonl`` (and as TensorBoard events); early stopping, ``BestExporter`` and
``tf.estimator.experimental.read_eval_metrics`` read them back."""

from __future__ import annotations

import json
import time

import numpy as np

from estimator.events.files import add_text, writer_for
from estimator.io import fs

__all__ = ["EVAL_RESULTS", "read_eval_metrics", "write_eval_results"]

EVAL_RESULTS = "eval_results.jsonl"


def _jsonable(value):
    try:
        return float(value) if np.ndim(value) == 0 else np.asarray(value).tolist()
    except (TypeError, ValueError):
        return str(value)


def write_eval_results(eval_dir: str, results: dict, checkpoint_path: str | None) -> None:
    """Records ``evaluate()``'s results in ``eval_dir``: one JSON line per evaluation in
    ``eval_results.jsonl`` (read back by :func:`read_eval_metrics`, e.g. for early
    stopping and ``BestExporter``), and the scalars as TensorBoard events at their global
    step."""
    fs.makedirs(eval_dir)
    step = int(results["global_step"])
    record = {
        "global_step": step,
        "checkpoint_path": checkpoint_path,
        "time": time.time(),
        "metrics": {k: _jsonable(v) for k, v in results.items()},
    }
    line = json.dumps(record, sort_keys=True) + "\n"
    fs.append_bytes(fs.join(eval_dir, EVAL_RESULTS), line.encode("utf-8"))
    writer = writer_for(eval_dir)
    for key, value in results.items():
        if key == "global_step":
            continue
        if np.ndim(value) == 0:
            writer.add_scalar(key, float(value), step)
        else:
            writer.add_tensor(key, np.asarray(value), step)
    if checkpoint_path:
        add_text(writer, "checkpoint_path", str(checkpoint_path), step)
    writer.flush()


def read_eval_metrics(eval_dir: str) -> dict[int, dict]:
    """Evaluation results written to ``eval_dir``, by global step, in step order
    (``tf.estimator.experimental.read_eval_metrics``): each step's scalar metrics, as TF
    reads them back from the events' simple values (so no ``global_step`` key and no
    arrays). A step evaluated twice keeps its latest results. Missing directory: empty."""
    path = fs.join(eval_dir, EVAL_RESULTS)
    try:
        text = fs.read_bytes(path).decode("utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return {}
    by_step: dict[int, dict] = {}
    for line in text.splitlines():
        line = line.strip()
        if line:
            record = json.loads(line)
            by_step[int(record["global_step"])] = {
                k: v
                for k, v in record["metrics"].items()
                if k != "global_step" and isinstance(v, int | float)
            }
    return dict(sorted(by_step.items()))
