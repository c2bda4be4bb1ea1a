"""TF Serving's gRPC API (``tensorflow.serving.PredictionService`` and ``ModelService``): its
request messages turned into calls of the :class:`~estimator.serve._core.ServingCore`, and
what the core returns written into its response messages.

``Predict``, ``Classify``, ``Regress``, ``MultiInference``, ``GetModelMetadata`` and
``GetModelStatus`` follow TF Serving 2.21's ``prediction_service_impl.cc`` and
``model_service_impl.cc``: the same defaults (an empty ``signature_name`` is
``serving_default``), checks, status codes and messages (the core's). Requests are parsed
here, so a malformed message is an INVALID_ARGUMENT naming the message type, not a bare
INTERNAL. A ``TensorProto`` is checked (dtype, rank, dimensions, element count, content
length, the signature's dtype and fixed dimensions, ``--max_request_tensor_bytes``) before
anything is allocated for it; dtypes of Predict inputs must equal the signature's (TF's
session would reject them too, with a different message).
"""

from __future__ import annotations

from estimator.serve._core import (
    CLASSIFY,
    DEFAULT_SIGNATURE,
    REGRESS,
    Code,
    ServingCore,
    ServingError,
)
from estimator.serve._protos import messages
from estimator.serve._tensors import (
    TensorError,
    check,
    data_type,
    dtype_name,
    from_numpy,
    short_name,
    to_numpy,
)


def _parse(cls, data: bytes):
    try:
        return cls.FromString(data)
    except Exception as err:  # protobuf's DecodeError
        raise ServingError(
            Code.INVALID_ARGUMENT,
            f"Could not parse the request as {cls.DESCRIPTOR.full_name} ({err}); send a "
            "message of that type (TF Serving's prediction_service_pb2_grpc stubs do).",
        ) from None


def _spec(spec) -> tuple[str, int | None, str | None]:
    """A ``ModelSpec`` as ``(name, version, label)`` for :meth:`ServingCore.resolve`."""
    choice = spec.WhichOneof("version_choice")
    version = spec.version.value if choice == "version" else None
    label = spec.version_label if choice == "version_label" else None
    return spec.name, version, label


def _model_spec(out, name: str, signature_name: str | None, version: int | None) -> None:
    """TF Serving's ``MakeModelSpec``: an empty signature name reads ``serving_default``."""
    out.Clear()
    out.name = name
    if signature_name is not None:
        out.signature_name = signature_name or DEFAULT_SIGNATURE
    if version is not None:
        out.version.value = version


class Servicer:
    """Answers TF Serving's gRPC methods from a :class:`ServingCore` (the one the REST API
    uses too, so both share the models, the thread pool and the batcher)."""

    def __init__(self, core: ServingCore) -> None:
        self.core = core

    # ----- Predict --------------------------------------------------------------------------
    async def predict(self, data: bytes, context) -> bytes:
        request = _parse(messages.PredictRequest, data)
        spec = request.model_spec
        version, model = self.core.resolve(*_spec(spec))
        signature = self.core.predict_signature(model, spec.signature_name)
        self.core.check_input_names(signature, set(request.inputs))
        columns = self._inputs(signature, request.inputs)
        outputs = await self.core.predict(signature, columns, request.output_filter)
        response = messages.PredictResponse()
        _model_spec(response.model_spec, spec.name, signature.name, version)
        for alias, array in outputs.items():
            from_numpy(array, response.outputs[alias])
        return response.SerializeToString()

    def _inputs(self, signature, tensors) -> dict:
        """The inputs as arrays, every tensor checked (and their bytes counted against the
        limit) before any is allocated."""
        nbytes = sum(_checked(signature, alias, tensor) for alias, tensor in tensors.items())
        self.core.check_bytes(nbytes)
        return {alias: to_numpy(tensor) for alias, tensor in tensors.items()}

    # ----- Classify / Regress ---------------------------------------------------------------
    async def classify(self, data: bytes, context) -> bytes:
        request = _parse(messages.ClassificationRequest, data)
        version, signature, examples = self._examples_request(request, CLASSIFY)
        columns = self.core.example_columns(signature, examples)
        rows = await self.core.classify(signature, columns, len(examples))
        response = messages.ClassificationResponse()
        _classifications(rows, response.result)
        spec = request.model_spec
        _model_spec(response.model_spec, spec.name, spec.signature_name, version)
        return response.SerializeToString()

    async def regress(self, data: bytes, context) -> bytes:
        request = _parse(messages.RegressionRequest, data)
        version, signature, examples = self._examples_request(request, REGRESS)
        columns = self.core.example_columns(signature, examples)
        values = await self.core.regress(signature, columns, len(examples))
        response = messages.RegressionResponse()
        _regressions(values, response.result)
        spec = request.model_spec
        _model_spec(response.model_spec, spec.name, spec.signature_name, version)
        return response.SerializeToString()

    def _examples_request(self, request, method: str):
        """``(version, signature, examples)`` of a Classify or Regress request."""
        version, model = self.core.resolve(*_spec(request.model_spec))
        signature = self.core.inference_signature(model, request.model_spec.signature_name, method)
        return version, signature, _input_examples(request.input)

    # ----- MultiInference -------------------------------------------------------------------
    async def multi_inference(self, data: bytes, context) -> bytes:
        request = _parse(messages.MultiInferenceRequest, data)
        tasks = [
            (t.model_spec.name, t.model_spec.signature_name, t.method_name) for t in request.tasks
        ]
        first = _spec(request.tasks[0].model_spec) if request.tasks else ("", None, None)
        version, results = await self.core.multi_inference(
            first, tasks, lambda: _input_examples(request.input)
        )
        response = messages.MultiInferenceResponse()
        for task, outcome in zip(request.tasks, results, strict=True):
            result = response.results.add()
            if task.method_name == CLASSIFY:
                _classifications(outcome, result.classification_result)
            else:
                _regressions(outcome, result.regression_result)
            spec = task.model_spec
            _model_spec(result.model_spec, spec.name, spec.signature_name, version)
        return response.SerializeToString()

    # ----- GetModelMetadata, GetModelStatus, HandleReloadConfigRequest ----------------------
    async def get_model_metadata(self, data: bytes, context) -> bytes:
        request = _parse(messages.GetModelMetadataRequest, data)
        if not request.HasField("model_spec"):
            raise ServingError(Code.INVALID_ARGUMENT, "Missing ModelSpec")
        version, defs = self.core.metadata(
            request.model_spec.name, request.metadata_field, *_spec(request.model_spec)[1:]
        )
        response = messages.GetModelMetadataResponse()
        response.model_spec.name = request.model_spec.name
        response.model_spec.version.value = version
        response.metadata["signature_def"].Pack(defs)
        return response.SerializeToString()

    async def get_model_status(self, data: bytes, context) -> bytes:
        request = _parse(messages.GetModelStatusRequest, data)
        if not request.HasField("model_spec"):
            raise ServingError(Code.INVALID_ARGUMENT, "Missing ModelSpec")
        return self.core.status(*_spec(request.model_spec)).SerializeToString()

    async def handle_reload_config_request(self, data: bytes, context) -> bytes:
        raise ServingError(
            Code.UNIMPLEMENTED,
            "HandleReloadConfigRequest is not supported by estimator.serve: restart the server "
            "with the new --model_config_file (new versions of a served model are picked up "
            "without a restart).",
        )


def _checked(signature, alias: str, tensor) -> int:
    """The bytes one Predict input takes once decoded, after checking the ``TensorProto``, its
    dtype against the signature's and, where the ranks agree, its fixed dimensions (so a
    small message declaring a huge tensor of the wrong shape allocates nothing)."""
    try:
        name, shape, nbytes = check(tensor)
    except TensorError as err:
        raise ServingError(
            Code.INVALID_ARGUMENT, f"tensor parsing error: {alias} ({err})"
        ) from None
    spec = signature.inputs.get(alias) or {"dtype": "string", "shape": [None]}  # examples
    want = dtype_name(data_type(spec["dtype"]))
    if want != name:
        raise ServingError(
            Code.INVALID_ARGUMENT,
            f"Expects arg[{alias}] to be {short_name(want)} but {short_name(name)} is provided: "
            f"signature {signature.name!r} takes {alias!r} as {want} {spec['shape']}; send "
            f"tf.make_tensor_proto(values, tf.{spec['dtype']}).",
        )
    expected = spec["shape"]
    if len(shape) == len(expected) and any(
        isinstance(d, int) and d != s for d, s in zip(expected, shape, strict=True)
    ):
        raise ServingError(
            Code.INVALID_ARGUMENT,
            f"Input {alias!r} has shape {list(shape)}, expected {expected} (None: any size).",
        )
    return nbytes


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
        raise ServingError(Code.INVALID_ARGUMENT, "Input is empty.")
    return examples


def _classifications(rows: list, result) -> None:
    for row in rows:
        classes = result.classifications.add().classes
        for label, score in row:
            entry = classes.add()
            entry.label = label
            entry.score = score


def _regressions(values: list, result) -> None:
    for value in values:
        result.regressions.add().value = value


__all__ = ["Servicer"]
