"""What of TF 1's session, graph and event writing a program's epilogue uses under
``estimator.compat.v1`` (``tf.Session``, ``tf.reset_default_graph``,
``tf.summary.FileWriter`` / ``FileWriterCache``, ``tf.Summary``), and the constants TF 1
programs read: ``tf.__version__``, ``tf.saved_model.signature_constants`` /
``tag_constants``."""

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import estimator.compat as tf_top
import estimator.compat.v1 as tf


def _scalars(logdir) -> dict:
    events = EventAccumulator(str(logdir)).Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }


def test_a_tensorboard_epilogue_writes_its_summaries(tmp_path):
    tf.reset_default_graph()
    with tf.Session() as sess:
        accuracy = sess.run(tf.constant(0.75))
        writer = tf.summary.FileWriter(str(tmp_path / "final"), sess.graph)
        summary = tf.Summary(value=[tf.Summary.Value(tag="final/accuracy", simple_value=accuracy)])
        writer.add_summary(summary, 200)
        writer.add_summary(summary.SerializeToString(), 300)  # bytes, as summary ops give
        writer.add_graph(tf.get_default_graph())
        writer.close()
    assert _scalars(tmp_path / "final") == {"final/accuracy": [(200, 0.75), (300, 0.75)]}
    assert sess.graph.get_operations() == []
    with pytest.raises(RuntimeError, match="Attempted to use a closed Session"):
        sess.run(1.0)
    with pytest.raises(ValueError, match="feed_dict"):
        tf.Session().run(1.0, feed_dict={"x": 1})
    out = tf.Session().run({"a": [np.float32(1), 2], "b": tf.no_op()})
    assert out["b"] is None and out["a"][1] == 2
    with pytest.raises(TypeError, match="add_summary takes a tf.Summary"):
        tf.summary.FileWriter(str(tmp_path / "x")).add_summary({"x": 1})


def test_file_writer_cache_is_the_estimators_writer_and_clear_flushes(tmp_path):
    def model_fn(features, labels, mode):
        w = tf.get_variable("w", [1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(features["x"] * w - labels))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    config = tf.estimator.RunConfig(save_summary_steps=1)
    estimator = tf.estimator.Estimator(model_fn, str(tmp_path), config=config)
    x = np.ones(4, np.float32)
    estimator.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, x)).batch(2), steps=2)
    writer = tf.summary.FileWriterCache.get(str(tmp_path))
    assert writer.get_logdir() == str(tmp_path)
    value = tf.Summary.Value(tag="epilogue", simple_value=1.5)
    writer.add_summary(tf.Summary(value=[value]), 2)
    tf.summary.FileWriterCache.clear()  # writes the cached writers' events out
    scalars = _scalars(tmp_path)
    assert scalars["epilogue"] == [(2, 1.5)] and "loss" in scalars


def test_version_is_the_tf1_api_level_followed():
    assert tf.__version__ == tf.VERSION == "1.15.0"
    assert tf_top.__version__ == "1.15.0"  # import estimator.compat as tf
    assert int(tf.__version__.split(".")[0]) == 1


def test_saved_model_constants_are_tfs():
    sc = tf.saved_model.signature_constants
    # TF 2.15.1's values.
    assert sc.DEFAULT_SERVING_SIGNATURE_DEF_KEY == "serving_default"
    assert sc.PREDICT_METHOD_NAME == "tensorflow/serving/predict"
    assert sc.CLASSIFY_METHOD_NAME == "tensorflow/serving/classify"
    assert sc.REGRESS_METHOD_NAME == "tensorflow/serving/regress"
    assert (sc.PREDICT_INPUTS, sc.PREDICT_OUTPUTS) == ("inputs", "outputs")
    assert (sc.CLASSIFY_OUTPUT_CLASSES, sc.CLASSIFY_OUTPUT_SCORES) == ("classes", "scores")
    assert tf.saved_model.tag_constants.SERVING == tf.saved_model.SERVING == "serve"
    assert tf.saved_model.PREDICT_METHOD_NAME == sc.PREDICT_METHOD_NAME
    with pytest.raises(tf.UnsupportedSymbolError, match="tf.saved_model.load .*export_saved_model"):
        tf.saved_model.load  # noqa: B018
