"""``shared_embeddings``: several categorical columns, one table. Names, shapes and
messages are TF 2.15.1's (``tf.feature_column.shared_embeddings`` in graph mode under a
``DNNClassifier``); unlike TF's V2 canned estimators, the table is trained."""

import jax.numpy as jnp
import numpy as np
import pytest

import canned
import estimator as est
from canned import feature_column as fc

A = fc.categorical_column_with_identity("a", 5)
B = fc.categorical_column_with_identity("b", 5)
X = {"a": np.array([[1], [2], [3], [4]], np.int64), "b": np.array([[0], [2], [4], [1]], np.int64)}
Y = np.array([0, 1, 1, 0], np.int64)


def test_columns_and_errors_are_tfs():
    columns = fc.shared_embeddings([B, A], dimension=3, combiner="sum")
    # TF 2.15.1: ["b_shared_embedding", "a_shared_embedding"], in the given order.
    assert [c.name for c in columns] == ["b_shared_embedding", "a_shared_embedding"]
    assert {c.shared_embedding_collection_name for c in columns} == {"a_b_shared_embedding"}
    with pytest.raises(ValueError, match=r"same number of buckets\. .*with buckets: 5 does  not "):
        fc.shared_embeddings([A, fc.categorical_column_with_identity("c", 4)], 3)
    with pytest.raises(ValueError, match=r"all categorical_columns must have the same type, or "):
        fc.shared_embeddings([A, fc.numeric_column("n")], 3)
    with pytest.raises(ValueError, match=r"Invalid dimension 0\."):
        fc.shared_embeddings([A, B], 0)


def test_one_table_at_the_root_looked_up_by_each_column():
    columns = fc.shared_embeddings([B, A], dimension=3, combiner="sum")

    def model_fn(features, labels, mode):
        net = fc.input_layer(features, columns)
        table = est.get_variable("a_b_shared_embedding", [5, 3])  # the same variable
        batch = net.shape[0]
        predictions = {"net": net, "table": jnp.broadcast_to(table, (batch, 5, 3))}
        return est.EstimatorSpec(mode, predictions=predictions, loss=jnp.sum(net) * 0.0)

    e = est.Estimator(model_fn, config=est.RunConfig(tf_random_seed=0))
    transform = fc.input_transform(columns)
    out = next(e.predict(lambda: transform.apply(X, None)[0], yield_single_examples=False))
    table = out["table"][0]
    # input_layer orders columns by name: a's rows, then b's, both from the one table.
    expected = np.concatenate([table[X["a"][:, 0]], table[X["b"][:, 0]]], axis=1)
    np.testing.assert_allclose(out["net"], expected, rtol=1e-6)


def test_a_dnn_trains_the_shared_table_unlike_tf(tmp_path):
    columns = fc.shared_embeddings([B, A], dimension=3)

    def make(model_dir):
        return canned.DNNClassifier(
            hidden_units=[4],
            feature_columns=columns,
            model_dir=str(model_dir),
            config=est.RunConfig(tf_random_seed=1),
        )

    def input_fn():
        return X, Y

    first = make(tmp_path / "one")
    first.train(input_fn, steps=1)
    second = make(tmp_path / "two")
    second.train(input_fn, steps=5)
    # TF 2.15.1's variables: a_b_shared_embedding [5, 3] and dnn/hiddenlayer_0/kernel [6, 4]
    # (two columns of 3).
    assert second.get_variable_value("a_b_shared_embedding").shape == (5, 3)
    assert second.get_variable_value("dnn/hiddenlayer_0/kernel").shape == (6, 4)
    # The same seed starts both tables equal; TF 2.15.1 leaves the table at its initial
    # value after any number of steps (it is not among the Keras model's variables).
    moved = np.abs(
        second.get_variable_value("a_b_shared_embedding")
        - first.get_variable_value("a_b_shared_embedding")
    )
    assert moved.max() > 0
