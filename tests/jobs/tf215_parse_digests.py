"""TF 2.15.1's results on ``example_corpus``: prints the JSON that ``test_io_parse.py``
carries as ``TF215`` (labelled as TF's). Run with a Python that has TensorFlow 2.15::

    <TF 2.15 venv>/bin/python tests/jobs/tf215_parse_digests.py
"""

import json
import os
import re
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))

import example_corpus as corpus  # noqa: E402
import tensorflow as tf  # noqa: E402


def tf_specs():
    out = {}
    for key, (kind, args) in corpus.spec_args().items():
        if kind == "fixed":
            shape, dtype, default = args
            out[key] = tf.io.FixedLenFeature(shape, getattr(tf, dtype), default)
        elif kind == "varlen":
            out[key] = tf.io.VarLenFeature(getattr(tf, args[0]))
        elif kind == "sparse":
            index, value, dtype, size = args
            out[key] = tf.io.SparseFeature(index, value, getattr(tf, dtype), size)
        elif kind == "ragged":
            dtype, value_key, parts = args
            partitions = [tf.io.RaggedFeature.RowLengths(k) for _, k in parts]
            out[key] = tf.io.RaggedFeature(getattr(tf, dtype), value_key, partitions)
        else:
            shape, dtype, allow_missing, default = args
            out[key] = tf.io.FixedLenSequenceFeature(
                shape, getattr(tf, dtype), allow_missing, default
            )
    return out


def as_lists(value):
    if isinstance(value, tf.SparseTensor):
        return [value.indices.numpy().tolist(), value.values.numpy().tolist(),
                value.dense_shape.numpy().tolist()]  # fmt: skip
    if isinstance(value, tf.RaggedTensor):
        return value.to_list()
    return value.numpy().tolist()


def message(err: Exception) -> str:
    text = str(err)
    text = re.sub(r"^\{\{function_node [^}]*\}\} ", "", text)
    return re.sub(r" \[Op:\w+\]$", "", text)


def main():
    specs = tf_specs()
    examples = corpus.example_dicts()
    records = [corpus.serialize(e, tf.train.Example) for e in examples]
    batches = []
    for lo in range(0, len(records), corpus.BATCH):
        parsed = tf.io.parse_example(tf.constant(records[lo : lo + corpus.BATCH]), specs)
        batches.append(corpus.digest({k: as_lists(v) for k, v in parsed.items()}))
    errors = {}
    for case in corpus.BAD:
        batch = [corpus.serialize(e, tf.train.Example) for e in corpus.bad_batch(examples, case)]
        try:
            tf.io.parse_example(tf.constant(batch), specs)
            errors[case[0]] = None
        except tf.errors.InvalidArgumentError as err:
            errors[case[0]] = message(err)
    print(json.dumps({"version": tf.__version__, "batches": batches, "errors": errors}, indent=1))


if __name__ == "__main__":
    main()
