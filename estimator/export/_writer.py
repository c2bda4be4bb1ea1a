"""Writing an export: ``Estimator.export_saved_model`` and ``experimental_export_all_...``.

The artifact (see ``estimator.export`` for the layout) is written to
``<export_dir_base>/temp-<timestamp>-<random>`` and renamed to
``<export_dir_base>/<timestamp>`` only when complete, as TF does (TF's temporary name has no
random part; ours keeps concurrent exports apart). A failure removes the temporary
directory; a killed process leaves at most a ``temp-`` directory, which the loader refuses.
Each signature's manifest entry records its ``mode`` and TF's ``method_name``.

``export_dir_base`` may be a storage URL (``estimator.io.fs``). Object stores have no
rename, so the export is written as above into a local scratch directory and then uploaded
to ``<export_dir_base>/<timestamp>/`` file by file, ``manifest.json`` last (a TF SavedModel:
``saved_model.pb`` last). Readers (the loader, the server's version poller, exporters'
garbage collection) take a version directory for an export only once it has its manifest;
a failed upload deletes what it wrote, and one killed midway leaves a directory without a
manifest, which the loader refuses and the server ignores.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from estimator import checkpoint as ckpt
from estimator.export._csv import apply_decodes, decode_steps, dummy_records
from estimator.export._functions import Exporter
from estimator.export._integrity import checksums
from estimator.export._loader import fill_parsed
from estimator.export._receivers import (
    ParsingServingInputReceiver,
    ServingInputReceiver,
    SupervisedInputReceiver,
    TensorServingInputReceiver,
)
from estimator.io import fs
from estimator.mode_keys import ModeKeys
from estimator.preprocessing import InputTransform

logger = logging.getLogger("estimator")

FORMAT = "jax_estimator.export"
VERSION = 2  # 2: "files" (sha256 of every file); "checkpoint" is a name, not a path
MANIFEST = "manifest.json"
_STRING = "string"
#: ``export_saved_model``'s formats: our ``jax.export`` artifact, or a TF SavedModel.
FORMATS = ("jax", "tf_saved_model")


def dtype_name(dtype) -> str:
    dtype = np.dtype(dtype)
    return _STRING if dtype.kind in "OUS" else dtype.name


def _signature_file(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


class _Inputs:
    """One signature's inputs and the host steps that turn them into device features."""

    def __init__(self, specs: dict, receiver, transform, group: str | None, ties=None):
        self.specs = specs  # receiver tensors: name -> ShapeDtypeStruct (None = any size)
        self.receiver = receiver
        self.parse_spec = (
            receiver.feature_spec
            if isinstance(receiver, ParsingServingInputReceiver) and group is None
            else None
        )
        computed = callable(receiver.features)
        raw = getattr(receiver.features, "raw_features", None)
        if computed and transform is not None and raw is not None:
            # Features that only reshape receiver tensors by size-1 dimensions (TF 1 code's
            # tf.expand_dims(placeholder, -1), estimator.compat): the host transform reads
            # the raw inputs, as TF's feature columns read [batch] and [batch, 1] alike.
            receiver = self.receiver = receiver._replace(features=raw)
            computed = False
        if computed and transform is not None:
            raise ValueError(
                "The receiver computes features with a function, but the Estimator also has "
                "an input_transform (host-side feature processing), which must see the raw "
                "features. Give the receiver the raw feature specs instead of a function."
            )
        # An alternative input group feeds the features themselves, downstream of the
        # receiver's function (TF: "feed inputs at different points within the input
        # receiver subgraph"), so the function only runs for the main group.
        self.device_fn = receiver.features if computed and group is None else None
        self.transform = transform
        self.ties = ties  # the Estimator's transform's ``equal_dimensions`` (see _functions._tie)
        # Features decoded from CSV lines on the host (``_csv``): the manifest's "decode".
        self.decodes: list = []
        if self.device_fn is not None:
            self.feature_keys = None
        elif computed:
            self.feature_keys = {name: name for name in specs}
        else:
            self.decodes, decoded = decode_steps(receiver.features, specs)
            rest = {k: v for k, v in receiver.features.items() if k not in decoded}
            self.feature_keys = {**_sources(rest, specs), **decoded}
            self.feature_keys = {k: self.feature_keys[k] for k in receiver.features}
        supervised = isinstance(receiver, SupervisedInputReceiver)
        self.label_keys = _sources(receiver.labels, specs) if supervised else None
        self.single_label = supervised and receiver.single_label
        self.single_feature = isinstance(receiver, TensorServingInputReceiver) or (
            supervised and set(receiver.features) == {"feature"}
        )
        if self.single_feature and self.feature_keys is not None and len(self.feature_keys) != 1:
            raise ValueError(
                f"Receiver tensors alternative {group!r} of a TensorServingInputReceiver must "
                f"hold exactly one array (the model's features); got {sorted(specs)}."
            )

    def dummy(self, batch: int, width: int) -> dict:
        """A batch of placeholder values for every input (to find the device specs)."""
        out = {}
        lines = {step["input"]: step for step in self.decodes}
        for name, spec in self.specs.items():
            shape = tuple(
                (batch if i == 0 else width) if d is None else d for i, d in enumerate(spec.shape)
            )
            if name in lines:
                out[name] = dummy_records(lines[name], shape)
            elif np.dtype(spec.dtype).kind in "OUS":
                out[name] = np.full(shape, "", dtype=object)
            else:
                out[name] = np.zeros(shape, spec.dtype)
        return out

    def host(self, inputs: dict):
        """Receiver inputs -> (device features, labels) on the host: defaults, transform."""

        labels = None
        if self.label_keys is not None:
            labels = {key: inputs[source] for key, source in self.label_keys.items()}
            if self.single_label:
                (labels,) = labels.values()
        if self.parse_spec is not None:
            inputs = fill_parsed(inputs, self.parse_spec)
        if self.decodes:
            inputs = apply_decodes(inputs, self.decodes)
        if self.device_fn is not None:
            return inputs, labels
        features = {key: inputs[source] for key, source in self.feature_keys.items()}
        if self.single_feature:
            (features,) = features.values()
        if self.transform is not None:
            features, _ = self.transform.apply(features, None)
        return features, labels

    def to_manifest(self) -> dict:
        return {
            "inputs": {name: _spec_json(spec) for name, spec in self.specs.items()},
            "parse_spec": None
            if self.parse_spec is None
            else {k: v.to_config() for k, v in self.parse_spec.items()},
            "decode": self.decodes,
            "features": self.feature_keys,
            "single_feature": self.single_feature,
            "labels": self.label_keys,
            "single_label": self.single_label,
        }


def _sources(wanted: dict, specs: dict) -> dict[str, str]:
    """Which receiver input each feature (or label) is: the same spec object, else the same
    name, else the only input with an equal shape and dtype."""
    sources = {}
    for key, spec in wanted.items():
        same = [name for name, s in specs.items() if s is spec]
        equal = [
            name
            for name, s in specs.items()
            if tuple(s.shape) == tuple(spec.shape) and np.dtype(s.dtype) == np.dtype(spec.dtype)
        ]
        if same:
            sources[key] = same[0]
        elif key in specs:
            sources[key] = key
        elif len(equal) == 1:
            sources[key] = equal[0]
        else:
            raise ValueError(
                f"Feature {key!r} is not one of the receiver's inputs ({sorted(specs)}). Pass the "
                "same specs as features and receiver_tensors, or a function computing the "
                "features from the receiver tensors."
            )
    return sources


def _spec_json(spec) -> dict:
    """``{"dtype", "shape"}``; unknown or symbolic dimensions as None or their symbol."""
    return {
        "dtype": dtype_name(spec.dtype),
        "shape": [d if d is None or isinstance(d, int) else str(d) for d in spec.shape],
    }


def _copy_assets(transform, target: str) -> list[str]:
    names = []
    if transform is None:
        return names
    for path in transform.assets():
        os.makedirs(target, exist_ok=True)
        shutil.copy(path, os.path.join(target, os.path.basename(path)))
        names.append(os.path.basename(path))
    return names


def _timestamped(base: str) -> str:
    """``<base>/<unix seconds>``, later than every version already in ``base``.

    Exports made faster than one a second take the next free seconds, ahead of the clock
    (TF sleeps instead); a later export must still sort after them, or an exporter's
    ``exports_to_keep``, which keeps the largest versions, would delete the newest export
    (a best model's) at once."""
    stamp = int(time.time())
    if fs.exists(base):
        versions = [int(n) for n in fs.listdir(base) if len(n) == 10 and n.isdigit()]
        stamp = max([stamp, *(v + 1 for v in versions)])
    while fs.exists(fs.join(base, str(stamp))):
        stamp += 1
    return fs.join(base, str(stamp))


def export(
    estimator,
    export_dir_base,
    receiver_fns: Mapping[str, Callable],
    *,
    assets_extra: Mapping[str, str] | None = None,
    as_text: bool = False,
    checkpoint_path=None,
    platforms=("cpu",),
    format: str = "jax",
) -> bytes:
    """Writes an export of ``estimator`` for the modes of ``receiver_fns`` (internal).

    In a multi-process job the chief alone reads the checkpoint and writes the export
    (``checkpoint.process_local``); the other processes write nothing. ``format="jax"``
    writes the ``jax.export`` artifact; ``"tf_saved_model"`` a TF SavedModel converted
    from it (``estimator.export.tf_saved_model``).

    Returns:
      The export directory as bytes (what TF returns); None on a process of a
      multi-process job that is not the chief.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {list(FORMATS)}; got {format!r}.")
    export_dir_base = fs.check(export_dir_base, "export_dir_base", write=True)
    if jax.process_count() > 1 and not estimator.runtime.is_chief:
        logger.info("The chief writes the export; process %d does not.", jax.process_index())
        return None
    write = _export_tf_saved_model if format == "tf_saved_model" else _export
    options = dict(
        assets_extra=assets_extra,
        as_text=as_text,
        checkpoint_path=checkpoint_path,
        platforms=platforms,
    )
    with ckpt.process_local():  # the chief alone: no process waits for the others
        return write(estimator, export_dir_base, receiver_fns, **options)


def _export_tf_saved_model(
    estimator, export_dir_base, receiver_fns, *, assets_extra, as_text, checkpoint_path, platforms
) -> bytes:
    """The ``jax.export`` artifact in a scratch directory, converted to
    ``<export_dir_base>/<unix seconds>``; what cannot convert is refused first."""
    from estimator.export.tf_saved_model import _builder

    _builder.check_modes(set(receiver_fns))
    transform = estimator.runtime.input_transform
    if transform is not None:  # as the manifest will record it
        _builder.check_supported(InputTransform.from_config(transform.to_config()))
    _builder.import_tensorflow()
    base = fs.as_str(export_dir_base)
    scratch = tempfile.mkdtemp(prefix="jax-export-")
    try:
        path = _export(
            estimator,
            scratch,
            receiver_fns,
            assets_extra=assets_extra,
            as_text=False,
            checkpoint_path=checkpoint_path,
            platforms=platforms,
        )
        with fs.staging_dir(base) as staging:
            built = _builder.build(
                path.decode(),
                os.path.join(staging, "saved_model"),
                as_text=as_text,
                verify_files=False,
            )
            final = _publish(built, base, "saved_model.pb")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    logger.info("TF SavedModel written to: %s", final)
    return final.encode()


def _export(
    estimator, export_dir_base, receiver_fns, *, assets_extra, as_text, checkpoint_path, platforms
) -> bytes:
    runtime = estimator.runtime
    path = _checkpoint(estimator, checkpoint_path)
    base = fs.as_str(export_dir_base)
    recorded = runtime.input_transform
    # The signatures are traced through the host phase the manifest records and the loader
    # replays (to_config), not the Estimator's own object, which may do more on the host
    # than serving needs (a canned estimator's weight column, when a request brings it).
    transform = None if recorded is None else InputTransform.from_config(recorded.to_config())
    exporter = Exporter(runtime, path, platforms)
    ties = getattr(recorded, "equal_dimensions", None)
    signatures, blobs = _signatures(exporter, receiver_fns, transform, ties)
    # A temp-* directory beside the exports locally (one rename publishes it), a local one
    # for a storage URL (uploaded with the manifest last).
    with fs.staging_dir(base) as temp:
        _write_functions(temp, signatures, blobs, as_text)
        _write_variables(temp, exporter.variables)
        assets = _copy_assets(transform, os.path.join(temp, "assets"))
        _copy_assets_extra(assets_extra, temp)
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "jax_version": jax.__version__,
            "platforms": list(platforms),
            "global_step": int(exporter.meta["global_step"]),
            # The checkpoint's name only: an export records no path of the machine it was
            # written on.
            "checkpoint": os.path.basename(os.path.normpath(path)),
            "variables": ckpt.variable_specs(
                exporter.variables["trainable"], exporter.variables["non_trainable"]
            ),
            "input_transform": None if transform is None else transform.to_config(),
            "assets": assets,
            "signatures": signatures,
            "files": checksums(temp),
        }
        with open(os.path.join(temp, MANIFEST), "w") as f:
            json.dump(manifest, f, indent=2 if as_text else None, sort_keys=True)
        final = _publish(temp, base, MANIFEST)
    logger.info("SavedModel written to: %s", final)
    return final.encode()


def _checkpoint(estimator, checkpoint_path) -> str:
    """The checkpoint to export: ``checkpoint_path`` (resolved), else the latest one."""
    path = checkpoint_path or estimator.latest_checkpoint()
    if checkpoint_path:
        path = estimator.runtime.resolve_checkpoint(checkpoint_path, "export")
    if not path:
        raise ValueError(f"Couldn't find trained model at {estimator.model_dir}.")
    return path


def _receiver(mode: str, receiver_fn: Callable):
    """The receiver ``receiver_fn`` returns, checked against the kind ``mode`` needs."""
    receiver = receiver_fn()
    expected = ServingInputReceiver if mode == ModeKeys.PREDICT else SupervisedInputReceiver
    if not isinstance(receiver, expected):
        raise ValueError(
            f"The input receiver function for mode {mode!r} must return a "
            f"{expected.__name__}; got {type(receiver).__name__}."
        )
    return receiver


def _signatures(exporter: Exporter, receiver_fns, transform, ties) -> tuple[dict, dict]:
    """``({name: manifest entry}, {name: Exported})`` of every signature: each mode's
    receiver tensors and each of their alternatives."""
    signatures: dict[str, dict] = {}
    blobs: dict[str, Any] = {}
    for mode, receiver_fn in receiver_fns.items():
        receiver = _receiver(mode, receiver_fn)
        groups = {None: receiver.receiver_tensors}
        groups.update(receiver.receiver_tensors_alternatives or {})
        for group, specs in groups.items():
            inputs = _Inputs(specs, receiver, transform, group, ties)
            fixed = next((s.shape[0] for s in specs.values() if s.shape and s.shape[0]), None)
            made, features_spec, labels_spec = exporter.signatures(mode, inputs, group, fixed)
            device_inputs = jax.tree.map(
                _spec_json, {"features": features_spec, "labels": labels_spec}
            )
            for name, (key, exported, vocabularies, method) in made.items():
                signatures[name] = {
                    "mode": mode,
                    "method_name": method,
                    "output_key": key,
                    "function": f"functions/{_signature_file(name)}.jax",
                    **inputs.to_manifest(),
                    "device_inputs": device_inputs,
                    "outputs": _outputs_json(exported, vocabularies),
                }
                blobs[name] = exported
    return signatures, blobs


def _outputs_json(exported, vocabularies: dict[str, list]) -> dict[str, dict]:
    """Each output's ``{"dtype", "shape"}``; a string output (ids on the device) is a
    ``"string"`` with its ``"vocabulary"``."""
    avals = jax.tree.unflatten(exported.out_tree, list(exported.out_avals))
    outputs = {}
    for out, aval in avals.items():
        outputs[out] = _spec_json(aval)
        if out in vocabularies:
            outputs[out].update(dtype=_STRING, vocabulary=vocabularies[out])
    return outputs


def _write_functions(temp: str, signatures: dict, blobs: dict, as_text: bool) -> None:
    """Each signature's serialized function (and its MLIR text with ``as_text``)."""
    os.makedirs(os.path.join(temp, "functions"))
    for name, exported in blobs.items():
        with open(os.path.join(temp, signatures[name]["function"]), "wb") as f:
            f.write(exported.serialize())
        if as_text:
            with open(os.path.join(temp, signatures[name]["function"][:-4] + ".mlir"), "w") as f:
                f.write(exported.mlir_module())


def _write_variables(temp: str, variables: dict) -> None:
    """The exported variables, as an orbax checkpoint in ``<temp>/variables``."""
    saver = ocp.StandardCheckpointer(multiprocessing_options=ckpt.multiprocessing_options())
    if jax.process_count() > 1:  # orbax writes no process-local jax.Array in a job
        variables = jax.device_get(variables)
    saver.save(os.path.abspath(os.path.join(temp, "variables")), variables)
    saver.wait_until_finished()
    saver.close()


def _copy_assets_extra(assets_extra: Mapping[str, str] | None, temp: str) -> None:
    """``{relative path: source file}`` copied under ``<temp>/assets.extra``."""
    for relative, source in (assets_extra or {}).items():
        destination = os.path.join(temp, "assets.extra", relative)
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        shutil.copy(source, destination)


def _publish(built: str, base: str, last: str) -> str:
    """Publishes the export directory ``built`` (in a ``fs.staging_dir(base)``) as
    ``<base>/<unix seconds>`` (``fs.publish_tree``: one rename locally, an upload with
    ``last`` last on a store), or under a later timestamp when another export took that
    name meanwhile; returns the path it got."""
    final = _timestamped(base)
    while True:
        try:
            fs.publish_tree(built, final, last=(last,))
            return final
        except FileExistsError:
            final = _timestamped(base)  # another export took the name meanwhile
