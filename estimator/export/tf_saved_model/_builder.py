"""Building the TF SavedModel of an export (internal; see ``estimator.export.tf_saved_model``).

One TF1-style graph, as TF Estimator 2.15 builds it (``tf.compat.v1.saved_model.Builder``,
tag ``serve``): the receiver's placeholders (``input_example_tensor`` and
``tf.io.parse_example`` for a parsing receiver), the host phase as TF ops, the variables as
resource variables under their TF names, one ``XlaCallModule`` per signature (the
signature's ``jax.export`` function through ``jax2tf``, with its symbolic dimensions kept),
and string outputs looked up in their vocabularies. Signature defs come from
``tf.compat.v1.saved_model``'s ``classification_signature_def`` /
``regression_signature_def`` / ``predict_signature_def``, as TF's ``ExportOutput`` classes
build them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid

import jax
import numpy as np

from estimator.export._loader import load
from estimator.export.tf_saved_model._host_ops import HostPhase, check_supported
from estimator.mode_keys import ModeKeys
from estimator.preprocessing import FixedLenFeature, InputTransform, feature_from_config

_CLASSIFY = "tensorflow/serving/classify"
_REGRESS = "tensorflow/serving/regress"
# TF's heads give ``class_ids`` as int64 (``argmax``); jax (without x64) as int32.
_INT64_OUTPUT = "class_ids"
_RECEIVER_KEYS = ("inputs", "parse_spec", "decode", "features", "single_feature", "labels")


def import_tensorflow():
    """``tensorflow`` and ``jax2tf``, or an ImportError saying which extra to install."""
    try:
        import tensorflow as tf
        from jax.experimental import jax2tf
    except ImportError as err:
        raise ImportError(
            f"Writing a TF SavedModel needs TensorFlow >= 2.21 ({err}). Install it with "
            "pip install 'jax-estimator[tf]'."
        ) from None
    major, minor = (int(p) for p in tf.__version__.split(".")[:2])
    if (major, minor) < (2, 21):
        raise ImportError(
            f"Writing a TF SavedModel needs TensorFlow >= 2.21 (jax {jax.__version__}'s "
            f"serialized functions are too new for older releases); found {tf.__version__}. "
            "Install it with pip install 'jax-estimator[tf]'."
        )
    return tf, jax2tf


def _op_name(name: str) -> str:
    """A valid TF op name for a receiver input (letters, digits, ``._-/``)."""
    cleaned = "".join(c if c.isalnum() or c in "._-/" else "_" for c in name)
    return cleaned if cleaned[:1].isalnum() or cleaned[:1] == "." else "input_" + cleaned


def _tf_dtype(tf, name: str):
    return tf.string if name == "string" else tf.as_dtype(name)


def _device_dtype(tf, tensor):
    """jax without x64: 64-bit inputs enter the device function as 32-bit."""
    narrow = {tf.int64: tf.int32, tf.float64: tf.float32, tf.uint64: tf.uint32}
    dtype = narrow.get(tensor.dtype)
    return tensor if dtype is None else tf.cast(tensor, dtype)


def _parse_feature(tf, spec):
    """Our parsing spec as ``tf.io``'s (TF parses float32, int64 and strings only)."""
    kind = spec.dtype.kind
    dtype = tf.string if kind in "OUS" else tf.float32 if kind == "f" else tf.int64
    if isinstance(spec, FixedLenFeature):
        return tf.io.FixedLenFeature(spec.shape, dtype, spec.default_value)
    return tf.io.VarLenFeature(dtype)


def _csv_default(tf, default: list):
    """A manifest ``record_defaults`` entry as ``tf.io.decode_csv`` takes it (``[]``:
    a required string column, as the host decoder's)."""
    if not default:
        return tf.constant([], tf.string)
    (value,) = default
    if isinstance(value, str):
        return tf.constant([value.encode()], tf.string)
    if isinstance(value, bool):
        return tf.constant([value], tf.bool)
    return tf.constant([value], tf.int64 if isinstance(value, int) else tf.float32)


class _Receiver:
    """The placeholders of one receiver (shared by its signatures) and the device
    features computed from them."""

    def __init__(self, tf, entry: dict, transform, assets_dir: str) -> None:
        inputs = entry["inputs"]
        batch = next((s["shape"][0] for s in inputs.values() if s["shape"]), None)
        batch = batch if isinstance(batch, int) else None
        if entry["parse_spec"] is not None:
            # build_parsing_serving_input_receiver_fn: serialized tf.Example protos.
            serialized = tf.compat.v1.placeholder(tf.string, [batch], "input_example_tensor")
            self.tensors = {"examples": serialized}
            specs = {k: feature_from_config(v) for k, v in entry["parse_spec"].items()}
            raw = tf.io.parse_example(
                serialized, {k: _parse_feature(tf, s) for k, s in specs.items()}
            )
            batch_size = tf.shape(serialized)[0]
        else:
            self.tensors = {
                name: tf.compat.v1.placeholder(
                    _tf_dtype(tf, spec["dtype"]),
                    [batch if i == 0 else d for i, d in enumerate(spec["shape"])],
                    _op_name(name),
                )
                for name, spec in inputs.items()
            }
            raw = dict(self.tensors)
            first = next((t for t in raw.values() if t.shape.rank), None)
            batch_size = tf.shape(first)[0] if first is not None else tf.constant(1)
            for step in entry.get("decode") or ():  # CSV lines (estimator.export._csv)
                columns = tf.io.decode_csv(
                    raw[step["input"]],
                    [_csv_default(tf, d) for d in step["record_defaults"]],
                    field_delim=step["field_delim"],
                    use_quote_delim=step["use_quote_delim"],
                    na_value=step["na_value"],
                    select_cols=step["select_cols"],
                )
                for index, name in step["outputs"].items():
                    raw[name] = columns[int(index)]
        if entry["features"] is None:  # the receiver's own function, inside the export
            features = {k: _device_dtype(tf, v) for k, v in raw.items()}
        else:
            features = {k: raw[source] for k, source in entry["features"].items()}
            if entry["single_feature"]:
                (features,) = features.values()
            elif transform is not None:
                features = HostPhase(tf, features, batch_size, assets_dir).apply(transform)
            features = jax.tree.map(lambda t: _device_dtype(tf, t), features)
        self.features = features


def _is_spec(x) -> bool:
    return isinstance(x, dict) and set(x) == {"dtype", "shape"}


def _polymorphic(spec: dict) -> str:
    """A manifest spec's shape as jax2tf's ``polymorphic_shapes`` string: ``(b, d0, 2)``."""
    return "(" + "".join(f"{d}, " for d in spec["shape"]) + ")"


def _device_call(tf, jax2tf, signature, variables, features, platforms):
    exported = signature._exported
    specs = signature.entry["device_inputs"]["features"]
    shapes = jax.tree.map(_polymorphic, specs, is_leaf=_is_spec)

    def call(variables, features):
        return exported.call(variables, features, None)

    converted = jax2tf.convert(
        call,
        polymorphic_shapes=[None, shapes],
        native_serialization_platforms=tuple(platforms),
        with_gradient=False,
    )
    return converted(variables, features)


def _outputs(tf, signature, values: dict) -> dict:
    outputs = {}
    for name, spec in signature.outputs.items():
        value = values[name]
        vocabulary = spec.get("vocabulary")
        if vocabulary is not None:  # ids -> strings, as the loader (b"UNK" out of range)
            table = tf.constant([v.encode() for v in vocabulary] + [b"UNK"])
            ids = tf.cast(value, tf.int64)
            n = len(vocabulary)
            valid = tf.logical_and(ids >= 0, ids < n)
            value = tf.gather(table, tf.where(valid, ids, tf.constant(n, tf.int64)))
        elif name == _INT64_OUTPUT or name.endswith("/" + _INT64_OUTPUT):
            value = tf.cast(value, tf.int64)
        outputs[name] = value
    return outputs


def _signature_def(tf, method: str, receiver: dict, outputs: dict):
    """TF's ``ExportOutput.as_signature_def``: classify/regress take one serialized
    ``tf.Example`` input named ``inputs``; with other receivers (which TF would not export
    as such) the signature is a predict signature over the receiver's inputs."""
    utils = tf.compat.v1.saved_model
    (single,) = receiver.values() if len(receiver) == 1 else (None,)
    examples = single if single is not None and single.dtype == tf.string else None
    if method == _CLASSIFY and examples is not None:
        return utils.classification_signature_def(
            examples, outputs.get("classes"), outputs.get("scores")
        )
    if method == _REGRESS and examples is not None:
        return utils.regression_signature_def(examples, outputs["outputs"])
    return utils.predict_signature_def(receiver, outputs)


def check_convertible(manifest: dict, transform) -> None:
    """Refuses, before TensorFlow is imported, what a TF SavedModel cannot hold."""
    check_supported(transform)
    check_modes({entry["mode"] for entry in manifest["signatures"].values()})


def check_modes(modes: set) -> None:
    """Refuses modes other than PREDICT (TF writes those as other meta graphs)."""
    if modes != {ModeKeys.PREDICT}:
        other = sorted(modes - {ModeKeys.PREDICT})
        raise ValueError(
            f"A TF SavedModel is written from serving (PREDICT mode) signatures only; this "
            f"export has signatures of mode(s) {other}. Export the PREDICT mode alone "
            "(export_saved_model's default experimental_mode)."
        )


def build(export_dir: str, output_dir: str, *, as_text: bool, verify_files: bool) -> str:
    """Writes the SavedModel of ``export_dir`` to ``output_dir`` (through a temporary
    sibling directory renamed when complete). Returns ``output_dir``."""
    model = load(export_dir, verify_files=verify_files)
    manifest = model.manifest
    config = manifest.get("input_transform")
    transform = (
        None
        if config is None
        else InputTransform.from_config(config, assets_dir=os.path.join(model.path, "assets"))
    )
    check_convertible(manifest, transform)
    if os.path.exists(output_dir):
        raise ValueError(
            f"{output_dir} already exists; a SavedModel is written to a new directory."
        )
    tf, jax2tf = import_tensorflow()
    parent = os.path.dirname(os.path.abspath(output_dir))
    os.makedirs(parent, exist_ok=True)
    temp = os.path.join(parent, f"temp-{os.path.basename(output_dir)}-{uuid.uuid4().hex[:8]}")
    staging = tempfile.mkdtemp(prefix="tf_saved_model_assets_")
    try:
        _write(tf, jax2tf, model, transform, temp, staging, as_text)
        extra = os.path.join(model.path, "assets.extra")
        if os.path.isdir(extra):
            shutil.copytree(extra, os.path.join(temp, "assets.extra"))
        os.rename(temp, output_dir)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return output_dir


def _write(tf, jax2tf, model, transform, temp: str, staging: str, as_text: bool) -> None:
    manifest = model.manifest
    graph = tf.Graph()
    with graph.as_default():
        variables, loads = {}, []
        for kind in ("non_trainable", "trainable"):
            variables[kind] = {}
            for name, value in sorted(model.variables[kind].items()):
                value = np.asarray(value)
                var = tf.compat.v1.get_variable(
                    name,
                    shape=value.shape,
                    dtype=tf.as_dtype(value.dtype),
                    initializer=tf.compat.v1.zeros_initializer(),
                    trainable=kind == "trainable",
                    use_resource=True,
                )
                variables[kind][name] = var
                loads.append((var, value))
        receivers: dict[str, _Receiver] = {}
        signature_defs = {}
        for name, signature in sorted(model.signatures.items()):
            entry = signature.entry
            key = json.dumps({k: entry.get(k) for k in _RECEIVER_KEYS}, sort_keys=True)
            if key not in receivers:
                receivers[key] = _Receiver(tf, entry, transform, staging)
            receiver = receivers[key]
            values = _device_call(
                tf, jax2tf, signature, variables, receiver.features, manifest["platforms"]
            )
            outputs = _outputs(tf, signature, values)
            signature_defs[name] = _signature_def(
                tf, signature.method_name, receiver.tensors, outputs
            )
        main_op = tf.group(
            tf.compat.v1.local_variables_initializer(), tf.compat.v1.tables_initializer()
        )
        assets = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.ASSET_FILEPATHS)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for var, value in loads:
                var.load(value, session)
            builder = tf.compat.v1.saved_model.Builder(temp)
            builder.add_meta_graph_and_variables(
                session,
                [tf.saved_model.SERVING],
                signature_def_map=signature_defs,
                assets_collection=assets,
                main_op=main_op,
                strip_default_attrs=True,
            )
            builder.save(as_text=as_text)
