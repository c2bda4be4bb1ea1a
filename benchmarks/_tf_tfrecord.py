"""TF 2.15's side of ``tfrecord_input.py``: run with a Python that has TensorFlow 2.15 and
tensorflow-estimator 2.15 (never this package). Reads the GZIP TFRecords of census
``tf.Example``s that ``tfrecord_input.py`` wrote, TF's recommended way: ``TFRecordDataset``
→ ``batch`` → ``tf.io.parse_example`` (batched, vectorized) → ``prefetch``; for training
with ``shuffle`` and ``repeat`` before the batch. Prints one JSON line.

Usage: ``<tf python> benchmarks/_tf_tfrecord.py parse TRAIN_FILE BATCH PASSES`` or
``<tf python> benchmarks/_tf_tfrecord.py train DATA_DIR TRAIN_FILE MODEL EPOCHS BATCH``.
"""

import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tensorflow as tf  # noqa: E402
from _tf_census import COLUMNS, NUMERIC, columns, load  # noqa: E402


def all_columns_spec():
    spec = {
        k: tf.io.FixedLenFeature([1], tf.float32 if k in NUMERIC else tf.string)
        for k in COLUMNS[:-1]
    }
    spec["label"] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def parse(path, batch, passes):
    spec = all_columns_spec()
    data = (
        tf.data.TFRecordDataset(path, compression_type="GZIP")
        .batch(batch)
        .map(lambda s: tf.io.parse_example(s, spec), num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
    rates = []
    for _ in range(passes):
        start, n = time.perf_counter(), 0
        for parsed in data:
            n += int(parsed["label"].shape[0])
        rates.append(n / (time.perf_counter() - start))
    return {"parse_examples_per_s": max(rates), "all_passes": rates}


class _Steady(tf.estimator.SessionRunHook):
    """Times the steps after the first ``skip`` (TF's steady state within one train())."""

    def __init__(self, skip=100):
        self.skip, self.step, self.start, self.last = skip, 0, None, None

    def after_run(self, run_context, run_values):
        self.step += 1
        if self.step == self.skip:
            self.start = time.perf_counter()
        self.last = time.perf_counter()


def train(data_dir, path, model, epochs, batch):
    train_x, _ = load(os.path.join(data_dir, "adult.data"))
    wide, deep = columns(train_x)
    hidden = [100, 75, 50, 25]
    dnn_optimizer = tf.keras.optimizers.legacy.Adagrad(learning_rate=0.05)
    model_dir = tempfile.mkdtemp(prefix="tf_tfrecord_")
    if model == "linear":
        estimator = tf.estimator.LinearClassifier(wide, model_dir)
        spec = tf.feature_column.make_parse_example_spec(wide)
    else:
        estimator = tf.estimator.DNNLinearCombinedClassifier(
            model_dir,
            linear_feature_columns=wide,
            dnn_feature_columns=deep,
            dnn_hidden_units=hidden,
            dnn_optimizer=dnn_optimizer,
        )
        spec = tf.feature_column.make_parse_example_spec(wide + deep)
    spec["label"] = tf.io.FixedLenFeature([1], tf.int64)

    def split(serialized):
        features = tf.io.parse_example(serialized, spec)
        return features, features.pop("label")

    def input_fn():
        data = tf.data.TFRecordDataset(path, compression_type="GZIP")
        data = data.shuffle(10000).repeat(epochs).batch(batch)
        return data.map(split, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    hook = _Steady()
    start = time.perf_counter()
    estimator.train(input_fn, hooks=[hook])
    total = time.perf_counter() - start
    steps = hook.step
    examples = 32561 * epochs
    steady = (steps - hook.skip) * batch / (hook.last - hook.start)
    return {
        "train_s": total,
        "train_examples_per_s": examples / total,
        "steady_examples_per_s": steady,
    }


def main():
    if sys.argv[1] == "parse":
        out = parse(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        data_dir, path, model, epochs, batch = sys.argv[2:7]
        out = train(data_dir, path, model, int(epochs), int(batch))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
