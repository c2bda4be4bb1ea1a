"""TF 1 serving receivers through ``estimator.compat.v1``: a CSV receiver (``tf.decode_csv`` on
a ``tf.placeholder(tf.string, [None])``) exports, and the export decodes the lines at
serving time (before, the export failed with ``Expect 2 fields but have 3 in
record 'ShapeDtypeStruct(...)'``)."""

import os

import numpy as np
import pytest

import estimator as est
import estimator.compat.v1 as tf

COLUMNS = ["x", "c", "label"]
DEFAULTS = [[0.0], [""], [0]]
LINES = np.array([b"1.0,a,1", b"-2.0,b,0", b"3.0,a,1", b"-1.0,b,0"], dtype=object)


def _input_fn():
    def parse(line):
        features = dict(zip(COLUMNS, tf.decode_csv(line, DEFAULTS), strict=True))
        return features, features.pop("label")

    return tf.data.Dataset.from_tensor_slices(LINES).batch(4).repeat().map(parse)


def _csv_receiver():
    rows = tf.placeholder(tf.string, [None])
    features = dict(zip(COLUMNS, tf.decode_csv(rows, DEFAULTS), strict=True))
    features.pop("label")
    return tf.estimator.export.ServingInputReceiver(features, {"csv_row": rows})


def _trained(path, columns):
    model = tf.estimator.LinearClassifier(columns, model_dir=str(path))
    model.train(_input_fn, steps=5)
    return model


NUMERIC = [tf.feature_column.numeric_column("x")]
WITH_VOCABULARY = NUMERIC + [
    tf.feature_column.categorical_column_with_vocabulary_list("c", ["a", "b"])
]


def test_a_csv_serving_receiver_exports_and_decodes_lines_when_serving(tmp_path):
    model = _trained(tmp_path, WITH_VOCABULARY)
    path = model.export_saved_model(str(tmp_path / "export"), _csv_receiver)
    signature = est.export.load(path.decode()).signatures["predict"]
    assert signature.inputs == {"csv_row": {"dtype": "string", "shape": [None]}}
    # Lines as a client sends them (the label field may be empty: it has a default).
    served = signature(csv_row=["1.0,a,", "-2.0,b,0"])
    # The linear model by hand: logit = w_x * x + w_c[c] + bias, for (1.0, a) and (-2.0, b).
    w_x = model.get_variable_value("linear/linear_model/x/weights")[0, 0]
    w_c = model.get_variable_value("linear/linear_model/c/weights")[:, 0]
    bias = model.get_variable_value("linear/linear_model/bias_weights")[0]
    logits = np.array([w_x * 1.0 + w_c[0] + bias, w_x * -2.0 + w_c[1] + bias])
    assert abs(w_x) > 0.01  # trained
    np.testing.assert_allclose(served["logistic"][:, 0], 1 / (1 + np.exp(-logits)), rtol=1e-5)
    with pytest.raises(ValueError, match="Expect 3 fields but have 2 in record '1.0,a'"):
        signature(csv_row=["1.0,a"])


def test_csv_receiver_errors_say_what_to_change():
    numbers = tf.placeholder(tf.float32, [None])
    with pytest.raises(ValueError, match="decode_csv decodes strings; .*tf.string"):
        tf.decode_csv(numbers, DEFAULTS)
    rows = tf.placeholder(tf.string, [None])
    other = tf.placeholder(tf.string, [None])
    (x, _, _) = tf.decode_csv(rows, DEFAULTS)
    receiver = tf.estimator.export.ServingInputReceiver({"x": x}, {"csv_row": other})
    with pytest.raises(ValueError, match="not among the receiver tensors.*receiver_tensors"):
        est.export._writer._Inputs(receiver.receiver_tensors, receiver, None, None)


@pytest.mark.slow
def test_a_csv_receiver_converts_to_a_tf_saved_model(tmp_path):
    real_tf = pytest.importorskip("tensorflow")
    model = _trained(tmp_path, NUMERIC)
    path = model.export_saved_model(str(tmp_path / "export"), _csv_receiver)
    converted = est.export.to_tf_saved_model(path.decode(), str(tmp_path / "tf"))
    predict = real_tf.saved_model.load(os.fsdecode(converted)).signatures["predict"]
    served = predict(csv_row=real_tf.constant(["1.0,a,", "-2.0,b,0"]))
    ours = est.export.load(path.decode()).signatures["predict"](csv_row=["1.0,a,", "-2.0,b,0"])
    np.testing.assert_allclose(served["logistic"].numpy(), ours["logistic"], rtol=1e-6)
