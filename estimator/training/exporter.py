"""Exporters: which evaluated models ``train_and_evaluate`` exports (``tf.estimator.Exporter``).

``EvalSpec(exporters=...)`` calls each exporter after every evaluation with the checkpoint
that was evaluated and its results; the exporter decides whether to write an export with
``Estimator.export_saved_model`` into ``model_dir/export/<name>/<unix seconds>``::

    exporter = est.BestExporter(
        serving_input_receiver_fn=est.export.build_raw_serving_input_receiver_fn({"x": x}),
        exports_to_keep=3)
    eval_spec = est.EvalSpec(eval_input_fn, exporters=[exporter], throttle_secs=0)

Semantics follow TF 2.15 (``tensorflow_estimator/python/estimator/exporter.py``): the same
arguments, defaults and messages; ``exports_to_keep`` keeps the newest N exports (by their
10-digit directory name). Where TF hurt, this does better:

* :class:`BestExporter` remembers the best result across process restarts. TF 2.15 exports
  unconditionally on the first call after a restart (its ``_has_exported`` flag starts
  False in every process), so a worse model replaces the best one. Here the result of each
  best export is written next to the exports (``best_eval_result.json``) and read back by a
  new exporter, so after a restart only a better model is exported.
* Neither :class:`LatestExporter` nor :class:`BestExporter` exports the same checkpoint twice
  in a row (``train_and_evaluate`` calls exporters again with ``is_the_final_export=True``
  when training ends on an already-evaluated step, so that :class:`FinalExporter` exports).
"""

from __future__ import annotations

import abc
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from estimator.events import read_eval_metrics
from estimator.export._integrity import MANIFEST
from estimator.fn_args import fn_args
from estimator.io import fs

__all__ = ["Exporter", "LatestExporter", "FinalExporter", "BestExporter"]

logger = logging.getLogger("estimator")

LOSS = "loss"  # the metric key of evaluate()'s loss (TF's MetricKeys.LOSS)
BEST_RESULT_FILE = "best_eval_result.json"


class Exporter(abc.ABC):
    """A kind of model export, called after each evaluation (``tf.estimator.Exporter``).

    Subclasses define :attr:`name` (the directory under ``model_dir/export``) and
    :meth:`export`.
    """

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The directory name under ``model_dir/export``; not None nor empty."""

    @abc.abstractmethod
    def export(
        self,
        estimator,
        export_path: str,
        checkpoint_path: str,
        eval_result: dict[str, Any],
        is_the_final_export: bool,
    ) -> bytes | None:
        """Exports the model of ``checkpoint_path``, or skips.

        Args:
          estimator: the ``Estimator``.
          export_path: the directory under which timestamped exports go
            (``model_dir/export/<name>``).
          checkpoint_path: the checkpoint that was evaluated.
          eval_result: what ``Estimator.evaluate`` returned for it.
          is_the_final_export: True for the evaluation at the end of training.

        Returns:
          The export directory (bytes, as ``export_saved_model``), or None when skipped.
        """


def _check_exports_to_keep(exports_to_keep, message: str) -> None:
    if exports_to_keep is not None and exports_to_keep <= 0:
        raise ValueError(message)


class _SavedModelExporter(Exporter):
    """Calls ``Estimator.export_saved_model`` (TF's ``_SavedModelExporter``)."""

    def __init__(
        self,
        name: str,
        serving_input_receiver_fn: Callable,
        assets_extra: Mapping[str, str] | None = None,
        as_text: bool = False,
    ) -> None:
        self._name = name
        self._serving_input_receiver_fn = serving_input_receiver_fn
        self._assets_extra = assets_extra
        self._as_text = as_text

    @property
    def name(self) -> str:
        return self._name

    def export(
        self,
        estimator,
        export_path: str,
        checkpoint_path: str,
        eval_result: dict[str, Any],
        is_the_final_export: bool,
    ) -> bytes | None:
        del eval_result, is_the_final_export
        return estimator.export_saved_model(
            export_path,
            self._serving_input_receiver_fn,
            assets_extra=self._assets_extra,
            as_text=self._as_text,
            checkpoint_path=checkpoint_path,
        )


def _export_versions(export_dir_base: str) -> list[int]:
    """The versions (10-digit directory names, as TF's ``gc``) under ``export_dir_base``."""
    return sorted(
        int(name)
        for name in fs.listdir(export_dir_base)
        if len(name) == 10 and name.isdigit() and fs.isdir(fs.join(export_dir_base, name))
    )


def _garbage_collect_exports(export_dir_base: str, exports_to_keep: int | None) -> None:
    """Deletes all but the ``exports_to_keep`` largest export versions (None: keeps all)."""
    if exports_to_keep is None:
        return
    versions = _export_versions(export_dir_base)
    for version in versions[: max(0, len(versions) - exports_to_keep)]:
        path = fs.join(export_dir_base, str(version))
        try:
            fs.rmtree(path, first=(MANIFEST,))  # a deletion cut short reads as incomplete
        except OSError as err:
            logger.warning("Can not delete %s recursively: %s", path, err)


class _SkipsRepeats:
    """Remembers the last checkpoint exported, so that the same one is not exported again."""

    def _init_repeats(self) -> None:
        self._last_export: tuple[str, str, bytes | None] | None = None

    def _repeat(self, export_path: str, checkpoint_path: str) -> bool:
        last = self._last_export
        return last is not None and last[:2] == (export_path, checkpoint_path)

    def _remember(self, export_path: str, checkpoint_path: str, result) -> None:
        self._last_export = (export_path, checkpoint_path, result)


class _WritesSavedModels(_SkipsRepeats, Exporter):
    """What the public exporters share: their name, the ``_SavedModelExporter`` that writes
    each export, and the memory of the last checkpoint exported."""

    def __init__(
        self,
        name: str,
        serving_input_receiver_fn: Callable,
        assets_extra: Mapping[str, str] | None,
        as_text: bool,
    ) -> None:
        self._saved_model_exporter = _SavedModelExporter(
            name, serving_input_receiver_fn, assets_extra, as_text
        )
        self._init_repeats()

    @property
    def name(self) -> str:
        return self._saved_model_exporter.name

    def _write(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        return self._saved_model_exporter.export(
            estimator, export_path, checkpoint_path, eval_result, is_the_final_export
        )


class LatestExporter(_WritesSavedModels):
    """Exports after every evaluation and keeps the newest ``exports_to_keep``
    (``tf.estimator.LatestExporter``).

    Args:
      name: unique name of this exporter; the export directory under ``model_dir/export``.
      serving_input_receiver_fn: returns an ``estimator.export.ServingInputReceiver``.
      assets_extra: ``{destination relative to assets.extra: source path}``.
      as_text: also write the StableHLO text and an indented manifest.
      exports_to_keep: how many of the newest exports to keep; None keeps all.

    Raises:
      ValueError: "`exports_to_keep`, if provided, must be positive number" (TF's).
    """

    def __init__(
        self,
        name: str,
        serving_input_receiver_fn: Callable,
        assets_extra: Mapping[str, str] | None = None,
        as_text: bool = False,
        exports_to_keep: int | None = 5,
    ) -> None:
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)
        _check_exports_to_keep(
            exports_to_keep,
            f"`exports_to_keep`, if provided, must be positive number; got {exports_to_keep}.",
        )
        self._exports_to_keep = exports_to_keep

    def export(
        self,
        estimator,
        export_path: str,
        checkpoint_path: str,
        eval_result: dict[str, Any],
        is_the_final_export: bool,
    ) -> bytes | None:
        """Exports ``checkpoint_path`` (unless it was the last one exported) and deletes the
        oldest exports beyond ``exports_to_keep``."""
        if self._repeat(export_path, checkpoint_path):
            return self._last_export[2]
        result = self._write(
            estimator, export_path, checkpoint_path, eval_result, is_the_final_export
        )
        self._remember(export_path, checkpoint_path, result)
        _garbage_collect_exports(export_path, self._exports_to_keep)
        return result


class FinalExporter(_WritesSavedModels):
    """Exports once, at the end of training (``tf.estimator.FinalExporter``).

    ``train_and_evaluate`` flags as final the evaluation at the end of training, and (as TF)
    one whose global step reached ``TrainSpec.max_steps``; so unlike TF, a run stopped early
    (early stopping, end of input) or with ``max_steps=None`` still gets its final export.

    Args:
      name: unique name of this exporter; the export directory under ``model_dir/export``.
      serving_input_receiver_fn: returns an ``estimator.export.ServingInputReceiver``.
      assets_extra: ``{destination relative to assets.extra: source path}``.
      as_text: also write the StableHLO text and an indented manifest.
    """

    def __init__(
        self,
        name: str,
        serving_input_receiver_fn: Callable,
        assets_extra: Mapping[str, str] | None = None,
        as_text: bool = False,
    ) -> None:
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)

    def export(
        self,
        estimator,
        export_path: str,
        checkpoint_path: str,
        eval_result: dict[str, Any],
        is_the_final_export: bool,
    ) -> bytes | None:
        """Exports when ``is_the_final_export``; otherwise returns None."""
        if not is_the_final_export:
            return None
        logger.info("Performing the final export in the end of training.")
        return self._write(
            estimator, export_path, checkpoint_path, eval_result, is_the_final_export
        )


def _loss_smaller(best_eval_result: dict, current_eval_result: dict) -> bool:
    """True when ``current_eval_result["loss"]`` is smaller (TF's default ``compare_fn``).

    Raises:
      ValueError: when either result is empty or has no ``loss`` (TF's messages).
    """
    if not best_eval_result or LOSS not in best_eval_result:
        raise ValueError("best_eval_result cannot be empty or no loss is found in it.")
    if not current_eval_result or LOSS not in current_eval_result:
        raise ValueError("current_eval_result cannot be empty or no loss is found in it.")
    return best_eval_result[LOSS] > current_eval_result[LOSS]


def _verify_compare_fn_args(compare_fn: Callable) -> None:
    """TF's check: ``compare_fn`` takes exactly ``best_eval_result, current_eval_result``."""
    args = set(fn_args(compare_fn))
    if "best_eval_result" not in args:
        raise ValueError(f"compare_fn ({compare_fn}) must include best_eval_result argument.")
    if "current_eval_result" not in args:
        raise ValueError(f"compare_fn ({compare_fn}) must include current_eval_result argument.")
    unexpected = sorted(args - {"best_eval_result", "current_eval_result"})
    if unexpected:
        raise ValueError(f"compare_fn ({compare_fn}) has following not expected args: {unexpected}")


def _to_json(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    array = np.asarray(value)
    if array.ndim == 0:
        return array.item()
    return array.tolist()


def _from_json(value):
    return np.asarray(value) if isinstance(value, list) else value


def _read_json(path: str) -> dict | None:
    try:
        return json.loads(fs.read_bytes(path))
    except (OSError, ValueError) as err:
        if fs.exists(path):
            logger.warning("Ignoring unreadable %s: %s", path, err)
        return None


class BestExporter(_WritesSavedModels):
    """Exports a model whenever it is better than every model exported before
    (``tf.estimator.BestExporter``).

    "Better" is ``compare_fn(best_eval_result=..., current_eval_result=...)``; the default
    compares ``loss`` (smaller is better). The first evaluation is always exported. After
    each export the exporter writes the evaluation result of that export to
    ``<export_path>/best_eval_result.json`` (atomically); a new exporter (a new process,
    after a restart) reads it on its first call, so it never exports a model worse than the
    best one already exported. If that file is missing but exports exist (a process killed
    between an export and the write), the best is recovered from the evaluation results
    (``eval_results.jsonl`` of the directory named by ``event_file_pattern``) of the
    global steps of the existing exports.

    Args:
      name: unique name of this exporter; the export directory under ``model_dir/export``.
      serving_input_receiver_fn: returns an ``estimator.export.ServingInputReceiver``
        (required; TF accepts None here and fails at the first export).
      event_file_pattern: TF's pattern of the evaluation event files, relative to
        ``model_dir``; its directory (``eval`` by default, ``eval_<name>`` for a named
        evaluation) is where results are recovered from. None disables that recovery (the
        ``best_eval_result.json`` record is still used).
      compare_fn: ``(best_eval_result, current_eval_result) -> bool``, True when the current
        result is better.
      assets_extra: ``{destination relative to assets.extra: source path}``.
      as_text: also write the StableHLO text and an indented manifest.
      exports_to_keep: how many of the newest (so best) exports to keep; None keeps all.

    Raises:
      ValueError: TF's messages: "`compare_fn` must not be None.", a ``compare_fn`` with
        other arguments, a non-positive ``exports_to_keep``; or no
        ``serving_input_receiver_fn``.
    """

    def __init__(
        self,
        name: str = "best_exporter",
        serving_input_receiver_fn: Callable | None = None,
        event_file_pattern: str | None = "eval/*.tfevents.*",
        compare_fn: Callable[..., bool] = _loss_smaller,
        assets_extra: Mapping[str, str] | None = None,
        as_text: bool = False,
        exports_to_keep: int | None = 5,
    ) -> None:
        if compare_fn is None:
            raise ValueError("`compare_fn` must not be None.")
        _verify_compare_fn_args(compare_fn)
        if serving_input_receiver_fn is None:
            raise ValueError(
                "BestExporter needs serving_input_receiver_fn, a function returning an "
                "estimator.export.ServingInputReceiver; got None. For example: "
                "serving_input_receiver_fn=estimator.export."
                "build_raw_serving_input_receiver_fn({'x': example_x})."
            )
        _check_exports_to_keep(
            exports_to_keep,
            f"`exports_to_keep`, if provided, must be a positive number. Got {exports_to_keep}",
        )
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)
        self._compare_fn = compare_fn
        self._event_file_pattern = event_file_pattern
        self._exports_to_keep = exports_to_keep
        self._export_path: str | None = None
        self._best_eval_result: dict | None = None

    @property
    def best_eval_result(self) -> dict | None:
        """The evaluation result of the best export so far (None before the first)."""
        return self._best_eval_result

    def export(
        self,
        estimator,
        export_path: str,
        checkpoint_path: str,
        eval_result: dict[str, Any] | None,
        is_the_final_export: bool,
    ) -> bytes | None:
        """Exports when ``eval_result`` is better than the best export's (or there is none;
        with ``eval_result=None`` and no best yet, it exports, as TF).

        Returns:
          The export directory (bytes), or None when the model is not better. Asked again
          for the checkpoint it exported last, it returns that export's directory.
        """
        export_path = fs.as_str(export_path)
        if self._export_path != export_path:
            self._export_path = export_path
            self._best_eval_result = self._load_best(estimator, export_path)
        if self._repeat(export_path, checkpoint_path):
            return self._last_export[2]  # this checkpoint is the best export already
        best = self._best_eval_result
        if best is not None and not self._compare_fn(
            best_eval_result=best, current_eval_result=eval_result
        ):
            return None
        logger.info("Performing best model export.")
        result = self._write(
            estimator, export_path, checkpoint_path, eval_result, is_the_final_export
        )
        # TF keeps None as the best when there was no result: the next one exports again.
        self._best_eval_result = None if eval_result is None else dict(eval_result)
        self._remember(export_path, checkpoint_path, result)
        if eval_result is not None:
            self._save_best(export_path, checkpoint_path, eval_result, result)
        _garbage_collect_exports(export_path, self._exports_to_keep)
        return result

    # ----- the record of the best export -------------------------------------------------
    def _save_best(self, export_path, checkpoint_path, eval_result, export_dir) -> None:
        record = {
            "export_dir": None if export_dir is None else os.fsdecode(export_dir),
            "checkpoint_path": None if checkpoint_path is None else os.fspath(checkpoint_path),
            "global_step": _to_json(eval_result.get("global_step")),
            "time": time.time(),
            "eval_result": {k: _to_json(v) for k, v in eval_result.items()},
        }
        path = fs.join(export_path, BEST_RESULT_FILE)
        fs.write_bytes(path, json.dumps(record, indent=1, sort_keys=True).encode())

    def _load_best(self, estimator, export_path: str) -> dict | None:
        """The best exported result in ``export_path`` from an earlier exporter, or None."""
        record = _read_json(fs.join(export_path, BEST_RESULT_FILE))
        candidates = []
        recorded_dir = None
        if record is not None and isinstance(record.get("eval_result"), dict):
            candidates.append({k: _from_json(v) for k, v in record["eval_result"].items()})
            recorded_dir = record.get("export_dir")
        unknown = [
            fs.join(export_path, str(v))
            for v in _export_versions(export_path)
            if recorded_dir is None
            or fs.abspath(fs.join(export_path, str(v))) != fs.abspath(recorded_dir)
        ]
        if unknown and (record is None or self._newer_than_record(unknown, recorded_dir)):
            candidates.extend(self._recover(estimator, unknown))
        best = None
        for candidate in candidates:
            if best is None or self._compare_fn(
                best_eval_result=best, current_eval_result=candidate
            ):
                best = candidate
        if best is not None:
            logger.info("BestExporter %r: best exported result so far: %s", self.name, best)
        elif unknown:
            logger.warning(
                "BestExporter %r: %s holds exports whose evaluation results are unknown (no %s "
                "and no matching results under event_file_pattern=%r); the next model "
                "evaluated will be exported.",
                self.name,
                export_path,
                BEST_RESULT_FILE,
                self._event_file_pattern,
            )
        return best

    @staticmethod
    def _newer_than_record(unknown: list[str], recorded_dir: str | None) -> bool:
        if recorded_dir is None:
            return True
        recorded = fs.basename(recorded_dir)
        return any(fs.basename(p) > recorded for p in unknown)

    def _recover(self, estimator, export_dirs: list[str]) -> list[dict]:
        """Evaluation results of the global steps of ``export_dirs``, from the eval dir."""
        if not self._event_file_pattern:
            return []

        eval_dir = fs.join(estimator.model_dir, os.path.dirname(self._event_file_pattern))
        by_step = read_eval_metrics(eval_dir)
        found = []
        for export_dir in export_dirs:
            manifest = _read_json(fs.join(export_dir, "manifest.json")) or {}
            step = manifest.get("global_step")
            if step is not None and int(step) in by_step:
                metrics = {k: _from_json(v) for k, v in by_step[int(step)].items()}
                found.append({**metrics, "global_step": int(step)})
        return found
