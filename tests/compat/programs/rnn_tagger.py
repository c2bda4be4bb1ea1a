"""A TF 1.x sequence tagger (an NER-style BiLSTM-CRF), in the style of the 2018-2019
TensorFlow Estimator taggers.

* text lines read with ``TextLineDataset`` (imported a second way, as such programs do:
  ``from tensorflow.python.data import Dataset``), tokenised with ``tf.string_split``, words
  and tags turned into ids by ``tf.contrib.lookup`` tables, batched with ``padded_batch``;
* the model: an embedding ``tf.Variable``, ``tf.nn.embedding_lookup``, a bidirectional
  ``tf.contrib.rnn.LSTMCell`` (``tf.nn.bidirectional_dynamic_rnn`` with the sentence
  lengths), a dense layer and ``tf.contrib.crf`` (log likelihood and Viterbi decoding);
* ``tf.contrib.estimator.clip_gradients_by_norm`` around Adam, ``add_metrics`` with a
  ``tf.metrics`` pair, ``forward_features`` to return each sentence's id with its tags,
  ``export_outputs`` keyed by ``tf.saved_model.signature_constants``;
* a TensorBoard epilogue: ``FileWriterCache.clear()``, ``tf.reset_default_graph()``, a
  ``tf.Session`` whose graph a ``tf.summary.FileWriter`` writes with a final summary.

Written for TensorFlow 1.15 (``import tensorflow as tf``); TensorFlow 2 has no
``tf.contrib`` and cannot run it. ``python -m estimator.compat.port`` rewrites its two
TensorFlow imports. The data: synthetic sentences (a fixed NumPy seed) whose person and
place names are tagged ``PER`` / ``LOC`` and other words ``O``.
"""

import argparse
import os
import time

import numpy as np
import tensorflow as tf
from _report import print_result
from tensorflow.python.data import Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir", default=None)
parser.add_argument("--train_steps", default=200, type=int)
parser.add_argument("--batch_size", default=16, type=int)
parser.add_argument("--seed", default=1, type=int)

PEOPLE = ["anna", "bob", "chen", "dana", "eli", "fatima"]
PLACES = ["paris", "lima", "oslo", "tokyo", "cairo", "quito"]
OTHER = ["met", "in", "visited", "from", "went", "to", "with", "the", "city", "and", "saw"]
# Names of people and places alike: the word before says which (the BiLSTM must read it).
AMBIGUOUS = {"jordan": ("met", "in"), "georgia": ("with", "to")}
WORDS = PEOPLE + PLACES + OTHER + list(AMBIGUOUS)
TAGS = ["O", "PER", "LOC"]
MAX_WORDS = 10


def write_sentences(path, n, seed):
    """``n`` lines ``"<id>\\t<words>\\t<tags>"`` of 2 to 10 words."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(n):
            words, tags = [], []
            for _ in range(rng.integers(2, 6)):
                kind = rng.integers(0, 4)
                if kind == 3:  # "met jordan" (PER) or "in jordan" (LOC)
                    name = str(rng.choice(list(AMBIGUOUS)))
                    person = rng.random() < 0.5
                    words += [AMBIGUOUS[name][0 if person else 1], name]
                    tags += ["O", "PER" if person else "LOC"]
                    continue
                word = str(rng.choice([OTHER, PEOPLE, PLACES][kind]))
                words.append(word)
                tags.append("PER" if word in PEOPLE else "LOC" if word in PLACES else "O")
            f.write(f"{i}\t{' '.join(words)}\t{' '.join(tags)}\n")


def input_fn(path, batch_size, training):
    words = tf.contrib.lookup.index_table_from_tensor(WORDS, num_oov_buckets=1)
    tags = tf.contrib.lookup.index_table_from_tensor(TAGS)

    def parse(line):
        fields = tf.string_split([line], delimiter="\t").values
        tokens = tf.string_split([fields[1]]).values
        labels = tf.string_split([fields[2]]).values
        features = {
            "id": tf.string_to_number(fields[0], out_type=tf.int32),
            "words": words.lookup(tokens),
            "length": tf.size(tokens),
        }
        return features, tags.lookup(labels)

    # A file of lines, or the lines themselves (a list: predictions for a few sentences).
    lines = Dataset.from_tensor_slices(path) if isinstance(path, list) else None
    dataset = (lines or tf.data.TextLineDataset(path)).map(parse)
    if training:
        dataset = dataset.shuffle(500).repeat()
    # One length for every batch (a compiled step keeps its shapes; TF would pad each batch
    # to its longest sentence with [None]).
    shapes = ({"id": [], "words": [MAX_WORDS], "length": []}, [MAX_WORDS])
    return dataset.padded_batch(batch_size, padded_shapes=shapes).prefetch(1)


def model_fn(features, labels, mode, params):
    embeddings = tf.Variable(tf.random_uniform([len(WORDS) + 1, 16], -0.1, 0.1), name="words")
    embedded = tf.nn.embedding_lookup(embeddings, features["words"])
    lengths = features["length"]
    cell_fw, cell_bw = tf.contrib.rnn.LSTMCell(16), tf.contrib.rnn.LSTMCell(16)
    (out_fw, out_bw), _ = tf.nn.bidirectional_dynamic_rnn(
        cell_fw, cell_bw, embedded, sequence_length=lengths, dtype=tf.float32
    )
    scores = tf.layers.dense(tf.concat([out_fw, out_bw], axis=-1), len(TAGS))
    transitions = tf.get_variable("crf", [len(TAGS), len(TAGS)])
    tags, _ = tf.contrib.crf.crf_decode(scores, transitions, lengths)
    if mode == tf.estimator.ModeKeys.PREDICT:
        key = tf.saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY
        outputs = {key: tf.estimator.export.PredictOutput({"tags": tags})}
        return tf.estimator.EstimatorSpec(mode, predictions={"tags": tags}, export_outputs=outputs)
    log_likelihood, _ = tf.contrib.crf.crf_log_likelihood(scores, labels, lengths, transitions)
    loss = tf.reduce_mean(-log_likelihood)
    weights = tf.sequence_mask(lengths, tf.shape(labels)[1], dtype=tf.float32)
    metrics = {"accuracy": tf.metrics.accuracy(labels, tags, weights)}
    optimizer = tf.contrib.estimator.clip_gradients_by_norm(
        tf.train.AdamOptimizer(params["learning_rate"]), clip_norm=5.0
    )
    train_op = optimizer.minimize(loss, global_step=tf.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(
        mode, predictions={"tags": tags}, loss=loss, train_op=train_op, eval_metric_ops=metrics
    )


def entity_recall(labels, predictions, features):
    """Of the PER/LOC words, how many were tagged right (a tf.metrics pair)."""
    weights = tf.cast(labels > 0, tf.float32) * tf.sequence_mask(
        features["length"], tf.shape(labels)[1], dtype=tf.float32
    )
    return {"entity_recall": tf.metrics.accuracy(labels, predictions["tags"], weights)}


def main(argv):
    args = parser.parse_args(argv[1:])
    start = time.time()
    assert tf.__version__.startswith("1."), tf.__version__  # a TF 1 program
    model_dir = args.model_dir
    train_path, test_path = (
        os.path.join(model_dir, "train.txt"),
        os.path.join(model_dir, "test.txt"),
    )
    os.makedirs(model_dir, exist_ok=True)
    write_sentences(train_path, 600, args.seed)
    write_sentences(test_path, 200, args.seed + 100)
    tagger = tf.estimator.Estimator(
        model_fn,
        model_dir=model_dir,
        params={"learning_rate": 0.01},
        config=tf.estimator.RunConfig(tf_random_seed=args.seed),
    )
    tagger = tf.contrib.estimator.add_metrics(tagger, entity_recall)
    tagger.train(lambda: input_fn(train_path, args.batch_size, True), steps=args.train_steps)
    results = tagger.evaluate(lambda: input_fn(test_path, 50, False))
    forwarded = tf.contrib.estimator.forward_features(tagger, "id")
    sample = ["7\tanna visited oslo\tPER O LOC", "8\tbob met jordan in jordan\tPER O PER O LOC"]
    predicted = {
        int(p["id"]): [TAGS[t] for t in p["tags"]]
        for p in forwarded.predict(lambda: input_fn(sample, 2, False))
    }
    # The TensorBoard epilogue of such programs.
    tf.summary.FileWriterCache.clear()
    tf.reset_default_graph()
    with tf.Session() as sess:
        writer = tf.summary.FileWriter(os.path.join(model_dir, "final"), sess.graph)
        value = tf.Summary.Value(tag="final/accuracy", simple_value=results["accuracy"])
        writer.add_summary(tf.Summary(value=[value]), results["global_step"])
        writer.close()
    print_result(
        start,
        results,
        ("accuracy", "entity_recall", "loss"),
        tags_7=predicted[7][:3],
        tags_8=predicted[8][:5],
    )


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run(main)
