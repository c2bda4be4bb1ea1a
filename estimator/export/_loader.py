"""Loading an export and serving its signatures with jax alone (no model code, no TF)."""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax import export as jax_export

from estimator.export._csv import apply_decodes
from estimator.export._integrity import safe_path, verify
from estimator.io import SparseValue, fs, parse_example
from estimator.preprocessing import InputTransform, VarLenFeature, feature_from_config

__all__ = ["load", "LoadedModel", "Signature"]

#: The input of a parsing signature that takes serialized ``tf.Example`` protos (TF's
#: ``build_parsing_serving_input_receiver_fn`` names it so).
EXAMPLES = "examples"

FORMAT = "jax_estimator.export"
VERSIONS = (1, 2)  # manifests this loader reads (1: before checksums)
MANIFEST = "manifest.json"


def _dtype_name(dtype) -> str:
    dtype = np.dtype(dtype)
    return "string" if dtype.kind in "OUS" else dtype.name


def _dtype(name: str):
    return np.dtype(object) if name == "string" else np.dtype(name)


def _pad(rows, dtype) -> np.ndarray:
    """Lists of different lengths -> ``[batch, max_len]``, padded with ``""`` (strings),
    ``NaN`` (floats: a sequence feature's absent values) or ``-1`` (integers)."""
    rows = [
        np.atleast_1d(np.asarray(r, dtype=object if dtype.kind in "OUS" else dtype)) for r in rows
    ]
    width = max((len(r) for r in rows), default=0)
    fill = "" if dtype.kind in "OUS" else np.nan if dtype.kind == "f" else -1
    out = np.full((len(rows), max(width, 1)), fill, dtype=object if dtype.kind in "OUS" else dtype)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def fill_parsed(inputs: Mapping[str, Any], parse_spec: Mapping[str, Any]) -> dict:
    """Applies a parsing spec to raw inputs: defaults for absent ``FixedLenFeature``s,
    padding for ``VarLenFeature`` lists (internal; used by the writer and the loader)."""
    out = dict(inputs)
    batch = next((len(v) for v in inputs.values()), None)
    for name, spec in parse_spec.items():
        if isinstance(spec, VarLenFeature):
            if name not in out:
                out[name] = _pad([[]] * (batch or 0), spec.dtype)
            elif (
                not isinstance(out[name], np.ndarray)
                or out[name].dtype == object
                and out[name].ndim == 1
                and len(out[name])
                and isinstance(out[name][0], list)
            ):
                out[name] = _pad(list(out[name]), spec.dtype)
            continue
        if name not in out:
            if spec.default_value is None:
                raise ValueError(
                    f"Input {name!r} is required (its FixedLenFeature has no default_value)."
                )
            if batch is None:
                raise ValueError("Cannot tell the batch size: give at least one input.")
            default = np.asarray(spec.default_value, dtype=spec.dtype)
            out[name] = np.broadcast_to(default, (batch,) + tuple(spec.shape)).copy()
    return out


def _check_dtype(name: str, value, expected: str, describe) -> None:
    """Refuses values that would change meaning when read as ``expected``: strings,
    ``None`` or booleans for a numeric input (TF's ``tf.constant(True, tf.float32)`` fails
    too; JSON ``true`` is not 1.0), floats for an integer input (``np.can_cast`` with
    ``"same_kind"``: int -> float and float64 -> float32 are accepted, float -> int is not)."""
    dtype = _dtype(expected)
    if dtype.kind == "O":
        return  # checked after conversion: every element must be str or bytes
    try:
        source = np.asarray(value).dtype
    except ValueError:
        return  # ragged nesting; the conversion reports it with the expected shape
    if dtype.kind != "b" and (
        source.kind == "b"
        or (
            not isinstance(value, np.ndarray)  # a nested list (JSON) may mix in booleans
            and any(isinstance(v, bool) for v in np.asarray(value, dtype=object).flat)
        )
    ):
        source = np.dtype(object)  # reported by the type of its values, below
    if source.kind in "OUS":
        kinds = sorted({type(v).__name__ for v in np.asarray(value, dtype=object).flat})
        raise ValueError(
            f"Input {name!r} must be {expected}, got values of type {', '.join(kinds)}.\n"
            f"{describe()}"
        )
    if not np.can_cast(source, dtype, "same_kind"):
        raise ValueError(
            f"Input {name!r} must be {expected}, got {source.name} (which does not convert "
            f"without loss).\n{describe()}"
        )


def _missing_examples(name: str, value, parse, describe):
    """Per-example ``None`` (a JSON row without the feature) -> the parsing spec's default
    (``FixedLenFeature.default_value``) or no values (``VarLenFeature``)."""
    if isinstance(value, np.ndarray) and value.dtype != object:
        return value
    if not isinstance(value, (list, tuple, np.ndarray)) or not any(v is None for v in value):
        return value
    if isinstance(parse, VarLenFeature):
        return [[] if v is None else v for v in value]
    if parse.default_value is None:
        raise ValueError(
            f"Input {name!r} is missing (None) for some examples, and its FixedLenFeature "
            f"has no default_value.\n{describe()}"
        )
    default = np.asarray(parse.default_value, dtype=parse.dtype).reshape(parse.shape)
    out = []
    for i, v in enumerate(value):
        try:
            out.append(default if v is None else np.asarray(v, parse.dtype).reshape(parse.shape))
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"Input {name!r} of example {i} is {v!r}, which cannot be read as "
                f"{_dtype_name(parse.dtype)} of shape {list(parse.shape)} ({err}).\n{describe()}"
            ) from None
    return out


def _example_values(name: str, value, parse, dtype: np.dtype, describe):
    """The values of a parsed feature as JSON rows give them: a missing example's default
    (:func:`_missing_examples`); a ``VarLenFeature``'s list per example padded."""
    value = _missing_examples(name, value, parse, describe)
    if isinstance(parse, VarLenFeature) and any(
        isinstance(v, (list, tuple, np.ndarray)) for v in value
    ):
        value = _pad(value, dtype)  # a list of values per example
    return value


def _column(array: np.ndarray, parse) -> np.ndarray:
    """One value per example, as JSON rows carry it: ``[batch] -> [batch, 1]`` for a
    ``VarLenFeature`` or a feature of shape ``[1]``."""
    if array.ndim == 1:
        if isinstance(parse, VarLenFeature) or tuple(parse.shape) == (1,):
            return array.reshape(-1, 1)
    return array


def _check_array(name: str, array: np.ndarray, shape: list, dtype: np.dtype, describe) -> None:
    """Refuses a string input holding other values, and an array whose shape is not
    ``shape`` (None: any size)."""
    if dtype.kind == "O":
        if array.size and not all(isinstance(v, (str, bytes)) for v in array.flat):
            raise ValueError(f"Input {name!r} must hold strings.\n{describe()}")
    if len(array.shape) != len(shape) or any(
        isinstance(d, int) and d != a for d, a in zip(shape, array.shape, strict=False)
    ):
        raise ValueError(
            f"Input {name!r} has shape {list(array.shape)}, expected {shape} (None: any "
            f"size).\n{describe()}"
        )


class Signature:
    """One exported signature: call it with the inputs by name, get the outputs.

    A signature exported with a parsing receiver (``build_parsing_serving_input_receiver_fn``)
    takes either its features by name or, as TF's parsing signatures do, serialized
    ``tf.Example`` protos under ``examples`` (parsed with the receiver's spec by
    ``estimator.io.parse_example``): ``signature(examples=[example.SerializeToString()])``.

    Attributes:
      name: the signature key (``serving_default``, ``predict``, ...).
      inputs: ``{name: {"dtype", "shape"}}``; ``None`` dimensions take any size.
      accepts_examples: whether ``examples`` (serialized ``tf.Example``) may replace the
        inputs.
      outputs: ``{name: {"dtype", "shape"}}`` (``"string"`` outputs come back as bytes).
      mode: the ``ModeKeys`` mode it was exported from (``"infer"``, ``"eval"``,
        ``"train"``).
      method_name: TF's method name for the signature's kind
        (``"tensorflow/serving/predict"``, ``".../classify"``, ``".../regress"``,
        ``"tensorflow/supervised/eval"``, ``"tensorflow/supervised/training"``).
    """

    def __init__(self, name: str, entry: dict, exported, variables, transform) -> None:
        self.name = name
        self.entry = entry
        self.inputs = entry["inputs"]
        self.outputs = entry["outputs"]
        self.mode = entry["mode"]
        self.method_name = entry.get("method_name", "")
        self._exported = exported
        _check_vocabularies(name, self.outputs, exported)
        self._call = jax.jit(exported.call)
        self._variables = variables
        self._transform = transform
        self._parse_spec = (
            None
            if entry["parse_spec"] is None
            else {k: feature_from_config(v) for k, v in entry["parse_spec"].items()}
        )
        self.accepts_examples = self._parse_spec is not None and EXAMPLES not in self.inputs

    def _expected(self) -> str:
        lines = [
            f"  {name}: {spec['dtype']} {spec['shape']}"
            for name, spec in sorted(self.inputs.items())
        ]
        if self.accepts_examples:
            lines.append("  or examples: serialized tf.Example protos (string [None])")
        return f"Signature {self.name!r} expects:\n" + "\n".join(lines)

    def _check(self, inputs: Mapping[str, Any]) -> dict:
        """``{name: array}`` of ``inputs``, each checked against its spec; all with one batch
        size."""
        self._check_names(inputs)
        arrays = {}
        batch = None
        for name, value in inputs.items():
            array = self._array(name, value)
            if array.ndim:
                if batch is not None and array.shape[0] != batch:
                    raise ValueError(
                        f"Inputs have different batch sizes ({batch} and {array.shape[0]} for "
                        f"{name!r}).\n{self._expected()}"
                    )
                batch = array.shape[0]
            arrays[name] = array
        return arrays

    def _check_names(self, inputs: Mapping[str, Any]) -> None:
        """Refuses unknown inputs and missing ones (a parsed feature with a default, or a
        ``VarLenFeature``, may be left out)."""
        optional = set(self._parse_spec or {}) - {
            k
            for k, s in (self._parse_spec or {}).items()
            if getattr(s, "default_value", 0) is None and not isinstance(s, VarLenFeature)
        }
        missing = sorted(set(self.inputs) - set(inputs) - optional)
        unexpected = sorted(set(inputs) - set(self.inputs))
        if missing or unexpected:
            raise ValueError(
                f"Wrong inputs: missing {missing}, unexpected {unexpected}.\n{self._expected()}"
            )

    def _array(self, name: str, value) -> np.ndarray:
        """Input ``name`` as the array the signature takes, checked against its spec."""
        spec = self.inputs[name]
        dtype = _dtype(spec["dtype"])
        parse = (self._parse_spec or {}).get(name)
        if parse is not None:
            value = _example_values(name, value, parse, dtype, self._expected)
        _check_dtype(name, value, spec["dtype"], self._expected)
        try:
            array = np.asarray(value, dtype=dtype if dtype.kind != "O" else object)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"Input {name!r} cannot be read as {spec['dtype']}: {err}.\n{self._expected()}"
            ) from None
        if parse is not None:
            array = _column(array, parse)
        _check_array(name, array, spec["shape"], dtype, self._expected)
        return array

    def _parsed(self, inputs: Mapping[str, Any]) -> dict:
        """``examples`` (serialized ``tf.Example``) parsed into the signature's inputs: dense
        features as arrays, ``VarLenFeature``s padded to ``[batch, max_len]``."""
        if set(inputs) != {EXAMPLES}:
            raise ValueError(
                f"Give either 'examples' (serialized tf.Example protos) or the features by "
                f"name, not both; got {sorted(inputs)}.\n{self._expected()}"
            )
        examples = inputs[EXAMPLES]
        if isinstance(examples, (bytes, str)):
            examples = [examples]
        records = list(np.asarray(examples, dtype=object).ravel())
        if not records:
            raise ValueError(f"'examples' is empty: give at least one.\n{self._expected()}")
        if any(isinstance(r, str) for r in records):
            raise ValueError(
                "'examples' must hold serialized tf.Example bytes; got text. Send the bytes "
                '(in JSON: {"b64": base64 of example.SerializeToString()}).'
            )
        parsed = parse_example(records, self._parse_spec)
        out = {}
        for name, value in parsed.items():
            if isinstance(value, SparseValue):
                rows = [[] for _ in range(len(records))]
                for (row, _), v in zip(value.indices.tolist(), value.values.tolist(), strict=True):
                    rows[row].append(v)
                value = _pad(rows, np.dtype(value.values.dtype))
            if name in self.inputs:
                out[name] = value
        return out

    def _host(self, inputs: dict):
        entry = self.entry
        if self._parse_spec is not None:
            inputs = fill_parsed(inputs, self._parse_spec)
        if entry.get("decode"):  # CSV lines decoded into features (``_csv``)
            inputs = apply_decodes(inputs, entry["decode"])
        labels = None
        if entry["labels"] is not None:
            labels = {k: inputs[source] for k, source in entry["labels"].items()}
            if entry["single_label"]:
                (labels,) = labels.values()
        if entry["features"] is None:
            return inputs, labels
        features = {k: inputs[source] for k, source in entry["features"].items()}
        if entry["single_feature"]:
            (features,) = features.values()
        if self._transform is not None:
            features, _ = self._transform.apply(features, None)
        canon = jax.tree.map(
            lambda x: np.asarray(x, jax.dtypes.canonicalize_dtype(np.asarray(x).dtype)), features
        )
        return canon, labels

    def __call__(self, **inputs) -> dict[str, np.ndarray]:
        """Runs the signature on a batch.

        Args:
          **inputs: one array-like per input (lists, NumPy arrays; strings as ``str``).

        Returns:
          ``{output_name: np.ndarray}``; string outputs as ``object`` arrays of ``bytes``.

        Raises:
          ValueError: for missing or unexpected input names, wrong dtypes or shapes (the
            message lists what the signature expects).
        """
        if self.accepts_examples and EXAMPLES in inputs:
            inputs = self._parsed(inputs)
        features, labels = self._host(self._check(inputs))
        outputs = jax.device_get(self._call(self._variables, features, labels))
        result = {}
        for name, value in outputs.items():
            vocabulary = self.outputs[name].get("vocabulary")
            if vocabulary is not None:
                table = np.array([v.encode() for v in vocabulary] + [b"UNK"], dtype=object)
                ids = np.asarray(value)
                value = table[np.where((ids >= 0) & (ids < len(vocabulary)), ids, len(vocabulary))]
            result[name] = np.asarray(value)
        return result

    def __repr__(self) -> str:
        inputs, outputs = sorted(self.inputs), sorted(self.outputs)
        return f"Signature({self.name!r}, inputs={inputs}, outputs={outputs})"


def _check_vocabularies(signature: str, outputs: dict, exported) -> None:
    """Each output the manifest maps through a vocabulary must be integer ids of the
    function, and the vocabulary a list of strings.

    Raises:
      ValueError: naming the signature and the output (an altered or mismatched manifest
        would otherwise fail at call time, indexing the vocabulary with other values).
    """
    returned = exported.out_tree.unflatten(exported.out_avals)
    for output, spec in sorted(outputs.items()):
        vocabulary = spec.get("vocabulary")
        if vocabulary is None:
            continue
        aval = returned.get(output) if isinstance(returned, dict) else None
        problem = None
        if aval is None:
            problem = "the function does not return it"
        elif not np.issubdtype(aval.dtype, np.integer):
            problem = f"the function returns it as {aval.dtype}, not integer ids"
        elif not isinstance(vocabulary, list) or not all(isinstance(v, str) for v in vocabulary):
            problem = "its vocabulary is not a list of strings"
        if problem:
            raise ValueError(
                f"Signature {signature!r}: the manifest maps output {output!r} through a "
                f"vocabulary, but {problem}. The export's manifest does not fit its functions "
                "(edited, or copied from another export): export the model again."
            )


class LoadedModel:
    """An exported model, ready to serve.

    Attributes:
      path: the export directory.
      manifest: the parsed ``manifest.json``.
      signatures: ``{name: Signature}``.
      global_step: the global step of the exported checkpoint.
      variables: ``{"trainable": {...}, "non_trainable": {...}}`` (jax arrays).

    A loaded model may be called from many threads at once.
    """

    def __init__(self, path: str, *, verify_files: bool = True) -> None:
        self.path = path
        manifest_path = os.path.join(path, MANIFEST)
        if os.path.basename(os.path.normpath(path)).startswith("temp-") or not os.path.isfile(
            manifest_path
        ):
            raise ValueError(
                f"{path} is not a complete export: expected {MANIFEST} in a directory named by "
                "its timestamp (a temp-* directory is an interrupted export)."
            )
        self.manifest = _read_manifest(path)
        if verify_files:
            verify(path, self.manifest.get("files"))
        try:
            self.global_step = int(self.manifest["global_step"])
            signatures = dict(self.manifest["signatures"])
            config = self.manifest.get("input_transform")
            assets = [
                safe_path(path, f"assets/{name}", "an asset")
                for name in self.manifest.get("assets", [])
            ]
            functions = {
                name: safe_path(path, entry["function"], f"signature {name!r}'s function")
                for name, entry in signatures.items()
            }
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(
                f"{manifest_path} is malformed ({type(err).__name__}: {err}). Re-export the model."
            ) from None
        self.variables = read_variables(path)
        transform = None
        if config is not None:
            assets_dir = os.path.join(path, "assets")
            if any(os.path.dirname(a) != os.path.realpath(assets_dir) for a in assets):
                raise ValueError(f"{manifest_path}: assets must lie directly in assets/.")
            transform = InputTransform.from_config(config, assets_dir=assets_dir)
        self.signatures = {}
        for name, entry in signatures.items():
            exported = _deserialize(functions[name])
            try:
                self.signatures[name] = Signature(name, entry, exported, self.variables, transform)
            except (KeyError, TypeError, AttributeError) as err:
                raise ValueError(
                    f"{manifest_path}: signature {name!r} is malformed ({type(err).__name__}: "
                    f"{err}). Re-export the model."
                ) from None

    def __repr__(self) -> str:
        return f"LoadedModel({self.path!r}, signatures={sorted(self.signatures)})"


def _read_manifest(path: str) -> dict:
    manifest_path = os.path.join(path, MANIFEST)
    safe_path(path, MANIFEST, "the manifest")
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(
            f"{manifest_path} is corrupt: not valid UTF-8 JSON ({err}). Re-copy or re-export "
            "the model."
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{manifest_path} is not a jax-estimator export manifest.")
    if manifest.get("version") not in VERSIONS:
        raise ValueError(
            f"{manifest_path} has version {manifest.get('version')!r}; this jax-estimator "
            f"reads versions {list(VERSIONS)}. Load it with the jax-estimator that wrote it, "
            "or re-export the model."
        )
    return manifest


def _deserialize(function_path: str):
    """``jax.export.deserialize`` of one signature's file, with errors naming the file."""
    with open(function_path, "rb") as f:
        blob = bytearray(f.read())
    try:
        return jax_export.deserialize(blob)
    except Exception as err:  # the deserializer's errors are flatbuffer internals
        raise ValueError(
            f"{function_path} is not a valid jax.export function ({type(err).__name__}: "
            f"{err}). The file is truncated or corrupt: re-copy or re-export the model."
        ) from None


def read_variables(path) -> dict:
    """The variables saved in an export (``{"trainable": ..., "non_trainable": ...}``).

    Args:
      path: the export directory (str, PathLike, or bytes as ``export_saved_model`` returns).

    Raises:
      ValueError: if ``variables/`` cannot be read (names the directory).
    """
    directory = os.path.abspath(os.path.join(os.fsdecode(path), "variables"))
    try:
        restored = ocp.StandardCheckpointer().restore(directory)
    except Exception as err:  # orbax/tensorstore raise many types for a damaged checkpoint
        raise ValueError(
            f"The variables of the export in {directory} cannot be read "
            f"({type(err).__name__}: {err}). Re-copy or re-export the model."
        ) from None
    return {
        "trainable": dict(restored.get("trainable", {})),
        "non_trainable": dict(restored.get("non_trainable", {})),
    }


def load(path, *, verify_files: bool = True) -> LoadedModel:
    """Loads an export written by ``Estimator.export_saved_model``.

    Needs only jax (and this package's host-side preprocessing): no model code, no TF.

    What loading trusts: an export's ``functions/*.jax`` are StableHLO programs that are
    compiled and run, so **an export is executable code**; load only exports from sources
    you trust, as you would a Python package. Nothing is unpickled and no Python from the
    export runs. What loading checks: every path in the manifest is relative, normalized and
    inside the export directory (symlinks out of it are refused); with ``verify_files``
    (the default) every file's sha256 must equal the manifest's and no file may be added,
    before anything is deserialized (a damaged function file could otherwise crash the
    process inside the deserializer). The checksums detect damage in copying and storage,
    not a forger who rewrites the manifest too; sign or checksum the directory out of band
    for that.

    An export in storage (a ``gs://``, ``s3://``, ... URL, ``estimator.io.fs``) is
    downloaded to a local temporary directory first (removed when the model is garbage
    collected) and checked there; the model's ``path`` stays the URL, and messages name it.
    A version directory without its ``manifest.json`` (published last) is refused before
    anything is downloaded.

    Args:
      path: the export directory (str, bytes as returned by ``export_saved_model``, or
        PathLike), or a storage URL.
      verify_files: check every file's sha256 against the manifest (reads each file once;
        ``False`` skips it, for speed with exports you have just verified).

    Returns:
      A :class:`LoadedModel`; call ``model.signatures["serving_default"](**inputs)``.

    Raises:
      ValueError: if ``path`` is not a complete export, or its manifest or a file in it is
        corrupt, altered, or points outside the export (the message names the file).
    """
    path = fs.check(path, "The export path")
    if not fs.complete(path, marker=MANIFEST, local_check=MANIFEST):
        raise ValueError(
            f"{path} is not a complete export: expected {MANIFEST} in a directory named by "
            "its timestamp (a temp-* directory, or one without the manifest, which an export "
            "writes last, is an export in progress or an interrupted one). Wait for it, or "
            "export again."
        )
    local, remove = fs.local_copy(path)
    try:
        model = LoadedModel(local, verify_files=verify_files)
    except ValueError as err:
        remove()
        raise ValueError(str(err).replace(local, path)) from None
    except BaseException:
        remove()
        raise
    model.path = path
    weakref.finalize(model, remove)
    return model
