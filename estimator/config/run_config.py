"""``RunConfig``: where and how an Estimator runs (``tf.estimator.RunConfig``).

Fields, defaults, validation messages and ``replace`` follow TF 2.15
(``tensorflow_estimator/python/estimator/run_config.py``). Fields that configure TF's
graph runtime (``session_config``, ``device_fn``, ``protocol``,
``session_creation_timeout_secs``, ``checkpoint_save_graph_def``,
``experimental_max_worker_delay_secs``) are accepted and validated for compatibility and
have no effect. Distribution is a ``jax.sharding.Mesh`` (``mesh=``) instead of a
``tf.distribute`` strategy.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import tempfile
from typing import Any

import jax

from estimator.config import dtype_policies as _dtype_policy
from estimator.config import platform
from estimator.config.tf_config import (
    ClusterSpec,
    TaskType,
    global_task_id,
    session_master,
    validate_task,
)
from estimator.fn_args import fn_args
from estimator.io import fs

__all__ = ["RunConfig"]

logger = logging.getLogger("estimator")

_USE_DEFAULT = object()

_DEFAULT_REPLACEABLE_LIST = [
    "model_dir",
    "tf_random_seed",
    "save_summary_steps",
    "save_checkpoints_steps",
    "save_checkpoints_secs",
    "session_config",
    "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours",
    "log_step_count_steps",
    "train_distribute",
    "device_fn",
    "protocol",
    "eval_distribute",
    "experimental_distribute",
    "experimental_max_worker_delay_secs",
    "session_creation_timeout_secs",
    "checkpoint_save_graph_def",
]
# Ours, beyond TF's list.
_EXTRA_REPLACEABLE = [
    "random_seed",
    "mesh",
    "steps_per_execution",
    "save_checkpoint_on_preemption",
    "compilation_cache_dir",
    "variable_partitions",
    "restore_fallback",
    "dtype_policy",
    "train_metrics_steps",
]

_SAVE_CKPT_ERR = "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set."


def _validate(config: RunConfig) -> None:
    """TF's ``_validate_properties``: same checks, same order, same messages."""

    def check(name, cond, message):
        value = getattr(config, name)
        if value is not None and not cond(value):
            raise ValueError(message)

    check("model_dir", lambda d: d, "model_dir should be non-empty")
    if config.model_dir:
        # A URL is served by its file system (estimator.io.fs), or refused here, naming
        # the package to install; it never becomes a local directory named after its scheme.
        fs.check(config.model_dir, "model_dir", write=True)
    check("save_summary_steps", lambda s: s >= 0, "save_summary_steps should be >= 0")
    check("save_checkpoints_steps", lambda s: s >= 0, "save_checkpoints_steps should be >= 0")
    check("save_checkpoints_secs", lambda s: s >= 0, "save_checkpoints_secs should be >= 0")
    check("keep_checkpoint_max", lambda k: k >= 0, "keep_checkpoint_max should be >= 0")
    check(
        "keep_checkpoint_every_n_hours",
        lambda h: h > 0,
        "keep_checkpoint_every_n_hours should be > 0",
    )
    check("log_step_count_steps", lambda n: n > 0, "log_step_count_steps should be > 0")
    check(
        "tf_random_seed",
        lambda s: isinstance(s, int) and not isinstance(s, bool),
        "tf_random_seed must be integer.",
    )
    check(
        "experimental_max_worker_delay_secs",
        lambda d: isinstance(d, int),
        "experimental_max_worker_delay_secs must be an integer if set.",
    )
    check(
        "session_creation_timeout_secs",
        lambda t: t > 0,
        "session_creation_timeout_secs should be > 0",
    )
    check(
        "device_fn",
        lambda f: callable(f) and set(fn_args(f)) == {"op"},
        'device_fn must be callable with exactly one argument "op".',
    )
    check(
        "protocol",
        lambda p: p in (None, "grpc", "grpc+verbs"),
        "protocol should be grpc or grpc+verbs",
    )
    check(
        "steps_per_execution",
        lambda n: isinstance(n, int) and n >= 1,
        f"steps_per_execution must be an integer >= 1, given: {config.steps_per_execution!r}",
    )
    check(
        "train_metrics_steps",
        lambda n: isinstance(n, int) and not isinstance(n, bool) and n >= 1,
        "train_metrics_steps must be None or an integer >= 1 (report the training metrics "
        f"every that many steps), given: {config.train_metrics_steps!r}",
    )
    check(
        "mesh",
        lambda m: isinstance(m, jax.sharding.Mesh),
        f"mesh must be a jax.sharding.Mesh, given: {config.mesh!r}",
    )
    check(
        "variable_partitions",
        lambda p: (
            isinstance(p, dict)
            and all(
                isinstance(k, str) and isinstance(v, jax.sharding.PartitionSpec)
                for k, v in p.items()
            )
        ),
        "variable_partitions must be a dict {regex: jax.sharding.PartitionSpec}, e.g. "
        "{r'embedding/weights$': PartitionSpec('data', None)}; given: "
        f"{config.variable_partitions!r}",
    )
    for name in ("train_distribute", "eval_distribute", "experimental_distribute"):
        if getattr(config, name) is not None:
            raise ValueError(
                f"{name} takes a tf.distribute strategy in TF, which has no JAX counterpart. "
                "For data parallelism pass mesh=jax.sharding.Mesh(jax.devices(), ('data',)) "
                "to RunConfig: the batch is sharded over the mesh and variables replicated."
            )


def _replacements(kwargs: dict) -> dict:
    """``RunConfig.replace``'s arguments by attribute name, in their stored form; TF's error
    for a property that cannot be replaced."""
    allowed = _DEFAULT_REPLACEABLE_LIST + _EXTRA_REPLACEABLE
    for key in kwargs:
        if key not in allowed:
            raise ValueError(
                f"Replacing {key} is not supported. Allowed properties are "
                f"{_DEFAULT_REPLACEABLE_LIST}."
            )
    if "random_seed" in kwargs:
        kwargs["tf_random_seed"] = kwargs.pop("random_seed")
    if "dtype_policy" in kwargs:
        kwargs["dtype_policy"] = _dtype_policy.get(kwargs["dtype_policy"])
    if "save_checkpoint_on_preemption" in kwargs:
        kwargs["save_checkpoint_on_preemption"] = bool(kwargs["save_checkpoint_on_preemption"])
    return kwargs


def _one_save_trigger(config: RunConfig, replaced: dict) -> None:
    """TF's rule: replacing one of ``save_checkpoints_steps`` / ``save_checkpoints_secs``
    with a value clears the other; replacing both with values is an error."""
    steps, secs = config._save_checkpoints_steps, config._save_checkpoints_secs
    if "save_checkpoints_steps" in replaced and "save_checkpoints_secs" in replaced:
        if steps is not None and secs is not None:
            raise ValueError(_SAVE_CKPT_ERR)
    elif "save_checkpoints_steps" in replaced and steps is not None:
        object.__setattr__(config, "_save_checkpoints_secs", None)
    elif "save_checkpoints_secs" in replaced and secs is not None:
        object.__setattr__(config, "_save_checkpoints_steps", None)


def _model_dir(tf_config: dict, model_dir) -> str | None:
    """TF's ``_get_model_dir``: ``model_dir`` argument or ``TF_CONFIG['model_dir']``."""
    if model_dir is not None:
        model_dir = os.fspath(model_dir)
    if model_dir == "":
        raise ValueError("model_dir should be non-empty.")
    in_config = tf_config.get("model_dir")
    if in_config == "":
        raise ValueError("model_dir in TF_CONFIG should be non-empty.")
    if in_config:
        fs.check(in_config, 'TF_CONFIG["model_dir"]', write=True)
    if in_config:
        if model_dir and in_config != model_dir:
            raise ValueError(
                "`model_dir` provided in RunConfig construct, if set, must have the same value "
                f"as the model_dir in TF_CONFIG. model_dir: {model_dir}\n"
                f'TF_CONFIG["model_dir"]: {in_config}.\n'
            )
        logger.info("Using model_dir in TF_CONFIG: %s", in_config)
    return model_dir or in_config


class RunConfig:
    """Run configuration of an Estimator; immutable, changed with :meth:`replace`.

    Args:
      model_dir: directory for checkpoints, event files and exports (str or PathLike), or
        a storage URL (``gs://bucket/dir``, ``s3://bucket/dir``, any fsspec protocol whose
        package is installed; see ``estimator.io.fs``).
      tf_random_seed: int seed of every random choice (initial values, ``next_rng_key``).
        None draws one seed per Estimator (logged), like TF's unseeded graphs.
      save_summary_steps: write summaries every this many steps (0 disables).
      save_checkpoints_steps: save a checkpoint every this many steps.
      save_checkpoints_secs: save a checkpoint every this many seconds. When neither is
        given, 600 seconds; both given is an error; both explicitly None disables
        checkpoints altogether, as in TF.
      session_config: accepted for compatibility; ignored.
      keep_checkpoint_max: the most recent checkpoints to keep (0 or None keeps all).
      keep_checkpoint_every_n_hours: additionally keep one checkpoint per this many hours.
      log_step_count_steps: log loss and global_step/sec every this many steps.
      train_distribute, eval_distribute, experimental_distribute: must be None (use
        ``mesh``).
      device_fn, protocol, experimental_max_worker_delay_secs: accepted and validated as
        TF does; no effect.
      session_creation_timeout_secs, checkpoint_save_graph_def: the same.
      random_seed: keyword-only alias of ``tf_random_seed``.
      mesh: keyword-only ``jax.sharding.Mesh`` for data parallelism: each batch is sharded
        over the mesh's first axis, variables are replicated. None runs on one device.
      steps_per_execution: keyword-only; up to this many train steps whose values no hook
        fetches run in one device call (a ``lax.scan``), which hides the per-call dispatch
        cost of small models (TPUEstimator's ``iterations_per_loop``, Keras'
        ``steps_per_execution``). Hooks are still called at every step, in order; a hook
        that fetches a value or reads the state runs the queued steps first. Batches from
        ``input_fn`` must not be modified after they are yielded. 1 runs each step alone.
        In a multi-process job every process runs the same calls, so hooks given to
        ``train()`` must fetch at the same steps on every process (count steps, as
        ``every_n_iter`` does, rather than each process's clock).
      save_checkpoint_on_preemption: keyword-only; on SIGTERM during ``train()``, finish
        the current step, save a checkpoint of it and raise ``SystemExit(143)`` (see
        ``estimator.engine.interrupt``). False keeps TF's behaviour: SIGTERM ends the process at
        once and the steps since the last checkpoint are lost.
      compilation_cache_dir: keyword-only; where JAX keeps compiled programs across
        processes (``estimator.config.platform``): by default
        ``$JAX_ESTIMATOR_CACHE_DIR`` or ``~/.cache/jax-estimator/xla``; None turns it off.
        Ignored when the process has set JAX's cache directory itself.
      variable_partitions: keyword-only ``{regex: jax.sharding.PartitionSpec}``: variables
        whose name matches a regex (``re.search``, first match wins) are sharded over the
        mesh by that spec — e.g. ``{r"embedding_weights$": PartitionSpec("data", None)}``
        splits a large table's rows over the ``data`` axis — with their optimizer slots;
        the others are replicated. Checkpoints keep the shards (each process writes its
        own) and restore onto any mesh. Needs a mesh (``mesh=``, or a multi-process job).
      restore_fallback: keyword-only; when the latest checkpoint is damaged (a file that
        cannot be read, an array that does not match its checksum: see
        ``estimator.checkpoint``), ``train()`` moves it aside (renamed
        ``damaged.model.ckpt_<step>``), logs which checkpoint it skipped and why, and
        resumes from the newest intact one. False (the default, as TF) raises
        ``estimator.checkpoint.DataLossError``. The chief checks the checkpoint it resumes
        from before training (one more read of it).
      dtype_policy: keyword-only; mixed precision like Keras 3's ``dtype_policy``:
        ``"float32"`` (default), ``"mixed_bfloat16"`` or ``"mixed_float16"`` (or a
        ``DTypePolicy``, or a ``keras.DTypePolicy`` of those names). Variables stay float32
        (checkpoints, exports); ``est.layers``, ``estimator.modules`` and the canned DNN
        towers compute in the lower precision; the loss is float32, and ``mixed_float16``
        scales it dynamically (see ``estimator.model.dtype_policy``). Read back as a
        ``DTypePolicy``.
      train_metrics_steps: keyword-only; report the ``eval_metric_ops`` computed on the
        training batches every this many steps (and at each epoch's end): they accumulate
        inside the compiled step with the same streaming metric states as ``evaluate()``
        (merged across devices and processes), and are logged with the mean loss, written
        to TensorBoard in ``model_dir`` under the metrics' names, and kept in
        ``session.logs`` as ``"train/<name>"`` for hooks and handlers
        (``estimator.handlers.MetricHandler``, which ``train()`` adds). None (the default,
        as TF, which ignores ``eval_metric_ops`` in TRAIN mode) computes nothing.

    Raises:
      ValueError: TF's messages for invalid values (e.g. "save_summary_steps should be >=
        0", "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set.").
    """

    def __init__(
        self,
        model_dir=None,
        tf_random_seed: int | None = None,
        save_summary_steps: int = 100,
        save_checkpoints_steps: Any = _USE_DEFAULT,
        save_checkpoints_secs: Any = _USE_DEFAULT,
        session_config: Any = None,
        keep_checkpoint_max: int | None = 5,
        keep_checkpoint_every_n_hours: float = 10000,
        log_step_count_steps: int = 100,
        train_distribute: Any = None,
        device_fn: Any = None,
        protocol: str | None = None,
        eval_distribute: Any = None,
        experimental_distribute: Any = None,
        experimental_max_worker_delay_secs: int | None = None,
        session_creation_timeout_secs: int = 7200,
        checkpoint_save_graph_def: bool = True,
        *,
        random_seed: int | None = None,
        mesh: jax.sharding.Mesh | None = None,
        steps_per_execution: int = 32,
        save_checkpoint_on_preemption: bool = True,
        compilation_cache_dir: str | None = _USE_DEFAULT,
        variable_partitions: dict | None = None,
        restore_fallback: bool = False,
        dtype_policy: Any = None,
        train_metrics_steps: int | None = None,
    ) -> None:
        if save_checkpoints_steps is _USE_DEFAULT and save_checkpoints_secs is _USE_DEFAULT:
            save_checkpoints_steps, save_checkpoints_secs = None, 600
        elif save_checkpoints_secs is _USE_DEFAULT:
            save_checkpoints_secs = None
        elif save_checkpoints_steps is _USE_DEFAULT:
            save_checkpoints_steps = None
        elif save_checkpoints_steps is not None and save_checkpoints_secs is not None:
            raise ValueError(_SAVE_CKPT_ERR)
        if random_seed is not None:
            if tf_random_seed is not None and tf_random_seed != random_seed:
                raise ValueError(
                    f"tf_random_seed={tf_random_seed} and random_seed={random_seed} disagree; "
                    "random_seed is an alias of tf_random_seed: give one of them."
                )
            tf_random_seed = random_seed

        tf_config = json.loads(os.environ.get("TF_CONFIG", "{}") or "{}")
        values = dict(
            model_dir=_model_dir(tf_config, model_dir),
            tf_random_seed=tf_random_seed,
            save_summary_steps=save_summary_steps,
            save_checkpoints_steps=save_checkpoints_steps,
            save_checkpoints_secs=save_checkpoints_secs,
            session_config=session_config,
            keep_checkpoint_max=keep_checkpoint_max,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
            log_step_count_steps=log_step_count_steps,
            train_distribute=train_distribute,
            device_fn=device_fn,
            protocol=protocol,
            eval_distribute=eval_distribute,
            experimental_distribute=experimental_distribute,
            experimental_max_worker_delay_secs=experimental_max_worker_delay_secs,
            session_creation_timeout_secs=session_creation_timeout_secs,
            checkpoint_save_graph_def=checkpoint_save_graph_def,
            mesh=mesh,
            steps_per_execution=steps_per_execution,
            save_checkpoint_on_preemption=bool(save_checkpoint_on_preemption),
            compilation_cache_dir=platform.default_cache_dir()
            if compilation_cache_dir is _USE_DEFAULT
            else compilation_cache_dir,
            variable_partitions=variable_partitions,
            restore_fallback=bool(restore_fallback),
            dtype_policy=_dtype_policy.get(dtype_policy),
            train_metrics_steps=train_metrics_steps,
        )
        for key, value in values.items():
            object.__setattr__(self, "_" + key, value)
        object.__setattr__(self, "_tf_config", tf_config)
        self._init_cluster(tf_config)
        _validate(self)

    def _init_cluster(self, tf_config: dict) -> None:
        """Task and cluster properties from TF_CONFIG, with TF 2.15's rules and messages.

        TF's ``_init_distributed_setting_from_environment_var`` (and its ``master``
        variant): without a cluster the task must be worker 0; with one, the cluster needs
        exactly one ``chief`` (or legacy ``master``) node, the task type and index must be
        set and valid; an evaluator is outside the training cluster.
        """
        cluster = tf_config.get("cluster") or {}
        task = tf_config.get("task") or {}
        global_id: int | None = 0
        service = tf_config.get("service")
        if service is not None and not isinstance(service, dict):
            raise TypeError(
                f'If "service" is set in TF_CONFIG, it must be a dict. Given {type(service)}'
            )
        master = tf_config.get("session_master", "")
        evaluation_master = tf_config.get("eval_session_master", "") if not cluster else ""
        if not cluster:
            task_type = task.get("type", TaskType.WORKER)
            task_id = int(task.get("index", 0))
            if task_type != TaskType.WORKER:
                raise ValueError('If "cluster" is not set in TF_CONFIG, task type must be WORKER.')
            if task_id != 0:
                raise ValueError('If "cluster" is not set in TF_CONFIG, task index must be 0.')
            is_chief, n_workers, n_ps = True, 1, 0
        else:
            chief = TaskType.CHIEF
            if TaskType.MASTER in cluster:
                if TaskType.CHIEF in cluster:
                    raise ValueError(
                        "If `master` node exists in `cluster`, job `chief` is not supported."
                    )
                chief = TaskType.MASTER
            task_type, task_id = validate_task(cluster, task, chief)
            if task_type == TaskType.EVALUATOR:
                if chief == TaskType.MASTER:
                    raise ValueError(
                        "If `master` node exists in `cluster`, task_type `evaluator` is not "
                        "supported."
                    )
                # The evaluator is not part of the training cluster.
                cluster, is_chief, n_workers, n_ps, global_id = {}, False, 0, 0, None
                master = ""
                evaluation_master = tf_config.get("eval_session_master", "")
            else:
                is_chief = task_type == chief
                n_workers = len(cluster.get(TaskType.WORKER, [])) + len(cluster.get(chief, []))
                n_ps = len(cluster.get(TaskType.PS, []))
                global_id = global_task_id(cluster, task_type, task_id, chief)
                master = session_master(cluster, task_type, task_id, tf_config)
        for key, value in dict(
            cluster_spec=ClusterSpec(cluster),
            master=master,
            evaluation_master=evaluation_master,
            service=service,
            task_type=task_type,
            task_id=task_id,
            is_chief=is_chief,
            num_worker_replicas=n_workers,
            num_ps_replicas=n_ps,
            global_id_in_cluster=global_id,
        ).items():
            object.__setattr__(self, "_" + key, value)

    def __setattr__(self, name, value):
        raise AttributeError(
            f"RunConfig is immutable: use config.replace({name}=...) to get a changed copy."
        )

    def replace(self, **kwargs) -> RunConfig:
        """A copy with some properties replaced, as TF's ``RunConfig.replace``.

        Setting only one of ``save_checkpoints_steps`` / ``save_checkpoints_secs`` to a value
        clears the other; setting both to values is an error.

        Raises:
          ValueError: "Replacing X is not supported. Allowed properties are [...]." for
            other names, and the constructor's validation errors.
        """
        kwargs = _replacements(kwargs)
        # TF deep-copies: a subclass, overridden task properties and an evaluator's cluster
        # survive (TF_CONFIG is not read again). Devices are not copied: the mesh is shared.
        new = copy.deepcopy(self, {id(self._mesh): self._mesh})
        for key, value in kwargs.items():
            object.__setattr__(new, "_" + key, value)
        _one_save_trigger(new, kwargs)
        _validate(new)
        return new

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{k}={getattr(self, '_' + k)!r}"
            for k in (
                "model_dir",
                "tf_random_seed",
                "save_summary_steps",
                "save_checkpoints_steps",
                "save_checkpoints_secs",
                "keep_checkpoint_max",
                "log_step_count_steps",
            )
        )
        return f"RunConfig({fields})"

    # Properties (read-only), TF's names.
    model_dir = property(lambda self: self._model_dir)
    tf_random_seed = property(lambda self: self._tf_random_seed)
    random_seed = property(lambda self: self._tf_random_seed)
    save_summary_steps = property(lambda self: self._save_summary_steps)
    save_checkpoints_steps = property(lambda self: self._save_checkpoints_steps)
    save_checkpoints_secs = property(lambda self: self._save_checkpoints_secs)
    session_config = property(lambda self: self._session_config)
    keep_checkpoint_max = property(lambda self: self._keep_checkpoint_max)
    keep_checkpoint_every_n_hours = property(lambda self: self._keep_checkpoint_every_n_hours)
    log_step_count_steps = property(lambda self: self._log_step_count_steps)
    train_distribute = property(lambda self: self._train_distribute)
    eval_distribute = property(lambda self: self._eval_distribute)
    experimental_distribute = property(lambda self: self._experimental_distribute)
    device_fn = property(lambda self: self._device_fn)
    protocol = property(lambda self: self._protocol)
    experimental_max_worker_delay_secs = property(
        lambda self: self._experimental_max_worker_delay_secs
    )
    session_creation_timeout_secs = property(lambda self: self._session_creation_timeout_secs)
    checkpoint_save_graph_def = property(lambda self: self._checkpoint_save_graph_def)
    mesh = property(lambda self: self._mesh)
    steps_per_execution = property(lambda self: self._steps_per_execution)
    save_checkpoint_on_preemption = property(lambda self: self._save_checkpoint_on_preemption)
    compilation_cache_dir = property(lambda self: self._compilation_cache_dir)
    variable_partitions = property(lambda self: self._variable_partitions)
    restore_fallback = property(lambda self: self._restore_fallback)
    dtype_policy = property(lambda self: self._dtype_policy)
    train_metrics_steps = property(lambda self: self._train_metrics_steps)
    cluster_spec = property(lambda self: self._cluster_spec)
    task_type = property(lambda self: self._task_type)
    task_id = property(lambda self: self._task_id)
    is_chief = property(lambda self: self._is_chief)
    num_worker_replicas = property(lambda self: self._num_worker_replicas)
    num_ps_replicas = property(lambda self: self._num_ps_replicas)
    master = property(lambda self: self._master)
    evaluation_master = property(lambda self: self._evaluation_master)
    service = property(lambda self: self._service)

    @property
    def global_id_in_cluster(self) -> int | None:
        """The task's index over the chief, the other jobs sorted by name, then ps (TF's
        ``_get_global_id_in_cluster``); 0 without a cluster, None for an evaluator."""
        return self._global_id_in_cluster


def config_with_model_dir(config, model_dir) -> RunConfig:
    """TF's ``maybe_overwrite_model_dir_and_session_config``."""
    if config is None:
        config = RunConfig()
        logger.info("Using default config.")
    if not isinstance(config, RunConfig):
        raise ValueError(f"config must be an instance of `RunConfig`, but provided {config}.")
    if model_dir is not None:
        model_dir = os.fspath(model_dir)
        if model_dir:
            fs.check(model_dir, "model_dir", write=True)
        if config.model_dir is not None and config.model_dir != model_dir:
            raise ValueError(
                "`model_dir` are set both in constructor and `RunConfig`, but with different "
                f"values. In constructor: '{model_dir}', in `RunConfig`: '{config.model_dir}' "
            )
    if model_dir:
        config = config.replace(model_dir=model_dir)
    elif config.model_dir is None:
        model_dir = tempfile.mkdtemp()
        logger.warning("Using temporary folder as model directory: %s", model_dir)
        config = config.replace(model_dir=model_dir)
    normal = fs.check(config.model_dir, "model_dir", write=True)  # file:// and trailing /
    platform.storage_environment()  # the storage clients follow the environment of now
    if normal != config.model_dir:
        config = config.replace(model_dir=normal)
    return config
