"""Which ``estimator.compat.v1`` namespace a TensorFlow module path stands for (shared by
``check`` and ``port``).

``tensorflow``, ``tensorflow.compat.v1`` and ``estimator.compat[.v1]`` are the ``tf``
namespace itself; their public submodules (``tensorflow.contrib.layers``,
``tensorflow.estimator.export``) are the same path under it. TF 1 programs also import
TensorFlow's private modules (``from tensorflow.python.data import Dataset``,
``from tensorflow.python.platform import gfile``) and the estimator package
(``tensorflow_estimator``); :data:`PRIVATE` maps those to the namespace that holds their
names.
"""

from __future__ import annotations

__all__ = ["PRIVATE", "compat_path", "is_tf_module"]

#: TensorFlow's private module paths (and prefixes) -> the namespace path of their names.
PRIVATE: dict[str, tuple[str, ...]] = {
    "tensorflow.python.data": ("data",),
    "tensorflow.python.data.ops.dataset_ops": ("data",),
    "tensorflow.python.data.ops.readers": ("data",),
    "tensorflow.python.data.ops.iterator_ops": ("data",),
    "tensorflow.python.data.experimental": ("data", "experimental"),
    "tensorflow.python.platform.gfile": ("gfile",),
    "tensorflow.python.platform.tf_logging": ("logging",),
    "tensorflow.python.platform.app": ("app",),
    "tensorflow.python.platform.flags": ("flags",),
    "tensorflow.python.framework.errors": ("errors",),
    "tensorflow.python.framework.errors_impl": ("errors",),
    "tensorflow.python.framework.dtypes": ("dtypes",),
    "tensorflow.python.framework.ops": (),
    "tensorflow.python.framework.constant_op": (),
    "tensorflow.python.ops.array_ops": (),
    "tensorflow.python.ops.math_ops": (),
    "tensorflow.python.ops.init_ops": (),
    "tensorflow.python.ops.variable_scope": (),
    "tensorflow.python.ops.control_flow_ops": (),
    "tensorflow.python.ops.nn": ("nn",),
    "tensorflow.python.ops.nn_ops": ("nn",),
    "tensorflow.python.ops.rnn": ("nn",),
    "tensorflow.python.ops.rnn_cell": ("nn", "rnn_cell"),
    "tensorflow.python.ops.rnn_cell_impl": ("nn", "rnn_cell"),
    "tensorflow.python.ops.metrics": ("metrics",),
    "tensorflow.python.ops.losses.losses": ("losses",),
    "tensorflow.python.ops.string_ops": ("strings",),
    "tensorflow.python.ops.parsing_ops": ("io",),
    "tensorflow.python.lib.io.tf_record": ("python_io",),
    "tensorflow.python.summary.summary": ("summary",),
    "tensorflow.python.summary.writer.writer_cache": ("summary",),
    "tensorflow.python.training": ("train",),
    "tensorflow.python.training.training": ("train",),
    "tensorflow.python.training.session_run_hook": ("train",),
    "tensorflow.python.training.basic_session_run_hooks": ("train",),
    "tensorflow.python.feature_column": ("feature_column",),
    "tensorflow.python.feature_column.feature_column": ("feature_column",),
    "tensorflow.python.feature_column.feature_column_v2": ("feature_column",),
    "tensorflow.python.saved_model": ("saved_model",),
    "tensorflow.python.saved_model.signature_constants": ("saved_model", "signature_constants"),
    "tensorflow.python.saved_model.tag_constants": ("saved_model", "tag_constants"),
    "tensorflow.python.estimator": ("estimator",),
    "tensorflow.python.estimator.estimator": ("estimator",),
    "tensorflow.python.estimator.model_fn": ("estimator",),
    "tensorflow.python.estimator.run_config": ("estimator",),
    "tensorflow.python.estimator.export": ("estimator", "export"),
    "tensorflow.python.estimator.export.export": ("estimator", "export"),
    "tensorflow.python.estimator.export.export_output": ("estimator", "export"),
    "tensorflow.python.estimator.canned": ("estimator",),
    "tensorflow.python.estimator.inputs": ("estimator", "inputs"),
    "tensorflow.python.keras": ("keras",),
    "tensorflow_estimator": ("estimator",),
    "tensorflow_estimator.python.estimator": ("estimator",),
    "tensorflow_estimator.python.estimator.estimator": ("estimator",),
    "tensorflow_estimator.python.estimator.model_fn": ("estimator",),
    "tensorflow_estimator.python.estimator.run_config": ("estimator",),
    "tensorflow_estimator.python.estimator.export": ("estimator", "export"),
    "tensorflow_estimator.python.estimator.export.export": ("estimator", "export"),
    "tensorflow_estimator.python.estimator.export.export_output": ("estimator", "export"),
    "tensorflow_estimator.python.estimator.canned": ("estimator",),
    "tensorflow_estimator.python.estimator.inputs": ("estimator", "inputs"),
}

_ROOTS = ("tensorflow", "tensorflow_estimator", "estimator.compat")


def is_tf_module(module: str) -> bool:
    """Whether ``module`` is TensorFlow's (or already this package's ``tf``)."""
    return any(module == root or module.startswith(root + ".") for root in _ROOTS)


def _private(module: str) -> tuple[str, ...] | None:
    """The namespace of a private module: its entry, or its longest listed package's (the
    estimator package's submodules all hold ``tf.estimator`` names)."""
    if module in PRIVATE:
        return PRIVATE[module]
    parts = module.split(".")
    for end in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in PRIVATE and PRIVATE[prefix][:1] == ("estimator",):
            return PRIVATE[prefix]
    return None


def compat_path(module: str) -> tuple[str, ...] | None:
    """The namespace path ``module`` stands for (``()`` is ``tf`` itself), or None when
    it is not TensorFlow's or no namespace holds its names (an unknown private module)."""
    if not is_tf_module(module):
        return None
    if module.startswith("tensorflow.python") or module.startswith("tensorflow_estimator"):
        return _private(module)
    for root in ("tensorflow", "estimator.compat"):
        if module == root:
            return ()
        if module.startswith(root + "."):
            rest = module[len(root) + 1 :]
            for v1 in ("compat.v1", "v1"):
                if rest == v1:
                    return ()
                if rest.startswith(v1 + "."):
                    rest = rest[len(v1) + 1 :]
                    break
            return tuple(rest.split("."))
    return None
