"""Writing checkpoints (what TF's ``Saver`` does): an orbax ``CheckpointManager`` per
``model_dir``, the metadata with every array's CRC32C, retention, and publication of staged
checkpoints to storage URLs. The format and how checkpoints are read and checked:
``estimator.checkpoint``, which re-exports :class:`Checkpointer`.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import datetime
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as ocm

from estimator.checkpoint import checksums, tree_form
from estimator.checkpoint.paths import (
    STEP_DIR,
    STEP_PREFIX,
    checkpoint_step,
    complete_steps,
    step_dir,
)
from estimator.io import fs, staging

#: The metadata's format: 2 records checksums (format 1, before them, is read unchecked).
FORMAT = 2


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


class _UntilPublished:
    """Retention for a staged ``model_dir``: ``policy``'s, and a checkpoint stays on the
    local disk until the publisher has uploaded it.

    Without it orbax deletes the staging directory's old steps at a later save's end, also
    those the publisher, which runs behind when uploads are slow, is still uploading or has
    yet to upload: the upload then fails, or uploads a partial tree that the marker written
    last declares complete. ``kept`` is what ``policy`` alone keeps (as of the last
    decision): the published checkpoints to keep.
    """

    def __init__(self, policy, publisher: staging.Publisher):
        self.policy = policy
        self.publisher = publisher
        self.kept: set[int] | None = None

    def should_preserve(self, checkpoints, *, context) -> Sequence[bool]:
        keep = self.policy.should_preserve(checkpoints, context=context)
        self.kept = {info.step for info, k in zip(checkpoints, keep, strict=True) if k}
        waiting = self.publisher.unpublished()
        return [
            k or f"{STEP_PREFIX}_{info.step}" in waiting
            for info, k in zip(checkpoints, keep, strict=True)
        ]


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


class Checkpointer:
    """Writes and reads the checkpoints under one ``model_dir`` (what TF's ``Saver`` does).

    Args:
      model_dir: the directory: a local path or a URL (``gs://`` written by orbax itself;
        other protocols staged locally and published, see the module docstring).
      keep_checkpoint_max: newest checkpoints to keep; 0 or None keeps all.
      keep_checkpoint_every_n_hours: also keep one checkpoint per this many hours.
      async_save: write in a background thread (training goes on); ``wait()`` joins it
        (and, for a staged URL, the publication).
      sparse_candidates: ``sparse_candidates() -> frozenset``: the tables ``model_fn``
        looks up under a ``train_op`` that may update them row by row (the candidates of
        ``estimator.engine.sparse``'s plan), recorded in the metadata so that a resumed
        training plans them without an init run.
      sparse_plans: ``sparse_plans() -> {input signature's digest: {table: ids per
        step}}``: the sparse plans made so far (``estimator.engine.row_plan``), recorded in
        the metadata so that a resumed training's step is traced with them at once.

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
        sparse_candidates: Callable[[], frozenset] | None = None,
        sparse_plans: Callable[[], dict] | None = None,
    ) -> None:
        self.model_dir = fs.as_str(model_dir)
        self._sparse_candidates = sparse_candidates
        self._sparse_plans = sparse_plans
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
        self._retention: _UntilPublished | None = None
        if self._publisher is not None:
            self._retention = _UntilPublished(ocm.AnyPreservationPolicy(policies), self._publisher)
        options = ocp.CheckpointManagerOptions(
            step_prefix=STEP_PREFIX,
            create=True,
            enable_async_checkpointing=async_save,
            preservation_policy=self._retention or ocm.AnyPreservationPolicy(policies),
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
        CRC32C is computed first and recorded in the metadata (``estimator.checkpoint.checksums``;
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
        if opt_state is not None and not jax.tree.leaves(opt_state):
            # A state without arrays (optax.sgd's) is not written (orbax refuses an empty
            # item): the metadata describes it, and the restore gives it back empty.
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
        if with_opt_state and state.opt_state is not None:
            # Its structure: a resumed run's train step is traced without model_fn's init run.
            meta["opt_state"] = tree_form.describe(state.opt_state)
        if self._sparse_candidates is not None:
            meta["sparse_candidates"] = sorted(self._sparse_candidates())
        if self._sparse_plans is not None:
            meta["sparse_plans"] = {k: dict(v) for k, v in sorted(self._sparse_plans().items())}
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
        kept = self._retention.kept if self._retention is not None else None
        keep = set(self._manager.all_steps() if kept is None else kept)
        complete = complete_steps(self.model_dir)
        if self._keep is None:
            return
        keep.update(complete[-self._keep :])
        for name in fs.listdir(self.model_dir):
            match = STEP_DIR.match(name)
            if match and int(match.group(1)) < newest and int(match.group(1)) not in keep:
                fs.rmtree(fs.join(self.model_dir, name), first=(staging.COMMIT_MARKER,))

    def reload(self) -> None:
        """Re-reads which checkpoints exist in ``model_dir`` (they may have changed), once
        this writer's save in progress is complete.

        The listing is read after the write: a step being written is not yet in
        ``model_dir``, and dropping it from the list would let the next :meth:`save` of
        that step write it again, or not, depending on the write's timing. In a job of
        several processes that timing differs per process, so one process would start the
        (collective) save and the others not: the job hung (``train_and_evaluate`` with
        ``EvalSpec(every_n_steps=N)`` and exporters, at a step the ``CheckpointSaverHook``
        had just saved). After orbax's wait every process sees the step complete (its
        finalization ends with a barrier of all processes), so all skip it alike.

        Raises:
          The error of the save in progress, if it failed.
        """
        self._manager.wait_until_finished()
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
