"""TF's MNIST convolutional network tutorial ("A Guide to TF Layers"), written as TF 1.x code.

The model function of ``tensorflow/examples/tutorials/layers/cnn_mnist.py``: two
``tf.layers.conv2d`` + ``max_pooling2d`` blocks, a dense layer with ``tf.layers.dropout``,
``tf.nn.softmax(logits, name="softmax_tensor")`` logged by a ``tf.train.LoggingTensorHook``,
``tf.estimator.inputs.numpy_input_fn`` input functions and a gradient-descent optimizer.
It runs under TensorFlow 2.15 as written; under jax-estimator with the import line changed
to ``import estimator.compat.v1 as tf``.

So that it runs in seconds without downloads, the data are synthetic 16x16 "digits": the
seven-segment shapes of 0-9, drawn with random shifts, stroke intensities and noise from a
fixed NumPy seed (the layer sizes are scaled down to match).
"""

import argparse
import time

import numpy as np
import tensorflow.compat.v1 as tf
from _report import print_result

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", default=50, type=int)
parser.add_argument("--train_steps", default=1000, type=int)
parser.add_argument("--model_dir", default=None, type=str)
parser.add_argument("--seed", default=1, type=int)

SIZE = 16
# Seven segments: a top, b upper right, c lower right, d bottom, e lower left, f upper left,
# g middle; each as (row0, col0, row1, col1) in a 12x8 box.
SEGMENTS = {
    "a": (0, 0, 0, 7),
    "b": (0, 7, 6, 7),
    "c": (6, 7, 11, 7),
    "d": (11, 0, 11, 7),
    "e": (6, 0, 11, 0),
    "f": (0, 0, 6, 0),
    "g": (6, 0, 6, 7),
}
DIGITS = ["abcdef", "bc", "abged", "abgcd", "fgbc", "afgcd", "afgedc", "abc", "abcdefg", "abcdfg"]


def make_digits(n, seed):
    """``n`` noisy seven-segment digits: images ``[n, 256]`` float32 in [0, 1], labels."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n).astype(np.int32)
    images = np.zeros((n, SIZE, SIZE), np.float32)
    for i, label in enumerate(labels):
        top, left = rng.integers(0, SIZE - 12 + 1), rng.integers(0, SIZE - 8 + 1)
        for segment in DIGITS[label]:
            r0, c0, r1, c1 = SEGMENTS[segment]
            images[i, top + r0 : top + r1 + 1, left + c0 : left + c1 + 1] = rng.uniform(0.6, 1.0)
    images += rng.normal(0.0, 0.25, images.shape).astype(np.float32)
    return np.clip(images, 0.0, 1.0).reshape(n, SIZE * SIZE), labels


def cnn_model_fn(features, labels, mode):
    """Model function for CNN."""
    input_layer = tf.reshape(features["x"], [-1, SIZE, SIZE, 1])
    conv1 = tf.layers.conv2d(
        inputs=input_layer, filters=8, kernel_size=[5, 5], padding="same", activation=tf.nn.relu
    )
    pool1 = tf.layers.max_pooling2d(inputs=conv1, pool_size=[2, 2], strides=2)
    conv2 = tf.layers.conv2d(
        inputs=pool1, filters=16, kernel_size=[5, 5], padding="same", activation=tf.nn.relu
    )
    pool2 = tf.layers.max_pooling2d(inputs=conv2, pool_size=[2, 2], strides=2)
    pool2_flat = tf.reshape(pool2, [-1, 4 * 4 * 16])
    dense = tf.layers.dense(inputs=pool2_flat, units=64, activation=tf.nn.relu)
    dropout = tf.layers.dropout(
        inputs=dense, rate=0.4, training=mode == tf.estimator.ModeKeys.TRAIN
    )
    logits = tf.layers.dense(inputs=dropout, units=10)

    predictions = {
        "classes": tf.argmax(input=logits, axis=1),
        "probabilities": tf.nn.softmax(logits, name="softmax_tensor"),
    }
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode=mode, predictions=predictions)

    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)

    if mode == tf.estimator.ModeKeys.TRAIN:
        optimizer = tf.train.GradientDescentOptimizer(learning_rate=0.1)
        train_op = optimizer.minimize(loss=loss, global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    eval_metric_ops = {
        "accuracy": tf.metrics.accuracy(labels=labels, predictions=predictions["classes"])
    }
    return tf.estimator.EstimatorSpec(mode=mode, loss=loss, eval_metric_ops=eval_metric_ops)


def main(argv):
    args = parser.parse_args(argv[1:])
    start = time.time()
    train_data, train_labels = make_digits(3000, seed=0)
    eval_data, eval_labels = make_digits(1000, seed=1)

    mnist_classifier = tf.estimator.Estimator(
        model_fn=cnn_model_fn,
        model_dir=args.model_dir,
        config=tf.estimator.RunConfig(tf_random_seed=args.seed),
    )
    tensors_to_log = {"probabilities": "softmax_tensor"}
    logging_hook = tf.train.LoggingTensorHook(tensors=tensors_to_log, every_n_iter=500)

    train_input_fn = tf.estimator.inputs.numpy_input_fn(
        x={"x": train_data},
        y=train_labels,
        batch_size=args.batch_size,
        num_epochs=None,
        shuffle=True,
    )
    mnist_classifier.train(input_fn=train_input_fn, steps=args.train_steps, hooks=[logging_hook])
    trained = time.time()

    eval_input_fn = tf.estimator.inputs.numpy_input_fn(
        x={"x": eval_data}, y=eval_labels, num_epochs=1, shuffle=False
    )
    eval_results = mnist_classifier.evaluate(input_fn=eval_input_fn)
    print(eval_results)
    print_result(start, eval_results, ("accuracy", "loss"), train_seconds=trained - start)


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run(main)
