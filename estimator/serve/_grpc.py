"""TF Serving's gRPC API (``tensorflow.serving.PredictionService`` and ``ModelService``) over
the same loaded versions as the REST app.

``Predict``, ``Classify``, ``Regress``, ``MultiInference``, ``GetModelMetadata`` and
``GetModelStatus`` follow TF Serving 2.21's ``predict_util.cc``, ``classifier.cc``,
``regressor.cc``, ``multi_inference.cc``, ``get_model_metadata_impl.cc``,
``get_model_status_impl.cc`` and ``server_core.cc``: the same defaults (an empty
``signature_name`` is ``serving_default``), checks, status codes and messages. Requests
are parsed in the handler (so a malformed message is an INVALID_ARGUMENT naming the
message type, not a bare INTERNAL) and run by the REST app's runner (the shared
:class:`~estimator.serve._dispatch.Dispatcher`, through the
:class:`~estimator.serve._batching.Batcher` when batching is on).

Where this server differs from TF Serving (because an export is not a TF graph):
``Classify``/``Regress`` parse the ``tf.Example``s with the export's feature spec
(``estimator.io.parse_example``) and call the signature with the features (TF feeds the
serialized examples to the signature's single string input);
dtypes of ``Predict`` inputs must equal the signature's (TF's session would reject them
too, with a different message). A parsing export's ``Predict`` takes either its features
by name or, as TF's, serialized ``tf.Example``s under ``examples``.
"""

from __future__ import annotations

from collections.abc import Mapping

import grpc
import numpy as np

from estimator.export._loader import EXAMPLES  # serialized tf.Examples (TF's name)
from estimator.serve import _examples
from estimator.serve._app import ServingError
from estimator.serve._models import ModelWatcher
from estimator.serve._protos import messages
from estimator.serve._tensors import (
    TensorError,
    data_type,
    dtype_name,
    from_numpy,
    short_name,
    to_numpy,
)

DEFAULT_SIGNATURE = "serving_default"
PREDICT = "tensorflow/serving/predict"
CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"
_CODE = grpc.StatusCode


class GrpcError(Exception):
    """A failed call: answered with ``code`` and ``message`` as the gRPC status."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _parse(cls, data: bytes):
    try:
        return cls.FromString(data)
    except Exception as err:  # protobuf's DecodeError
        raise GrpcError(
            _CODE.INVALID_ARGUMENT,
            f"Could not parse the request as {cls.DESCRIPTOR.full_name} ({err}); send a "
            "message of that type (TF Serving's prediction_service_pb2_grpc stubs do).",
        ) from None


def _model_spec(out, name: str, signature_name: str | None, version: int | None) -> None:
    """TF Serving's ``MakeModelSpec``: an empty signature name reads ``serving_default``."""
    out.Clear()
    out.name = name
    if signature_name is not None:
        out.signature_name = signature_name or DEFAULT_SIGNATURE
    if version is not None:
        out.version.value = version


class Servicer:
    """Answers TF Serving's gRPC methods for a set of watched models.

    Args:
      models: ``{model name: ModelWatcher}``; each watcher's ``version_labels`` maps a
        label to a version (``--model_config_file``'s ``version_labels``).
      run: ``async run(signature, columns) -> outputs``; the REST app's runner, so both
        APIs share the thread pool and the batcher.
    """

    def __init__(self, models: Mapping[str, ModelWatcher], run) -> None:
        self.models = dict(models)
        self._run = run

    # ----- models and versions (server_core.cc) ---------------------------------------------
    def resolve(self, spec):
        """``(version, LoadedModel)`` for a ``ModelSpec``, or NOT_FOUND/INVALID_ARGUMENT."""
        name = spec.name
        if not name:
            raise GrpcError(_CODE.INVALID_ARGUMENT, "ModelSpec has no name specified.")
        choice = spec.WhichOneof("version_choice")
        watcher = self.models.get(name)
        version = None
        if choice == "version":
            version = spec.version.value
        elif choice == "version_label":
            labels = getattr(watcher, "version_labels", None) or {}
            if spec.version_label not in labels:
                raise GrpcError(
                    _CODE.INVALID_ARGUMENT,
                    f"Unrecognized servable version label: {spec.version_label}",
                )
            version = labels[spec.version_label]
        request = f"Latest({name})" if version is None else f"Specific({name}, {version})"
        served, model = watcher.current() if watcher is not None else (None, None)
        if model is None or (version is not None and version != served):
            raise GrpcError(_CODE.NOT_FOUND, f"Servable not found for request: {request}")
        return served, model

    async def call(self, signature, columns: dict) -> dict:
        try:
            return await self._run(signature, columns)
        except ServingError as err:
            raise GrpcError(_CODE.INVALID_ARGUMENT, err.message) from None

    # ----- Predict (predict_util.cc) ---------------------------------------------------------
    async def predict(self, data: bytes, context) -> bytes:
        request = _parse(messages.PredictRequest, data)
        version, model = self.resolve(request.model_spec)
        name = request.model_spec.signature_name or DEFAULT_SIGNATURE
        signature = model.signatures.get(name)
        if signature is None:
            raise GrpcError(_CODE.FAILED_PRECONDITION, f'Serving signature key "{name}" not found.')
        if signature.method_name not in (PREDICT, CLASSIFY, REGRESS):
            raise GrpcError(
                _CODE.INTERNAL,
                f"Expected prediction signature method_name to be one of {{{PREDICT}, "
                f"{CLASSIFY}, {REGRESS}}}. Was: {signature.method_name}",
            )
        sent, expected = set(request.inputs), set(signature.inputs)
        if getattr(signature, "accepts_examples", False) and EXAMPLES in sent:
            expected = {EXAMPLES}  # TF's parsing signature: serialized tf.Examples
        if sent - expected:
            raise GrpcError(
                _CODE.INVALID_ARGUMENT,
                f"input size does not match signature: {len(sent)}!={len(expected)} "
                f"len({{{','.join(sorted(sent))}}}) != len({{{','.join(sorted(expected))}}}). "
                f"Sent extra: {{{','.join(sorted(sent - expected))}}}. Missing but required: "
                f"{{{','.join(sorted(expected - sent))}}}.",
            )
        columns = {alias: _input(signature, alias, t) for alias, t in request.inputs.items()}
        aliases = list(request.output_filter)
        seen = set()
        for alias in aliases:
            if alias not in signature.outputs:
                raise GrpcError(
                    _CODE.INVALID_ARGUMENT,
                    f"output tensor alias not found in signature: {alias} Outputs expected to "
                    f"be in the set {{{','.join(sorted(signature.outputs))}}}.",
                )
            if alias in seen:
                raise GrpcError(_CODE.INVALID_ARGUMENT, f"duplicate output tensor alias: {alias}")
            seen.add(alias)
        outputs = await self.call(signature, columns)
        response = messages.PredictResponse()
        _model_spec(response.model_spec, request.model_spec.name, name, version)
        for alias in aliases or sorted(outputs):
            from_numpy(outputs[alias], response.outputs[alias])
        return response.SerializeToString()

    # ----- Classify / Regress (classifier.cc, regressor.cc) ---------------------------------
    def _signature(self, model, spec, method: str, kind: str):
        name = spec.signature_name or DEFAULT_SIGNATURE
        signature = model.signatures.get(name)
        if signature is None:
            raise GrpcError(_CODE.INVALID_ARGUMENT, f"No signature was found with the name: {name}")
        if signature.method_name != method:
            raise GrpcError(
                _CODE.INVALID_ARGUMENT,
                f"Expected {kind} signature method_name to be {method}. Was: "
                f"{signature.method_name}",
            )
        return signature

    async def _examples_call(self, signature, examples: list) -> tuple[int, dict]:
        try:
            columns = _examples.columns(signature, examples)
        except ValueError as err:
            raise GrpcError(_CODE.INVALID_ARGUMENT, str(err)) from None
        return len(examples), await self.call(signature, columns)

    async def classify(self, data: bytes, context) -> bytes:
        return await self._examples_method(
            data,
            messages.ClassificationRequest,
            messages.ClassificationResponse,
            (CLASSIFY, "classification"),
            _classifications,
        )

    async def regress(self, data: bytes, context) -> bytes:
        return await self._examples_method(
            data,
            messages.RegressionRequest,
            messages.RegressionResponse,
            (REGRESS, "regression"),
            _regressions,
        )

    async def _examples_method(self, data, request_type, response_type, kind, fill) -> bytes:
        """Classify or Regress: the request's examples through the signature of ``kind``
        (``(method name, signature kind)``), the outputs written by ``fill``."""
        request = _parse(request_type, data)
        version, model = self.resolve(request.model_spec)
        signature = self._signature(model, request.model_spec, *kind)
        count, outputs = await self._examples_call(signature, _input_examples(request.input))
        response = response_type()
        fill(outputs, count, response.result)
        spec = request.model_spec
        _model_spec(response.model_spec, spec.name, spec.signature_name, version)
        return response.SerializeToString()

    # ----- MultiInference (multi_inference.cc) ----------------------------------------------
    async def multi_inference(self, data: bytes, context) -> bytes:
        request = _parse(messages.MultiInferenceRequest, data)
        if not request.tasks:
            raise GrpcError(_CODE.INVALID_ARGUMENT, "Expected at least one task")
        name = ""
        for task in request.tasks:
            if not task.model_spec.name:
                raise GrpcError(_CODE.INVALID_ARGUMENT, "Found ModelSpec with an empty model name.")
            if name and task.model_spec.name != name:
                raise GrpcError(
                    _CODE.INVALID_ARGUMENT,
                    "All ModelSpecs in a MultiInferenceRequest must access the same model name.",
                )
            name = task.model_spec.name
        version, model = self.resolve(request.tasks[0].model_spec)
        signatures, seen = [], set()
        for task in request.tasks:
            key = task.model_spec.signature_name or DEFAULT_SIGNATURE
            if key in seen:
                raise GrpcError(_CODE.INVALID_ARGUMENT, f"Duplicate evaluation of signature: {key}")
            seen.add(key)
            signature = model.signatures.get(key)
            if signature is None:
                raise GrpcError(
                    _CODE.INVALID_ARGUMENT,
                    f"Requested signature not found in model graph: {key}",
                )
            if task.method_name not in (CLASSIFY, REGRESS):
                raise GrpcError(
                    _CODE.UNIMPLEMENTED, f"Unsupported signature method_name: {task.method_name}"
                )
            kind = "classification" if task.method_name == CLASSIFY else "regression"
            signatures.append(self._signature(model, task.model_spec, task.method_name, kind))
        examples = _input_examples(request.input)
        response = messages.MultiInferenceResponse()
        for task, signature in zip(request.tasks, signatures, strict=True):
            count, outputs = await self._examples_call(signature, examples)
            result = response.results.add()
            if task.method_name == CLASSIFY:
                _classifications(outputs, count, result.classification_result)
            else:
                _regressions(outputs, count, result.regression_result)
            spec = task.model_spec
            _model_spec(result.model_spec, spec.name, spec.signature_name, version)
        return response.SerializeToString()

    # ----- GetModelMetadata (get_model_metadata_impl.cc) ------------------------------------
    async def get_model_metadata(self, data: bytes, context) -> bytes:
        request = _parse(messages.GetModelMetadataRequest, data)
        if not request.HasField("model_spec"):
            raise GrpcError(_CODE.INVALID_ARGUMENT, "Missing ModelSpec")
        if not request.metadata_field:
            raise GrpcError(
                _CODE.INVALID_ARGUMENT,
                "GetModelMetadataRequest must specify at least one metadata_field",
            )
        for field in request.metadata_field:
            if field != "signature_def":
                raise GrpcError(_CODE.INVALID_ARGUMENT, f"Metadata field {field} is not supported")
        version, model = self.resolve(request.model_spec)
        defs = messages.SignatureDefMap()
        for key, signature in model.signatures.items():
            entry = defs.signature_def[key]
            entry.method_name = signature.method_name
            for alias, spec in signature.inputs.items():
                _tensor_info(alias, spec, entry.inputs[alias])
            for alias, spec in signature.outputs.items():
                _tensor_info(alias, spec, entry.outputs[alias])
        response = messages.GetModelMetadataResponse()
        response.model_spec.name = request.model_spec.name
        response.model_spec.version.value = version
        response.metadata["signature_def"].Pack(defs)
        return response.SerializeToString()

    # ----- GetModelStatus (get_model_status_impl.cc) ----------------------------------------
    async def get_model_status(self, data: bytes, context) -> bytes:
        request = _parse(messages.GetModelStatusRequest, data)
        if not request.HasField("model_spec"):
            raise GrpcError(_CODE.INVALID_ARGUMENT, "Missing ModelSpec")
        name = request.model_spec.name
        watcher = self.models.get(name)
        served = watcher.version if watcher is not None else None
        if request.model_spec.HasField("version"):
            version = request.model_spec.version.value
            if served != version:
                raise GrpcError(
                    _CODE.NOT_FOUND, f"Could not find version {version} of model {name}"
                )
        elif served is None:
            raise GrpcError(_CODE.NOT_FOUND, f"Could not find any versions of model {name}")
        response = messages.GetModelStatusResponse()
        status = response.model_version_status.add()
        status.version = served
        status.state = messages.ModelVersionStatus_State.values_by_name["AVAILABLE"].number
        status.status.error_code = 0  # tensorflow.error.OK
        return response.SerializeToString()

    async def handle_reload_config_request(self, data: bytes, context) -> bytes:
        raise GrpcError(
            _CODE.UNIMPLEMENTED,
            "HandleReloadConfigRequest is not supported by estimator.serve: restart the server "
            "with the new --model_config_file (new versions of a served model are picked up "
            "without a restart).",
        )


def _input(signature, alias: str, tensor) -> np.ndarray:
    """One Predict input as an array, its dtype checked against the signature's."""
    try:
        array = to_numpy(tensor)
    except TensorError as err:
        raise GrpcError(_CODE.INVALID_ARGUMENT, f"tensor parsing error: {alias} ({err})") from None
    spec = signature.inputs.get(alias) or {"dtype": "string", "shape": [None]}  # examples
    expected = spec["dtype"]
    want = dtype_name(data_type(expected))
    got = dtype_name(tensor.dtype)
    if want != got:
        raise GrpcError(
            _CODE.INVALID_ARGUMENT,
            f"Expects arg[{alias}] to be {short_name(want)} but {short_name(got)} is provided: "
            f"signature {signature.name!r} takes {alias!r} as {want} {spec['shape']}; send "
            f"tf.make_tensor_proto(values, tf.{expected}).",
        )
    return array


def _input_examples(message) -> list:
    """``tensorflow.serving.Input`` -> ``tf.Example`` messages (util.cc's
    ``InputToSerializedExampleTensor``: with a context, each example is read from its bytes
    after the context's, so when both hold a feature the example's own wins)."""
    kind = message.WhichOneof("kind")
    if kind == "example_list":
        examples = list(message.example_list.examples)
    elif kind == "example_list_with_context":
        listed = message.example_list_with_context
        context = listed.context.SerializeToString()
        examples = [
            messages.Example.FromString(context + e.SerializeToString()) for e in listed.examples
        ]
    else:
        examples = []
    if not examples:
        raise GrpcError(_CODE.INVALID_ARGUMENT, "Input is empty.")
    return examples


def _classifications(outputs: dict, count: int, result) -> None:
    classes, scores = outputs.get("classes"), outputs.get("scores")
    if classes is None and scores is None:
        raise GrpcError(
            _CODE.INVALID_ARGUMENT,
            'Expected classification signature outputs to contain at least one of "classes" '
            f'or "scores". Signature outputs: {sorted(outputs)}',
        )
    for array, label in ((classes, "classes"), (scores, "scores")):
        if array is not None and (array.ndim != 2 or array.shape[0] != count):
            raise GrpcError(
                _CODE.INVALID_ARGUMENT,
                f"Expected Tensor shape: [batch_size num_classes] but got {list(array.shape)} "
                f"for {label}",
            )
    width = (classes if classes is not None else scores).shape[1]
    for i in range(count):
        row = result.classifications.add()
        for j in range(width):
            entry = row.classes.add()
            if classes is not None:
                value = classes[i, j]
                entry.label = value.decode() if isinstance(value, bytes) else str(value)
            if scores is not None:
                entry.score = float(scores[i, j])


def _regressions(outputs: dict, count: int, result) -> None:
    if len(outputs) != 1:
        raise GrpcError(_CODE.INVALID_ARGUMENT, "Expected one output Tensor.")
    (values,) = outputs.values()
    if not (values.ndim == 1 or (values.ndim == 2 and values.shape[1] == 1)):
        raise GrpcError(
            _CODE.INVALID_ARGUMENT,
            "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but "
            f"got {list(values.shape)}",
        )
    for value in values.reshape(-1)[:count]:
        result.regressions.add().value = float(value)


def _tensor_info(name: str, spec: dict, out) -> None:
    out.name = name
    out.dtype = data_type(spec["dtype"])
    for size in spec["shape"]:
        out.tensor_shape.dim.add().size = size if isinstance(size, int) else -1


__all__ = ["GrpcError", "Servicer"]
