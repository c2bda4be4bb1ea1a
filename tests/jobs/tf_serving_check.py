"""Serves SavedModels with TensorFlow alone, as TF Serving would (for test_tf_saved_model.py).

Run as ``python tests/jobs/tf_serving_check.py`` with a JSON request on stdin::

    {"models": {"<label>": "<saved model dir>"}, "rows": {"<label>": [{feature: value}]},
     "tensors": {"<label>": {input: values}}, "show": ["<label>", ...]}

For each model: loads it with ``tf.saved_model.load``, serializes its rows as
``tf.train.Example`` protos (str -> bytes_list, int -> int64_list, float -> float_list,
``None`` -> feature absent), calls every signature on them by its input key, and prints
``{"outputs": {label: {signature: {output: values}}}, "inputs": ..., "show": ...}`` as
JSON (a model under ``tensors`` instead gets those inputs, by name, in every signature),
where ``show`` maps each label of ``show`` to ``saved_model_cli show --all``. It never
imports this package (checked at the end).
"""

import contextlib
import io
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402
from tensorflow.python.tools import saved_model_cli  # noqa: E402


def example(row: dict) -> bytes:
    feature = {}
    for key, value in row.items():
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        if all(isinstance(v, str) for v in values):
            feature[key] = tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[v.encode() for v in values])
            )
        elif all(isinstance(v, int) for v in values):
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        else:
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def jsonable(tensor):
    value = tensor.numpy()
    if tensor.dtype == tf.string:
        return [[s.decode() for s in row] for row in value]
    return value.tolist()


def main() -> None:
    request = json.load(sys.stdin)
    outputs, inputs = {}, {}
    for label, path in request["models"].items():
        model = tf.saved_model.load(path)
        outputs[label], inputs[label] = {}, {}
        for name, function in model.signatures.items():
            keys = sorted(function.structured_input_signature[1])
            inputs[label][name] = keys
            if label in request.get("tensors", {}):
                tensors = request["tensors"][label]
                result = function(**{k: tf.constant(tensors[k], tf.float32) for k in keys})
            else:
                (key,) = keys  # "inputs" or "examples": serialized tf.Example protos
                rows = request["rows"][label]
                result = function(**{key: tf.constant([example(row) for row in rows])})
            outputs[label][name] = {k: jsonable(v) for k, v in result.items()}
    show = {}
    for label in request["show"]:
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            saved_model_cli._show_all(request["models"][label])
        show[label] = text.getvalue()
    assert "estimator" not in sys.modules and "canned" not in sys.modules
    print(json.dumps({"outputs": outputs, "inputs": inputs, "show": show}))


if __name__ == "__main__":
    main()
