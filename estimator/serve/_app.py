"""TF Serving's REST API (``/v1/models/...``) as a Starlette app: JSON turned into calls of the
:class:`~estimator.serve._core.ServingCore`, and what it returns written as TF Serving's JSON.

As TF Serving's ``http_rest_api_handler.cc``: a request's URL names the model, version or
label and the method; its body (``instances`` rows or ``inputs`` columns, ``{"b64": ...}``
for bytes; ``examples`` and ``context`` for classify and regress) becomes the core's inputs;
the answers are the gRPC API's, in JSON (``NaN``, ``Infinity`` and ``-Infinity`` written as
those tokens, as TF Serving writes them). The core's :class:`ServingError` becomes the HTTP
status of its code with ``{"error": message}``; a request body that is not JSON, nests too
deeply or holds an integer of more than Python's 4,300 digits is a 400, one larger than
``max_request_bytes`` a 413.
"""

import base64
import json
import re
from collections.abc import Mapping

import numpy as np
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from estimator.serve._core import CLASSIFY, REGRESS, Code, ServingCore, ServingError, runner
from estimator.serve._models import ModelWatcher

_METHODS = {"predict": None, "classify": CLASSIFY, "regress": REGRESS}
# TF Serving's ToHTTPStatusCode (http_server.cc), but 413 for a request too large.
_HTTP = {
    Code.INVALID_ARGUMENT: 400,
    Code.FAILED_PRECONDITION: 400,
    Code.NOT_FOUND: 404,
    Code.RESOURCE_EXHAUSTED: 413,
    Code.UNIMPLEMENTED: 501,
}


class _JSON(JSONResponse):
    """Starlette's JSON response, with non-finite floats as TF Serving's JSON writes them
    (``NaN``, ``Infinity``, ``-Infinity``) and characters UTF-8 cannot encode as escapes."""

    def render(self, content) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=True, separators=(",", ":"))
        return text.encode("utf-8", "backslashreplace")


def _decode_b64(value):
    """``{"b64": "..."}`` -> bytes, recursively (TF Serving's binary encoding)."""
    if isinstance(value, dict):
        if set(value) == {"b64"}:
            try:
                return base64.b64decode(value["b64"], validate=True)
            except (ValueError, TypeError) as err:
                raise ServingError(
                    Code.INVALID_ARGUMENT, f"Invalid base64 in {{'b64': ...}}: {err}"
                ) from None
        return {k: _decode_b64(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode_b64(v) for v in value]
    return value


def _jsonable(array: np.ndarray):
    """NumPy output -> JSON (bytes as UTF-8 text, or ``{"b64": ...}`` when not UTF-8)."""
    if array.dtype == object or array.dtype.kind in "SU":

        def text(v):
            if isinstance(v, bytes):
                try:
                    return v.decode()
                except UnicodeDecodeError:
                    return {"b64": base64.b64encode(v).decode()}
            return v

        return np.vectorize(text, otypes=[object])(array).tolist() if array.size else []
    return array.tolist()


def _version_number(text: str, name: str) -> int:
    """The version of a ``/versions/{v}`` URL (NOT_FOUND unless an int64)."""
    if re.fullmatch(r"[0-9]{1,18}", text) is None:
        raise ServingError(
            Code.NOT_FOUND, f"Servable not found for request: Specific({name}, {text})"
        )
    return int(text)


def _model(params: dict) -> tuple[str, int | None, str | None]:
    """``(name, version, label)`` of the URL, as the core's calls take them."""
    name = params["name"]
    version = params.get("version")
    return name, None if version is None else _version_number(version, name), params.get("label")


async def _json_body(request: Request, limit: int) -> dict:
    """The request's JSON object, ``{"b64": ...}`` values decoded; 413/400 otherwise."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise ServingError(
            Code.RESOURCE_EXHAUSTED,
            f"Request body of {length} bytes exceeds the limit of {limit} bytes "
            "(--max_request_bytes).",
        )
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ServingError(
                Code.RESOURCE_EXHAUSTED,
                f"Request body exceeds the limit of {limit} bytes (--max_request_bytes).",
            )
    try:
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ServingError(
                Code.INVALID_ARGUMENT,
                f"Request body must be a JSON object, got {type(data).__name__}.",
            )
        return _decode_b64(data)
    except ValueError as err:  # not JSON, not UTF-8, an integer of over 4,300 digits
        raise ServingError(Code.INVALID_ARGUMENT, f"JSON Parse error: {err}") from None
    except RecursionError:
        raise ServingError(
            Code.INVALID_ARGUMENT,
            "JSON Parse error: the request nests arrays or objects too deeply.",
        ) from None


def _signature_name(data: dict) -> str:
    name = data.get("signature_name", "")
    if not isinstance(name, str):
        raise ServingError(Code.INVALID_ARGUMENT, "'signature_name' must be a string.")
    return name


def _all_bytes(value) -> bool:
    """Whether ``value`` is a non-empty list of bytes (decoded ``{"b64": ...}`` strings)."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, bytes) for v in value)


def _rows_to_columns(instances: list, input_names: list) -> dict:
    if not instances:
        raise ServingError(Code.INVALID_ARGUMENT, "'instances' must be a non-empty list.")
    if all(isinstance(row, dict) for row in instances):
        keys = {k for row in instances for k in row}
        return {k: [row.get(k) for row in instances] for k in keys}
    if any(isinstance(row, dict) for row in instances):
        raise ServingError(
            Code.INVALID_ARGUMENT, "'instances' mixes named (object) and unnamed rows."
        )
    if len(input_names) != 1:
        raise ServingError(
            Code.INVALID_ARGUMENT,
            f"Unnamed 'instances' need a signature with one input; this one has "
            f"{sorted(input_names)}: give each instance as an object keyed by input name.",
        )
    return {input_names[0]: instances}


def _predict_columns(signature, data: dict) -> tuple[str, dict]:
    """``(format, columns)`` of a predict body: ``instances`` (rows) or ``inputs``
    (columns)."""
    formats = [k for k in ("instances", "inputs") if k in data]
    if len(formats) != 1:
        raise ServingError(
            Code.INVALID_ARGUMENT,
            "Missing 'inputs' or 'instances' key"
            if not formats
            else "Request may contain either 'instances' or 'inputs', not both.",
        )
    unknown = sorted(set(data) - {"instances", "inputs", "signature_name"})
    if unknown:
        raise ServingError(Code.INVALID_ARGUMENT, f"Unknown keys in request: {unknown}.")
    (form,) = formats
    names = sorted(signature.inputs)
    if getattr(signature, "accepts_examples", False) and _all_bytes(data[form]):
        names = ["examples"]  # TF's parsing signature: serialized tf.Example, {"b64": ...}
    if form == "instances":
        if not isinstance(data["instances"], list):
            raise ServingError(Code.INVALID_ARGUMENT, "'instances' must be a list of rows.")
        return form, _rows_to_columns(data["instances"], names)
    if isinstance(data["inputs"], dict):
        return form, data["inputs"]
    if len(names) != 1:
        raise ServingError(
            Code.INVALID_ARGUMENT, f"'inputs' must be an object keyed by input name {names}."
        )
    return form, {names[0]: data["inputs"]}


def _predict_json(form: str, outputs: dict) -> dict:
    """TF Serving's predict answer: ``outputs`` (columns) for ``inputs``, ``predictions``
    (rows; a lone output not keyed) for ``instances``."""
    if form == "inputs":
        result = {k: _jsonable(v) for k, v in outputs.items()}
        if len(result) == 1:
            (result,) = result.values()
        return {"outputs": result}
    keys = sorted(outputs)
    cols = {k: _jsonable(outputs[k]) for k in keys}
    if len(keys) == 1:
        return {"predictions": cols[keys[0]]}
    batch = len(next(iter(cols.values())))
    return {"predictions": [{k: cols[k][i] for k in keys} for i in range(batch)]}


def _examples_columns(data: dict) -> tuple[dict, int]:
    """``(columns, rows)`` of a classify or regress body (``examples``, each joined with the
    shared ``context``; an example's own feature wins)."""
    examples = data.get("examples")
    if not isinstance(examples, list) or not examples:
        raise ServingError(
            Code.INVALID_ARGUMENT, "Expected 'examples': a non-empty list of objects."
        )
    if not all(isinstance(e, dict) for e in examples):
        raise ServingError(
            Code.INVALID_ARGUMENT, "Each of 'examples' must be an object {feature: value}."
        )
    context = data.get("context", {})
    if not isinstance(context, dict):
        raise ServingError(Code.INVALID_ARGUMENT, "'context' must be an object {feature: value}.")
    rows = [{**context, **e} for e in examples]
    keys = {k for row in rows for k in row}
    return {k: [row.get(k) for row in rows] for k in keys}, len(rows)


class _Handlers:
    """The routes' handlers over one :class:`ServingCore`."""

    def __init__(self, core: ServingCore, max_request_bytes: int) -> None:
        self.core = core
        self.max_request_bytes = max_request_bytes

    async def status(self, request: Request):
        response = self.core.status(*_model(request.path_params))
        return _JSON(_message_json(response))

    async def metadata(self, request: Request):
        name, version, label = _model(request.path_params)
        served, defs = self.core.metadata(name, ["signature_def"], version, label)
        spec = {"name": name, "signature_name": "", "version": str(served)}
        return _JSON({"model_spec": spec, "metadata": {"signature_def": _message_json(defs)}})

    async def post(self, request: Request):
        params = dict(request.path_params)
        target, _, method = params.pop("method").partition(":")
        if method not in _METHODS:
            raise ServingError(
                Code.NOT_FOUND,
                f"Unknown method {method!r}: expected :predict, :classify or :regress.",
            )
        if "name" not in params:
            params["name"] = target
        else:
            params["label" if "/labels/" in request.url.path else "version"] = target
        _, model = self.core.resolve(*_model(params))
        data = await _json_body(request, self.max_request_bytes)
        if method == "predict":
            signature = self.core.json_signature(model, _signature_name(data))
            form, columns = _predict_columns(signature, data)
            return _JSON(_predict_json(form, await self.core.predict(signature, columns)))
        signature = self.core.inference_signature(model, _signature_name(data), _METHODS[method])
        columns, count = _examples_columns(data)
        if method == "regress":
            return _JSON({"result": await self.core.regress(signature, columns, count)})
        return _JSON({"result": await self.core.classify(signature, columns, count)})


def _message_json(message) -> dict:
    """A response message as TF Serving's REST API writes it (proto3 JSON with field names
    as in the ``.proto`` and every field, defaults included)."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


async def _on_error(request: Request, exc: ServingError):
    return _JSON({"error": exc.message}, status_code=_HTTP.get(exc.code, 500))


async def _on_http(request: Request, exc):
    return _JSON({"error": exc.detail}, status_code=exc.status_code)


def build_app(
    models: ModelWatcher | Mapping[str, ModelWatcher] | ServingCore,
    max_request_bytes: int = 64 << 20,
    max_batch_size: int | None = None,
    batch_timeout_micros: int = 1000,
) -> Starlette:
    """The REST app for the watched models.

    Args:
      models: the :class:`ModelWatcher` serving the model, ``{name: ModelWatcher}`` for
        several (``--model_config_file``), or the :class:`ServingCore` to share with the
        gRPC API (then batching is the core's runner's, and the next two arguments are
        ignored).
      max_request_bytes: larger request bodies get 413.
      max_batch_size: if set, concurrent requests are merged into calls of up to this many
        rows (TF Serving's ``--enable_batching``); ``None``: one call per request.
      batch_timeout_micros: how long a batch waits for more requests.

    Returns:
      A Starlette ASGI app with TF Serving's ``/v1/models/{name}`` routes.
    """
    if isinstance(models, ServingCore):
        core = models
    else:
        watchers = {models.name: models} if isinstance(models, ModelWatcher) else dict(models)
        core = ServingCore(watchers, runner(max_batch_size, batch_timeout_micros))
    handlers = _Handlers(core, max_request_bytes)
    status, metadata, post = handlers.status, handlers.metadata, handlers.post
    return Starlette(
        routes=[
            Route("/v1/models/{name}", status),
            Route("/v1/models/{name}/versions/{version}", status),
            Route("/v1/models/{name}/metadata", metadata),
            Route("/v1/models/{name}/versions/{version}/metadata", metadata),
            Route("/v1/models/{method}", post, methods=["POST"]),
            Route("/v1/models/{name}/versions/{method}", post, methods=["POST"]),
            Route("/v1/models/{name}/labels/{label}", status),
            Route("/v1/models/{name}/labels/{label}/metadata", metadata),
            Route("/v1/models/{name}/labels/{method}", post, methods=["POST"]),
        ],
        exception_handlers={ServingError: _on_error, 404: _on_http, 405: _on_http},
    )
