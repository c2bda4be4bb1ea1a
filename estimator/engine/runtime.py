"""``Runtime``: an Estimator's engine — its model, compiled steps, state and checkpoints.

The :class:`~estimator.Estimator` checks arguments as TF does and hands the work to its
runtime (``Estimator.runtime``). The export writer, ``InMemoryEvaluatorHook``,
``train_and_evaluate`` and ``add_metrics`` use the same object; none of them reaches into
the Estimator's private members.
"""

from __future__ import annotations

import copy
import functools
import logging
import signal
import time
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np

from estimator import checkpoint as ckpt
from estimator import distribute, keys
from estimator import hooks as hooks_lib
from estimator.engine import live_evaluation
from estimator.engine.compile_policy import FEW_BATCHES, RunPlan
from estimator.engine.compiler import StepCompiler, signature
from estimator.engine.default_hooks import default_training_hooks
from estimator.engine.epochs import Passes
from estimator.engine.eval_results import host_value
from estimator.engine.input_pipeline import (
    Prefetcher,
    batch_pipeline,
    call_input_fn,
    host_batches,
    placement,
)
from estimator.engine.interrupt import PREEMPTION_EXIT_CODE, SignalGuard
from estimator.engine.loop import (
    EvalRunner,
    PredictRunner,
    TrainRunner,
    examples,
    extract_keys,
    loop_steps,
    run_loop,
)
from estimator.engine.programs import TRAIN_METRICS
from estimator.engine.session import Session
from estimator.engine.state import StateSource
from estimator.engine.steps import TrainState
from estimator.events.eval_history import write_eval_results
from estimator.handlers.events import Dispatcher
from estimator.hooks.basic import steps_bound
from estimator.io import fs
from estimator.mode_keys import ModeKeys
from estimator.model.function import ModelFunction
from estimator.model.padding import RowPadding
from estimator.model.strings import to_host

__all__ = ["Runtime"]

logger = logging.getLogger("estimator")

_NO_STEPS = "Training with estimator made no steps. Perhaps input is empty or misspecified."


def _few_batches(prefetcher, steps: int | None = None) -> bool:
    """Whether the input is known to end within ``FEW_BATCHES`` batches (or ``steps``)."""
    count = getattr(prefetcher, "batch_count", None)
    if steps is not None:
        count = steps if count is None else min(count, steps)
    return count is not None and count <= FEW_BATCHES


def _most_steps(hooks, latest: str | None) -> int | None:
    """The most steps a ``train()`` call from checkpoint ``latest`` runs, as its
    ``StopAtStepHook``s say (None: none bounds it; the input's end or another hook may stop
    it sooner)."""
    return steps_bound(hooks, ckpt.checkpoint_step(latest) if latest else 0)  # no read


class Runtime:
    """Runs train/evaluate/predict for one Estimator (internal; ``Estimator.runtime``).

    Args:
      model: the :class:`~estimator.model.ModelFunction`.
      config: the ``RunConfig`` (with ``model_dir`` set).
      warm_start: the Estimator's warm start (``estimator.warm_starting.WarmStart``: see
        :class:`~estimator.engine.state.StateSource`), or None.
      input_transform: the host-side batch transform, or None.
      fast_compile: small programs run many times compile for compile speed
        (``Estimator(fast_compile=...)``, ``estimator.engine.compile_policy``).

    Attributes:
      model, config, warm_start, input_transform, fast_compile: as given.
      states: the :class:`~estimator.engine.state.StateSource` runs start from.
    """

    def __init__(
        self,
        model: ModelFunction,
        config,
        warm_start,
        input_transform,
        *,
        fast_compile: bool = False,
    ) -> None:
        self.model = model
        self.config = config
        self.warm_start = warm_start
        self.input_transform = input_transform
        self.fast_compile = fast_compile
        self.mesh = distribute.mesh_for(config)
        self.processes = jax.process_count()
        distribute.check_same("model_dir", fs.abspath(config.model_dir))
        self.is_chief = distribute.is_chief(config)
        if self.processes > 1:  # a process that raises ends the job at once (all say why)
            task = f"{config.task_type}:{config.task_id}" if config.cluster_spec.as_dict() else None
            distribute.watch(task, grace_secs=distribute.heartbeat_timeout())
        partitions = config.variable_partitions
        if partitions and self.mesh is None:
            raise ValueError(
                "RunConfig(variable_partitions=...) shards variables over a mesh, but there is "
                "none: pass RunConfig(mesh=jax.sharding.Mesh(jax.devices(), ('data',))) too "
                "(a multi-process job has one by default)."
            )
        self._sharding = (
            None
            if self.mesh is None
            else functools.partial(
                distribute.state_shardings, mesh=self.mesh, partitions=partitions
            )
        )
        self._compilers: dict[str, StepCompiler] = {}
        self._checkpointer: ckpt.Checkpointer | None = None
        self.states = StateSource(model, self._sharding, warm_start)

    @property
    def model_dir(self) -> str:
        return self.config.model_dir

    def compiler(self, mode: str, *, metrics: bool = False) -> StepCompiler:
        """The mode's :class:`StepCompiler` (made on first use); with ``metrics``, the
        TRAIN one whose step accumulates training metrics (``TRAIN_METRICS``)."""
        key = TRAIN_METRICS if metrics else mode
        if key not in self._compilers:
            self._compilers[key] = StepCompiler(
                self.model,
                mode,
                self._sharding,
                self.steps_per_execution,
                host_batches=host_batches(self.mesh),
                program=TRAIN_METRICS if metrics else None,
                fast_compile=self.fast_compile,
            )
        return self._compilers[key]

    def compile_counts(self) -> dict[str, int]:
        """``{mode: programs compiled}`` for the modes run so far (a public counter: tests
        and users check that repeated calls compile nothing)."""
        return {mode: c.compile_count for mode, c in self._compilers.items()}

    def saver(self) -> ckpt.Checkpointer:
        """The Estimator's checkpointer (one per Estimator; ``model_dir`` re-listed)."""
        if self._checkpointer is None:
            self._checkpointer = ckpt.Checkpointer(
                self.model_dir,
                self.config.keep_checkpoint_max,
                self.config.keep_checkpoint_every_n_hours,
                sparse_candidates=lambda: self.model.sparse_candidates,
                sparse_plans=lambda: self.model.plan_records,
            )
        else:
            # model_dir may have changed since (removed, rolled back, written by another
            # Estimator): re-list its checkpoints so no save is skipped as "already there".
            self._checkpointer.reload()
        return self._checkpointer

    def intact_checkpoint(self, latest: str | None) -> str | None:
        """``latest``, or the newest intact checkpoint before it (``RunConfig(
        restore_fallback=True)``): each damaged one is logged and moved aside by the chief
        (``checkpoint.quarantine``); None when none is intact. Every process of a job
        checks the same checkpoints and reaches the same answer."""
        while latest is not None:
            try:
                ckpt.verify_checkpoint(latest)
                break
            except ckpt.DataLossError as err:
                previous = ckpt.previous_checkpoint(latest)
                moved = ckpt.quarantine(latest) if self.is_chief else None
                logger.warning(
                    "restore_fallback: skipping the damaged checkpoint %s%s; resuming from "
                    "%s. What is wrong with it: %s",
                    latest,
                    f" (moved to {moved})" if moved else "",
                    previous or "fresh variables (no earlier checkpoint)",
                    err,
                )
                latest = previous
        if self.processes > 1:
            distribute.barrier("estimator_restore_fallback")  # the chief's renames are done
        return latest

    def resolve_checkpoint(self, checkpoint_path, what: str) -> str | None:
        """A checkpoint path (or the latest in a directory) for ``what`` (a verb for errors);
        None and no checkpoint in ``model_dir`` give None."""
        return ckpt.resolve(checkpoint_path, self.model_dir, what)

    def eval_dir(self, name: str | None = None) -> str:
        """``model_dir/eval`` or ``model_dir/eval_<name>``."""
        return fs.join(self.model_dir, "eval" if not name else "eval_" + name)

    def input_context(self) -> distribute.InputContext:
        """This process's share of the input (what ``input_fn(input_context)`` receives)."""
        replicas = 1 if self.mesh is None else self.mesh.shape[self.mesh.axis_names[0]]
        return distribute.InputContext(self.processes, jax.process_index(), replicas)

    def _prefetcher(self, input_fn, mode: str) -> Prefetcher:
        params = copy.deepcopy(self.model.params)
        place = (
            distribute.process_local_placement(self.mesh)
            if self.processes > 1
            else placement(self.mesh)
        )
        result = call_input_fn(input_fn, mode, params, self.config, self.input_context())
        pad = RowPadding() if self.model.masks_padding and mode != ModeKeys.PREDICT else None
        prefetcher = batch_pipeline(
            result, mode, self.input_transform, place, pad, self.model.input_checks
        )
        if self.processes > 1:
            return distribute.AgreedEnd(prefetcher, distribute.input_end_timeout())
        return prefetcher

    @property
    def steps_per_execution(self) -> int:
        """``RunConfig.steps_per_execution``, also in a multi-process job.

        Every process of a job must run the same calls (each step reduces its gradients
        across them), and they do so without a message: a call ends after that many steps,
        at a step whose values a hook fetches or after which it reads the state (a
        checkpoint save, also one a ``SyncedTimer`` decided; training metrics), at the last
        step (``max_steps``, a stop every process requests) or at the end of the input
        (``distribute.AgreedEnd``). Those are the same steps on every process as long as
        every process's hooks fetch at the same steps: the processes other than the chief
        fetch where the chief's reporting hooks do (``default_hooks``), and see
        :meth:`_steps_per_call` for ``training_chief_hooks``."""
        return self.config.steps_per_execution

    def _steps_per_call(self, info) -> int | None:
        """The most steps one train call runs in this ``train()`` call: None (the
        compiler's, :attr:`steps_per_execution`), or 1 in a multi-process job whose
        ``model_fn`` gave ``training_chief_hooks``: the chief alone runs them, and a
        value one of them fetches would end a call on the chief alone."""
        if self.processes == 1 or not info.chief_hooks or self.steps_per_execution == 1:
            return None
        logger.info(
            "This multi-process job runs one step per call in this train(): the chief alone "
            "runs the EstimatorSpec's training_chief_hooks, and the steps they fetch from "
            "would end a fused call on the chief alone (steps_per_execution=%d otherwise).",
            self.steps_per_execution,
        )
        return 1

    def _plan(self, prefetcher, first, few_runs: bool = False, most: int | None = None) -> RunPlan:
        """The call's :class:`RunPlan`: ``few_runs`` as given; ``once``, the signature of
        the shorter last batch when the input knows its size in advance (``numpy_input_fn``;
        one device: a mesh places an uneven batch differently) and the call can reach it:
        not when it runs at most ``most`` steps (None: no such bound) and the input has more
        batches (``train(steps=...)`` on a part of the data compiles no program for the
        last batch)."""
        size = getattr(prefetcher, "last_batch_size", None)
        count = getattr(prefetcher, "batch_count", None)
        leaves = jax.tree.leaves(first)
        padding = getattr(prefetcher, "padding", None)
        if size is None or self.mesh is not None or not leaves or (padding and padding.active):
            return RunPlan(few_runs)  # (a padded last batch runs in the first batch's program)
        if most is not None and count is not None and most < count:
            return RunPlan(few_runs)  # the call stops before the last batch
        full = np.shape(leaves[0])[:1]
        if any(np.shape(x)[:1] != full for x in leaves) or full == (size,):
            return RunPlan(few_runs)  # not every leaf is batch-major: its shape is unknown
        return RunPlan(few_runs, signature(self._last_batch(first, size)))

    @staticmethod
    def _last_batch(first, size: int):
        """The shorter last batch: ``first``'s leaves with ``size`` rows, abstract."""
        return jax.tree.map(
            lambda x: jax.ShapeDtypeStruct((size, *np.shape(x)[1:]), x.dtype), first
        )

    def _precompile_last_batch(self, compiler, leading: tuple, first, prefetcher, plan) -> None:
        """Prepares the shorter last batch's program (``plan.once``) now and compiles it in
        the background, beside the first batch's program and the full batches' run. It
        runs once per call, so it compiles for compile speed (``compile_options``)."""
        if plan.once is None:
            return
        abstract = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None)),
            leading,
        )
        compiler.precompile(abstract, self._last_batch(first, prefetcher.last_batch_size), plan)

    def _session(self, mode: str, runner, state: TrainState, events: Dispatcher, info) -> Session:
        """The session hooks see; calls their ``after_create_session`` (TF's order: after
        ``begin`` and after the state is created or restored), and in training the
        handlers' ``train_begin`` in the same pass over the list."""
        training = mode == ModeKeys.TRAIN
        session = Session(
            mode,
            self.model_dir,
            runner,
            int(state.global_step),
            info.output_names,
            apart=info.apart,
            is_chief=self.is_chief,
            evaluate=self.evaluate_live if training else None,
            save_checkpoint=self._save_live if training else None,
        )
        events.after_create_session(session)
        return session

    def _save_live(self, session: Session) -> str:
        """``session.save_checkpoint()``: the state now, as the Estimator's checkpoint."""
        step, state = session.checkpoint_state(session.global_step)
        return self.saver().save(step, state)

    # ----- train ------------------------------------------------------------------------
    def _prepare_training(
        self, compiler, prefetcher, first, latest, metrics: bool, most: int | None
    ) -> tuple:
        """Readies a ``train()`` call's programs: ``(abstract state, metrics accumulator or
        None, RunPlan, StepInfo)``. The state's structure comes from the kept state or
        ``latest``'s metadata when they have it (``StateSource.abstract``: ``model_fn``
        then runs once, in the step's trace), else from ``model_fn``'s init run. ``most``:
        the most steps the call runs (:func:`_most_steps`).

        Raises:
          ValueError: ``model_fn`` fails on that structure (the model or its optimizer
            changed: the caller retries without it) or otherwise.
        """
        abstract = self.states.abstract(compiler, first, latest)
        # The train step's leading arguments: the state, and the metrics accumulator.
        acc = compiler.empty_accumulator(abstract, *first) if metrics else None
        leading = (abstract,) if acc is None else (abstract, acc)
        plan = self._plan(prefetcher, first, most=most)
        compiler.precompile(leading, first, plan)
        if latest is None:  # a fresh state: its program compiles beside the step's
            compiler.precompile_init(first[0], first[1] if len(first) > 1 else None)
        # The last batch's program compiles beside the first's (both XLA compiles at once).
        self._precompile_last_batch(compiler, leading, first, prefetcher, plan)
        prefetcher.warm()  # the input's host phase, while XLA compiles
        return abstract, acc, plan, compiler.prepare_run(*leading, *first, plan=plan)

    def _prepared_training(self, compiler, prefetcher, first, latest, metrics, most) -> tuple:
        """:meth:`_prepare_training`, retried once without the kept state's structure when
        ``model_fn`` fails on it (``StateSource.retry_without_kept``)."""
        try:
            return self._prepare_training(compiler, prefetcher, first, latest, metrics, most)
        except ValueError:
            if not self.states.retry_without_kept(compiler, first):
                raise
            return self._prepare_training(compiler, prefetcher, first, latest, metrics, most)

    def train(self, input_fn, hooks, saving_listeners, latest: str | None) -> float | None:
        """Trains from checkpoint ``latest`` (or fresh/warm-started variables) until a hook
        stops or the input ends; returns the last step's loss (None without steps)."""
        # Training metrics: when asked for (RunConfig) or read by a handler of the caller's.
        metrics = bool(self.config.train_metrics_steps) or any(
            getattr(h, "needs_train_metrics", False) for h in hooks
        )
        compiler = self.compiler(ModeKeys.TRAIN, metrics=metrics)
        prefetcher = self._prefetcher(input_fn, ModeKeys.TRAIN)
        try:
            first = prefetcher.peek()
        except StopIteration:
            logger.warning(_NO_STEPS)
            return None
        self.model.check_labels(first[1])
        abstract, acc, plan, info = self._prepared_training(
            compiler, prefetcher, first, latest, metrics, _most_steps(hooks, latest)
        )
        all_hooks = default_training_hooks(
            self.config,
            info,
            hooks,
            saving_listeners,
            self.saver,
            chief=self.is_chief,
            processes=self.processes,
        )
        events = Dispatcher(all_hooks, training=True)
        if events.reads_passes:  # more passes over the input while a handler wants epochs
            make = functools.partial(self._prefetcher, input_fn, ModeKeys.TRAIN)
            prefetcher = Passes(prefetcher, make, events.another_pass)
        events.begin()
        state = self.states.read(
            compiler, first, latest, training=True, abstract=abstract, train_op=info.train_op
        )
        runner = TrainRunner(compiler, state, plan, acc, self._steps_per_call(info))
        session = self._session(ModeKeys.TRAIN, runner, state, events, info)
        if self._train_loop(session, events, prefetcher) == 0:
            logger.warning(_NO_STEPS)
        saved = ckpt.latest_checkpoint(self.model_dir)
        if saved is not None and ckpt.checkpoint_step(saved) == session.global_step:
            self.states.keep(saved, runner.state)
        loss = session.outputs.get(keys.LOSS)
        return None if loss is None else float(loss)

    def _train_loop(self, session: Session, events: Dispatcher, prefetcher) -> int:
        """Runs the training loop and the saves its end calls for (a preemption, a
        non-finite loss); returns the number of steps run.

        Raises:
          SystemExit: 143 after a preemption (``estimator.engine.interrupt``).
          KeyboardInterrupt: after Ctrl-C, at a step boundary.
          NanLossDuringTrainingError: from the ``NanTensorHook``, after saving the last
            finite state.
        """
        guard = SignalGuard(
            # SIGTERM: this process's handler in one process; in a job, JAX's preemption
            # notifier's, and every process stops at the step the job agrees on.
            sigterm=self.config.save_checkpoint_on_preemption and self.processes == 1,
            preemption=distribute.preemption_sync_point() if self.processes > 1 else None,
        )
        try:
            with guard:
                count = run_loop(
                    session, events, prefetcher, advances_global_step=True, guard=guard
                )
            if guard.signum == signal.SIGTERM and self.config.save_checkpoint_on_preemption:
                self._save_on_preemption(session)
        except hooks_lib.NanLossDuringTrainingError:
            if self._checkpointer is not None:
                # The last finite state, as the checkpoint of the step whose loss was not
                # finite: the steps since the last save are not lost.
                self._checkpointer.save(*session.checkpoint_state(session.global_step))
            raise
        finally:
            if self._checkpointer is not None:
                self._checkpointer.wait()
        guard.raise_if_received()
        return count

    def _save_on_preemption(self, session: Session) -> None:
        """Saves the state after SIGTERM (in a multi-process job: every process, at the
        step they agreed on, a collective save); the chief logs the step."""
        if self._checkpointer is None:
            return
        step, state = session.checkpoint_state(session.global_step)
        if self.processes > 1 and self.is_chief:
            logger.warning(
                "Preempted (SIGTERM to a process of this %d-process job): every process saves "
                "the checkpoint of step %d, the step they agreed on, then exits with status %d.",
                self.processes,
                step,
                PREEMPTION_EXIT_CODE,
            )
        elif self.processes == 1:
            logger.warning("Preempted: saving checkpoints for %d.", step)
        self._checkpointer.save(step, state)

    # ----- evaluate ---------------------------------------------------------------------
    def evaluate(
        self, input_fn, steps, hooks, name, path, state: TrainState | None = None
    ) -> dict[str, Any]:
        """Evaluation from checkpoint ``path`` or, when ``state`` is given, from that
        in-memory state (``InMemoryEvaluatorHook``: no checkpoint needed); writes the
        results to ``eval_dir(name)`` and returns them (see ``Estimator.evaluate``)."""
        compiler = self.compiler(ModeKeys.EVAL)
        prefetcher = self._prefetcher(input_fn, ModeKeys.EVAL)
        start = time.time()
        acc, finalize_metrics, global_step = self.evaluation_loop(
            compiler, prefetcher, steps, hooks, path, state
        )
        metrics, loss = jax.device_get(finalize_metrics(acc))
        return self.record_evaluation(metrics, loss, global_step, name, path, start)

    def evaluation_loop(self, compiler, prefetcher, steps, hooks, path, state=None) -> tuple:
        """Runs an evaluation's loop (hooks included) from checkpoint ``path`` or the
        in-memory ``state``; returns ``(accumulator on the device, finalize, global step)``.

        Raises:
          ValueError: an input without a batch (and ``model_fn``'s errors).
        """
        try:
            first = prefetcher.peek()
        except StopIteration:
            raise ValueError(
                "input_fn returned no batch to evaluate: check its data and num_epochs."
            ) from None
        self.model.check_labels(first[1])
        if state is None:
            # The program compiles while the checkpoint is read.
            abstract = self.states.abstract(compiler, first, path)
        else:
            state = abstract = state._replace(opt_state=None)
        try:
            acc = compiler.empty_accumulator(abstract, *first)  # model_fn's trace
        except ValueError:
            if state is not None or not self.states.retry_without_kept(compiler, first):
                raise
            abstract = self.states.abstract(compiler, first, path)
            acc = compiler.empty_accumulator(abstract, *first)
        plan = self._plan(prefetcher, first, _few_batches(prefetcher, steps), steps)
        compiler.precompile((abstract, acc), first, plan)
        self._precompile_last_batch(compiler, (abstract, acc), first, prefetcher, plan)
        prefetcher.warm()  # the input's host phase, while XLA compiles
        if state is None:
            state = self.states.read(compiler, first, path, training=False, abstract=abstract)
        finalize_metrics = compiler.finalizer(acc)
        info = compiler.prepare_run(state, acc, *first, plan=plan)
        events = Dispatcher(hooks + list(info.hooks))
        logger.info("Starting evaluation at %s", time.strftime("%Y-%m-%dT%H:%M:%S"))
        events.begin()
        runner = EvalRunner(compiler, state, acc, plan)
        session = self._session(ModeKeys.EVAL, runner, state, events, info)
        with SignalGuard(sigterm=False) as guard:
            run_loop(session, events, prefetcher, num_steps=steps, guard=guard)
        guard.raise_if_received()
        runner.flush()
        return runner.accumulator, finalize_metrics, int(session.global_step)

    def record_evaluation(
        self, metrics: dict, loss, global_step: int, name, path, start: float
    ) -> dict[str, Any]:
        """An evaluation's results (host values, ``loss`` and ``global_step`` added),
        logged as TF does and written to ``eval_dir(name)`` by the chief."""
        results = {k: host_value(v) for k, v in metrics.items()}
        results["loss"] = float(loss)
        results["global_step"] = int(global_step)
        logger.info("Inference Time : %.5fs", time.time() - start)
        logger.info("Finished evaluation at %s", time.strftime("%Y-%m-%d-%H:%M:%S"))
        logger.info(
            "Saving dict for global step %d: %s",
            results["global_step"],
            ", ".join(f"{k} = {results[k]}" for k in sorted(results)),
        )
        if jax.process_index() == 0:  # every process of a job has them; one writes them
            write_eval_results(self.eval_dir(name), results, path)
        return results

    def evaluate_live(self, session: Session, input_fn, steps, hooks, name) -> dict[str, Any]:
        """Evaluates the training state on the device now (``session.evaluate``:
        ``InMemoryEvaluatorHook``, ``ValidationHandler``); in a multi-process job every
        process evaluates its shard and the statistics are merged
        (``estimator.engine.live_evaluation``)."""
        return live_evaluation.evaluate(self, session, input_fn, steps, list(hooks or []), name)

    # ----- predict ----------------------------------------------------------------------
    def predict(self, input_fn, predict_keys, hooks, path, yield_single_examples: bool) -> Iterator:
        """Yields predictions (see ``Estimator.predict``); the next batch is computed on
        the device while the current one is yielded. A Ctrl-C that Python swallows while
        a batch is made is raised again when it is ready (``estimator.engine.interrupt``);
        the caller's code between the predictions keeps Python's handler."""
        batches = self._predicted_batches(input_fn, predict_keys, hooks, path)
        while True:
            with SignalGuard(defer=False):
                batch = next(batches, None)
            if batch is None:
                return
            yield from examples(batch, yield_single_examples)

    def _predicted_batches(self, input_fn, predict_keys, hooks, path) -> Iterator:
        """Yields the batches of predictions on the host, one batch ahead on the device."""
        compiler = self.compiler(ModeKeys.PREDICT)
        prefetcher = self._prefetcher(input_fn, ModeKeys.PREDICT)
        try:
            first = prefetcher.peek()
        except StopIteration:
            return
        state = self.states.read(compiler, first, path, training=False)
        plan = self._plan(prefetcher, first, _few_batches(prefetcher))
        try:
            info = compiler.prepare_run(state, *first, plan=plan)  # model_fn's trace
        except ValueError:
            if not self.states.retry_without_kept(compiler, first):
                raise
            state = self.states.read(compiler, first, path, training=False)
            info = compiler.prepare_run(state, *first, plan=plan)
        self._precompile_last_batch(compiler, (state,), first, prefetcher, plan)
        events = Dispatcher(hooks + list(info.hooks))
        events.begin()
        runner = PredictRunner(compiler, state, predict_keys, plan)
        self.states.lend(runner)  # until this generator is done or dropped
        session = self._session(ModeKeys.PREDICT, runner, state, events, info)
        pending = runner.pending
        for _ in loop_steps(session, events, prefetcher):
            # One batch ahead: yield the previous batch's predictions while this one runs.
            while len(pending) > 1:
                yield self._host(pending.pop(0), predict_keys)
        while pending:
            yield self._host(pending.pop(0), predict_keys)

    def _host(self, predictions, predict_keys):
        """A batch's predictions on the host: this process's rows in a multi-process job."""
        predictions = extract_keys(predictions, predict_keys)
        if self.processes > 1:
            predictions = distribute.process_local(predictions, self.mesh)
        return to_host(predictions)
