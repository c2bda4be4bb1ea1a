"""TF Serving's REST API (``/v1/models/...``) as a Starlette app over ``estimator.export``."""

import base64
import json
import os
from collections.abc import Mapping

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from estimator.serve._batching import Batcher
from estimator.serve._dispatch import Dispatcher
from estimator.serve._models import ModelWatcher

_METHODS = {
    "predict": "tensorflow/serving/predict",
    "classify": "tensorflow/serving/classify",
    "regress": "tensorflow/serving/regress",
}


class ServingError(Exception):
    """An error answered as ``{"error": message}`` with an HTTP status code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _decode_b64(value):
    """``{"b64": "..."}`` -> bytes, recursively (TF Serving's binary encoding)."""
    if isinstance(value, dict):
        if set(value) == {"b64"}:
            try:
                return base64.b64decode(value["b64"], validate=True)
            except (ValueError, TypeError) as err:
                raise ServingError(400, f"Invalid base64 in {{'b64': ...}}: {err}") from None
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


_TF_DTYPES = {"float32": "DT_FLOAT", "float64": "DT_DOUBLE", "string": "DT_STRING"}


def _tensor_info(name: str, spec: dict) -> dict:
    """A signature input/output as TF Serving's metadata shows a ``TensorInfo``."""
    dims = [{"size": str(d if isinstance(d, int) else -1), "name": ""} for d in spec["shape"]]
    return {
        "dtype": _TF_DTYPES.get(spec["dtype"], "DT_" + spec["dtype"].upper()),
        "tensor_shape": {"dim": dims, "unknown_rank": False},
        "name": name,
    }


def _version_of(models: Mapping[str, ModelWatcher], request: Request):
    """The served model for the URL, or a 404 like TF Serving's."""
    name = request.path_params["name"]
    version = request.path_params.get("version")
    watcher = models.get(name)
    if watcher is None:
        raise ServingError(404, f"Servable not found for request: Latest({name})")
    label = request.path_params.get("label")
    if label is not None:  # /labels/{label}: a version named in --model_config_file
        if label not in watcher.version_labels:
            raise ServingError(400, f"Unrecognized servable version label: {label}")
        version = str(watcher.version_labels[label])
    served, model = watcher.current()
    if model is None:
        raise ServingError(404, f"Servable not found for request: Latest({name})")
    if version is not None and str(served) != version:
        raise ServingError(404, f"Servable not found for request: Specific({name}, {version})")
    return served, model


async def _json_body(request: Request, limit: int) -> dict:
    """The request's JSON object, ``{"b64": ...}`` values decoded; 413/400 otherwise."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise ServingError(
            413,
            f"Request body of {length} bytes exceeds the limit of {limit} bytes "
            "(--max_request_bytes).",
        )
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ServingError(
                413, f"Request body exceeds the limit of {limit} bytes (--max_request_bytes)."
            )
    try:
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ServingError(
                400, f"Request body must be a JSON object, got {type(data).__name__}."
            )
        return _decode_b64(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ServingError(400, f"JSON Parse error: {err}") from None
    except RecursionError:
        raise ServingError(
            400, "JSON Parse error: the request nests arrays or objects too deeply."
        ) from None


def _signature(model, data: dict, method: str):
    name = data.get("signature_name", "serving_default")
    if not isinstance(name, str):
        raise ServingError(400, "'signature_name' must be a string.")
    signature = model.signatures.get(name)
    if signature is None:
        raise ServingError(
            400,
            f'Serving signature name: "{name}" not found in signature def. '
            f"Available: {sorted(model.signatures)}",
        )
    if method != "predict" and signature.method_name != _METHODS[method]:
        raise ServingError(
            400,
            f"Expected {method} signature method_name to be {_METHODS[method]}. "
            f"Was: {signature.method_name}",
        )
    return signature


def _all_bytes(value) -> bool:
    """Whether ``value`` is a non-empty list of bytes (decoded ``{"b64": ...}`` strings)."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, bytes) for v in value)


def _rows_to_columns(instances: list, input_names: list) -> dict:
    if not instances:
        raise ServingError(400, "'instances' must be a non-empty list.")
    if all(isinstance(row, dict) for row in instances):
        keys = {k for row in instances for k in row}
        return {k: [row.get(k) for row in instances] for k in keys}
    if any(isinstance(row, dict) for row in instances):
        raise ServingError(400, "'instances' mixes named (object) and unnamed rows.")
    if len(input_names) != 1:
        raise ServingError(
            400,
            f"Unnamed 'instances' need a signature with one input; this one has "
            f"{sorted(input_names)}: give each instance as an object keyed by input name.",
        )
    return {input_names[0]: instances}


def _call(signature, columns: dict) -> dict:
    try:
        return signature(**columns)
    except ValueError as err:
        raise ServingError(400, str(err)) from None


def runner(
    max_batch_size: int | None = None,
    batch_timeout_micros: int = 1000,
    num_batch_threads: int | None = None,
    num_threads: int | None = None,
):
    """``async run(signature, columns) -> outputs``: the :class:`Batcher` when
    ``max_batch_size`` is set, else one call per request (shared by the REST and gRPC APIs,
    so their concurrent requests merge into, or queue for, the same calls). Bad input raises
    :class:`ServingError` (400).

    Each call runs where a :class:`~estimator.serve._dispatch.Dispatcher` puts it: on the
    event loop's thread when the signature's recent calls with inputs of the same shapes
    were short (under 2 ms), else in a worker thread. Without batching at most
    ``num_threads`` calls run in threads at once (None or 0: the CPU count;
    ``--tensorflow_inter_op_parallelism``), the others waiting in arrival order; with
    batching, ``num_batch_threads`` merged calls. A call holds Python's lock for its host
    work and the CPU for the model, so more calls at once only share the same cores out of
    order: with up to 40 at once (Starlette's thread pool), REST at 64 clients on 2 cores
    served 381-418 requests/s with a p99 of 3.7-4.4x the mean latency, against 532-587 and
    1.2-1.3x with 2 (``benchmarks/serving_load.py``, an earlier machine).
    """
    threads = num_threads or os.cpu_count() or 1
    if max_batch_size is None:
        return Dispatcher(_call, threads)
    dispatch = Dispatcher(_call, num_batch_threads or threads)
    return Batcher(dispatch, max_batch_size, batch_timeout_micros, num_batch_threads)


def build_app(
    watcher: ModelWatcher | Mapping[str, ModelWatcher],
    max_request_bytes: int = 64 << 20,
    max_batch_size: int | None = None,
    batch_timeout_micros: int = 1000,
    *,
    run=None,
) -> Starlette:
    """The REST app for the watched models.

    Args:
      watcher: the :class:`ModelWatcher` serving the model, or ``{name: ModelWatcher}``
        for several (``--model_config_file``).
      max_request_bytes: larger request bodies get 413.
      max_batch_size: if set, concurrent requests are merged into calls of up to this many
        rows (TF Serving's ``--enable_batching``); ``None``: one call per request.
      batch_timeout_micros: how long a batch waits for more requests.
      run: a :func:`runner` to share with the gRPC API (then ``max_batch_size`` and
        ``batch_timeout_micros`` are the runner's).

    Returns:
      A Starlette ASGI app with TF Serving's ``/v1/models/{name}`` routes.
    """
    models = {watcher.name: watcher} if isinstance(watcher, ModelWatcher) else dict(watcher)
    if run is None:
        run = runner(max_batch_size, batch_timeout_micros)

    async def status(request: Request):
        version, _ = _version_of(models, request)
        return JSONResponse(
            {
                "model_version_status": [
                    {
                        "version": str(version),
                        "state": "AVAILABLE",
                        "status": {"error_code": "OK", "error_message": ""},
                    }
                ]
            }
        )

    async def metadata(request: Request):
        version, model = _version_of(models, request)
        defs = {}
        for key, sig in model.signatures.items():
            defs[key] = {
                "inputs": {n: _tensor_info(n, s) for n, s in sig.inputs.items()},
                "outputs": {n: _tensor_info(n, s) for n, s in sig.outputs.items()},
                "method_name": sig.method_name,
            }
        return JSONResponse(
            {
                "model_spec": {
                    "name": request.path_params["name"],
                    "signature_name": "",
                    "version": str(version),
                },
                "metadata": {"signature_def": {"signature_def": defs}},
            }
        )

    async def post(request: Request):
        params = request.path_params
        target, _, method = params.pop("method").partition(":")
        if method not in _METHODS:
            raise ServingError(
                404, f"Unknown method {method!r}: expected :predict, :classify or :regress."
            )
        if "name" not in params:
            params["name"] = target
        else:
            params["label" if "/labels/" in request.url.path else "version"] = target
        _, model = _version_of(models, request)
        data = await _json_body(request, max_request_bytes)
        signature = _signature(model, data, method)
        if method == "predict":
            return await _predict(signature, data)
        return await _classify_regress(signature, data, method)

    async def _predict(signature, data: dict):
        formats = [k for k in ("instances", "inputs") if k in data]
        if len(formats) != 1:
            raise ServingError(
                400,
                "Missing 'inputs' or 'instances' key"
                if not formats
                else "Request may contain either 'instances' or 'inputs', not both.",
            )
        unknown = sorted(set(data) - {"instances", "inputs", "signature_name"})
        if unknown:
            raise ServingError(400, f"Unknown keys in request: {unknown}.")
        names = sorted(signature.inputs)
        if getattr(signature, "accepts_examples", False) and _all_bytes(data[formats[0]]):
            names = ["examples"]  # TF's parsing signature: serialized tf.Example, {"b64": ...}
        if formats[0] == "instances":
            if not isinstance(data["instances"], list):
                raise ServingError(400, "'instances' must be a list of rows.")
            columns = _rows_to_columns(data["instances"], names)
        else:
            inputs = data["inputs"]
            if isinstance(inputs, dict):
                columns = inputs
            elif len(names) == 1:
                columns = {names[0]: inputs}
            else:
                raise ServingError(400, f"'inputs' must be an object keyed by input name {names}.")
        outputs = await run(signature, columns)
        if formats[0] == "inputs":
            result = {k: _jsonable(v) for k, v in outputs.items()}
            if len(result) == 1:
                (result,) = result.values()
            return JSONResponse({"outputs": result})
        keys = sorted(outputs)
        cols = {k: _jsonable(outputs[k]) for k in keys}
        batch = len(next(iter(cols.values())))
        if len(keys) == 1:
            return JSONResponse({"predictions": cols[keys[0]]})
        return JSONResponse({"predictions": [{k: cols[k][i] for k in keys} for i in range(batch)]})

    async def _classify_regress(signature, data: dict, method: str):
        examples = data.get("examples")
        if not isinstance(examples, list) or not examples:
            raise ServingError(400, "Expected 'examples': a non-empty list of objects.")
        if not all(isinstance(e, dict) for e in examples):
            raise ServingError(400, "Each of 'examples' must be an object {feature: value}.")
        context = data.get("context", {})
        if not isinstance(context, dict):
            raise ServingError(400, "'context' must be an object {feature: value}.")
        rows = [{**context, **e} for e in examples]
        keys = {k for row in rows for k in row}
        columns = {k: [row.get(k) for row in rows] for k in keys}
        outputs = await run(signature, columns)
        if method == "regress":
            return JSONResponse({"result": _jsonable(outputs["outputs"].reshape(-1))})
        scores = _jsonable(outputs["scores"]) if "scores" in outputs else None
        classes = _jsonable(outputs["classes"]) if "classes" in outputs else None
        result = []
        for i in range(len(rows)):
            n = len((classes or scores)[i])
            result.append(
                [
                    [
                        classes[i][j] if classes else "",
                        scores[i][j] if scores else 0.0,
                    ]
                    for j in range(n)
                ]
            )
        return JSONResponse({"result": result})

    async def on_error(request: Request, exc: ServingError):
        return JSONResponse({"error": exc.message}, status_code=exc.status)

    async def on_http(request: Request, exc):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)

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
        exception_handlers={ServingError: on_error, 404: on_http, 405: on_http},
    )
