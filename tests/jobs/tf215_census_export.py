"""Writes reference SavedModels with TF Estimator 2.15, for test_tf_saved_model.py.

Run with a Python that has tensorflow-cpu 2.15 and tensorflow-estimator 2.15 (never this
package)::

    <tf 2.15 python> tests/jobs/tf215_census_export.py ../shared/data/adult
    saved_model_cli show --dir <printed path> --all

``TF215_CLASSIFIER`` in the test is that command's output for the first path printed: the
tutorial's ``LinearClassifier`` on the wide columns of ``benchmarks/_tf_census.py`` with
``label_vocabulary``, trained 20 batches of 256; ``TF215_REGRESSOR`` for the second: a
``LinearRegressor`` on one numeric column. Both exported with
``build_parsing_serving_input_receiver_fn(make_parse_example_spec(columns))``.
"""

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks")
)
import _tf_census  # noqa: E402

train_x, train_y = _tf_census.load(os.path.join(sys.argv[1], "adult.data"))
wide, _ = _tf_census.columns(train_x)
work = tempfile.mkdtemp()
labels = np.where(train_y == 1, ">50K", "<=50K").astype(object)
model = tf.estimator.LinearClassifier(
    wide, os.path.join(work, "model"), label_vocabulary=["<=50K", ">50K"]
)
keys = ["age", "education", "marital_status", "relationship", "workclass", "occupation"]
features = {k: train_x[k] for k in keys}
model.train(lambda: tf.data.Dataset.from_tensor_slices((features, labels)).batch(256).take(20))
receiver = tf.estimator.export.build_parsing_serving_input_receiver_fn(
    tf.feature_column.make_parse_example_spec(wide)
)
print(model.export_saved_model(os.path.join(work, "export"), receiver).decode())

columns = [tf.feature_column.numeric_column("x")]
regressor = tf.estimator.LinearRegressor(columns, os.path.join(work, "regressor"))
x = {"x": np.arange(8, dtype=np.float32)}
regressor.train(lambda: tf.data.Dataset.from_tensor_slices((x, x["x"])).batch(4), steps=2)
receiver = tf.estimator.export.build_parsing_serving_input_receiver_fn(
    tf.feature_column.make_parse_example_spec(columns)
)
print(regressor.export_saved_model(os.path.join(work, "regressor_export"), receiver).decode())
