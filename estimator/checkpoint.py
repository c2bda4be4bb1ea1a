"""Checkpoints of an Estimator's train state, written with orbax-checkpoint.

A checkpoint is the directory ``<model_dir>/model.ckpt_<global_step>`` written by an orbax
``CheckpointManager`` (atomically: orbax writes to a temporary directory and renames it
when complete, so a process killed mid-save leaves the previous checkpoint as the latest).
It holds three items:

* ``variables`` — ``{"trainable": {name: array}, "non_trainable": {name: array}}``;
* ``opt_state`` — the optimizer state pytree (absent when saved without one);
* ``meta`` — JSON: ``global_step``, ``variables`` (name -> shape, dtype, trainable), the
  jax version, and a CRC32C checksum of every array in ``variables`` and ``opt_state``
  (``estimator.io.checksums``): enough to list or read variables without the model code.

Every read checks what it reads, as TF's tensor bundles do (``tf.errors.DataLossError``):
the metadata against the directory's step, the arrays against their checksums (orbax and
TensorStore check only their own index files: a flipped bit in an array's bytes loaded
silently as a different model). Damage of any kind raises :class:`DataLossError` naming the
checkpoint, what is wrong and the previous checkpoint; ``RunConfig(restore_fallback=True)``
makes ``train()`` resume from the newest intact checkpoint instead.

``model_dir`` may be a storage URL (``estimator.io.fs``). orbax writes ``gs://`` itself
(through TensorStore; a step directory is complete when it holds orbax's
``commit_success.txt``); for other protocols (``s3://``, ...), which orbax cannot write,
each checkpoint is written to a local staging directory and published to the URL in the
background when complete, ``commit_success.txt`` last (``estimator.io.staging``), and read
through a local copy. Retention applies to the URL too: the newest
``keep_checkpoint_max`` published checkpoints stay, with those the writer's policy keeps.

TF names checkpoints ``model.ckpt-<step>``; orbax's step naming needs an underscore.
Retention follows ``RunConfig``: the newest ``keep_checkpoint_max`` (0/None keeps all),
plus one every ``keep_checkpoint_every_n_hours`` as TF's ``Saver`` (timed from when the
writer was created). The newest checkpoint is never deleted.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import datetime
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as ocm

from estimator.checkpoint_paths import _STEP_DIR as _STEP_DIR
from estimator.checkpoint_paths import STEP_PREFIX as STEP_PREFIX
from estimator.checkpoint_paths import checkpoint_step as checkpoint_step
from estimator.checkpoint_paths import complete_steps as complete_steps
from estimator.checkpoint_paths import latest_checkpoint as latest_checkpoint
from estimator.checkpoint_paths import previous_checkpoint as previous_checkpoint
from estimator.checkpoint_paths import quarantine as quarantine
from estimator.checkpoint_paths import resolve as resolve
from estimator.checkpoint_paths import step_dir as step_dir
from estimator.io import checksums, fs, staging

logger = logging.getLogger("estimator")

__all__ = [
    "Checkpointer",
    "DataLossError",
    "latest_checkpoint",
    "list_variables",
    "load_variable",
]

#: The metadata's format: 2 records checksums (format 1, before them, is read unchecked).
FORMAT = 2


class DataLossError(ValueError):
    """A checkpoint whose files are damaged: unreadable, inconsistent, or whose arrays do
    not match their checksums (TF's ``tf.errors.DataLossError``; a ``ValueError``, as the
    errors for damaged checkpoints were before)."""


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


def _way_back(path: str) -> str:
    previous = previous_checkpoint(path)
    then = (
        f"training then resumes from the previous checkpoint, {previous}"
        if previous
        else "there is no earlier checkpoint: training then starts afresh"
    )
    return (
        f"Delete or move {path} ({then}; RunConfig(restore_fallback=True) does so by "
        "itself), or restore it from a copy."
    )


def _corrupt(path: str, item: str, err: BaseException | str) -> DataLossError:
    """The error for a checkpoint whose ``item`` cannot be read (``err``: the exception) or
    is inconsistent (``err``: what is wrong)."""
    what = (
        f"is inconsistent: {err}"
        if isinstance(err, str)
        else f"cannot be read ({type(err).__name__}: {err})"
    )
    return DataLossError(
        f"The checkpoint {path} is corrupt: {fs.join(path, item)} {what}. {_way_back(path)}"
    )


def _damaged_arrays(path: str, item: str, problems: list[str]) -> DataLossError:
    shown = "\n".join(f"  {p}" for p in problems[:10])
    more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
    return DataLossError(
        f"The checkpoint {path} is damaged: arrays in {fs.join(path, item)} do not "
        f"match the checksums recorded when it was written:\n{shown}{more}\n{_way_back(path)}"
    )


def read_meta(path: str) -> dict:
    """The JSON metadata of a checkpoint (global step and variable specs).

    Raises:
      ValueError: if the metadata file is damaged (names the file and the way back).
    """
    try:
        options = multiprocessing_options()
        with staging.readable(path, ("meta",)) as where:
            restored = ocp.Checkpointer(
                ocp.JsonCheckpointHandler(multiprocessing_options=options),
                multiprocessing_options=options,
            ).restore(fs.join(where, "meta"))
    except Exception as err:  # orbax and the file system raise many types for a damaged item
        raise _corrupt(path, os.path.join("meta", "metadata"), err) from None
    where = os.path.join("meta", "metadata")
    if (
        not isinstance(restored, dict)
        or not isinstance(restored.get("global_step"), int)
        or not isinstance(restored.get("variables"), dict)
    ):
        raise _corrupt(path, where, ValueError("expected an object with global_step and variables"))
    match = _STEP_DIR.match(fs.basename(path))
    if match and int(match.group(1)) != restored["global_step"]:
        raise _corrupt(
            path,
            where,
            f"it says global_step {restored['global_step']}, but the checkpoint's directory "
            f"is step {match.group(1)}",
        )
    if ("checksums" in restored or "format" in restored) and not _valid_checksums(restored):
        raise _corrupt(path, where, "its checksums section is missing or malformed")
    return dict(restored)


def _valid_checksums(meta: dict) -> bool:
    section = meta.get("checksums")
    return (
        meta.get("format") == FORMAT
        and isinstance(section, dict)
        and section.get("algorithm") == checksums.ALGORITHM
        and section.get("piece_bytes") == checksums.PIECE_BYTES
        and isinstance(section.get("arrays"), dict)
    )


def _records(path: str, meta: dict) -> dict | None:
    """The checksum records of a checkpoint; None (logged) for one written before them."""
    if "checksums" not in meta and "format" not in meta:
        logger.warning(
            "The checkpoint %s was written before checkpoints carried checksums: its arrays "
            "are read unchecked.",
            path,
        )
        return None
    return meta["checksums"]["arrays"]


def _verify(path: str, item: str, tree, meta: dict) -> None:
    """Raises :class:`DataLossError` unless every array of ``tree`` matches its checksum."""
    records = _records(path, meta)
    if records is None:
        return
    problems = checksums.verify(tree, records, prefix=item)
    if problems:
        raise _damaged_arrays(path, item, problems)


def list_variables(path: str) -> list[tuple[str, list[int]]]:
    """``[(name, shape)]`` of every variable in a checkpoint, sorted, with ``global_step``
    (``tf.train.list_variables``); read from metadata, without the model code."""
    meta = read_meta(path)
    out = [(name, list(spec["shape"])) for name, spec in meta["variables"].items()]
    out.append(("global_step", []))
    return sorted(out)


def load_variable(path: str, name: str) -> np.ndarray:
    """The value of one variable in a checkpoint (``tf.train.load_variable``), checked
    against its checksum.

    Raises:
      ValueError: if the checkpoint has no such variable (lists the names it has).
      DataLossError: if the checkpoint is damaged.
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
    restored = _read_host(path, "variables", target)
    _verify(path, "variables", restored, meta)
    return np.asarray(restored[group][name])


def _read_host(path: str, item: str, target=None):
    """An item of a checkpoint as NumPy arrays (``target``: the part to read; None: all).

    Raises:
      DataLossError: if the item cannot be read.
    """
    try:
        with staging.readable(path, (item,)) as where:
            directory = fs.join(where, item)
            if target is None:  # all of it, with the structure orbax recorded
                recorded = ocp.StandardCheckpointer().metadata(directory).item_metadata.tree
                target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype), recorded)
            restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), target)
            return ocp.PyTreeCheckpointer().restore(
                directory,
                args=ocp.args.PyTreeRestore(
                    item=target, restore_args=restore_args, partial_restore=True
                ),
            )
    except Exception as err:  # orbax and TensorStore raise many types for a damaged item
        raise _corrupt(path, item, err) from None


def verify_checkpoint(path: str) -> None:
    """Reads a whole checkpoint to the host and checks it (``restore_fallback``).

    Raises:
      DataLossError: if any of it is damaged.
    """
    read_checkpoint(path)


def read_checkpoint(path: str) -> tuple[dict, Any]:
    """Every variable and the optimizer state of a checkpoint, as NumPy arrays, checked
    against their checksums (what warm start reads).

    Returns:
      ``({"trainable": {...}, "non_trainable": {...}}, opt_state or None)``; the optimizer
      state as orbax reads it without a target (NamedTuples as dicts, tuples as lists,
      which name their leaves as the saved state did).

    Raises:
      DataLossError: if the checkpoint is damaged.
    """
    meta = read_meta(path)
    variables = _read_host(path, "variables")
    variables = {
        "trainable": dict(variables.get("trainable", {})),
        "non_trainable": dict(variables.get("non_trainable", {})),
    }
    _verify(path, "variables", variables, meta)
    opt_state = None
    if fs.isdir(fs.join(path, "opt_state")):
        opt_state = _read_host(path, "opt_state")
        _verify(path, "opt_state", opt_state, meta)
    return variables, opt_state


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
      model_dir: the directory: a local path or a URL (``gs://`` written by orbax itself;
        other protocols staged locally and published, see the module docstring).
      keep_checkpoint_max: newest checkpoints to keep; 0 or None keeps all.
      keep_checkpoint_every_n_hours: also keep one checkpoint per this many hours.
      async_save: write in a background thread (training goes on); ``wait()`` joins it
        (and, for a staged URL, the publication).

    Raises:
      ValueError: a staged URL (not local, not gs://) in a job of several processes
        (orbax writes one checkpoint from all of them into one directory).
    """

    def __init__(
        self,
        model_dir,
        keep_checkpoint_max: int | None = 5,
        keep_checkpoint_every_n_hours: float | None = 10000,
        *,
        async_save: bool = True,
    ) -> None:
        self.model_dir = fs.as_str(model_dir)
        self._keep = keep_checkpoint_max or None
        self._publisher: staging.Publisher | None = None
        self._staging: str | None = None
        directory = fs.abspath(self.model_dir)
        if not staging.native(self.model_dir):
            if jax.process_count() > 1:
                raise ValueError(
                    f"model_dir {self.model_dir!r}: orbax cannot write "
                    f"{fs.protocol(self.model_dir)}:// itself, so its checkpoints are staged "
                    "on this machine's disk and uploaded, which a job of several processes "
                    "cannot share. Use a gs:// model_dir or a file system every process mounts."
                )
            self._staging = directory = tempfile.mkdtemp(prefix="jax-estimator-staging-")
            atexit.register(shutil.rmtree, self._staging, True)  # if close() is never called
            self._publisher = staging.Publisher(self._staging, self.model_dir, self._prune)
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
            directory,
            options=options,
            item_names=("variables", "opt_state", "meta"),
        )

    def save(self, global_step: int, state, *, with_opt_state: bool = True) -> str:
        """Starts saving ``state`` (a ``TrainState``) as the checkpoint of ``global_step``.

        Device values are copied to the host before this returns, so the caller may
        donate or overwrite them; files are written in the background. Every array's
        CRC32C is computed first and recorded in the metadata (``estimator.io.checksums``;
        collective in a multi-process job, as the save is).

        Returns:
          The checkpoint's path (complete after :meth:`wait`).
        """
        if int(global_step) in self._manager.all_steps() or (
            self._publisher is not None and int(global_step) in complete_steps(self.model_dir)
        ):
            return step_dir(self.model_dir, global_step)  # the same state is on disk already
        variables = {"trainable": state.trainable, "non_trainable": state.non_trainable}
        opt_state = state.opt_state if with_opt_state else None
        if opt_state is not None and not jax.tree.leaves(opt_state) and fs.is_url(self.model_dir):
            # On object storage a state without arrays (optax.sgd's) is not written: orbax
            # cannot find the directory of an item with no files there. It is restored from
            # train_op's own (equally empty) state.
            opt_state = None
        records = checksums.compute(variables, prefix="variables")
        if opt_state is not None:
            records.update(checksums.compute(opt_state, prefix="opt_state"))
        meta = {
            "format": FORMAT,
            "global_step": int(global_step),
            "variables": variable_specs(state.trainable, state.non_trainable),
            "jax_version": jax.__version__,
            "time": time.time(),
            "checksums": {
                "algorithm": checksums.ALGORITHM,
                "piece_bytes": checksums.PIECE_BYTES,
                "arrays": records,
            },
        }
        items = {
            "variables": ocp.args.StandardSave(variables),
            "meta": ocp.args.JsonSave(meta),
        }
        if opt_state is not None:
            items["opt_state"] = ocp.args.StandardSave(opt_state)
        self._manager.save(int(global_step), args=ocp.args.Composite(**items), force=True)
        if self._publisher is not None:
            name = f"{STEP_PREFIX}_{int(global_step)}"
            self._publisher.submit(name, pending=self._manager.is_saving_in_progress)
        return step_dir(self.model_dir, global_step)

    def _prune(self, published: str) -> None:
        """After a publication: deletes the URL's checkpoints that retention no longer
        keeps (neither among the newest ``keep_checkpoint_max`` complete ones nor kept by
        the writer's policy), older than the one just published."""
        newest = checkpoint_step(published)
        keep = set(self._manager.all_steps())
        complete = complete_steps(self.model_dir)
        if self._keep is None:
            return
        keep.update(complete[-self._keep :])
        for name in fs.listdir(self.model_dir):
            match = _STEP_DIR.match(name)
            if match and int(match.group(1)) < newest and int(match.group(1)) not in keep:
                fs.rmtree(fs.join(self.model_dir, name))

    def reload(self) -> None:
        """Re-reads which checkpoints exist in ``model_dir`` (they may have changed)."""
        self._manager.reload()

    def wait(self) -> None:
        """Blocks until every started save is complete in ``model_dir``.

        Raises:
          The error of a publication that failed (staged URLs).
        """
        self._manager.wait_until_finished()
        if self._publisher is not None:
            self._publisher.wait()

    def close(self) -> None:
        """Completes every started save (and publication), then releases the writer."""
        try:
            self._manager.close()
            if self._publisher is not None:
                self._publisher.close()
        finally:
            if self._staging is not None:
                shutil.rmtree(self._staging, ignore_errors=True)


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
      DataLossError: when the checkpoint is damaged: a file cannot be read, or an array
        does not match its checksum.
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
    items = ("variables", "opt_state") if with_opt_state else ("variables",)
    with staging.readable(path, items) as where:
        return _restore(path, where, abstract_state, target, meta, with_opt_state)


def _restore(path, where, abstract_state, target, meta, with_opt_state):
    """:func:`restore` reading from ``where`` (``path`` itself or a local copy of it)."""
    restored = {}
    if target:
        try:
            restored = _pytree_checkpointer().restore(
                fs.join(where, "variables"),
                args=ocp.args.PyTreeRestore(
                    item=target, restore_args=_restore_args(target), partial_restore=True
                ),
            )
        except Exception as err:  # orbax and TensorStore raise many types for damage
            raise _corrupt(path, "variables", err) from None
        _verify(path, "variables", restored, meta)
    opt_state = None
    if (
        with_opt_state
        and not jax.tree.leaves(abstract_state.opt_state)
        and not fs.isdir(fs.join(where, "opt_state"))
    ):
        return (
            restored.get("trainable", {}),
            restored.get("non_trainable", {}),
            abstract_state.opt_state,  # no arrays: the structure is the value
        )
    if with_opt_state:
        opt_path = fs.join(where, "opt_state")
        if not fs.isdir(opt_path):
            raise ValueError(
                f"The checkpoint {path} has no optimizer state; it cannot resume training. "
                "Warm-start a new model_dir from it instead (warm_start_from=...)."
            )
        target = jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=_sharding(s)),
            abstract_state.opt_state,
        )
        records = _records(path, meta)
        if records is not None:
            difference = _opt_state_difference(target, records)
            if difference:
                raise _optimizer_changed(path, difference)
        try:
            opt_state = ocp.StandardCheckpointer().restore(opt_path, target)
        except Exception as err:  # orbax and TensorStore raise many types for damage
            if records is None and isinstance(err, (ValueError, KeyError, TypeError)):
                raise _optimizer_changed(path, str(err)) from err  # no record to tell
            raise _corrupt(path, "opt_state", err) from None
        _verify(path, "opt_state", opt_state, meta)
    return restored.get("trainable", {}), restored.get("non_trainable", {}), opt_state


def _opt_state_difference(target, records: dict) -> str | None:
    """How ``train_op``'s state differs from the one a checkpoint recorded, or None."""
    model = {
        key: ([int(d) for d in x.shape], np.dtype(x.dtype).name)
        for key, x in checksums.leaves(target, "opt_state")
    }
    saved = {
        key: (r["shape"], r["dtype"]) for key, r in records.items() if key.startswith("opt_state")
    }
    if model == saved:
        return None
    lines = [
        f"{k}: {model[k]} in train_op's state, {saved.get(k)} in the checkpoint"
        for k in sorted(model)
        if model[k] != saved.get(k)
    ]
    lines += [f"{k}: only in the checkpoint" for k in sorted(set(saved) - set(model))]
    return "; ".join(lines[:5]) + ("; ..." if len(lines) > 5 else "")


def _optimizer_changed(path: str, detail: str) -> ValueError:
    return ValueError(
        f"The optimizer state in {path} does not match train_op's state (was the "
        f"optimizer changed?): {detail}. Train in a new model_dir, or warm-start from "
        "this checkpoint (which reads variables only)."
    )
