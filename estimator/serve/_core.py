"""The serving core that both APIs call: models and versions, signature checks, ``TensorInfo``,
``tf.Example`` columns, the runner and the one error type.

TF Serving has one core: its REST handler (``http_rest_api_handler.cc``) fills the gRPC
request message from the JSON and calls what its gRPC service calls
(``prediction_service_impl.cc``: ``predict_util.cc``, ``classifier.cc``, ``regressor.cc``,
``multi_inference.cc``, ``get_model_metadata_impl.cc`` and ``get_model_status_impl.cc``
over ``server_core.cc``'s model lookup). Here the REST app (``_app``) turns JSON into calls
of :class:`ServingCore` and the gRPC servicer (``_grpc``) turns protos into them; each renders
what comes back, and neither imports the other. Every refusal is a :class:`ServingError`
with TF Serving's status code, which each API maps at its edge (to an HTTP status, to the gRPC
code of the same name), so both answer one mistake with one message.

Where this differs from TF Serving (because an export is not a TF graph): Classify, Regress
and MultiInference parse the ``tf.Example``s with the export's feature spec
(``estimator.io.parse_example``, through :mod:`estimator.serve._examples`) and call the
signature with the features (TF feeds the serialized examples to the signature's single
string input); a parsing export's Predict takes either its features by name or, as TF's,
serialized ``tf.Example``s under ``examples``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping

import numpy as np

from estimator.export._loader import EXAMPLES  # serialized tf.Examples (TF's name)
from estimator.serve import _examples
from estimator.serve._batching import Batcher
from estimator.serve._dispatch import Dispatcher
from estimator.serve._models import ModelWatcher
from estimator.serve._protos import messages
from estimator.serve._tensors import TensorError, data_type

DEFAULT_SIGNATURE = "serving_default"
PREDICT = "tensorflow/serving/predict"
CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"
_KIND = {CLASSIFY: "classification", REGRESS: "regression"}
#: ``--max_request_tensor_bytes``'s default: what a request's inputs may take once decoded.
MAX_TENSOR_BYTES = 1 << 30


class Code(enum.IntEnum):
    """TF Serving's status codes (``tensorflow.error.Code``; gRPC's ``StatusCode`` has the
    same names)."""

    INVALID_ARGUMENT = 3
    NOT_FOUND = 5
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    UNIMPLEMENTED = 12


class ServingError(Exception):
    """A refused request: TF Serving's status code and message.

    Args:
      code: the :class:`Code`. The gRPC API answers with the gRPC code of the same name, the
        REST API with TF Serving's HTTP status for it (``http_server.cc``'s
        ``ToHTTPStatusCode``: 400, 404, 501), but 413 for RESOURCE_EXHAUSTED (a request too
        large, where TF Serving's 429 would say "too many requests").
      message: what was wrong and how to fix it. Characters that UTF-8 cannot encode (lone
        surrogates, which a JSON string may carry into a message) are kept as ``\\udXXX``
        escapes, so that either API can send the message.
    """

    def __init__(self, code: Code, message: str) -> None:
        message = message.encode("utf-8", "backslashreplace").decode("utf-8")
        super().__init__(message)
        self.code = code
        self.message = message


def _call(signature, columns: dict) -> dict:
    """One signature call; the signature's refusal of its inputs (its documented
    ``ValueError``; a ``TypeError`` where an input is not even the container it reads, such
    as ``null`` for a list) is INVALID_ARGUMENT."""
    try:
        return signature(**columns)
    except ValueError as err:  # the loader's checks, NumPy's conversions, parse_example's
        raise ServingError(Code.INVALID_ARGUMENT, str(err)) from None
    except TypeError as err:
        takes = ", ".join(f"{k}: {v['dtype']} {v['shape']}" for k, v in signature.inputs.items())
        raise ServingError(
            Code.INVALID_ARGUMENT,
            f"Could not read the inputs ({err}): signature {signature.name!r} takes {takes}, "
            "each a list with a value (or a list of values) per row.",
        ) from None


def runner(
    max_batch_size: int | None = None,
    batch_timeout_micros: int = 1000,
    num_batch_threads: int | None = None,
    num_threads: int | None = None,
):
    """``async run(signature, columns) -> outputs``: the :class:`Batcher` when
    ``max_batch_size`` is set, else one call per request (one runner serves both APIs, so
    their concurrent requests merge into, or queue for, the same calls). Inputs the signature
    refuses raise :class:`ServingError` (INVALID_ARGUMENT).

    Each call runs where a :class:`~estimator.serve._dispatch.Dispatcher` puts it: on the
    event loop's thread when the signature's recent calls with inputs of the same shapes were
    short, else in a worker thread. Without batching at most ``num_threads`` calls run in
    threads at once (None or 0: the CPU count; ``--tensorflow_inter_op_parallelism``), the
    others waiting in arrival order; with batching, ``num_batch_threads`` merged calls. Why
    so few: a call holds Python's lock for its host work and the CPU for the model, so more
    calls at once (Starlette's 40 threads) only share the same cores out of order, which
    raises the p99 latency and lowers the throughput (``benchmarks/serving_load.py``
    measures both).
    """
    threads = num_threads or os.cpu_count() or 1
    if max_batch_size is None:
        return Dispatcher(_call, threads)
    dispatch = Dispatcher(_call, num_batch_threads or threads)
    return Batcher(dispatch, max_batch_size, batch_timeout_micros, num_batch_threads)


class ServingCore:
    """What TF Serving's REST and gRPC APIs answer, for a set of watched models.

    Args:
      models: ``{model name: ModelWatcher}``; a watcher's ``version_labels`` map a label to a
        version (``--model_config_file``'s ``version_labels``).
      run: ``async run(signature, columns) -> outputs`` (a :func:`runner`, shared by both
        APIs); default: ``runner()``, one call per request.
      max_tensor_bytes: the most bytes a request's inputs may take once decoded
        (``--max_request_tensor_bytes``; ragged lists counted padded to their longest, as
        the signature pads them); larger requests are refused with RESOURCE_EXHAUSTED
        before anything that size is allocated (:meth:`check_inputs`).
    """

    def __init__(
        self,
        models: Mapping[str, ModelWatcher],
        run=None,
        max_tensor_bytes: int = MAX_TENSOR_BYTES,
    ) -> None:
        self.models = dict(models)
        self._run = runner() if run is None else run
        self.max_tensor_bytes = max_tensor_bytes

    # ----- models and versions (server_core.cc, get_model_status_impl.cc) --------------------
    def _labelled(self, name: str, label: str) -> int:
        labels = self.models[name].version_labels if name in self.models else {}
        if label not in labels:
            raise ServingError(
                Code.INVALID_ARGUMENT, f"Unrecognized servable version label: {label}"
            )
        return labels[label]

    def resolve(self, name: str, version: int | None = None, label: str | None = None):
        """``(version, LoadedModel)`` served for a request naming ``name`` and at most one of
        ``version`` and ``label`` (neither: the latest).

        Raises:
          ServingError: INVALID_ARGUMENT for an empty name or an unknown label, NOT_FOUND
            for a model or version not served (``Servable not found for request: ...``).
        """
        if not name:
            raise ServingError(Code.INVALID_ARGUMENT, "ModelSpec has no name specified.")
        watcher = self.models.get(name)
        if label is not None and watcher is not None:
            version = self._labelled(name, label)
        served, model = watcher.current() if watcher is not None else (None, None)
        if model is None or (version is not None and version != served):
            request = f"Latest({name})" if version is None else f"Specific({name}, {version})"
            raise ServingError(Code.NOT_FOUND, f"Servable not found for request: {request}")
        return served, model

    def status(self, name: str, version: int | None = None, label: str | None = None):
        """GetModelStatus: the ``GetModelStatusResponse`` of the served version.

        Raises:
          ServingError: NOT_FOUND for a model or version not served (TF Serving's
            ``Could not find ...``), INVALID_ARGUMENT for an unknown label.
        """
        if label is not None:
            version = self._labelled(name, label)
        watcher = self.models.get(name)
        served = watcher.version if watcher is not None else None
        if version is not None and served != version:
            raise ServingError(Code.NOT_FOUND, f"Could not find version {version} of model {name}")
        if served is None:
            raise ServingError(Code.NOT_FOUND, f"Could not find any versions of model {name}")
        response = messages.GetModelStatusResponse()
        entry = response.model_version_status.add()
        entry.version = served
        entry.state = messages.ModelVersionStatus_State.values_by_name["AVAILABLE"].number
        entry.status.error_code = 0  # tensorflow.error.OK
        return response

    def metadata(self, name: str, fields, version: int | None = None, label: str | None = None):
        """GetModelMetadata: ``(version, SignatureDefMap)`` with every signature's inputs and
        outputs as ``TensorInfo`` (a dimension of any size has size -1).

        Raises:
          ServingError: INVALID_ARGUMENT without a metadata field or with one other than
            ``signature_def``; :meth:`resolve`'s.
        """
        if not fields:
            raise ServingError(
                Code.INVALID_ARGUMENT,
                "GetModelMetadataRequest must specify at least one metadata_field",
            )
        for field in fields:
            if field != "signature_def":
                raise ServingError(
                    Code.INVALID_ARGUMENT, f"Metadata field {field} is not supported"
                )
        served, model = self.resolve(name, version, label)
        defs = messages.SignatureDefMap()
        for key, signature in model.signatures.items():
            entry = defs.signature_def[key]
            entry.method_name = signature.method_name
            for alias, spec in signature.inputs.items():
                _tensor_info(alias, spec, entry.inputs[alias])
            for alias, spec in signature.outputs.items():
                _tensor_info(alias, spec, entry.outputs[alias])
        return served, defs

    # ----- signatures -----------------------------------------------------------------------
    @staticmethod
    def json_signature(model, name: str):
        """The signature a REST request's JSON is read against (``GetInfoMap``: an empty name
        is ``serving_default``); INVALID_ARGUMENT if there is none of that name."""
        name = name or DEFAULT_SIGNATURE
        signature = model.signatures.get(name)
        if signature is None:
            raise ServingError(
                Code.INVALID_ARGUMENT,
                f'Serving signature name: "{name}" not found in signature def. '
                f"Available: {sorted(model.signatures)}",
            )
        return signature

    @staticmethod
    def predict_signature(model, name: str):
        """Predict's signature (``predict_util.cc``); FAILED_PRECONDITION if there is none of
        that name. Its method is not checked (TF Serving's default,
        ``--enable_signature_method_name_check=false``)."""
        name = name or DEFAULT_SIGNATURE
        signature = model.signatures.get(name)
        if signature is None:
            raise ServingError(
                Code.FAILED_PRECONDITION, f'Serving signature key "{name}" not found.'
            )
        return signature

    @staticmethod
    def inference_signature(model, name: str, method: str):
        """Classify's or Regress's signature (``classifier.cc``, ``regressor.cc``; ``method``
        is :data:`CLASSIFY` or :data:`REGRESS`); INVALID_ARGUMENT if there is none of that
        name or its method is another."""
        name = name or DEFAULT_SIGNATURE
        signature = model.signatures.get(name)
        if signature is None:
            raise ServingError(
                Code.INVALID_ARGUMENT, f"No signature was found with the name: {name}"
            )
        if signature.method_name != method:
            raise ServingError(
                Code.INVALID_ARGUMENT,
                f"Expected {_KIND[method]} signature method_name to be {method}. Was: "
                f"{signature.method_name}",
            )
        return signature

    @staticmethod
    def check_input_names(signature, sent: set) -> None:
        """Predict's inputs by name (``predict_util.cc``): none the signature lacks
        (INVALID_ARGUMENT); a missing one is left to the signature, which knows the
        defaults of a parsing export's features."""
        expected = set(signature.inputs)
        if getattr(signature, "accepts_examples", False) and EXAMPLES in sent:
            expected = {EXAMPLES}  # TF's parsing signature: serialized tf.Examples
        if sent - expected:
            raise ServingError(
                Code.INVALID_ARGUMENT,
                f"input size does not match signature: {len(sent)}!={len(expected)} "
                f"len({{{','.join(sorted(sent))}}}) != len({{{','.join(sorted(expected))}}}). "
                f"Sent extra: {{{','.join(sorted(sent - expected))}}}. Missing but required: "
                f"{{{','.join(sorted(expected - sent))}}}.",
            )

    # ----- running --------------------------------------------------------------------------
    def check_bytes(self, nbytes: int) -> None:
        """RESOURCE_EXHAUSTED if a request's inputs take more than ``max_tensor_bytes``."""
        if nbytes > self.max_tensor_bytes:
            raise ServingError(
                Code.RESOURCE_EXHAUSTED,
                f"The request's inputs take {nbytes} bytes once decoded, over the limit of "
                f"{self.max_tensor_bytes} bytes (--max_request_tensor_bytes): send fewer rows "
                "per request, or start the server with a larger limit.",
            )

    def check_inputs(self, signature, columns: dict) -> None:
        """Refuses, before anything is allocated for them, inputs that would take more than
        ``max_tensor_bytes`` (RESOURCE_EXHAUSTED) and lists nested deeper than the input's
        rank (INVALID_ARGUMENT; NumPy would fail on them with errors of its own).

        What the inputs take is bounded from above: an array's own size; 8 bytes per element
        of a list, ragged lists padded to their longest at each depth (as the signature pads
        a ``VarLenFeature``'s lists); for serialized ``tf.Example``s, 8 bytes per element of
        :func:`_examples.decoded_elements`. Measuring is linear in the number of list items
        (never recursive)."""
        total = 0
        for name, value in columns.items():
            if name == EXAMPLES and getattr(signature, "accepts_examples", False):
                total += 8 * _examples.decoded_elements(signature, value)
            elif isinstance(value, np.ndarray):
                total += value.size * value.dtype.itemsize
            else:
                elements, depth = _padded(value)
                spec = signature.inputs.get(name)
                if spec is not None and depth > len(spec["shape"]):
                    raise ServingError(
                        Code.INVALID_ARGUMENT,
                        f"Input {name!r} nests lists {depth} deep; signature {signature.name!r} "
                        f"takes it as {spec['dtype']} {spec['shape']}, {len(spec['shape'])} "
                        "levels at most.",
                    )
                total += 8 * elements
        self.check_bytes(total)

    async def run(self, signature, columns: dict) -> dict:
        """``{output: array}`` of the signature on ``columns`` (arrays or lists by input
        name), through the runner; :meth:`check_inputs`'s errors, INVALID_ARGUMENT if the
        signature refuses the inputs."""
        self.check_inputs(signature, columns)
        return await self._run(signature, columns)

    async def predict(self, signature, columns: dict, output_filter=()) -> dict:
        """Predict: ``{alias: array}`` of the outputs ``output_filter`` names (all, sorted, if
        it is empty).

        Raises:
          ServingError: INVALID_ARGUMENT for an alias the signature lacks or one named
            twice (``predict_util.cc``); :meth:`run`'s.
        """
        aliases = list(output_filter)
        for i, alias in enumerate(aliases):
            if alias not in signature.outputs:
                raise ServingError(
                    Code.INVALID_ARGUMENT,
                    f"output tensor alias not found in signature: {alias} Outputs expected to "
                    f"be in the set {{{','.join(sorted(signature.outputs))}}}.",
                )
            if alias in aliases[:i]:
                raise ServingError(Code.INVALID_ARGUMENT, f"duplicate output tensor alias: {alias}")
        outputs = await self.run(signature, columns)
        return {alias: outputs[alias] for alias in aliases or sorted(outputs)}

    @staticmethod
    def example_columns(signature, examples: list) -> dict:
        """The columns of decoded ``tf.Example`` messages (:func:`_examples.columns`);
        INVALID_ARGUMENT with ``parse_example``'s message for a wrong feature."""
        try:
            return _examples.columns(signature, examples)
        except ValueError as err:
            raise ServingError(Code.INVALID_ARGUMENT, str(err)) from None

    async def classify(self, signature, columns: dict, count: int) -> list:
        """Classify: per example, ``[(label, score)]`` for each class (``""`` without a
        ``classes`` output, 0.0 without ``scores``); ``count`` rows.

        Raises:
          ServingError: INVALID_ARGUMENT for outputs that are no classification
            (``classifier.cc``'s messages); :meth:`run`'s.
        """
        return _classifications(await self.run(signature, columns), count)

    async def regress(self, signature, columns: dict, count: int) -> list[float]:
        """Regress: one value per example.

        Raises:
          ServingError: INVALID_ARGUMENT for outputs that are no regression
            (``regressor.cc``'s messages); :meth:`run`'s.
        """
        return _regressions(await self.run(signature, columns), count)

    async def multi_inference(self, spec: tuple, tasks: list, read_examples) -> tuple:
        """MultiInference (``multi_inference.cc``): each task's signature over the same
        ``tf.Example``s.

        Args:
          spec: ``(name, version, label)`` of the model, as :meth:`resolve` takes them.
          tasks: ``[(model name, signature name, method name)]``.
          read_examples: returns the decoded ``tf.Example`` messages; called once the tasks
            are checked (TF Serving reads the input after them).

        Returns:
          ``(version, results)``: per task, :meth:`classify`'s or :meth:`regress`'s result.

        Raises:
          ServingError: INVALID_ARGUMENT without tasks, for an empty or second model name, a
            signature named twice or not found; UNIMPLEMENTED for a method other than
            classify and regress; each task's own.
        """
        _check_tasks(tasks)
        version, model = self.resolve(*spec)
        signatures, seen = [], set()
        for _, key, method in tasks:
            key = key or DEFAULT_SIGNATURE
            if key in seen:
                raise ServingError(
                    Code.INVALID_ARGUMENT, f"Duplicate evaluation of signature: {key}"
                )
            seen.add(key)
            signatures.append(self._task_signature(model, key, method))
        examples = read_examples()
        results = []
        for (_, _, method), signature in zip(tasks, signatures, strict=True):
            columns = self.example_columns(signature, examples)
            infer = self.classify if method == CLASSIFY else self.regress
            results.append(await infer(signature, columns, len(examples)))
        return version, results

    def _task_signature(self, model, key: str, method: str):
        if key not in model.signatures:
            raise ServingError(
                Code.INVALID_ARGUMENT, f"Requested signature not found in model graph: {key}"
            )
        if method not in _KIND:
            raise ServingError(Code.UNIMPLEMENTED, f"Unsupported signature method_name: {method}")
        return self.inference_signature(model, key, method)


def _check_tasks(tasks: list) -> None:
    if not tasks:
        raise ServingError(Code.INVALID_ARGUMENT, "Expected at least one task")
    names = {name for name, _, _ in tasks}
    if "" in names:
        raise ServingError(Code.INVALID_ARGUMENT, "Found ModelSpec with an empty model name.")
    if len(names) > 1:
        raise ServingError(
            Code.INVALID_ARGUMENT,
            "All ModelSpecs in a MultiInferenceRequest must access the same model name.",
        )


def _tensor_info(name: str, spec: dict, out) -> None:
    """A signature input or output as a ``TensorInfo`` (DT_INVALID for a dtype that has no
    ``DataType``)."""
    out.name = name
    try:
        out.dtype = data_type(spec["dtype"])
    except TensorError:
        out.dtype = 0  # DT_INVALID
    for size in spec["shape"]:
        out.tensor_shape.dim.add().size = size if isinstance(size, int) else -1


def _classifications(outputs: dict, count: int) -> list:
    classes, scores = outputs.get("classes"), outputs.get("scores")
    if classes is None and scores is None:
        raise ServingError(
            Code.INVALID_ARGUMENT,
            'Expected classification signature outputs to contain at least one of "classes" '
            f'or "scores". Signature outputs: {sorted(outputs)}',
        )
    for array, label in ((classes, "classes"), (scores, "scores")):
        if array is not None and (array.ndim != 2 or array.shape[0] != count):
            raise ServingError(
                Code.INVALID_ARGUMENT,
                f"Expected Tensor shape: [batch_size num_classes] but got {list(array.shape)} "
                f"for {label}",
            )
    width = (classes if classes is not None else scores).shape[1]
    labels = [[""] * width] * count if classes is None else classes.tolist()
    values = [[0.0] * width] * count if scores is None else scores.tolist()
    return [
        [(_text(label), float(score)) for label, score in zip(row, row_scores, strict=True)]
        for row, row_scores in zip(labels, values, strict=True)
    ]


def _text(label) -> str:
    """A class label as text (bytes as UTF-8; undecodable bytes as ``\\xNN`` escapes)."""
    return label.decode("utf-8", "backslashreplace") if isinstance(label, bytes) else str(label)


def _regressions(outputs: dict, count: int) -> list[float]:
    if len(outputs) != 1:
        raise ServingError(Code.INVALID_ARGUMENT, "Expected one output Tensor.")
    (values,) = outputs.values()
    if not (values.ndim == 1 or (values.ndim == 2 and values.shape[1] == 1)):
        raise ServingError(
            Code.INVALID_ARGUMENT,
            "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but "
            f"got {list(values.shape)}",
        )
    return values.reshape(-1)[:count].astype(np.float64).tolist()


def _padded(value) -> tuple[int, int]:
    """``(elements, depth)`` of nested lists padded to the longest list at each depth (at
    least one element per list, as the signature pads an empty one)."""
    count, depth, level = 1, 0, [value]
    while True:
        lists = [v for v in level if isinstance(v, (list, tuple))]
        if not lists:
            return count, depth
        count *= max(max(len(v) for v in lists), 1)
        depth += 1
        level = [item for v in lists for item in v]


__all__ = [
    "CLASSIFY",
    "Code",
    "DEFAULT_SIGNATURE",
    "MAX_TENSOR_BYTES",
    "PREDICT",
    "REGRESS",
    "ServingCore",
    "ServingError",
    "runner",
]
