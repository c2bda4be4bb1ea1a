"""TF's Iris custom-estimator tutorial, written as TF 1.x code.

The model, input functions and flags of ``samples/core/get_started/custom_estimator.py``
(TensorFlow 1.x "Creating Custom Estimators"): ``tf.feature_column.input_layer``,
``tf.layers.dense``, ``tf.losses.sparse_softmax_cross_entropy``, ``tf.metrics.accuracy``
with ``tf.summary.scalar('accuracy', accuracy[1])``, ``tf.train.AdagradOptimizer`` and
``tf.data`` input functions. It runs under TensorFlow 2.15 as written; under jax-estimator
with the import line changed to ``import estimator.compat.v1 as tf``.

The data: Fisher's Iris (``iris.csv`` beside this file); every fifth row is the test set.
"""

import argparse
import csv
import os
import time

import numpy as np
import tensorflow.compat.v1 as tf
from _report import print_result

CSV_COLUMN_NAMES = ["SepalLength", "SepalWidth", "PetalLength", "PetalWidth", "Species"]
SPECIES = ["Setosa", "Versicolor", "Virginica"]
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "iris.csv")

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", default=100, type=int, help="batch size")
parser.add_argument("--train_steps", default=1000, type=int, help="number of training steps")
parser.add_argument("--model_dir", default=None, type=str, help="where to keep checkpoints")
parser.add_argument("--seed", default=1, type=int, help="tf_random_seed of the RunConfig")


def load_data(path=DATA):
    """Returns the iris dataset as (train_x, train_y), (test_x, test_y)."""
    with open(path) as f:
        rows = [r for r in csv.reader(line for line in f if not line.startswith("#"))][1:]
    data = np.array(rows, dtype=np.float32)
    test = np.arange(len(data)) % 5 == 4

    def split(mask):
        x = {name: data[mask, i] for i, name in enumerate(CSV_COLUMN_NAMES[:-1])}
        return x, data[mask, -1].astype(np.int32)

    return split(~test), split(test)


def train_input_fn(features, labels, batch_size):
    """An input function for training"""
    dataset = tf.data.Dataset.from_tensor_slices((dict(features), labels))
    return dataset.shuffle(1000).repeat().batch(batch_size)


def eval_input_fn(features, labels, batch_size):
    """An input function for evaluation or prediction"""
    features = dict(features)
    inputs = features if labels is None else (features, labels)
    dataset = tf.data.Dataset.from_tensor_slices(inputs)
    return dataset.batch(batch_size)


def my_model(features, labels, mode, params):
    """DNN with two hidden layers and learning_rate=0.1."""
    net = tf.feature_column.input_layer(features, params["feature_columns"])
    for units in params["hidden_units"]:
        net = tf.layers.dense(net, units=units, activation=tf.nn.relu)
    logits = tf.layers.dense(net, params["n_classes"], activation=None)

    predicted_classes = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {
            "class_ids": predicted_classes[:, tf.newaxis],
            "probabilities": tf.nn.softmax(logits),
            "logits": logits,
        }
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)

    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    accuracy = tf.metrics.accuracy(labels=labels, predictions=predicted_classes, name="acc_op")
    metrics = {"accuracy": accuracy}
    tf.summary.scalar("accuracy", accuracy[1])

    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)

    assert mode == tf.estimator.ModeKeys.TRAIN
    optimizer = tf.train.AdagradOptimizer(learning_rate=0.1)
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(argv):
    args = parser.parse_args(argv[1:])
    start = time.time()
    (train_x, train_y), (test_x, test_y) = load_data()

    my_feature_columns = []
    for key in train_x.keys():
        my_feature_columns.append(tf.feature_column.numeric_column(key=key))

    classifier = tf.estimator.Estimator(
        model_fn=my_model,
        model_dir=args.model_dir,
        config=tf.estimator.RunConfig(tf_random_seed=args.seed),
        params={"feature_columns": my_feature_columns, "hidden_units": [10, 10], "n_classes": 3},
    )
    classifier.train(
        input_fn=lambda: train_input_fn(train_x, train_y, args.batch_size),
        steps=args.train_steps,
    )
    trained = time.time()
    eval_result = classifier.evaluate(
        input_fn=lambda: eval_input_fn(test_x, test_y, args.batch_size)
    )
    print("\nTest set accuracy: {accuracy:0.3f}\n".format(**eval_result))

    expected = ["Setosa", "Versicolor", "Virginica"]
    predict_x = {
        "SepalLength": [5.1, 5.9, 6.9],
        "SepalWidth": [3.3, 3.0, 3.1],
        "PetalLength": [1.7, 4.2, 5.4],
        "PetalWidth": [0.5, 1.5, 2.1],
    }
    predictions = classifier.predict(
        input_fn=lambda: eval_input_fn(predict_x, labels=None, batch_size=args.batch_size)
    )
    predicted = []
    for pred_dict, expec in zip(predictions, expected, strict=False):
        class_id = pred_dict["class_ids"][0]
        probability = pred_dict["probabilities"][class_id]
        predicted.append(SPECIES[class_id])
        print(f'Prediction is "{SPECIES[class_id]}" ({100 * probability:.1f}%), expected "{expec}"')
    print_result(
        start,
        eval_result,
        ("accuracy", "loss"),
        predicted=predicted,
        train_seconds=trained - start,
    )


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run(main)
