"""``tf.estimator.tpu`` (TF 1.15's ``TPUEstimator``, also ``tf.contrib.tpu``) on whatever
JAX devices are present.

Read from TF 1.15's ``tensorflow/python/tpu/tpu_estimator.py``, ``tpu_config.py``,
``tpu_context.py`` and ``tpu_optimizer.py`` (the same code ships as
``tf.compat.v1.estimator.tpu`` in tensorflow-estimator 2.15). A ``TPUEstimator`` is an
``Estimator`` whose ``model_fn`` returns a :class:`TPUEstimatorSpec`:

* ``RunConfig(tpu_config=TPUConfig(iterations_per_loop=N))``: TF runs ``N`` steps per
  ``session.run`` on the TPU; here ``N`` is ``RunConfig.steps_per_execution`` (up to ``N``
  steps fused into one compiled call). Unlike TF, hooks still see every step.
* ``use_tpu=True`` runs data-parallel over the devices JAX has (``jax.devices()``, the
  first ``TPUConfig.num_shards`` of them): the global batch is split over a mesh of them
  (``RunConfig.mesh``), variables are replicated. ``use_tpu=False`` runs on one device,
  as TF's CPU fallback. Either way the program is the same; TPUs, GPUs or CPUs alike.
* ``train_batch_size`` / ``eval_batch_size`` / ``predict_batch_size`` are **global**
  batch sizes; ``input_fn`` gets ``params['batch_size']`` = the global batch size divided
  by the number of processes (TF's ``PER_HOST_V1`` input: one ``input_fn`` per host), and
  ``model_fn`` gets ``params['batch_size']`` = the global batch size, because ``model_fn``
  is traced once over the whole (sharded) batch. TF calls ``model_fn`` once per TPU core
  and gives it the per-core size (``global / num_shards``); that is the one difference, and
  with ``use_tpu=False`` (or one device) the two agree. Both also get
  ``params['use_tpu']``. With ``use_tpu``, the global batch sizes must divide by the
  number of devices (TF's check).
* :class:`TPUEstimatorSpec`: ``eval_metrics=(metric_fn, tensors)`` becomes
  ``eval_metric_ops = metric_fn(*tensors)`` (or ``**tensors``); ``host_call=(fn, tensors)``
  is called every step (its ``tf.contrib.summary`` summaries are written); ``scaffold_fn``
  is called (``tf.train.init_from_checkpoint`` inside it initialises variables from a
  checkpoint, as TF's); TF's checks and messages on both tuples.
* :class:`CrossShardOptimizer` wraps an optimizer: ``reduction=MEAN`` (TF's default)
  averages the shards' gradients, which is what differentiating the mean loss over the
  global batch gives (so it changes nothing); ``SUM`` adds them (the gradients are
  multiplied by the number of devices).

Not provided: model parallelism (``num_cores_per_replica``), TPU embeddings
(``embedding_config_spec``), ``PER_HOST_V2``/``BROADCAST`` input contexts
(``params['context']``), cluster resolvers; each is refused with the replacement named.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import numbers
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from estimator import Estimator
from estimator.compat._unsupported import module_getattr
from estimator.compat.v1 import losses as _losses
from estimator.compat.v1.estimator._spec import EstimatorSpec
from estimator.compat.v1.train._optimizers import Optimizer
from estimator.config.run_config import RunConfig as _RunConfig
from estimator.fn_args import fn_args
from estimator.hooks.session_run_hook import SessionRunHook
from estimator.mode_keys import ModeKeys

__all__ = [
    "TPUEstimator",
    "TPUEstimatorSpec",
    "TPUConfig",
    "RunConfig",
    "InputPipelineConfig",
    "CrossShardOptimizer",
]

__getattr__ = module_getattr("tf.estimator.tpu", __name__)

_BATCH_SIZE_KEY = "batch_size"
_CTX_KEY = "context"
_USE_TPU_KEY = "use_tpu"
_RESERVED_PARAMS_KEYS = [_BATCH_SIZE_KEY, _CTX_KEY]


class InputPipelineConfig:
    """``tf.estimator.tpu.InputPipelineConfig``: how ``input_fn`` is called (TF's values)."""

    PER_SHARD_V1 = 1
    PER_HOST_V1 = 2
    PER_HOST_V2 = 3
    BROADCAST = 4
    SLICED = 5


def _check_positive_integer(value: Any, name: str) -> None:
    """TF's ``util.check_positive_integer`` (its message)."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be positive integer. Got {value}.")


_TPU_CONFIG_FIELDS = [
    "iterations_per_loop",
    "num_shards",
    "num_cores_per_replica",
    "per_host_input_for_training",
    "tpu_job_name",
    "initial_infeed_sleep_secs",
    "input_partition_dims",
    "eval_training_input_configuration",
    "experimental_host_call_every_n_steps",
    "experimental_allow_per_host_v2_parallel_get_next",
    "experimental_feed_hook",
]


class TPUConfig(collections.namedtuple("TPUConfig", _TPU_CONFIG_FIELDS)):
    """``tf.estimator.tpu.TPUConfig`` (TF 1.15's fields and defaults).

    Args:
      iterations_per_loop: train steps per execution (``RunConfig.steps_per_execution``);
        a positive int (TF also takes a duration such as ``"30s"``: refused here).
      num_shards: how many devices to run on with ``use_tpu`` (default: all of
        ``jax.devices()``).
      per_host_input_for_training: True (``PER_HOST_V1``) or ``PER_HOST_V1``; False
        (``PER_SHARD_V1``) and ``PER_HOST_V2`` are accepted and read the same way here.
      Others: accepted as TF's; ``num_cores_per_replica`` (model parallelism) and
        ``input_partition_dims`` are refused.

    Raises:
      ValueError: TF's checks; model parallelism; a duration as ``iterations_per_loop``.
    """

    def __new__(
        cls,
        iterations_per_loop=2,
        num_shards=None,
        num_cores_per_replica=None,
        per_host_input_for_training=True,
        tpu_job_name=None,
        initial_infeed_sleep_secs=None,
        input_partition_dims=None,
        eval_training_input_configuration=InputPipelineConfig.PER_HOST_V1,
        experimental_host_call_every_n_steps=1,
        experimental_allow_per_host_v2_parallel_get_next=False,
        experimental_feed_hook=None,
    ):
        if isinstance(iterations_per_loop, str):
            raise ValueError(
                f"iterations_per_loop={iterations_per_loop!r}: a duration is not supported; "
                "give a number of steps (it becomes RunConfig.steps_per_execution)."
            )
        _check_positive_integer(iterations_per_loop, "iterations_per_loop")
        if num_shards is not None:
            _check_positive_integer(num_shards, "TPUConfig num_shards")
        if num_cores_per_replica not in (None, 1) or input_partition_dims is not None:
            raise ValueError(
                "Model parallelism (num_cores_per_replica, input_partition_dims) is not "
                "supported: TPUEstimator runs data-parallel over JAX's devices. Shard large "
                "variables with RunConfig(variable_partitions=...) instead."
            )
        if per_host_input_for_training is False:
            per_host_input_for_training = InputPipelineConfig.PER_SHARD_V1
        elif per_host_input_for_training is True:
            per_host_input_for_training = InputPipelineConfig.PER_HOST_V1
        return super().__new__(
            cls,
            iterations_per_loop,
            num_shards,
            num_cores_per_replica,
            per_host_input_for_training,
            tpu_job_name,
            initial_infeed_sleep_secs,
            input_partition_dims,
            eval_training_input_configuration,
            experimental_host_call_every_n_steps,
            experimental_allow_per_host_v2_parallel_get_next,
            experimental_feed_hook,
        )


class RunConfig(_RunConfig):
    """``tf.estimator.tpu.RunConfig``: a ``RunConfig`` with a :class:`TPUConfig`.

    ``tpu_config.iterations_per_loop`` becomes ``steps_per_execution`` (unless that is
    given); ``master``/``evaluation_master`` (TPU addresses) are kept and not used.

    Raises:
      ValueError: both ``master`` and ``cluster`` (TF's message); a cluster resolver
        (JAX finds its devices itself).
    """

    def __init__(
        self, tpu_config=None, evaluation_master=None, master=None, cluster=None, **kwargs
    ) -> None:
        tpu_config = tpu_config or TPUConfig()
        kwargs.setdefault("steps_per_execution", tpu_config.iterations_per_loop)
        super().__init__(**kwargs)
        if master is not None and cluster is not None:
            raise ValueError("Both master and cluster are set.")
        if cluster is not None:
            raise ValueError(
                "RunConfig(cluster=...): TPU cluster resolvers are not supported; JAX finds "
                "the devices of this process itself (jax.devices()). Leave cluster=None."
            )
        object.__setattr__(self, "_tpu_config", tpu_config)
        object.__setattr__(self, "_cluster", None)
        if master is not None:
            object.__setattr__(self, "_master", master)
        object.__setattr__(
            self,
            "_evaluation_master",
            evaluation_master if evaluation_master is not None else self._master,
        )

    tpu_config = property(lambda self: self._tpu_config)
    evaluation_master = property(lambda self: self._evaluation_master)
    cluster = property(lambda self: self._cluster)


def _validate_host_call(name: str, host_call: Any) -> None:
    """TF's ``_OutfeedHostCall.validate`` (its messages)."""
    if not isinstance(host_call, (tuple, list)):
        raise ValueError(f"{name} should be tuple or list")
    if len(host_call) != 2:
        raise ValueError(f"{name} should have two elements.")
    if not callable(host_call[0]):
        raise TypeError(f"{name}[0] should be callable.")
    if not isinstance(host_call[1], (tuple, list, dict)):
        raise ValueError(f"{name}[1] should be tuple or list, or dict.")
    if isinstance(host_call[1], (tuple, list)):
        import inspect

        spec = inspect.getfullargspec(host_call[0])
        if spec.varargs is None and len(host_call[1]) != len(fn_args(host_call[0])):
            raise RuntimeError(
                f"In TPUEstimatorSpec.{name}, length of tensors {len(host_call[1])} does not "
                f"match method args of the function, which takes {len(fn_args(host_call[0]))}."
            )


def _call(host_call) -> Any:
    fn, tensors = host_call
    return fn(**tensors) if isinstance(tensors, dict) else fn(*tensors)


_SPEC_FIELDS = [
    "mode",
    "predictions",
    "loss",
    "train_op",
    "eval_metrics",
    "export_outputs",
    "scaffold_fn",
    "host_call",
    "training_hooks",
    "evaluation_hooks",
    "prediction_hooks",
]


class TPUEstimatorSpec(collections.namedtuple("TPUEstimatorSpec", _SPEC_FIELDS)):
    """``tf.estimator.tpu.TPUEstimatorSpec``: what a ``TPUEstimator``'s ``model_fn``
    returns (see the module docstring for ``eval_metrics``, ``host_call`` and
    ``scaffold_fn``).

    Raises:
      ValueError, TypeError, RuntimeError: TF's checks of ``eval_metrics`` and
        ``host_call`` (a ``(function, tensors)`` pair whose function takes as many
        arguments as there are tensors) and of the hooks.
    """

    def __new__(
        cls,
        mode,
        predictions=None,
        loss=None,
        train_op=None,
        eval_metrics=None,
        export_outputs=None,
        scaffold_fn=None,
        host_call=None,
        training_hooks=None,
        evaluation_hooks=None,
        prediction_hooks=None,
    ):
        if eval_metrics is not None:
            _validate_host_call("eval_metrics", eval_metrics)
        if host_call is not None:
            _validate_host_call("host_call", host_call)
        training_hooks = tuple(training_hooks or [])
        evaluation_hooks = tuple(evaluation_hooks or [])
        prediction_hooks = tuple(prediction_hooks or [])
        for hook in training_hooks + evaluation_hooks + prediction_hooks:
            if not isinstance(hook, SessionRunHook):
                raise TypeError(f"All hooks must be SessionRunHook instances, given: {hook}")
        return super().__new__(
            cls,
            mode,
            predictions,
            loss,
            train_op,
            eval_metrics,
            export_outputs,
            scaffold_fn,
            host_call,
            training_hooks,
            evaluation_hooks,
            prediction_hooks,
        )

    def as_estimator_spec(self) -> EstimatorSpec:
        """The equivalent ``EstimatorSpec`` (TF's CPU path): ``metric_fn`` and the host
        call are called on their tensors, ``scaffold_fn`` is called."""
        eval_metric_ops = None
        if self.eval_metrics is not None and self.mode == ModeKeys.EVAL:
            eval_metric_ops = _call(self.eval_metrics)
        if self.host_call is not None and self.mode != ModeKeys.PREDICT:
            _call(self.host_call)
        if self.scaffold_fn is not None:
            self.scaffold_fn()
        return EstimatorSpec(
            mode=self.mode,
            predictions=self.predictions,
            loss=self.loss,
            train_op=self.train_op,
            eval_metric_ops=eval_metric_ops,
            export_outputs=self.export_outputs,
            training_hooks=self.training_hooks,
            evaluation_hooks=self.evaluation_hooks,
            prediction_hooks=self.prediction_hooks,
        )


_SHARDS: contextvars.ContextVar[int] = contextvars.ContextVar("tpu_shards", default=1)


@contextlib.contextmanager
def _shard_context(shards: int) -> Iterator[None]:
    token = _SHARDS.set(shards)
    try:
        yield
    finally:
        _SHARDS.reset(token)


class CrossShardOptimizer(Optimizer):
    """``tf.tpu.CrossShardOptimizer`` (``tf.contrib.tpu``): the wrapped optimizer, its
    gradients averaged (``MEAN``) or added (``SUM``) across shards (see the module
    docstring). Slots keep the wrapped optimizer's names.

    Raises:
      ValueError: an unsupported ``reduction`` (TF's message); ``group_assignment``.
    """

    def __init__(
        self, opt, reduction=_losses.Reduction.MEAN, name="CrossShardOptimizer",
        group_assignment=None,
    ) -> None:  # fmt: skip
        if reduction not in (_losses.Reduction.SUM, _losses.Reduction.MEAN):
            raise ValueError(f"Unsupported reduction: {reduction}.")
        if group_assignment is not None:
            raise ValueError(
                "CrossShardOptimizer(group_assignment=...) is not supported: gradients are "
                "reduced over every device of the mesh."
            )
        super().__init__(False, name)
        self._opt = opt
        self._reduction = reduction

    def _scaled(self, loss):
        if self._reduction == _losses.Reduction.SUM and _SHARDS.get() > 1:
            return loss * _SHARDS.get()
        return loss

    def minimize(self, loss, global_step=None, var_list=None, *args, **kwargs):
        """The wrapped optimizer's ``minimize`` (see the class docstring)."""
        return self._opt.minimize(self._scaled(loss), global_step, var_list, *args, **kwargs)

    def compute_gradients(self, loss, var_list=None, **kwargs):
        """The wrapped optimizer's ``compute_gradients``."""
        return self._opt.compute_gradients(self._scaled(loss), var_list, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """The wrapped optimizer's ``apply_gradients``."""
        return self._opt.apply_gradients(grads_and_vars, global_step, name)

    def get_slot_names(self) -> list[str]:
        return self._opt.get_slot_names()


def _tpu_shards(config, batch_sizes: dict) -> int:
    """The number of devices a ``use_tpu`` TPUEstimator splits batches over, after TF's
    checks of the batch sizes (``{"train": ..., "eval": ..., "predict": ...}``)."""
    if batch_sizes["train"] is None:
        raise ValueError("`train_batch_size` cannot be `None`")
    for mode, value in batch_sizes.items():
        if value is not None:
            _check_positive_integer(value, f"{mode}_batch_size")
    devices = jax.devices()
    shards = config.tpu_config.num_shards or len(devices)
    if shards > len(devices):
        raise ValueError(
            f"TPUConfig(num_shards={shards}) asks for more devices than JAX has "
            f"({len(devices)}: {devices}). Leave num_shards=None to use them all."
        )
    for mode, value in batch_sizes.items():
        if value is not None and value % shards != 0:
            raise ValueError(
                f"{mode} batch size {value} must be divisible by number of replicas {shards}"
            )
    return shards


class TPUEstimator(Estimator):
    """``tf.estimator.tpu.TPUEstimator`` on JAX devices (see the module docstring).

    Args:
      model_fn: ``model_fn(features, labels, mode, params[, config])`` returning a
        :class:`TPUEstimatorSpec` (or an ``EstimatorSpec``); must take ``params``.
      model_dir, warm_start_from: as ``Estimator``.
      config: a :class:`RunConfig` (required, TF's check).
      params: a dict without ``batch_size`` or ``context`` (TF reserves them).
      use_tpu: run data-parallel over the available devices (False: one device).
      train_batch_size, eval_batch_size, predict_batch_size: global batch sizes.
      eval_on_tpu: False evaluates as ``use_tpu=False``.
      batch_axis, export_to_tpu, export_to_cpu, export_saved_model_api_version: accepted.
      embedding_config_spec: refused (TPU embeddings).

    Raises:
      ValueError: TF's checks (config type, reserved params, batch sizes required, positive
        and divisible by the number of devices with ``use_tpu``); more devices asked for
        (``num_shards``) than there are.
    """

    def __init__(
        self,
        model_fn=None,
        model_dir=None,
        config=None,
        params=None,
        use_tpu=True,
        train_batch_size=None,
        eval_batch_size=None,
        predict_batch_size=None,
        batch_axis=None,
        eval_on_tpu=True,
        export_to_tpu=True,
        export_to_cpu=True,
        warm_start_from=None,
        embedding_config_spec=None,
        export_saved_model_api_version=1,
    ) -> None:
        del batch_axis, export_to_tpu, export_to_cpu, export_saved_model_api_version
        if config is None or not isinstance(config, RunConfig):
            raise ValueError("`config` must be provided with type `tpu_config.RunConfig`")
        if params is not None and any(k in params for k in _RESERVED_PARAMS_KEYS):
            raise ValueError(
                f"{_RESERVED_PARAMS_KEYS} are reserved keys but existed in params {params}."
            )
        if embedding_config_spec is not None:
            raise ValueError(
                "embedding_config_spec (TPU embeddings) is not supported: use "
                "tf.feature_column embedding columns, whose tables update sparsely already."
            )
        if "params" not in fn_args(model_fn):
            raise ValueError(
                f"model_fn ({model_fn}) does not include params argument, required by "
                'TPUEstimator to pass batch size as params["batch_size"]'
            )
        shards = 1
        if use_tpu:
            sizes = {"train": train_batch_size, "eval": eval_batch_size}
            sizes["predict"] = predict_batch_size
            shards = _tpu_shards(config, sizes)
            if config.mesh is None:
                mesh = jax.sharding.Mesh(np.array(jax.devices()[:shards]), ("data",))
                config = config.replace(mesh=mesh)
        self._use_tpu = bool(use_tpu)
        self._eval_on_tpu = bool(eval_on_tpu)
        self._shards = shards
        self._batch_sizes = {
            ModeKeys.TRAIN: train_batch_size,
            ModeKeys.EVAL: eval_batch_size,
            ModeKeys.PREDICT: predict_batch_size,
        }
        super().__init__(
            model_fn=self._tpu_model_fn(model_fn),
            model_dir=model_dir,
            config=config,
            params=dict(params or {}),  # TF always passes params (with the batch size)
            warm_start_from=warm_start_from,
        )

    def _on_tpu(self, mode: str) -> bool:
        return self._use_tpu and (mode != ModeKeys.EVAL or self._eval_on_tpu)

    def _params_for(self, params: dict, mode: str, *, per_process: bool) -> dict:
        params = dict(params or {})
        batch = self._batch_sizes[mode]
        if batch is not None:
            params[_BATCH_SIZE_KEY] = batch // jax.process_count() if per_process else batch
        params[_USE_TPU_KEY] = self._on_tpu(mode)
        return params

    def _tpu_model_fn(self, model_fn: Callable) -> Callable:
        names = fn_args(model_fn)

        def tpu_model_fn(features, labels, mode, params, config):
            if "labels" not in names and labels is not None:
                raise ValueError("model_fn does not take labels, but input_fn returns labels.")
            kwargs = {"params": self._params_for(params, mode, per_process=False)}
            if "labels" in names:
                kwargs["labels"] = labels
            if "mode" in names:
                kwargs["mode"] = mode
            if "config" in names:
                kwargs["config"] = config
            with _shard_context(self._shards if self._on_tpu(mode) else 1):
                spec = model_fn(features=features, **kwargs)
                if isinstance(spec, TPUEstimatorSpec):
                    spec = spec.as_estimator_spec()
            return spec

        return tpu_model_fn

    def _tpu_input_fn(self, input_fn: Callable, mode: str) -> Callable:
        names = fn_args(input_fn)
        if "params" not in names:
            raise ValueError(
                f"input_fn ({input_fn}) does not include params argument, required by "
                'TPUEstimator to pass batch size as params["batch_size"]'
            )

        def tpu_input_fn(params, config):
            kwargs = {"params": self._params_for(params, mode, per_process=True)}
            if "mode" in names:
                kwargs["mode"] = mode
            if "config" in names:
                kwargs["config"] = config
            return input_fn(**kwargs)

        return tpu_input_fn

    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        """``Estimator.train`` with ``params['batch_size']`` given to ``input_fn``."""
        return super().train(
            self._tpu_input_fn(input_fn, ModeKeys.TRAIN), hooks, steps, max_steps,
            saving_listeners,
        )  # fmt: skip

    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        """``Estimator.evaluate`` with ``params['batch_size']`` given to ``input_fn``."""
        return super().evaluate(
            self._tpu_input_fn(input_fn, ModeKeys.EVAL), steps, hooks, checkpoint_path, name
        )

    def predict(
        self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None,
        yield_single_examples=True,
    ):  # fmt: skip
        """``Estimator.predict`` with ``params['batch_size']`` given to ``input_fn``."""
        return super().predict(
            self._tpu_input_fn(input_fn, ModeKeys.PREDICT), predict_keys, hooks,
            checkpoint_path, yield_single_examples,
        )  # fmt: skip
