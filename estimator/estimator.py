"""``Estimator``: train, evaluate and predict a ``model_fn`` (``tf.estimator.Estimator``).

Semantics follow TF 2.15 (``tensorflow_estimator/python/estimator/estimator.py``): the
same constructor checks, ``steps`` relative and ``max_steps`` absolute across calls,
resuming from the latest checkpoint on every call, the default hooks, evaluation's
``loss`` as the mean of per-batch losses. Where TF hurt, this does better:

* repeated calls rebuild nothing: each mode's step is compiled once per input signature;
  variables read from a checkpoint are kept while it stays the latest.
* no step from a NaN/inf loss on is applied (TF writes NaN into the variables); metrics
  accumulate on the device, one transfer at the end of ``evaluate()``."""

from __future__ import annotations

import contextlib
import copy
import logging
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from estimator import checkpoint as ckpt
from estimator import distribute
from estimator import hooks as hooks_lib
from estimator.checkpoint.lock import ModelDirLock
from estimator.config import TaskType, platform
from estimator.config.run_config import RunConfig, config_with_model_dir
from estimator.engine.interrupt import SignalGuard
from estimator.engine.runtime import Runtime
from estimator.export import _writer
from estimator.handlers.events import check_hooks
from estimator.handlers.metric import MetricHandler
from estimator.hooks import progress as progress_lib
from estimator.hooks.checks import check_listeners
from estimator.hooks.early_stopping import Evaluations
from estimator.mode_keys import ModeKeys
from estimator.model.function import ModelFunction, verify_model_fn_args
from estimator.warm_starting import WarmStart

__all__ = ["Estimator"]

logger = logging.getLogger("estimator")


class Estimator:
    """Trains, evaluates and predicts with a ``model_fn`` (``tf.estimator.Estimator``).

    Args:
      model_fn: ``model_fn(features, labels, mode, params, config) -> EstimatorSpec``;
        ``features`` is required, the others are passed when named. It is traced by JAX:
        ``mode`` is a static string, arrays are traced. Variables come from
        ``estimator.get_variable`` and ``estimator.layers``.
      model_dir: checkpoints and event files go here. None uses ``config.model_dir``, else
        a new temporary directory (with a warning), as TF.
      config: a ``RunConfig``.
      params: a dict passed to ``model_fn`` (deep-copied).
      warm_start_from: a checkpoint directory, a checkpoint path or an export directory
        (str, bytes or PathLike) whose trainable variables initialise the model, or an
        ``estimator.WarmStartSettings`` choosing variables, renames and vocabulary
        remapping. Applied only when ``model_dir`` has no checkpoint (logged either way).
      input_transform: keyword-only; a host-side transform with
        ``apply(features, labels) -> (features, labels)`` run on every batch before it
        reaches the device, e.g. the host phase of feature columns
        (``canned.feature_column.input_transform(columns)``). Strings cannot enter a jitted
        step: string features need one.
      fast_compile: keyword-only; compile the programs a call runs many times (the train
        step, a long evaluation's) for compile speed when none of their arrays holds more
        than ``SMALL_ARRAY_MAX`` (4,096) values: XLA's older CPU loop emitters, which
        compile such programs faster and run them as fast (``benchmarks/loop_emitters.py``
        measures both), with values that may differ from a ``jax.jit`` program's in the
        last bits (the emitters group multiply-adds differently;
        ``estimator.engine.compile_policy``). The canned
        estimators set it: their reference is TF 2.15, matched either way. Without it a
        ``model_fn`` compiles as ``jax.jit`` compiles it, so training gives the values the
        same hand-written ``jax.jit`` loop would. Only on the CPU backend.

    When ``model_fn`` runs (it may log or count; TF 2.15 runs it once per ``train``/
    ``evaluate``/``predict`` call, building a graph that creates and uses the variables in
    one pass). Each run is a trace, never one per step:

    * a first ``train()`` on an empty ``model_dir`` runs it twice: once in init mode,
      abstractly, to create the variables (their shapes, dtypes and initial values) and
      ``train_op``'s state, and once to build the step program;
    * any other first call in an input signature (``train()`` resuming from a checkpoint,
      ``evaluate()``, ``predict()``) runs it once, to build the step program: the
      variables, and in training the optimizer state, are those of the state the
      Estimator kept from its last call, else those the checkpoint's metadata lists (the
      optimizer state is kept and saved as nested dicts by name, ``estimator.io.
      tree_form``; the step rebuilds ``train_op``'s structure from them in its trace).
      When ``model_fn`` asks for variables or an optimizer state the checkpoint lacks (or
      the checkpoint predates that metadata), it runs in init mode first, and the restore
      then lists what differs;
    * a ``model_fn`` that looks rows up in a table that ``train_op`` updates row by row
      (``est.layers.embedding_lookup``, feature columns, under ``est.sparse_updates`` or
      the canned FTRL/Adagrad) has the table checked to be read only through lookups
      (sparse updates, ``estimator.engine.row_plan``): in the init run's trace on an empty
      ``model_dir`` (no extra run); when resuming, in the step's own trace, which uses the
      plan the checkpoint's metadata records for this input signature (no extra run).
      A resumed training runs it twice (abstractly to plan, then in the step) for an
      input signature without a recorded plan (another batch shape, or a checkpoint
      written before plans were recorded) or a table the metadata names that is updated
      densely (also read whole); three times when ``model_fn`` no longer fits the
      recorded plan (it now reads the table whole, or looks up other id shapes): the
      step's trace is dropped, then those two runs; twice when the checkpoint lacks the
      record of looked-up tables, or the model now looks up another such table: the
      step's first trace finds the lookup and is traced again;
    * a later call with the same input signature runs it no more (its program is
      compiled), unless ``model_fn`` returned hooks: then once, abstractly, so the hooks
      are new objects, as TF's;
    * a shorter last batch is another input signature (except for ``masks_padding``
      models, whose last batch is padded).

    Raises:
      ValueError: TF's messages: no model_fn, a bad config, model_dir disagreeing with
        ``config.model_dir``, ``model_fn`` arguments other than features, labels, mode,
        params, config, or params given to a ``model_fn`` without ``params``.
    """

    def __init__(
        self,
        model_fn: Callable,
        model_dir=None,
        config: RunConfig | None = None,
        params: dict | None = None,
        warm_start_from=None,
        *,
        input_transform=None,
        fast_compile: bool = False,
    ) -> None:
        self._config = config_with_model_dir(config, model_dir)
        distribute.connect(self._config)  # a TF_CONFIG cluster: join it before any device use
        platform.configure(self._config.compilation_cache_dir)  # before any compile
        if not model_fn:
            raise ValueError("model_fn must be provided to Estimator.")
        verify_model_fn_args(model_fn, params)
        self._params = copy.deepcopy(params or {})
        seed = self._config.tf_random_seed
        if seed is None:
            seed = random.SystemRandom().randrange(2**31)
            seed = distribute.shared_seed(seed)  # the same on every process of a job
            logger.info("No tf_random_seed in RunConfig; using seed %d.", seed)
        self._runtime = Runtime(
            ModelFunction(model_fn, self._params, self._config, seed),
            self._config,
            None if warm_start_from is None else WarmStart(warm_start_from, self.model_dir),
            input_transform,
            fast_compile=fast_compile,
        )
        self._evaluations = Evaluations()

    # ----- properties -----------------------------------------------------------------
    @property
    def model_dir(self) -> str:
        return self._config.model_dir

    @property
    def config(self) -> RunConfig:
        return self._config

    @property
    def params(self) -> dict:
        return copy.deepcopy(self._params)

    @property
    def model_fn(self) -> Callable:
        """``(features, labels, mode, config) -> EstimatorSpec`` (TF's wrapper; see
        ``ModelFunction.public``)."""
        return self._runtime.model.public()

    @property
    def runtime(self) -> Runtime:
        """The engine behind this Estimator (``estimator.engine.runtime.Runtime``): its
        compiled steps, state and checkpointer. Not in TF's API; the export writer,
        evaluators and ``train_and_evaluate`` use it, and ``runtime.compile_counts()``
        shows that repeated calls compile nothing."""
        return self._runtime

    @property
    def evaluations(self) -> Evaluations:
        """Where this Estimator's in-process evaluators announce evaluations to its
        early-stopping hooks (``estimator.hooks.early_stopping.Evaluations``). Not in TF's
        API: ``train_and_evaluate``'s evaluator and ``InMemoryEvaluatorHook`` announce
        here, the ``stop_if_*_hook(estimator, ...)`` hooks watch it, so they check right
        after the evaluation that decides them; another Estimator's are not seen."""
        return self._evaluations

    @property
    def trace_count(self) -> int:
        """How many times ``model_fn`` has run (each run is a trace, never one per step)."""
        return self._runtime.model.trace_count

    def eval_dir(self, name: str | None = None) -> str:
        """``model_dir/eval`` or ``model_dir/eval_<name>``: where evaluation writes."""
        return self._runtime.eval_dir(name)

    def latest_checkpoint(self) -> str | None:
        """The path of the newest complete checkpoint in ``model_dir``, or None."""
        return ckpt.latest_checkpoint(self.model_dir)

    def _require_checkpoint(self) -> str:
        if not (latest := self.latest_checkpoint()):
            raise ValueError(f"Could not find trained model in model_dir: {self.model_dir}.")
        return latest

    def get_variable_names(self) -> list[str]:
        """Names of the variables in the latest checkpoint (and ``global_step``).

        Raises:
          ValueError: "Could not find trained model in model_dir: ...".
        """
        return [name for name, _ in ckpt.list_variables(self._require_checkpoint())]

    def get_variable_value(self, name: str) -> np.ndarray:
        """The value of a variable in the latest checkpoint, as NumPy.

        Raises:
          ValueError: no checkpoint, or no such variable (lists the names there are).
        """
        return ckpt.load_variable(self._require_checkpoint(), name)

    # ----- train ------------------------------------------------------------------------
    def train(
        self,
        input_fn,
        hooks=None,
        steps: int | None = None,
        max_steps: int | None = None,
        saving_listeners=None,
    ) -> Estimator:
        """Trains the model (``tf.estimator.Estimator.train``).

        Resumes from the latest checkpoint in ``model_dir``. Stops after ``steps`` more
        steps, at global step ``max_steps``, at the end of the input, or when a hook asks.
        Checkpoints are saved at the start, on the ``RunConfig`` schedule (asynchronously)
        and at the end; this returns when every checkpoint is complete on disk.

        Args:
          input_fn: returns batches (see ``estimator.inputs``).
          hooks: extra ``SessionRunHook`` objects and event handlers (``estimator.handlers``:
            epochs, training metrics, validation, ...), in one list; they run in the order
            of ``estimator.handlers.order`` (by ``priority``, then as listed).
          steps: how many steps to run, counted from this call's start.
          max_steps: the global step to stop at, counted across calls; training is skipped
            when the latest checkpoint is already there.
          saving_listeners: ``CheckpointSaverListener`` objects called around each save.

        Returns:
          ``self``.

        Raises:
          ValueError: both steps and max_steps, a non-positive one, listeners without
            checkpoints, or errors from ``model_fn``/``input_fn``.
          TypeError: a hook that is not a ``SessionRunHook``; an event handler whose event
            methods do not take the loop's arguments (checked before anything runs).
          NanLossDuringTrainingError: from the default ``NanTensorHook``.
          ModelDirBusyError: another ``train()`` (in any process) is writing to
            ``model_dir`` (TF lets both run and interleave their checkpoints; see
            ``estimator.checkpoint.lock``).
          estimator.checkpoint.DataLossError: the latest checkpoint is damaged (without
            ``RunConfig(restore_fallback=True)``, which resumes from the newest intact one).
        """
        if self._config.task_type in (TaskType.EVALUATOR, TaskType.PS):
            raise ValueError(
                "Train has been called wrong configuration. Please use "
                "tf.estimator.train_and_evaluate which calls proper API according to given "
                f"configuration. Current configuration: {self.config}."
            )
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps.")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        hooks = check_hooks(hooks)
        saving_listeners = check_listeners(saving_listeners)
        chief = self._runtime.is_chief
        # A Ctrl-C that Python swallows is raised again (estimator.engine.interrupt); in a
        # multi-process job an error here ends every process (estimator.distribute.failures).
        with distribute.reporting(), SignalGuard(defer=False):
            with ModelDirLock(self.model_dir) if chief else contextlib.nullcontext():
                self._train_locked(input_fn, hooks, steps, max_steps, saving_listeners)
        return self

    def _train_locked(self, input_fn, hooks, steps, max_steps, saving_listeners) -> None:
        latest = self.latest_checkpoint()
        if self._config.restore_fallback:
            latest = self._runtime.intact_checkpoint(latest)
        if max_steps is not None:
            start = ckpt.read_meta(latest)["global_step"] if latest else 0
            if max_steps <= start:
                logger.info("Skipping training since max_steps has already saved.")
                return
        if steps is not None or max_steps is not None:
            hooks.append(hooks_lib.StopAtStepHook(steps, max_steps))
        progress = progress_lib.default_hook(hooks, num_steps=steps, last_step=max_steps)
        if progress is not None:
            hooks.append(progress)
        if self._config.train_metrics_steps and not any(
            isinstance(h, MetricHandler) for h in hooks
        ):
            # Every process reads and resets its copy of the metrics at the same steps; the
            # chief logs and writes them (RunConfig.train_metrics_steps).
            hooks.append(MetricHandler(batch_period=self._config.train_metrics_steps))
        loss = self._runtime.train(input_fn, hooks, saving_listeners, latest)
        logger.info("Loss for final step: %s.", loss)

    # ----- evaluate ---------------------------------------------------------------------
    def evaluate(
        self,
        input_fn,
        steps: int | None = None,
        hooks=None,
        checkpoint_path=None,
        name: str | None = None,
    ) -> dict[str, Any]:
        """Evaluates the model on the batches of ``input_fn`` (``Estimator.evaluate``).

        Every example is counted once, none dropped: a smaller last batch is compiled once
        more or, for a ``model_fn`` marked ``estimator.masks_padding`` (the canned linear,
        DNN and wide & deep estimators), padded to the others' size and masked out of
        every metric (see ``estimator.model.padding``). Metrics are merged on the device;
        one transfer at the end.

        Args:
          input_fn: returns batches (see ``estimator.inputs``); a single batch is
            evaluated once.
          steps: evaluate at most this many batches; None until the input ends.
          hooks: ``SessionRunHook`` objects (and ``estimator.handlers`` event handlers: the
            evaluation is one epoch) for this evaluation.
          checkpoint_path: a checkpoint (or a directory of them) to evaluate; None uses
            the latest in ``model_dir``, or fresh variables when there is none (logged).
          name: evaluation name; results go to ``eval_dir(name)``.

        Returns:
          ``{metric_name: value, "loss": mean of per-batch losses, "global_step": int}``;
          scalars as Python ``float``/``int``, others as NumPy arrays.

        Raises:
          ValueError: non-positive steps, a metric named "loss" or "global_step", an input
            with no batch, an unknown checkpoint.
        """
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        hooks = check_hooks(hooks)
        progress = progress_lib.default_hook(hooks, num_steps=steps)
        if progress is not None:
            hooks.append(progress)
        path = self._runtime.resolve_checkpoint(checkpoint_path, "evaluate")
        with distribute.reporting(), SignalGuard(defer=False):  # see train()
            return self._runtime.evaluate(input_fn, steps, hooks, name, path)

    # ----- predict ----------------------------------------------------------------------
    def predict(
        self,
        input_fn,
        predict_keys=None,
        hooks=None,
        checkpoint_path=None,
        yield_single_examples: bool = True,
    ) -> Iterator:
        """Yields predictions for the features of ``input_fn`` (``Estimator.predict``).

        The next batch is computed on the device while the current one is yielded.

        Args:
          input_fn: returns features (labels, if any, are ignored).
          predict_keys: names of the predictions to return (dict predictions only).
          hooks: ``SessionRunHook`` objects for this prediction.
          checkpoint_path: as in :meth:`evaluate`.
          yield_single_examples: yield one dict per example (``{key: value[i]}``) instead
            of one per batch.

        Yields:
          Dicts of NumPy values (or arrays for non-dict predictions). String predictions
          (``estimator.index_to_string``) arrive as ``bytes`` arrays, as in TF.

        Raises:
          ValueError: TF's messages for unknown predict_keys, predict_keys with non-dict
            predictions, or predictions whose batch lengths differ.
        """
        hooks = check_hooks(hooks)
        progress = progress_lib.default_hook(hooks)
        if progress is not None:
            hooks.append(progress)
        path = self._runtime.resolve_checkpoint(checkpoint_path, "predict")
        with distribute.reporting():  # see train()
            yield from self._runtime.predict(
                input_fn, predict_keys, hooks, path, yield_single_examples
            )

    # ----- export -----------------------------------------------------------------------
    def export_saved_model(
        self,
        export_dir_base,
        serving_input_receiver_fn,
        assets_extra=None,
        as_text: bool = False,
        checkpoint_path=None,
        experimental_mode: str = ModeKeys.PREDICT,
        *,
        platforms=("cpu",),
        format: str = "jax",
    ) -> bytes:
        """Exports the model for serving (``Estimator.export_saved_model``).

        Writes ``<export_dir_base>/<unix seconds>/`` (see ``estimator.export`` for the
        layout) through a temporary directory renamed when complete; a clash in the same
        second takes a later second. The artifact runs with jax alone: no model code, no
        TensorFlow. With ``format="tf_saved_model"`` the directory is a TF SavedModel
        instead, with TF 2.15's signatures, for TF Serving (needs the ``tf`` extra; see
        ``estimator.export.tf_saved_model``).

        Args:
          export_dir_base: the parent directory of exports.
          serving_input_receiver_fn: returns an ``estimator.export.ServingInputReceiver``
            (a ``SupervisedInputReceiver`` for TRAIN/EVAL ``experimental_mode``).
          assets_extra: ``{relative destination: source path}`` copied to
            ``assets.extra/``.
          as_text: also write each function's StableHLO as text (``functions/*.mlir``)
            and an indented manifest.
          checkpoint_path: the checkpoint to export; None: the latest.
          experimental_mode: the ``ModeKeys`` mode to export.
          platforms: keyword-only; the ``jax.export`` platforms to lower for.
          format: keyword-only; ``"jax"`` (the ``jax.export`` artifact) or
            ``"tf_saved_model"`` (a TF SavedModel; ``as_text`` then writes
            ``saved_model.pbtxt``).

        Returns:
          The export directory, as ``bytes`` (as TF). In a multi-process job the chief
          alone writes it; the other processes write nothing and return None.

        Raises:
          ValueError: "Couldn't find trained model at ..." without a checkpoint, a
            receiver of the wrong kind, an unknown ``format``, or (``tf_saved_model``) a
            mode other than PREDICT or a host op with no TF form.
          ImportError: ``format="tf_saved_model"`` without TensorFlow >= 2.21.
        """
        if not serving_input_receiver_fn:
            raise ValueError("An input_receiver_fn must be defined.")
        return _writer.export(
            self,
            export_dir_base,
            {experimental_mode: serving_input_receiver_fn},
            assets_extra=assets_extra,
            as_text=as_text,
            checkpoint_path=checkpoint_path,
            platforms=platforms,
            format=format,
        )

    def export_savedmodel(
        self,
        export_dir_base,
        serving_input_receiver_fn,
        assets_extra=None,
        as_text: bool = False,
        checkpoint_path=None,
        strip_default_attrs: bool = False,
    ) -> bytes:
        """TF's deprecated name of :meth:`export_saved_model` (``strip_default_attrs``:
        TF graph attributes, meaningless here). Logs TF's deprecation message."""
        del strip_default_attrs
        logger.warning(
            "Estimator.export_savedmodel is deprecated and will be removed in a future "
            "version.\nInstructions for updating:\nThis function has been renamed, use "
            "`export_saved_model` instead."
        )
        return self.export_saved_model(
            export_dir_base, serving_input_receiver_fn, assets_extra, as_text, checkpoint_path
        )

    def experimental_export_all_saved_models(
        self,
        export_dir_base,
        input_receiver_fn_map,
        assets_extra=None,
        as_text: bool = False,
        checkpoint_path=None,
        *,
        platforms=("cpu",),
        format: str = "jax",
    ) -> bytes:
        """Exports several modes into one artifact
        (``Estimator.experimental_export_all_saved_models``).

        Args:
          input_receiver_fn_map: ``{ModeKeys.X: receiver_fn}``. PREDICT gives the serving
            signatures; TRAIN a ``train`` signature and EVAL an ``eval`` signature, which
            take features and labels and return ``loss``, ``predictions/<key>`` (and for EVAL
            ``metrics/<name>/value``, the metric on that batch). Neither changes variables.
          Other arguments: as :meth:`export_saved_model` (``format="tf_saved_model"``
            takes PREDICT alone).

        Returns:
          The export directory, as ``bytes``.
        """
        if not input_receiver_fn_map:
            raise ValueError(f"No valid modes for exporting found. Got {input_receiver_fn_map}.")
        return _writer.export(
            self,
            export_dir_base,
            dict(input_receiver_fn_map),
            assets_extra=assets_extra,
            as_text=as_text,
            checkpoint_path=checkpoint_path,
            platforms=platforms,
            format=format,
        )
