"""TF Serving's own client against ``python -m estimator.serve``, and TF's SavedModel answers.

Run by ``test_serve_grpc.py`` as ``python tests/jobs/grpc_client_job.py`` with a JSON request on
stdin::

    {"address": "127.0.0.1:PORT", "exports": {model: export dir},
     "rows": {model: [{feature: value}]}, "saved_models": DIR}

In a process with TensorFlow and ``tensorflow-serving-api``, it calls every method of the
server through TF Serving's ``prediction_service_pb2_grpc`` / ``model_service_pb2_grpc``
stubs, building requests with ``tf.make_tensor_proto`` and ``tf.train.Example`` and reading
answers with ``tf.make_ndarray``, exactly as a TF Serving client does. It also writes each
export's TF SavedModel (``estimator.export.to_tf_saved_model``) and calls its signatures with
the same ``tf.Example``s, TF Serving's way (serialized examples into the signature's single
string input). It prints ``{"grpc": ..., "tf": ...}`` as JSON: per model, per call, the
outputs as nested lists (strings decoded), and under ``"schema"`` how the server's committed
descriptors compare with the installed TF Serving and TF (``gen_serving_descriptors.py``).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import grpc  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow_serving.apis import (  # noqa: E402
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

TIMEOUT = 60.0
CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"
PREDICT = "tensorflow/serving/predict"


def example(row: dict) -> tf.train.Example:
    feature = {}
    for key, value in row.items():
        if isinstance(value, str):
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        else:
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def jsonable(array):
    if array.dtype == object or array.dtype.kind == "S":
        return [v.decode() if isinstance(v, bytes) else jsonable(v) for v in array]
    return array.tolist()


def metadata(stub, name: str) -> dict:
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = name
    request.metadata_field.append("signature_def")
    response = stub.GetModelMetadata(request, TIMEOUT)
    defs = get_model_metadata_pb2.SignatureDefMap()
    assert response.metadata["signature_def"].Unpack(defs)
    return {
        "version": response.model_spec.version.value,
        "signatures": {
            key: {
                "method_name": d.method_name,
                "inputs": {
                    k: [tf.dtypes.as_dtype(v.dtype).name, [x.size for x in v.tensor_shape.dim]]
                    for k, v in d.inputs.items()
                },
                "outputs": sorted(d.outputs),
            }
            for key, d in defs.signature_def.items()
        },
    }


def predict(stub, name: str, signature: str, info: dict, rows: list, output_filter=()):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    request.output_filter.extend(output_filter)
    for key, (dtype, _) in info["inputs"].items():
        values = [[row[key]] for row in rows]
        request.inputs[key].CopyFrom(tf.make_tensor_proto(values, tf.dtypes.as_dtype(dtype)))
    response = stub.Predict(request, TIMEOUT)
    spec = response.model_spec
    return {
        "model_spec": [spec.name, spec.version.value, spec.signature_name],
        "outputs": {k: jsonable(tf.make_ndarray(v)) for k, v in response.outputs.items()},
    }


def predict_examples(stub, name: str, signature: str, rows: list):
    """Predict as TF Serving clients call an Estimator's parsing export: serialized
    tf.Examples under ``examples``."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    serialized = [example(r).SerializeToString() for r in rows]
    request.inputs["examples"].CopyFrom(tf.make_tensor_proto(serialized, tf.string))
    response = stub.Predict(request, TIMEOUT)
    return {k: jsonable(tf.make_ndarray(v)) for k, v in response.outputs.items()}


def set_input(message, rows: list, context: dict | None) -> None:
    if context is None:
        message.example_list.examples.extend(example(r) for r in rows)
        return
    listed = message.example_list_with_context
    listed.context.CopyFrom(example(context))
    listed.examples.extend(example({k: v for k, v in r.items() if k not in context}) for r in rows)


def classifications(result) -> list:
    return [[[c.label, c.score] for c in row.classes] for row in result.classifications]


def classify(stub, name: str, signature: str, rows: list, context=None) -> dict:
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    set_input(request.input, rows, context)
    response = stub.Classify(request, TIMEOUT)
    spec = response.model_spec
    return {
        "model_spec": [spec.name, spec.version.value, spec.signature_name],
        "result": classifications(response.result),
    }


def regress(stub, name: str, signature: str, rows: list, context=None) -> dict:
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    set_input(request.input, rows, context)
    response = stub.Regress(request, TIMEOUT)
    spec = response.model_spec
    return {
        "model_spec": [spec.name, spec.version.value, spec.signature_name],
        "result": [r.value for r in response.result.regressions],
    }


def multi_inference(stub, name: str, tasks: list, rows: list) -> list:
    request = inference_pb2.MultiInferenceRequest()
    set_input(request.input, rows, None)
    for signature, method in tasks:
        task = request.tasks.add()
        task.model_spec.name = name
        task.model_spec.signature_name = signature
        task.method_name = method
    response = stub.MultiInference(request, TIMEOUT)
    out = []
    for result in response.results:
        kind = result.WhichOneof("result")
        value = (
            classifications(result.classification_result)
            if kind == "classification_result"
            else [r.value for r in result.regression_result.regressions]
        )
        out.append([result.model_spec.signature_name, kind, value])
    return out


def status(stub, name: str) -> list:
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    response = stub.GetModelStatus(request, TIMEOUT)
    return [
        [
            s.version,
            get_model_status_pb2.ModelVersionStatus.State.Name(s.state),
            s.status.error_code,
        ]
        for s in response.model_version_status
    ]


def tf_answers(export: str, directory: str, rows: list) -> dict:
    """Every signature of the export's TF SavedModel on the rows' serialized tf.Examples."""
    import estimator as est

    est.export.to_tf_saved_model(export, directory)
    model = tf.saved_model.load(directory)
    serialized = tf.constant([example(r).SerializeToString() for r in rows])
    out = {}
    for key, function in model.signatures.items():
        (name,) = function.structured_input_signature[1]
        result = function(**{name: serialized})
        out[key] = {k: jsonable(v.numpy()) for k, v in result.items()}
    return out


def main() -> None:
    request = json.load(sys.stdin)
    channel = grpc.insecure_channel(request["address"])
    grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    models = model_service_pb2_grpc.ModelServiceStub(channel)
    answers, tf_out = {}, {}
    for name, export in request["exports"].items():
        rows = request["rows"][name]
        meta = metadata(stub, name)
        calls: dict = {"metadata": meta, "status": status(models, name)}
        context = {k: rows[0][k] for k in sorted(rows[0])[:2]}  # shared by every row
        for key, info in sorted(meta["signatures"].items()):
            method = info["method_name"]
            if method == PREDICT:
                calls[f"predict:{key}"] = predict(stub, name, key, info, rows)
                calls[f"predict_examples:{key}"] = predict_examples(stub, name, key, rows)
            elif method == CLASSIFY:
                calls[f"classify:{key}"] = classify(stub, name, key, rows)
                calls[f"classify_context:{key}"] = classify(
                    stub, name, key, [dict(r, **context) for r in rows], context
                )
            elif method == REGRESS:
                calls[f"regress:{key}"] = regress(stub, name, key, rows)
                calls[f"regress_context:{key}"] = regress(
                    stub, name, key, [dict(r, **context) for r in rows], context
                )
        if name == "census":
            calls["predict_filtered"] = predict(
                stub, name, "predict", meta["signatures"]["predict"], rows, ["logits", "classes"]
            )
        if name == "multi_head":
            calls["multi_inference"] = multi_inference(
                stub, name, [("income", CLASSIFY), ("hours", REGRESS)], rows
            )
        answers[name] = calls
        tf_out[name] = tf_answers(export, os.path.join(request["saved_models"], name), rows)
    # The server's schema against the installed tensorflow-serving-api and TF (this process
    # has both): see gen_serving_descriptors.py.
    sys.path.insert(
        0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
    )
    from importlib.metadata import version

    import gen_serving_descriptors as generator

    schema = {
        "differences": generator.differences(),
        "rendered": generator.render(),
        "versions": [version("tensorflow-serving-api"), tf.__version__],
    }
    print(json.dumps({"grpc": answers, "tf": tf_out, "schema": schema}))


if __name__ == "__main__":
    main()
