"""What ``estimator.compat.v1`` says about a TF symbol it does not cover.

Every namespace of the compat package (``tf``, ``tf.nn``, ``tf.train``, ...) ends in a
module ``__getattr__`` made by :func:`module_getattr`: asking for a name it lacks raises
:class:`UnsupportedSymbolError`, which names the TF symbol, says it is not supported and
points to the replacement (:data:`HINTS`, then :data:`PREFIX_HINTS`, then a general
pointer). It is an ``AttributeError`` (so ``hasattr``/``getattr(tf, name, default)`` keep
working) and a ``NotImplementedError``.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["UnsupportedSymbolError", "unsupported", "module_getattr", "hint_for"]

_GENERAL = (
    "Write that part with jax.numpy / jax.nn / optax / estimator directly (see the table "
    "in docs/model_fn.md); `python -m estimator.compat.check <program.py>` lists every TF symbol "
    "a program uses and which are covered."
)

_NO_SESSION = (
    "An Estimator program needs no graph or session: the Estimator traces model_fn and runs "
    "the compiled steps itself."
)

_NO_SPARSE = "Sparse tensors are not provided: feature columns give ids as dense [batch, k]."

#: Replacements for symbols that TF 1.x programs use and this package does not provide.
HINTS: dict[str, str] = {
    "tf.InteractiveSession": _NO_SESSION,
    "tf.Graph": _NO_SESSION,
    "tf.global_variables_initializer": (
        "Variables are initialised by the Estimator from their get_variable initializers."
    ),
    "tf.local_variables_initializer": (
        "Metrics keep no local variables: tf.metrics.* return streaming metrics that the "
        "Estimator merges over the evaluation."
    ),
    "tf.py_func": "Call Python from traced code with jax.pure_callback.",
    "tf.py_function": "Call Python from traced code with jax.pure_callback.",
    "tf.numpy_function": "Call Python from traced code with jax.pure_callback.",
    "tf.while_loop": (
        "Use jax.lax.while_loop(cond_fun, body_fun, init_val) (one carry instead of "
        "loop_vars), or jax.lax.fori_loop."
    ),
    "tf.case": "Use jax.lax.switch(index, branches) or nested tf.cond.",
    "tf.train.Saver": (
        "Checkpoints are written by the Estimator (RunConfig.save_checkpoints_steps / "
        "keep_checkpoint_max) with orbax; read one with estimator.Checkpointer or "
        "Estimator.get_variable_value."
    ),
    "tf.train.MonitoredTrainingSession": _NO_SESSION + " Use Estimator.train with hooks.",
    "tf.train.MonitoredSession": _NO_SESSION + " Use Estimator.train with hooks.",
    "tf.train.ExponentialMovingAverage": (
        "Keep an average as a non-trainable variable: avg = tf.get_variable(..., "
        "trainable=False); tf.assign(avg, decay * avg + (1 - decay) * value); or use "
        "optax.ema around the optimizer."
    ),
    "tf.train.SyncReplicasOptimizer": (
        "Training is synchronous on a jax mesh already (RunConfig, TF_CONFIG); use the "
        "optimizer alone."
    ),
    "tf.train.replica_device_setter": (
        "There are no parameter servers: variables live on the training processes (see "
        "docs/distributed.md)."
    ),
    "tf.device": "Placement is jax's: the Estimator shards over RunConfig's mesh.",
    "tf.image": "Image ops: use jax.image (resize) and jax.numpy on NHWC arrays.",
    "tf.strings": (
        "tf.strings provides to_hash_bucket_fast, strip, lower, upper, length, join, split, "
        "regex_full_match, to_number and as_string; do the rest on the host in the input "
        "pipeline (NumPy on bytes) or with feature columns (tf.feature_column.*)."
    ),
    "tf.string_to_hash_bucket_strong": (
        "The keyed SipHash bucket is not provided: use tf.string_to_hash_bucket_fast "
        "(FarmHash, the hash of categorical_column_with_hash_bucket)."
    ),
    "tf.string_to_hash_bucket": (
        "TF's legacy hash is not provided (TF 1 deprecated it): use tf.string_to_hash_bucket_fast."
    ),
    "tf.sparse": _NO_SPARSE,
    "tf.SparseTensor": _NO_SPARSE,
    "tf.data.Dataset.zip": "Zip the arrays before slicing: from_tensor_slices((a, b)).",
}

_QUEUES = (
    "TF 1's queue-based input is replaced by tf.data: return a tf.data.Dataset (or "
    "tf.estimator.inputs.numpy_input_fn) from input_fn."
)
for _name in (
    "batch batch_join shuffle_batch shuffle_batch_join maybe_batch maybe_batch_join "
    "maybe_shuffle_batch maybe_shuffle_batch_join input_producer string_input_producer "
    "range_input_producer slice_input_producer limit_epochs start_queue_runners "
    "add_queue_runner QueueRunner queue_runner Coordinator match_filenames_once"
).split():
    HINTS[f"tf.train.{_name}"] = _QUEUES
HINTS["tf.contrib.learn"] = (
    "tf.contrib.learn became tf.estimator: use tf.estimator.Estimator, the canned "
    "estimators and tf.estimator.inputs.numpy_input_fn."
)
HINTS["tf.contrib.slim"] = "Build the model with tf.layers.* / tf.contrib.layers.* instead of slim."
HINTS["tf.contrib.training.HParams"] = (
    "Keep hyperparameters in a dict (params=...) or an argparse.Namespace."
)
HINTS["tf.contrib.cluster_resolver"] = (
    "Cluster resolvers are not needed: JAX finds its devices (jax.devices()); a TPUEstimator "
    "runs on them with RunConfig(cluster=None)."
)
HINTS["tf.contrib.distribute"] = (
    "Distribution is jax's: RunConfig(mesh=...) or TF_CONFIG (see docs/distributed.md)."
)
HINTS["tf.strings.to_hash_bucket_strong"] = HINTS["tf.string_to_hash_bucket_strong"]
HINTS["tf.strings.to_hash_bucket"] = HINTS["tf.string_to_hash_bucket"]
HINTS["tf.train.warm_start"] = (
    "Use warm_start_from=tf.estimator.WarmStartSettings(ckpt_to_initialize_from, "
    "vars_to_warm_start, var_name_to_prev_var_name) on the Estimator, or "
    "tf.train.init_from_checkpoint inside model_fn."
)
HINTS["tf.train.NewCheckpointReader"] = (
    "Read checkpoints with tf.train.list_variables / tf.train.load_variable (or "
    "estimator.Checkpointer)."
)

#: Replacements by namespace, for symbols under it that :data:`HINTS` does not list.
PREFIX_HINTS: dict[str, str] = {
    "tf.contrib.": (
        "Only part of tf.contrib is provided (layers, framework, lookup, data, estimator, "
        "metrics, tpu, summary, rnn, crf: see estimator.compat.v1.contrib); TensorFlow 2 "
        "removed the rest, and its replacement depends on the op."
    ),
    "tf.keras.": (
        "Keras models and layers are not provided: build the model in model_fn with "
        "tf.layers.* (estimator.layers), or use Keras 3 on JAX outside the Estimator."
    ),
    "tf.compat.v2.": "Only the TF 1.x API (tf.compat.v1) is provided.",
    "tf.distribute.": (
        "Distribution is jax's: RunConfig(mesh=...) or TF_CONFIG (see docs/distributed.md)."
    ),
    "tf.saved_model.": (
        "tf.saved_model provides signature_constants and tag_constants; export with "
        "Estimator.export_saved_model (a jax.export artifact) and load it with "
        "estimator.export.load."
    ),
    "tf.tpu.": (
        "TPU system ops are not provided: tf.estimator.tpu.TPUEstimator runs on whatever "
        "JAX devices are present (tf.tpu.CrossShardOptimizer is provided)."
    ),
}


class UnsupportedSymbolError(AttributeError, NotImplementedError):
    """A TF symbol that ``estimator.compat.v1`` does not provide.

    Attributes:
      symbol: the TF name asked for, e.g. ``"tf.Session"``.
    """

    def __init__(self, symbol: str, message: str) -> None:
        super().__init__(message)
        self.symbol = symbol


def hint_for(symbol: str) -> str:
    """The replacement text for a TF symbol (exact, then by namespace, then general)."""
    if symbol in HINTS:
        return HINTS[symbol]
    parts = symbol.split(".")
    for end in range(len(parts) - 1, 0, -1):  # tf.image.resize -> the hint of tf.image
        prefix = ".".join(parts[:end])
        if prefix in HINTS and prefix != "tf":
            return HINTS[prefix]
    for prefix, text in PREFIX_HINTS.items():
        if symbol.startswith(prefix) or symbol == prefix.rstrip("."):
            return text
    return _library_equivalent(parts[-1]) or _GENERAL


def _library_equivalent(name: str) -> str | None:
    """ "Use jax.numpy.<name> ..." when a library of the stack has a function of that name
    (``tf.nn.ctc_loss`` -> ``optax.ctc_loss``, ``tf.searchsorted`` -> ``jax.numpy``'s)."""
    import importlib

    for module in ("jax.numpy", "jax.nn", "jax.lax", "optax"):
        if callable(getattr(importlib.import_module(module), name, None)):
            return (
                f"Use {module}.{name} (check its arguments against TF's), inside model_fn or "
                "a Dataset.map; `python -m estimator.compat.check <program.py>` lists every "
                "TF symbol a program uses and which are covered."
            )
    return None


def unsupported(symbol: str) -> UnsupportedSymbolError:
    """The error for ``symbol`` (``"tf.Session"``): what is missing and what to use."""
    return UnsupportedSymbolError(
        symbol,
        f"{symbol} is not supported by estimator.compat.v1 (TF 1.x's API on JAX, for "
        f"Estimator programs). {hint_for(symbol)}",
    )


def module_getattr(tf_prefix: str, module_name: str) -> Callable[[str], object]:
    """A module ``__getattr__`` raising :func:`unsupported` for names the module lacks.

    Args:
      tf_prefix: the TF name of the namespace, e.g. ``"tf.nn"``.
      module_name: the module's ``__name__`` (for dunder look-ups, which stay plain
        ``AttributeError``s: tools probe those).
    """

    def __getattr__(name: str):
        if name.startswith("__") or name.startswith("_"):
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        raise unsupported(f"{tf_prefix}.{name}")

    return __getattr__
