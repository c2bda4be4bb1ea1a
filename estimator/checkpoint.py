"""Checkpoints of an Estimator's train state, written with orbax-checkpoint.

A checkpoint is the directory ``<model_dir>/model.ckpt_<global_step>`` written by an orbax
``CheckpointManager`` (atomically: orbax writes to a temporary directory and renames it
when complete, so a process killed mid-save leaves the previous checkpoint as the latest).
It holds three items:

* ``variables`` — ``{"trainable": {name: array}, "non_trainable": {name: array}}``;
* ``opt_state`` — the optimizer state pytree (absent when saved without one);
* ``meta`` — JSON: ``global_step``, ``variables`` (name -> shape, dtype, trainable) and
  the jax version, enough to list or read variables without the model code.

TF names checkpoints ``model.ckpt-<step>``; orbax's step naming needs an underscore.
Retention follows ``RunConfig``: the newest ``keep_checkpoint_max`` (0/None keeps all),
plus one every ``keep_checkpoint_every_n_hours`` as TF's ``Saver`` (timed from when the
writer was created). The newest checkpoint is never deleted.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import json
import logging
import os
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as ocm

from estimator.io.paths import local_path

logger = logging.getLogger("estimator")

__all__ = ["Checkpointer", "latest_checkpoint", "list_variables", "load_variable"]

STEP_PREFIX = "model.ckpt"
_STEP_DIR = re.compile(r"^model\.ckpt_(\d+)$")


class _KeepEveryNHours:
    """TF ``Saver``'s ``keep_checkpoint_every_n_hours`` as an orbax preservation policy."""

    def __init__(self, hours: float):
        self.interval = datetime.timedelta(hours=hours)
        self.start = datetime.datetime.now(datetime.UTC)

    def should_preserve(self, checkpoints, *, context) -> Sequence[bool]:
        del context
        last = self.start
        result = []
        for info in checkpoints:
            when = info.time if info.time.tzinfo else info.time.replace(tzinfo=datetime.UTC)
            keep = when - last >= self.interval
            if keep:
                last = when
            result.append(keep)
        return result


def step_dir(model_dir: str, step: int) -> str:
    """The path of the checkpoint of ``step`` under ``model_dir``."""
    return os.path.join(os.fspath(model_dir), f"{STEP_PREFIX}_{int(step)}")


def checkpoint_step(path: str) -> int:
    """The global step of a checkpoint path (``.../model.ckpt_120`` -> 120).

    Raises:
      ValueError: when ``path`` is not a checkpoint directory name.
    """
    match = _STEP_DIR.match(os.path.basename(os.path.normpath(os.fspath(path))))
    if not match:
        raise ValueError(
            f"{path} is not a checkpoint: expected a directory named {STEP_PREFIX}_<step> "
            "written by an Estimator (see Estimator.latest_checkpoint())."
        )
    return int(match.group(1))


def latest_checkpoint(model_dir) -> str | None:
    """The newest complete checkpoint under ``model_dir``, or None
    (``tf.train.latest_checkpoint``). Incomplete (interrupted) saves are ignored."""
    model_dir = os.fspath(model_dir)
    if not os.path.isdir(model_dir):
        return None
    steps = []
    for name in os.listdir(model_dir):
        match = _STEP_DIR.match(name)
        full = os.path.join(model_dir, name)
        if match and os.path.isfile(os.path.join(full, "meta", "metadata")):
            # orbax finalises the step directory by renaming it; a directory with this name
            # is complete. ``meta/metadata`` is the last item we need to read it.
            steps.append(int(match.group(1)))
    return step_dir(model_dir, max(steps)) if steps else None


_LOCAL = contextvars.ContextVar("checkpoint_process_local", default=False)


@contextlib.contextmanager
def process_local() -> Iterator[None]:
    """Checkpoint reads (and export saves) inside run on this process alone.

    In a multi-process job orbax synchronises every process on each read and write; an
    export, which the chief makes alone, must not wait for the others.
    """
    token = _LOCAL.set(True)
    try:
        yield
    finally:
        _LOCAL.reset(token)


def multiprocessing_options() -> ocp.options.MultiprocessingOptions:
    """orbax's options: every process together, or (:func:`process_local`) this one."""
    if _LOCAL.get() and jax.process_count() > 1:
        me = jax.process_index()
        return ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me})
    return ocp.options.MultiprocessingOptions()


def _pytree_checkpointer() -> ocp.Checkpointer:
    options = multiprocessing_options()
    handler = ocp.PyTreeCheckpointHandler(multiprocessing_options=options)
    return ocp.Checkpointer(handler, multiprocessing_options=options)


def _meta_path(path: str) -> str:
    return os.path.join(os.path.abspath(path), "meta")


# What a damaged file gives when orbax parses it: bad UTF-8 or JSON (both ValueErrors).
_DAMAGE = (UnicodeDecodeError, json.JSONDecodeError)


def _corrupt(path: str, item: str, err: BaseException) -> ValueError:
    """The error for a checkpoint whose ``item`` cannot be read."""
    return ValueError(
        f"The checkpoint {path} is corrupt: {os.path.join(path, item)} cannot be read "
        f"({type(err).__name__}: {err}). Delete {path} to go back to the previous checkpoint "
        "(training resumes from the latest complete one), or restore it from a copy."
    )


def read_meta(path: str) -> dict:
    """The JSON metadata of a checkpoint (global step and variable specs).

    Raises:
      ValueError: if the metadata file is damaged (names the file and the way back).
    """
    try:
        options = multiprocessing_options()
        restored = ocp.Checkpointer(
            ocp.JsonCheckpointHandler(multiprocessing_options=options),
            multiprocessing_options=options,
        ).restore(_meta_path(path))
    except _DAMAGE as err:
        raise _corrupt(path, os.path.join("meta", "metadata"), err) from None
    if (
        not isinstance(restored, dict)
        or not isinstance(restored.get("global_step"), int)
        or not isinstance(restored.get("variables"), dict)
    ):
        raise _corrupt(
            path,
            os.path.join("meta", "metadata"),
            ValueError("expected an object with global_step and variables"),
        )
    return dict(restored)


def list_variables(path: str) -> list[tuple[str, list[int]]]:
    """``[(name, shape)]`` of every variable in a checkpoint, sorted, with ``global_step``
    (``tf.train.list_variables``); read from metadata, without the model code."""
    meta = read_meta(path)
    out = [(name, list(spec["shape"])) for name, spec in meta["variables"].items()]
    out.append(("global_step", []))
    return sorted(out)


def load_variable(path: str, name: str) -> np.ndarray:
    """The value of one variable in a checkpoint (``tf.train.load_variable``).

    Raises:
      ValueError: if the checkpoint has no such variable (lists the names it has).
    """
    meta = read_meta(path)
    if name == "global_step":
        return np.asarray(meta["global_step"], np.int64)
    if name not in meta["variables"]:
        raise ValueError(
            f"Variable {name} not found in checkpoint {path}. It has: "
            f"{', '.join(sorted(meta['variables']))}, global_step."
        )
    group = "trainable" if meta["variables"][name]["trainable"] else "non_trainable"
    spec = meta["variables"][name]
    target = {group: {name: jax.ShapeDtypeStruct(tuple(spec["shape"]), np.dtype(spec["dtype"]))}}
    restored = ocp.PyTreeCheckpointer().restore(
        os.path.join(os.path.abspath(path), "variables"),
        args=ocp.args.PyTreeRestore(
            item=target,
            restore_args=jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), target),
            partial_restore=True,
        ),
    )
    return np.asarray(restored[group][name])


def variable_specs(trainable: dict, non_trainable: dict) -> dict[str, dict[str, Any]]:
    """``{name: {"shape", "dtype", "trainable"}}`` of variable dicts (arrays or abstract)."""
    specs = {}
    for group, values in ((True, trainable), (False, non_trainable)):
        for name, value in values.items():
            specs[name] = {
                "shape": [int(d) for d in np.shape(value)],
                "dtype": np.dtype(value.dtype).name,
                "trainable": group,
            }
    return specs


def describe_mismatch(path: str, model: dict, saved: dict) -> str | None:
    """A readable list of the differences between the model's and a checkpoint's
    variables, or None when every model variable is in the checkpoint with its shape and
    dtype. Variables only in the checkpoint are allowed (TF's ``Saver`` restores the
    graph's variables and ignores others) and listed when there is another problem."""
    missing = sorted(set(model) - set(saved))
    extra = sorted(set(saved) - set(model))
    lines = [f"  in the model, not in the checkpoint: {n} {model[n]['shape']}" for n in missing]
    for name in sorted(set(model) & set(saved)):
        m, s = model[name], saved[name]
        for key in ("shape", "dtype", "trainable"):
            if m[key] != s[key]:
                lines.append(f"  {key} differs for {name}: model {m[key]}, checkpoint {s[key]}")
    if not lines:
        return None
    lines += [f"  in the checkpoint, not in the model: {n} {saved[n]['shape']}" for n in extra]
    return (
        f"The checkpoint {path} does not match the model's variables:\n"
        + "\n".join(lines)
        + "\nThe model_fn changed since this checkpoint was written. Train in a new model_dir, "
        "or start the new model from this one with warm_start_from."
    )


class Checkpointer:
    """Writes and reads the checkpoints under one ``model_dir`` (what TF's ``Saver`` does).

    Args:
      model_dir: the directory.
      keep_checkpoint_max: newest checkpoints to keep; 0 or None keeps all.
      keep_checkpoint_every_n_hours: also keep one checkpoint per this many hours.
      async_save: write in a background thread (training goes on); ``wait()`` joins it.
    """

    def __init__(
        self,
        model_dir,
        keep_checkpoint_max: int | None = 5,
        keep_checkpoint_every_n_hours: float | None = 10000,
        *,
        async_save: bool = True,
    ) -> None:
        self.model_dir = os.fspath(model_dir)
        policies: list[Any] = [ocm.LatestN(n=keep_checkpoint_max or None)]
        if keep_checkpoint_every_n_hours:
            policies.append(_KeepEveryNHours(keep_checkpoint_every_n_hours))
        options = ocp.CheckpointManagerOptions(
            step_prefix=STEP_PREFIX,
            create=True,
            enable_async_checkpointing=async_save,
            preservation_policy=ocm.AnyPreservationPolicy(policies),
        )
        self._manager = ocp.CheckpointManager(
            os.path.abspath(self.model_dir),
            options=options,
            item_names=("variables", "opt_state", "meta"),
        )

    def save(self, global_step: int, state, *, with_opt_state: bool = True) -> str:
        """Starts saving ``state`` (a ``TrainState``) as the checkpoint of ``global_step``.

        Device values are copied to the host before this returns, so the caller may
        donate or overwrite them; files are written in the background.

        Returns:
          The checkpoint's path (complete after :meth:`wait`).
        """
        if int(global_step) in self._manager.all_steps():
            return step_dir(self.model_dir, global_step)  # the same state is on disk already
        meta = {
            "global_step": int(global_step),
            "variables": variable_specs(state.trainable, state.non_trainable),
            "jax_version": jax.__version__,
            "time": time.time(),
        }
        items = {
            "variables": ocp.args.StandardSave(
                {"trainable": state.trainable, "non_trainable": state.non_trainable}
            ),
            "meta": ocp.args.JsonSave(meta),
        }
        if with_opt_state and state.opt_state is not None:
            items["opt_state"] = ocp.args.StandardSave(state.opt_state)
        self._manager.save(int(global_step), args=ocp.args.Composite(**items), force=True)
        return step_dir(self.model_dir, global_step)

    def reload(self) -> None:
        """Re-reads which checkpoints exist in ``model_dir`` (they may have changed)."""
        self._manager.reload()

    def wait(self) -> None:
        """Blocks until every started save is complete on disk."""
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.close()


def _sharding(spec):
    """Where a restored array goes: ``spec``'s sharding, else this process's first device
    (never the sharding it was saved with, which may name devices this process lacks)."""
    default = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    return getattr(spec, "sharding", None) or default


def _restore_args(abstract):
    def one(spec):
        return ocp.ArrayRestoreArgs(
            sharding=_sharding(spec), global_shape=spec.shape, dtype=spec.dtype
        )

    return jax.tree.map(one, abstract)


def restore(path: str, abstract_state, *, with_opt_state: bool) -> tuple[dict, dict, Any]:
    """Reads ``(trainable, non_trainable, opt_state)`` from a checkpoint.

    Args:
      path: a checkpoint directory.
      abstract_state: a ``TrainState`` of ``jax.ShapeDtypeStruct`` (with shardings when the
        state is distributed): the structure to restore into.
      with_opt_state: also read the optimizer state (training); otherwise it is None.

    Raises:
      ValueError: when the checkpoint's variables differ from the model's, or its optimizer
        state from ``train_op``'s, listing the differences.
    """
    meta = read_meta(path)
    model_specs = variable_specs(abstract_state.trainable, abstract_state.non_trainable)
    problem = describe_mismatch(path, model_specs, meta["variables"])
    if problem:
        raise ValueError(problem)
    # Empty groups are left out: orbax cannot match an empty dict in a partial restore.
    target = {
        group: dict(values)
        for group, values in (
            ("trainable", abstract_state.trainable),
            ("non_trainable", abstract_state.non_trainable),
        )
        if values
    }
    restored = {}
    if target:
        try:
            restored = _pytree_checkpointer().restore(
                os.path.join(os.path.abspath(path), "variables"),
                args=ocp.args.PyTreeRestore(
                    item=target, restore_args=_restore_args(target), partial_restore=True
                ),
            )
        except _DAMAGE as err:
            raise _corrupt(path, "variables", err) from None
    opt_state = None
    if with_opt_state:
        opt_path = os.path.join(os.path.abspath(path), "opt_state")
        if not os.path.isdir(opt_path):
            raise ValueError(
                f"The checkpoint {path} has no optimizer state; it cannot resume training. "
                "Warm-start a new model_dir from it instead (warm_start_from=...)."
            )
        try:
            target = jax.tree.map(
                lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=_sharding(s)),
                abstract_state.opt_state,
            )
            opt_state = ocp.StandardCheckpointer().restore(opt_path, target)
        except _DAMAGE as err:
            raise _corrupt(path, "opt_state", err) from None
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(
                f"The optimizer state in {path} does not match train_op's state (was the "
                f"optimizer changed?): {err}. Train in a new model_dir, or warm-start from "
                "this checkpoint (which reads variables only)."
            ) from err
    return restored.get("trainable", {}), restored.get("non_trainable", {}), opt_state


def resolve(checkpoint_path, model_dir: str, what: str) -> str | None:
    """The checkpoint ``evaluate``/``predict``/export use: ``checkpoint_path`` (a
    checkpoint, or a directory of them: its latest), else the latest in ``model_dir``,
    else None (logged: fresh variables are used, as TF).

    Raises:
      ValueError: "Could not find trained model at ..." for a path without a checkpoint.
    """
    if checkpoint_path:
        checkpoint_path = local_path(checkpoint_path, "checkpoint_path")
        if os.path.isdir(checkpoint_path) and not _STEP_DIR.match(
            os.path.basename(os.path.normpath(checkpoint_path))
        ):
            latest = latest_checkpoint(checkpoint_path)
            if latest is None:
                raise ValueError(f"Could not find trained model at {checkpoint_path}.")
            return latest
        if not os.path.isdir(checkpoint_path):
            raise ValueError(f"Could not find trained model at {checkpoint_path}.")
        return checkpoint_path
    latest = latest_checkpoint(model_dir)
    if not latest:
        logger.info(
            "Could not find trained model in model_dir: %s, running initialization to %s.",
            model_dir,
            what,
        )
    return latest
