"""Sequence feature columns and ``sequence_input_layer`` against TF 2.15.

Expected numbers marked "TF 2.15.1" were printed by TensorFlow 2.15.1
(``tf.keras.experimental.SequenceFeatures``) on the same inputs given as
``tf.sparse.SparseTensor``s (script shown next to each number); TF is never imported here.
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from canned import feature_column as fc
from estimator import preprocessing
from estimator.model import variables as V


class Sparse:
    """A sparse tensor value (what a tf.data pipeline yields for a VarLenFeature)."""

    def __init__(self, indices, values, dense_shape):
        self.indices = np.array(indices)
        self.values = np.array(values)
        self.dense_shape = np.array(dense_shape)


def _layer(columns, raw, **kwargs):
    features, _ = fc.input_transform(columns).apply(raw)
    frame = V.Frame(V.INIT, jax.random.key(0), 0)
    with V.transform_context(frame):
        out, length = fc.sequence_input_layer(features, columns, **kwargs)
    return np.asarray(out), np.asarray(length), frame, features


def _columns():
    tok = fc.sequence_categorical_column_with_vocabulary_list("tok", ["a", "b", "c"])
    table = jnp.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    emb = fc.embedding_column(tok, 2, initializer=lambda key, shape, dtype: table)
    num = fc.sequence_numeric_column(
        "x", shape=(2,), default_value=-5.0, normalizer_fn=lambda v: v * 2
    )
    ind = fc.indicator_column(fc.sequence_categorical_column_with_identity("n", 4))
    return [emb, num, ind]  # fmt: skip


SPARSE = {
    "tok": Sparse([[0, 0], [0, 1], [0, 2], [1, 0]], [b"a", b"zz", b"zz", b"c"], [2, 3]),
    "n": Sparse([[0, 0], [0, 2], [1, 0]], [1, 3, 2], [2, 3]),
    "x": Sparse([[0, 0], [0, 1], [0, 2], [0, 3], [0, 4], [1, 0]], [1, 2, 3, 4, 5, 6.0], [2, 6]),
}
# TF 2.15.1: SequenceFeatures([emb, num, ind])(SPARSE as tf.sparse.SparseTensor), the columns
# built as in _columns (embedding initializer tf.constant_initializer(table)); columns in order
# of name: n_indicator (4), tok_embedding (2), x (2). "zz" is out of vocabulary (a step without
# id: zeros); x's last step holds 5.0 and an absent value (default -5, not normalized).
TF_OUTPUT = [
    [[0, 1, 0, 0, 1, 2, 2, 4], [0, 0, 0, 0, 0, 0, 6, 8], [0, 0, 0, 1, 0, 0, 10, -5]],
    [[0, 0, 1, 0, 5, 6, 12, -5], [0, 0, 0, 0, 0, 0, -5, -5], [0, 0, 0, 0, 0, 0, -5, -5]],
]
TF_LENGTH = [3, 1]


def test_sequence_input_layer_matches_tf_on_sparse_input():
    out, length, frame, features = _layer(_columns(), SPARSE)
    # A sparse batch of longest sequence 3 is padded to 4 steps (a power of two: a bounded
    # number of compiled shapes); the first 3 are TF's, the 4th is padding.
    assert out.shape == (2, 4, 8)
    np.testing.assert_allclose(out[:, :3], TF_OUTPUT)
    np.testing.assert_allclose(out[:, 3], [[0] * 6 + [-5, -5]] * 2)
    np.testing.assert_array_equal(length, TF_LENGTH)
    # TF's variable name for the embedding (SequenceFeatures' scope).
    assert list(frame.trainable) == ["sequence_features/tok_embedding/embedding_weights"]
    assert sorted(features) == [
        "n/ids", "n/sequence_length", "tok/ids", "tok/sequence_length", "x",
        "x/sequence_length",
    ]  # fmt: skip


def test_dense_ragged_and_sparse_inputs_agree():
    dense = {
        "tok": np.array([["a", "zz", "zz"], ["c", "", ""]], object),
        "n": np.array([[1, -1, 3], [2, -1, -1]]),
        "x": np.array([[1, 2, 3, 4, 5, np.nan], [6] + [np.nan] * 5], np.float32),
    }
    ragged = {
        "tok": [["a", "zz", "zz"], ["c"]],
        "n": [[1, -1, 3], [2]],
        "x": [[1, 2, 3, 4, 5], [6]],
    }
    out_dense, length_dense, _, _ = _layer(_columns(), dense)
    out_ragged, length_ragged, _, _ = _layer(_columns(), ragged)
    # Padded dense input keeps its width (3 steps); ragged input is padded to 4 steps.
    np.testing.assert_allclose(out_dense, TF_OUTPUT)
    np.testing.assert_allclose(out_ragged[:, :3], TF_OUTPUT)
    np.testing.assert_array_equal(length_dense, TF_LENGTH)
    np.testing.assert_array_equal(length_ragged, TF_LENGTH)


def test_sequence_lengths_as_tf():
    tok = fc.sequence_categorical_column_with_vocabulary_list("tok", ["a", "b"])
    # TF 2.15.1: SequenceFeatures([indicator_column(tok)]) on the dense string tensor
    # [["a", "zz", ""], ["", "b", ""]] -> one-hots [[a, -, -], [-, b, -]], lengths [2, 2]: an
    # out-of-vocabulary value counts towards the length; "" is absent, even first.
    out, length, _, _ = _layer(
        [fc.indicator_column(tok)], {"tok": np.array([["a", "zz", ""], ["", "b", ""]])}
    )
    np.testing.assert_array_equal(out, [[[1, 0], [0, 0], [0, 0]], [[0, 0], [0, 1], [0, 0]]])
    np.testing.assert_array_equal(length, [2, 2])
    # TF 2.15.1: sequence_categorical_column_with_hash_bucket("h", 10, dtype=tf.int64) on
    # [[5, -1, 7, -1], [-1, -1, -1, -1]]: buckets [[1, -, 8, -], [-, -, -, -]], lengths [3, 0].
    h = fc.sequence_categorical_column_with_hash_bucket("h", 10, dtype="int64")
    out, length, _, _ = _layer(
        [fc.indicator_column(h)], {"h": np.array([[5, -1, 7, -1], [-1, -1, -1, -1]])}
    )
    np.testing.assert_array_equal(out.argmax(-1), [[1, 0, 8, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(out.sum(-1), [[1, 0, 1, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(length, [3, 0])
    # A numeric step of 2 values: 3 values make ceil(3 / 2) = 2 steps; an empty example 0.
    x = fc.sequence_numeric_column("x", shape=2)
    out, length, _, _ = _layer([x], {"x": [[1, 2, 3], [], [1, 2, 3, 4, 5, 6, 7, 8, 9]]})
    np.testing.assert_array_equal(length, [2, 0, 5])
    assert out.shape == (3, 8, 2)  # 5 steps -> 8
    np.testing.assert_array_equal(out[0, :2], [[1, 2], [3, 0]])


def test_vocabulary_file_and_context_input(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("x\ny\n")
    column = fc.sequence_categorical_column_with_vocabulary_file("s", str(path), num_oov_buckets=1)
    assert column.num_buckets == 3 and column.name == "s"
    out, length, _, _ = _layer([fc.indicator_column(column)], {"s": [["y", "q"], ["x"]]})
    np.testing.assert_array_equal(length, [2, 1])
    assert out[0, 0].tolist() == [0, 1, 0] and out[0, 1].tolist() == [0, 0, 1]
    context = jnp.array([[7.0], [8.0]])
    joined = fc.concatenate_context_input(context, jnp.asarray(out))
    assert joined.shape == (2, 2, 4)
    np.testing.assert_array_equal(joined[:, :, 3], [[7, 7], [8, 8]])
    with pytest.raises(ValueError, match="context_input must have rank 2"):
        fc.concatenate_context_input(jnp.ones(2), jnp.asarray(out))


def test_sequence_features_layer_object_and_parse_spec():
    columns = _columns()
    layer = fc.SequenceFeatures(columns, name="seq")
    features, _ = fc.input_transform(columns).apply(SPARSE)
    frame = V.Frame(V.INIT, jax.random.key(0), 0)
    with V.transform_context(frame):
        out, length = layer(features)
    np.testing.assert_allclose(np.asarray(out)[:, :3], TF_OUTPUT)
    assert list(frame.trainable) == ["seq/tok_embedding/embedding_weights"]
    spec = fc.make_parse_example_spec(columns)
    assert spec == {
        "tok": preprocessing.VarLenFeature(str),
        "x": preprocessing.VarLenFeature(np.float32),
        "n": preprocessing.VarLenFeature(np.int64),
    }


def test_host_phase_round_trips_through_its_config():
    transform = fc.input_transform(_columns())
    again = preprocessing.InputTransform.from_config(json.loads(json.dumps(transform.to_config())))
    a, _ = transform.apply(SPARSE)
    b, _ = again.apply(SPARSE)
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def test_errors_name_the_problem():
    # TF 2.15.1's messages.
    with pytest.raises(
        ValueError, match="Items of feature_columns must be a <class 'SequenceDense"
    ):
        fc.SequenceFeatures([fc.numeric_column("a")])
    plain = fc.embedding_column(fc.categorical_column_with_identity("a", 3), 2)
    features, _ = fc.input_transform([plain]).apply({"a": np.array([[1]])})
    with V.transform_context(V.Frame(V.INIT, jax.random.key(0), 0)):
        with pytest.raises(ValueError, match="In embedding_column: a_embedding. categorical_"):
            fc.sequence_input_layer(features, [plain])
    sequence = fc.sequence_categorical_column_with_identity("n", 4)
    features, _ = fc.input_transform([sequence]).apply({"n": np.array([[1, 2]])})
    with V.transform_context(V.Frame(V.INIT, jax.random.key(0), 0)):
        with pytest.raises(ValueError, match="must not be of type SequenceCategoricalColumn"):
            fc.input_layer(features, [fc.indicator_column(sequence)])
    with pytest.raises(ValueError, match="dtype must be convertible to float. dtype: string"):
        fc.sequence_numeric_column("a", dtype=str)
    with pytest.raises(ValueError, match="shape dimensions must be greater than 0"):
        fc.sequence_numeric_column("a", shape=(0,))
    with pytest.raises(ValueError, match="num_buckets 0 < 1, column_name n"):
        fc.sequence_categorical_column_with_identity("n", 0)
    with pytest.raises(TypeError, match="default_value must be a single number"):
        fc.sequence_numeric_column("a", default_value=[1.0])
    # Inputs the host phase cannot read.
    x = fc.sequence_numeric_column("x", shape=(2,))
    with pytest.raises(ValueError, match="has 3 values per example, not a multiple of the 2"):
        fc.input_transform([x]).apply({"x": np.ones((2, 3), np.float32)})
    with pytest.raises(ValueError, match="expected a 2-D \\[batch_size, max_length\\]"):
        fc.input_transform([x]).apply({"x": Sparse([[0, 0, 0]], [1.0], [1, 1, 1])})
    with pytest.raises(ValueError, match="expected numbers"):
        fc.input_transform([x]).apply({"x": [["a", "b"]]})
