"""A TF 1.x regression Estimator with a decaying learning rate, in the style of TF's
custom-estimator regression examples.

A ``tf.layers.dense`` network trained with ``tf.train.MomentumOptimizer`` at
``tf.train.exponential_decay(...)`` of the global step (also summarised), the loss
``tf.losses.mean_squared_error`` and ``tf.metrics.mean_squared_error`` /
``root_mean_squared_error`` for evaluation; ``tf.data`` input functions that standardise
the features in ``Dataset.map``. It runs under TensorFlow 2.15 as written; under
jax-estimator with the import line changed to ``import estimator.compat.v1 as tf``.

The data: a fixed nonlinear function of 8 features plus noise, from a NumPy seed.
"""

import argparse
import time

import numpy as np
import tensorflow.compat.v1 as tf
from _report import print_result

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", default=64, type=int)
parser.add_argument("--train_steps", default=1000, type=int)
parser.add_argument("--model_dir", default=None, type=str)
parser.add_argument("--seed", default=1, type=int)

NUM_FEATURES = 8


def make_data(n, seed):
    """``n`` examples: features ``[n, 8]`` (scaled as raw measurements), targets ``[n]``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, NUM_FEATURES)).astype(np.float32)
    y = (
        2.0 * x[:, 0]
        - 1.5 * x[:, 1] * x[:, 2]
        + np.sin(2.0 * x[:, 3])
        + 0.5 * x[:, 4] ** 2
        + 0.1 * rng.normal(size=n)
    ).astype(np.float32)
    scale = np.array([10, 2, 0.5, 3, 1, 7, 0.1, 4], np.float32)
    offset = np.array([50, -3, 1, 0, 10, 2, 0, -8], np.float32)
    return x * scale + offset, y


def input_fn(x, y, batch_size, mean, std, training):
    dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, y))

    def standardize(features, label):
        return {"x": (features["x"] - mean) / std}, label

    dataset = dataset.map(standardize)
    if training:
        dataset = dataset.shuffle(buffer_size=10000).repeat()
    return dataset.batch(batch_size)


def model_fn(features, labels, mode, params):
    net = features["x"]
    for units in params["hidden_units"]:
        net = tf.layers.dense(net, units=units, activation=tf.nn.relu)
    output = tf.layers.dense(net, 1)
    predictions = tf.squeeze(output, axis=1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"predictions": predictions})

    loss = tf.losses.mean_squared_error(labels=labels, predictions=predictions)
    eval_metric_ops = {
        "mse": tf.metrics.mean_squared_error(labels, predictions),
        "rmse": tf.metrics.root_mean_squared_error(labels, predictions),
    }
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=eval_metric_ops)

    global_step = tf.train.get_global_step()
    learning_rate = tf.train.exponential_decay(
        params["learning_rate"], global_step, decay_steps=200, decay_rate=0.7, staircase=True
    )
    tf.summary.scalar("learning_rate", learning_rate)
    optimizer = tf.train.MomentumOptimizer(learning_rate, momentum=0.9)
    train_op = optimizer.minimize(loss, global_step=global_step)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(argv):
    args = parser.parse_args(argv[1:])
    start = time.time()
    train_x, train_y = make_data(4000, seed=0)
    test_x, test_y = make_data(1000, seed=1)
    mean, std = train_x.mean(axis=0), train_x.std(axis=0)

    regressor = tf.estimator.Estimator(
        model_fn=model_fn,
        model_dir=args.model_dir,
        params={"hidden_units": [32, 16], "learning_rate": 0.05},
        config=tf.estimator.RunConfig(tf_random_seed=args.seed),
    )
    regressor.train(
        input_fn=lambda: input_fn(train_x, train_y, args.batch_size, mean, std, True),
        steps=args.train_steps,
    )
    trained = time.time()
    metrics = regressor.evaluate(
        input_fn=lambda: input_fn(test_x, test_y, args.batch_size, mean, std, False)
    )
    print(metrics)
    print_result(start, metrics, ("mse", "rmse", "loss"), train_seconds=trained - start)


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run(main)
