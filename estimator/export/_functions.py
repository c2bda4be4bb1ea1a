"""The ``jax.export`` functions of an export's signatures, from one checkpoint.

:class:`Exporter` finds the device specs of a signature's inputs (symbolic dimensions where
they follow the batch or vary with the inputs), traces ``model_fn`` once per mode through
the checkpoint's variables (``_shared_trace``), names each output by TF's signature keys
and method names, and exports one function per distinct set of outputs. The writer
(``_writer``) records them in the manifest and writes the artifact.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax import export as jax_export

from estimator import checkpoint as ckpt
from estimator.engine.init_run import init_run
from estimator.engine.steps import TrainState
from estimator.export._shared_trace import signature_functions
from estimator.mode_keys import ModeKeys
from estimator.model.export_output import EvalOutput
from estimator.model.strings import IndexToString

__all__ = ["Exporter"]


def _device_specs(inputs, fixed_batch) -> tuple[Any, Any, dict]:
    """Symbolic ``ShapeDtypeStruct``s of the device features: dimensions that follow the
    batch size become ``b``, others that vary with the inputs' free dimensions get their
    own symbol. ``inputs``: one signature's inputs (``_writer._Inputs``)."""
    a = inputs.host(inputs.dummy(2, 1))
    b = inputs.host(inputs.dummy(3, 2))
    scope = jax_export.SymbolicScope()
    counter = iter(range(1000))
    batch_symbol = jax_export.symbolic_shape("b", scope=scope)[0] if fixed_batch is None else None

    def spec(x, y):
        x, y = np.asarray(x), np.asarray(y)
        dims = []
        for i, (p, q) in enumerate(zip(x.shape, y.shape, strict=True)):
            if p == q:
                dims.append(p)
            elif i == 0 and (p, q) == (2, 3):
                dims.append(batch_symbol)
            else:
                dims.append(jax_export.symbolic_shape(f"d{next(counter)}", scope=scope)[0])
        dtype = jax.dtypes.canonicalize_dtype(x.dtype)
        return jax.ShapeDtypeStruct(tuple(dims), dtype)

    features = _tie(jax.tree.map(spec, a[0], b[0]), inputs.ties)
    labels = None if a[1] is None else jax.tree.map(spec, a[1], b[1])
    return features, labels, a


def _tie(features, groups):
    """One symbol for the dimensions the host transform makes equal: its optional
    ``equal_dimensions()`` (``groups``) lists groups of ``(feature key, axis)`` (the steps of
    several sequence features, padded alike), which the inputs alone would give separate
    symbols."""
    if groups is None or not isinstance(features, dict):
        return features
    features = dict(features)
    for group in groups():
        members = [(key, axis) for key, axis in group if key in features]
        for key, axis in members[1:]:
            shape = list(features[key].shape)
            shape[axis] = features[members[0][0]].shape[members[0][1]]
            features[key] = jax.ShapeDtypeStruct(tuple(shape), features[key].dtype)
    return features


# TF's signature keys and method names of TRAIN and EVAL exports
# (``tf.saved_model.SUPERVISED_TRAIN_METHOD_NAME`` / ``SUPERVISED_EVAL_METHOD_NAME``).
_SUPERVISED_KEYS = {ModeKeys.TRAIN: "train", ModeKeys.EVAL: "eval"}
_SUPERVISED_METHODS = {
    ModeKeys.TRAIN: "tensorflow/supervised/training",
    ModeKeys.EVAL: "tensorflow/supervised/eval",
}


def _outputs_for(mode: str, spec) -> dict[str, dict]:
    """``{signature_key: {output_name: array}}`` of a traced spec, by TF's rules."""
    if mode == ModeKeys.PREDICT:
        return {key: out.outputs for key, out in spec.export_outputs.items()}
    metrics = spec.eval_metric_ops if mode == ModeKeys.EVAL else None
    outputs = EvalOutput(spec.loss, spec.predictions, metrics).outputs
    return {_SUPERVISED_KEYS[mode]: outputs}


def _select(outputs: dict) -> dict:
    """Strings leave the device as ids; the manifest keeps their vocabulary."""
    return {k: v.ids if isinstance(v, IndexToString) else v for k, v in outputs.items()}


class Exporter:
    """Builds the ``jax.export`` functions of each signature from one checkpoint."""

    def __init__(self, runtime, checkpoint_path: str, platforms):
        self.model = runtime.model
        self.path = checkpoint_path
        self.meta = ckpt.read_meta(checkpoint_path)
        self.platforms = tuple(platforms)
        self.variables = None

    def _saved_variables(self) -> dict:
        """The variables' shapes and dtypes the checkpoint's metadata lists. A variable the
        exported mode never reads is an argument too, and is saved in the export (TF's
        export holds the variables its mode's graph creates)."""
        trainable, non_trainable = ckpt.abstract_variables(self.meta)
        return {"trainable": trainable, "non_trainable": non_trainable}

    def _model_variables(self, mode, features, labels) -> dict:
        """The variables' shapes and dtypes ``model_fn`` creates in init mode (when it asks
        for others than the checkpoint's: the restore then lists the differences)."""
        state, _ = jax.eval_shape(
            lambda f, lab: init_run(self.model, f, lab, mode=mode), features, labels
        )
        return {"trainable": state.trainable, "non_trainable": state.non_trainable}

    def _restore(self, abstract_vars: dict) -> None:
        """Reads the variables ``abstract_vars`` names from the checkpoint (once)."""
        if self.variables is None:
            abstract = TrainState(
                abstract_vars["trainable"], abstract_vars["non_trainable"], None, None, None
            )
            trainable, non_trainable, _ = ckpt.restore(self.path, abstract, with_opt_state=False)
            self.variables = {"trainable": trainable, "non_trainable": non_trainable}

    def signatures(self, mode: str, inputs, group: str | None, fixed_batch) -> tuple:
        """``({name: (key, Exported, vocabularies, method_name)}, features_spec, labels_spec)``.

        ``model_fn`` runs once for all the signatures of the mode (on the variables the
        checkpoint's metadata lists), or twice when it asks for variables the checkpoint
        lacks (init mode first: the restore then lists what differs)."""
        features_spec, labels_spec, (dummy_features, dummy_labels) = _device_specs(
            inputs, fixed_batch
        )
        device_fn = inputs.device_fn
        model, step = self.model, int(self.meta["global_step"])

        methods: dict[str, str] = {}  # signature key -> TF method name, seen when tracing

        def call(variables, features, labels):
            if device_fn is not None:
                features = device_fn(features)
            spec, _ = model.apply(mode, features, labels, variables, step)
            if mode == ModeKeys.PREDICT:
                methods.update({k: o.method_name for k, o in spec.export_outputs.items()})
            else:
                methods[_SUPERVISED_KEYS[mode]] = _SUPERVISED_METHODS[mode]
            return _outputs_for(mode, spec)

        abstract_vars = self._saved_variables()
        try:
            shapes, functions = signature_functions(call, abstract_vars, features_spec, labels_spec)
        except ValueError:  # variables the checkpoint lacks (or model_fn's own error)
            model_features = device_fn(dummy_features) if device_fn else dummy_features
            abstract_vars = self._model_variables(mode, model_features, dummy_labels)
            shapes, functions = signature_functions(call, abstract_vars, features_spec, labels_spec)
        self._restore(abstract_vars)  # raises the checkpoint's differences, if any
        args = (abstract_vars, features_spec, labels_spec)
        results, exports = {}, {}  # exports: one per distinct function
        for key, outputs in shapes.items():
            vocabularies = {
                n: list(o.vocabulary) for n, o in outputs.items() if isinstance(o, IndexToString)
            }
            function = functions[key]
            if function not in exports:
                fn = jax.jit(lambda v, f, lab, function=function: _select(function(v, f, lab)))
                exports[function] = jax_export.export(fn, platforms=self.platforms)(*args)
            name = key if group is None else f"{group}:{key}"
            results[name] = (key, exports[function], vocabularies, methods[key])
        return results, features_spec, labels_spec
