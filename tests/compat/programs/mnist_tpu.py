"""TF's MNIST-on-TPU sample (``models/official/mnist/mnist_tpu.py``), written as TF 1.x code
with ``tf.estimator.tpu``.

* absl flags through ``tf.flags``; ``--use_tpu``, ``--iterations``, ``--num_shards``;
* ``tf.estimator.tpu.RunConfig(tpu_config=TPUConfig(iterations, num_shards))`` with a
  ``session_config``, ``TPUEstimator(train_batch_size=..., eval_batch_size=...,
  predict_batch_size=..., params={...})``;
* ``input_fn(params)`` reading ``params["batch_size"]``, batches of fixed size
  (``drop_remainder=True``, as a TPU needs);
* ``TPUEstimatorSpec`` with ``eval_metrics=(metric_fn, [labels, logits])``,
  ``tf.tpu.CrossShardOptimizer`` when on TPU, an exponentially decaying learning rate.

It runs under TensorFlow 2.15 as written with ``--use_tpu=false`` (TF's CPU path); under
jax-estimator with the import line changed to ``import estimator.compat.v1 as tf``, with
``--use_tpu`` true or false on whatever devices JAX has. So that it runs in seconds without
downloads, the images are synthetic 16x16 "digits" (seven-segment shapes with random
shifts and noise, a fixed NumPy seed).
"""

import time

import numpy as np
import tensorflow.compat.v1 as tf
from _report import print_result

flags = tf.flags
flags.DEFINE_bool("use_tpu", False, "Use TPUs rather than plain CPUs.")
flags.DEFINE_string("model_dir", None, "Estimator model_dir.")
flags.DEFINE_integer("batch_size", 64, "Mini-batch size for the training.")
flags.DEFINE_integer("train_steps", 500, "Total number of training steps.")
flags.DEFINE_integer("eval_steps", 8, "Total number of evaluation steps.")
flags.DEFINE_float("learning_rate", 0.1, "Learning rate.")
flags.DEFINE_integer("iterations", 50, "Number of iterations per TPU training loop.")
flags.DEFINE_integer("num_shards", None, "Number of shards (TPU chips).")
flags.DEFINE_integer("seed", 1, "tf_random_seed of the RunConfig.")
FLAGS = flags.FLAGS

SIZE = 16
SEGMENTS = {"a": (0, 0, 0, 7), "b": (0, 7, 6, 7), "c": (6, 7, 11, 7), "d": (11, 0, 11, 7),
            "e": (6, 0, 11, 0), "f": (0, 0, 6, 0), "g": (6, 0, 6, 7)}  # fmt: skip
DIGITS = ["abcdef", "bc", "abged", "abgcd", "fgbc", "afgcd", "afgedc", "abc", "abcdefg", "abcdfg"]


def make_digits(n, seed):
    """``n`` noisy seven-segment digits: ``[n, 256]`` float32 images and int32 labels."""
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 10, n).astype(np.int32)
    images = np.zeros((n, SIZE, SIZE), np.float32)
    for i, label in enumerate(labels):
        top, left = rng.randint(0, SIZE - 12 + 1), rng.randint(0, SIZE - 8 + 1)
        for segment in DIGITS[label]:
            r0, c0, r1, c1 = SEGMENTS[segment]
            images[i, top + r0 : top + r1 + 1, left + c0 : left + c1 + 1] = rng.uniform(0.6, 1.0)
    images += rng.normal(0.0, 0.25, images.shape).astype(np.float32)
    return np.clip(images, 0.0, 1.0).reshape(n, SIZE * SIZE), labels


TRAIN = make_digits(4096, 1)
TEST = make_digits(512, 2)


def metric_fn(labels, logits):
    accuracy = tf.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, axis=1))
    return {"accuracy": accuracy}


def model_fn(features, labels, mode, params):
    """model_fn constructs the ML model used to predict handwritten digits."""
    del params
    image = features
    if isinstance(image, dict):
        image = features["image"]
    hidden = tf.layers.dense(image, 128, activation=tf.nn.relu, name="hidden")
    if mode == tf.estimator.ModeKeys.TRAIN:
        hidden = tf.layers.dropout(hidden, rate=0.2, training=True)
    logits = tf.layers.dense(hidden, 10, name="logits")
    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {
            "class_ids": tf.argmax(logits, axis=1),
            "probabilities": tf.nn.softmax(logits),
        }
        return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions=predictions)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.tpu.TPUEstimatorSpec(
            mode=mode, loss=loss, eval_metrics=(metric_fn, [labels, logits])
        )
    learning_rate = tf.train.exponential_decay(
        FLAGS.learning_rate, tf.train.get_global_step(), decay_steps=100, decay_rate=0.96
    )
    optimizer = tf.train.GradientDescentOptimizer(learning_rate=learning_rate)
    if FLAGS.use_tpu:
        optimizer = tf.tpu.CrossShardOptimizer(optimizer)
    return tf.estimator.tpu.TPUEstimatorSpec(
        mode=mode, loss=loss, train_op=optimizer.minimize(loss, tf.train.get_global_step())
    )


def train_input_fn(params):
    """train_input_fn defines the input pipeline used for training."""
    batch_size = params["batch_size"]
    ds = tf.data.Dataset.from_tensor_slices(TRAIN).cache().repeat().shuffle(buffer_size=5000)
    return ds.batch(batch_size, drop_remainder=True)


def eval_input_fn(params):
    batch_size = params["batch_size"]
    ds = tf.data.Dataset.from_tensor_slices(TEST)
    return ds.batch(batch_size, drop_remainder=True)


def predict_input_fn(params):
    batch_size = params["batch_size"]
    ds = tf.data.Dataset.from_tensor_slices(TEST[0][:batch_size])
    return ds.batch(batch_size)


def main(_):
    start = time.time()
    run_config = tf.estimator.tpu.RunConfig(
        model_dir=FLAGS.model_dir,
        tf_random_seed=FLAGS.seed,
        session_config=tf.ConfigProto(allow_soft_placement=True, log_device_placement=False),
        tpu_config=tf.estimator.tpu.TPUConfig(FLAGS.iterations, FLAGS.num_shards),
    )
    estimator = tf.estimator.tpu.TPUEstimator(
        model_fn=model_fn,
        use_tpu=FLAGS.use_tpu,
        train_batch_size=FLAGS.batch_size,
        eval_batch_size=FLAGS.batch_size,
        predict_batch_size=FLAGS.batch_size,
        params={"data_dir": None},
        config=run_config,
    )
    estimator.train(input_fn=train_input_fn, max_steps=FLAGS.train_steps)
    results = estimator.evaluate(input_fn=eval_input_fn, steps=FLAGS.eval_steps)
    predictions = list(estimator.predict(input_fn=predict_input_fn))
    predicted = [int(p["class_ids"]) for p in predictions]
    print_result(
        start,
        results,
        ("accuracy", "loss"),
        predict_accuracy=float(np.mean(np.array(predicted) == TEST[1][: len(predicted)])),
    )


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run(main)
