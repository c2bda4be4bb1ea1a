"""TF 1's Estimator helpers under ``estimator.compat.v1``: ``add_metrics`` with
``tf.metrics`` pairs, ``tf.contrib.estimator.clip_gradients_by_norm`` and
``forward_features``, ops on a ``serving_input_receiver_fn``'s placeholders traced at
export, ``tf.Variable`` in ``model_fn``, and the range check of ``tf.nn.embedding_lookup``'s
ids fed from the input."""

import numpy as np
import pytest

import estimator as est
import estimator.compat.v1 as tf
from estimator.model.input_checks import IdRangeError

X = np.arange(8, dtype=np.float32)  # y = 2x: w goes 0 -> 2
Y = 2.0 * X


def _input(repeat=False):
    def input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": X[:, None], "key": np.arange(8)}, Y))
        return (dataset.repeat() if repeat else dataset).batch(4)

    return input_fn


def _model_fn(optimizer=lambda: tf.train.GradientDescentOptimizer(0.01)):
    def model_fn(features, labels, mode):
        w = tf.get_variable("w", [1, 1], initializer=tf.zeros_initializer())
        predictions = tf.squeeze(tf.matmul(features["x"], w), 1)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions={"y": predictions})
        loss = tf.losses.mean_squared_error(labels, predictions)
        train_op = optimizer().minimize(loss, global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(
            mode, loss=loss, train_op=train_op, predictions={"y": predictions}
        )

    return model_fn


def test_add_metrics_takes_tf_metrics_pairs(tmp_path):
    estimator = tf.estimator.Estimator(_model_fn(), str(tmp_path))
    estimator.train(_input(), steps=1)

    def metric_fn(labels, predictions):
        return {"mae": tf.metrics.mean_absolute_error(labels, predictions["y"])}

    for add_metrics in (tf.estimator.add_metrics, tf.contrib.estimator.add_metrics):
        metrics = add_metrics(estimator, metric_fn).evaluate(_input())
        w = estimator.get_variable_value("w")[0, 0]
        # mae = mean |2x - w x| over x = 0..7 = (2 - w) * 3.5
        np.testing.assert_allclose(metrics["mae"], (2 - w) * 3.5, rtol=1e-5)
    with pytest.raises(TypeError, match="that tf.metrics did not make"):
        tf.estimator.add_metrics(estimator, lambda labels: {"m": (1.0, 1.0)}).evaluate(_input())


def test_clip_gradients_by_norm_clips_the_global_norm(tmp_path):
    def clipped():
        return tf.contrib.estimator.clip_gradients_by_norm(
            tf.train.GradientDescentOptimizer(1.0), clip_norm=0.5
        )

    assert clipped().get_name() == "ClipByNormGradientDescent"
    estimator = tf.estimator.Estimator(_model_fn(clipped), str(tmp_path))
    estimator.train(_input(), steps=1)
    # The first batch x = 0..3: d/dw mean((w x - 2x)^2) at w = 0 is -4 mean(x^2) = -14, of
    # norm 14 > 0.5: clipped to -0.5, so one step of rate 1 moves w to 0.5.
    np.testing.assert_allclose(estimator.get_variable_value("w"), [[0.5]], rtol=1e-6)


def test_forward_features_adds_features_to_predictions_and_exports(tmp_path):
    estimator = tf.estimator.Estimator(_model_fn(), str(tmp_path / "m"))
    estimator.train(_input(), steps=1)
    forwarded = tf.contrib.estimator.forward_features(estimator, "key")
    predictions = list(forwarded.predict(_input()))
    assert [p["key"] for p in predictions] == list(range(8))
    assert set(predictions[0]) == {"y", "key"}
    with pytest.raises(ValueError, match=r"Given keys are not in features: \['nope'\]"):
        next(tf.contrib.estimator.forward_features(estimator, ["nope"]).predict(_input()))
    with pytest.raises(TypeError, match="keys should be either a string or a list of strings"):
        next(tf.contrib.estimator.forward_features(estimator, 3).predict(_input()))

    def receiver():
        inputs = {
            "x": tf.placeholder(tf.float32, [None, 1]),
            "key": tf.placeholder(tf.int32, [None]),
        }
        return tf.estimator.export.ServingInputReceiver(inputs, inputs)

    path = forwarded.export_saved_model(str(tmp_path / "export"), receiver)
    served = est.export.load(path.decode()).signatures["serving_default"]
    out = served(x=np.ones((2, 1), np.float32), key=np.array([5, 6], np.int32))
    np.testing.assert_array_equal(out["key"], [5, 6])


def test_ops_on_receiver_placeholders_are_traced_at_export(tmp_path):
    estimator = tf.estimator.Estimator(_model_fn(), str(tmp_path / "custom"))
    estimator.train(_input(), steps=1)
    w = estimator.get_variable_value("w")[0, 0]

    def receiver():  # TF 1 receivers compute features from [None] placeholders
        inputs = {"x": tf.placeholder(tf.float32, [None])}
        features = {"x": tf.expand_dims(tf.cast(inputs["x"], tf.float32), -1) * 2.0}
        return tf.estimator.export.ServingInputReceiver(features, inputs)

    path = estimator.export_saved_model(str(tmp_path / "e1"), receiver)
    served = est.export.load(path.decode()).signatures["serving_default"]
    np.testing.assert_allclose(served(x=np.array([1.0, 3.0], np.float32))["y"], [2 * w, 6 * w])
    # A canned estimator (a host-side feature-column phase): size-1 reshapes of its inputs,
    # as TF's feature columns read [batch] and [batch, 1] alike.
    regressor = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x")])
    regressor.train(lambda: ({"x": X}, Y), steps=2)

    def squeezed():
        inputs = {"x": tf.placeholder(tf.float32, [None, 1])}
        return tf.estimator.export.ServingInputReceiver({"x": tf.squeeze(inputs["x"], 1)}, inputs)

    path = regressor.export_saved_model(str(tmp_path / "e2"), squeezed)
    loaded = est.export.load(path.decode()).signatures["predict"]
    expected = [p["predictions"] for p in regressor.predict(lambda: {"x": X[:2]})]
    np.testing.assert_allclose(loaded(x=X[:2, None])["predictions"], expected, rtol=1e-6)


def test_tf_variable_is_a_model_variable(tmp_path):
    def model_fn(features, labels, mode):
        w = tf.Variable(tf.zeros([1, 1]), name="weights")
        b = tf.Variable(0.0)  # TF's default names: Variable, Variable_1, ...
        c = tf.Variable(lambda: tf.ones([2]), trainable=False)
        predictions = tf.squeeze(tf.matmul(features["x"], w), 1) + b + 0.0 * tf.reduce_sum(c)
        loss = tf.losses.mean_squared_error(labels, predictions)
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    estimator = tf.estimator.Estimator(model_fn, str(tmp_path))
    estimator.train(_input(), steps=1)
    assert set(estimator.get_variable_names()) >= {"weights", "Variable", "Variable_1"}
    np.testing.assert_array_equal(estimator.get_variable_value("Variable_1"), [1.0, 1.0])
    # One step on x = 0..3, y = 2x from w = b = 0: dw = -2 mean(2 x^2) = -14 -> w = 0.14.
    np.testing.assert_allclose(estimator.get_variable_value("weights"), [[0.14]], rtol=1e-5)
    with pytest.raises(ValueError, match="initial_value must be specified"):
        tf.Variable()


def test_input_ids_out_of_range_stop_training_naming_the_table(tmp_path):
    ids = np.tile(np.arange(10), 4).reshape(20, 2)

    def model_fn(features, labels, mode):
        table = tf.get_variable("words", [10, 3])
        rows = tf.nn.embedding_lookup(table, features["ids"])
        loss = tf.reduce_mean(tf.square(tf.reduce_sum(rows, [1, 2]) - labels))
        train_op = tf.train.AdagradOptimizer(0.1).minimize(loss)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn(bad_row=None):
        x = ids.copy()
        if bad_row is not None:
            x[bad_row, 1] = 10  # one past the table
        return lambda: tf.data.Dataset.from_tensor_slices(({"ids": x}, np.ones(20))).batch(4)

    estimator = tf.estimator.Estimator(model_fn, str(tmp_path / "m"))
    estimator.train(input_fn(), steps=2)
    # TF 2.15.1: "indices[2,1] = 10 is not in [0, 10)" (the batch's row 2, column 1).
    message = r"^indices\[2,1\] = 10 is not in \[0, 10\) \(embedding_lookup of words, 10 rows;"
    with pytest.raises(IdRangeError, match=message):  # a later batch: checked on the host
        estimator.train(input_fn(bad_row=14), steps=5)
    fresh = tf.estimator.Estimator(model_fn, str(tmp_path / "fresh"))
    with pytest.raises(ValueError, match=r"^indices\[2,1\] = 10"):  # the first batch
        fresh.train(input_fn(bad_row=2), steps=5)
