"""A TF 1.x text classifier built from ``tf.contrib``, in the style of the 2018 "text
classification with TensorFlow Estimators" tutorials.

* ``tf.contrib.lookup.index_table_from_tensor`` maps words and string labels to ids inside
  a ``tf.data`` pipeline (``tf.contrib.data.map_and_batch``);
* the model: ``tf.contrib.layers.embed_sequence`` and ``bow_encoder``,
  ``fully_connected`` with an ``l2_regularizer``, ``layer_norm``;
* ``tf.contrib.layers.optimize_loss`` (Adam), ``tf.contrib.framework.get_global_step``;
* ``tf.contrib.metrics.streaming_accuracy``; predictions turned back into class names with
  ``tf.contrib.lookup.index_to_string_table_from_tensor``.

Written for TensorFlow 1.15 (``import tensorflow as tf``); TensorFlow 2 has no
``tf.contrib`` and cannot run it. Under jax-estimator the import line becomes
``import estimator.compat as tf``. The data: short synthetic reviews (a fixed NumPy seed)
whose label follows the count of positive and negative words.
"""

import argparse
import time

import numpy as np
import tensorflow as tf
from _report import print_result

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir", default=None)
parser.add_argument("--train_steps", default=300, type=int)
parser.add_argument("--batch_size", default=32, type=int)
parser.add_argument("--seed", default=1, type=int)

POSITIVE = ["good", "great", "excellent", "loved", "wonderful", "best", "fun", "brilliant"]
NEGATIVE = ["bad", "awful", "boring", "hated", "worst", "poor", "dull", "terrible"]
NEUTRAL = ["the", "movie", "plot", "actors", "film", "was", "story", "really", "and", "it"]
VOCABULARY = ["<pad>"] + POSITIVE + NEGATIVE + NEUTRAL
CLASSES = ["negative", "positive"]
MAX_LENGTH = 12


def make_reviews(n, seed):
    """``n`` reviews (``[n, MAX_LENGTH]`` words, padded) and their string labels."""
    rng = np.random.default_rng(seed)
    words = np.full((n, MAX_LENGTH), "<pad>", dtype=object)
    labels = []
    for i in range(n):
        positive = rng.random() < 0.5
        length = rng.integers(6, MAX_LENGTH + 1)
        strong, weak = (POSITIVE, NEGATIVE) if positive else (NEGATIVE, POSITIVE)
        review = list(rng.choice(NEUTRAL, length - 3)) + list(rng.choice(strong, 2))
        review.append(rng.choice(weak if rng.random() < 0.3 else strong))
        rng.shuffle(review)
        words[i, :length] = review
        # One in twenty reviews also has an unknown word, which the table's OOV bucket takes.
        if rng.random() < 0.05:
            words[i, 0] = "unseen"
        labels.append("positive" if positive else "negative")
    return words, np.array(labels, dtype=object)


def input_fn(words, labels, batch_size, training):
    word_table = tf.contrib.lookup.index_table_from_tensor(VOCABULARY, num_oov_buckets=1)
    label_table = tf.contrib.lookup.index_table_from_tensor(CLASSES)

    def parse(review, label):
        return {"words": word_table.lookup(review)}, label_table.lookup(label)

    dataset = tf.data.Dataset.from_tensor_slices((words, labels))
    if training:
        dataset = dataset.shuffle(1000).repeat()
    return dataset.apply(tf.contrib.data.map_and_batch(parse, batch_size))


def model_fn(features, labels, mode, params):
    ids = features["words"]
    vocab_size = len(VOCABULARY) + 1  # the OOV bucket
    sequence = tf.contrib.layers.embed_sequence(ids, vocab_size=vocab_size, embed_dim=8)
    pooled = tf.reduce_max(sequence, axis=1)
    bag = tf.contrib.layers.bow_encoder(ids, vocab_size=vocab_size, embed_dim=8)
    hidden = tf.contrib.layers.fully_connected(
        tf.concat([pooled, bag], axis=1),
        16,
        weights_regularizer=tf.contrib.layers.l2_regularizer(1e-4),
    )
    hidden = tf.contrib.layers.layer_norm(hidden)
    logits = tf.contrib.layers.fully_connected(hidden, len(CLASSES), activation_fn=None)
    predicted = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        names = tf.contrib.lookup.index_to_string_table_from_tensor(CLASSES)
        predictions = {"class": names.lookup(predicted), "probabilities": tf.nn.softmax(logits)}
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    loss += tf.losses.get_regularization_loss()
    train_op = tf.contrib.layers.optimize_loss(
        loss,
        tf.contrib.framework.get_global_step(),
        learning_rate=params["learning_rate"],
        optimizer="Adam",
        summaries=["loss", "learning_rate"],
    )
    metrics = {"accuracy": tf.contrib.metrics.streaming_accuracy(predicted, labels)}
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)


def main(argv):
    args = parser.parse_args(argv[1:])
    start = time.time()
    train_words, train_labels = make_reviews(2000, args.seed)
    test_words, test_labels = make_reviews(500, args.seed + 100)
    classifier = tf.estimator.Estimator(
        model_fn,
        model_dir=args.model_dir,
        params={"learning_rate": 0.01},
        config=tf.estimator.RunConfig(tf_random_seed=args.seed),
    )
    classifier.train(
        lambda: input_fn(train_words, train_labels, args.batch_size, True),
        steps=args.train_steps,
    )
    results = classifier.evaluate(lambda: input_fn(test_words, test_labels, 100, False))
    samples = np.full((2, MAX_LENGTH), "<pad>", dtype=object)
    samples[0, :4] = ["loved", "the", "great", "movie"]
    samples[1, :4] = ["awful", "and", "boring", "film"]
    predicted = [
        p["class"].decode()
        for p in classifier.predict(lambda: input_fn(samples, np.array(CLASSES, object), 2, False))
    ]
    print_result(start, results, ("accuracy",), predicted=predicted)


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run(main)
