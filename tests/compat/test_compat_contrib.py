"""``tf.contrib`` (TF 1.15) subset of ``estimator.compat.v1``.

TF 2.15 has no ``tf.contrib``, but TF 1.15's ``contrib.lookup`` re-exported
``tensorflow/python/ops/lookup_ops.py`` and ``contrib.layers.layer_norm`` /
``bow_encoder`` are ``tf.nn.moments`` + ``tf.nn.batch_normalization`` and
``safe_embedding_lookup_sparse``: ``TF_NUMBERS`` were printed by TF 2.15.1 running those
(``lookup_ops.index_table_from_tensor`` etc., ``tf.compat.v1`` graph mode) on the inputs
below. The streaming metrics are ``tf.metrics`` with the arguments swapped: their numbers
are ``tests/compat/test_compat_ops.py``'s TF 2.15.1 ``tf.metrics`` numbers on the same inputs.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import estimator as est
import estimator.compat.v1 as tf

X = np.array([[-2.0, -0.5, 0.0], [0.5, 3.0, 7.0]], np.float32)
TABLE = np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0
IDS = np.array([[0, 2, -1], [-1, -1, -1], [1, 1, 3]], np.int32)
LABELS = np.array([1, 0, 1, 1, 0, 1], np.int32)
SCORES = np.array([0.9, 0.4, 0.35, 0.8, 0.1, 0.55], np.float32)

# TF 2.15.1 (see the module docstring).
TF_NUMBERS = {
    "oov": [0, 4, 2, 5, 1],
    "default": [0, -1, 2, -1, 1],
    "to_string": [b"x", b"y", b"UNK"],
    "int_oov": [1, 3, 2, 3],
    "layer_norm": [
        [-1.3728129863739014, 0.3922322392463684, 0.9805806279182434],
        [-1.1206310987472534, -0.18677186965942383, 1.3074029684066772],
    ],
    "bow": [[0.3, 0.4, 0.5], [0.0, 0.1, 0.2], [0.5, 0.6, 0.7]],
}


def _in_model_fn(fn, mode=tf.estimator.ModeKeys.EVAL):
    """Runs ``fn()`` inside a model_fn's init run, compiled (one program rather than many
    eager ops): ``(result, names of the trainable variables created)``."""
    from estimator.model.function import ModelFunction

    names = []

    def model_fn(features, labels, mode):
        value = fn()
        names.append(value)
        return tf.estimator.EstimatorSpec(mode, loss=jnp.zeros(()), predictions={})

    def run():
        _, frame = ModelFunction(model_fn, None, est.RunConfig(), 0).apply(
            mode, {"x": np.zeros((1, 1), np.float32)}, None
        )
        value = names.pop()
        names.append(sorted(frame.trainable))
        return value

    value = jax.jit(run)()
    return value, names.pop()


def test_lookup_tables_match_tf():
    keys = np.array([b"a", b"z", b"c", b"q", b"b"], dtype=object)
    with_oov = tf.contrib.lookup.index_table_from_tensor(["a", "b", "c"], num_oov_buckets=3)
    assert with_oov.lookup(keys).tolist() == TF_NUMBERS["oov"]
    assert with_oov.lookup(["a", "z", "c", "q", "b"]).tolist() == TF_NUMBERS["oov"]  # str too
    assert int(with_oov.size()) == 6
    plain = tf.contrib.lookup.index_table_from_tensor(["a", "b", "c"])
    assert plain.lookup(keys).tolist() == TF_NUMBERS["default"]
    names = tf.contrib.lookup.index_to_string_table_from_tensor(["x", "y"])
    assert names.lookup([0, 1, 5]).tolist() == TF_NUMBERS["to_string"]
    ints = tf.contrib.lookup.index_table_from_tensor([10, 20, 30], num_oov_buckets=2)
    assert ints.lookup(np.array([20, 7, 30, 99])).tolist() == TF_NUMBERS["int_oov"]
    assert isinstance(plain.init, type(tf.no_op())) and isinstance(
        tf.tables_initializer(), type(tf.no_op())
    )


def test_lookup_tables_from_files_and_inside_model_fn(tmp_path):
    vocabulary = tmp_path / "labels.txt"
    vocabulary.write_text("cat\ndog\nbird\n")
    table = tf.contrib.lookup.index_table_from_file(str(vocabulary), vocab_size=2)
    assert table.lookup(["dog", "bird", "cat"]).tolist() == [1, -1, 0]  # bird is line 3 of 2
    names = tf.contrib.lookup.index_to_string_table_from_file(str(vocabulary))
    assert names.lookup([2, 0]).tolist() == [b"bird", b"cat"]
    # In model_fn: ids -> strings is a prediction of strings (decoded on the host)...
    value, _ = _in_model_fn(lambda: names.lookup(jnp.array([2, 7])))
    assert isinstance(value, est.IndexToString)
    assert value.to_numpy().tolist() == [b"bird", b"UNK"]
    # ... integer keys look up traced values; strings say where to look them up.
    ints = tf.contrib.lookup.index_table_from_tensor([10, 20, 30])
    value, _ = _in_model_fn(lambda: ints.lookup(jnp.array([30, 5])))
    assert np.asarray(value).tolist() == [2, -1]
    with pytest.raises(TypeError, match="strings cannot run inside model_fn.*dataset.map"):
        _in_model_fn(lambda: table.lookup(jnp.array([1])))
    with pytest.raises(ValueError, match="vocabulary_file must be specified"):
        tf.contrib.lookup.index_table_from_file("")
    with pytest.raises(ValueError, match="num_oov_buckets must be greater or equal than 0"):
        tf.contrib.lookup.index_table_from_tensor(["a"], num_oov_buckets=-1)


def test_a_lookup_in_a_dataset_map_feeds_string_labels():
    table = tf.contrib.lookup.index_table_from_tensor(["<=50K", ">50K"])
    lines = np.array([b"39,<=50K", b"52,>50K", b"31,>50K"], dtype=object)

    def parse(line):
        age, income = tf.decode_csv(line, [[0.0], [""]])
        return {"age": age}, table.lookup(income)

    (batch,) = tf.data.Dataset.from_tensor_slices(lines).map(parse).batch(3)
    assert batch[1].tolist() == [0, 1, 1]


def test_layers_match_tf_and_keep_tfs_variable_names():
    def build():
        x = jnp.asarray(X)
        return {
            "fc": tf.contrib.layers.fully_connected(x, 4),
            "fc_linear": tf.contrib.layers.fully_connected(x, 2, activation_fn=None),
            "flat": tf.contrib.layers.flatten(jnp.zeros((2, 3, 4))),
            "ln": tf.contrib.layers.layer_norm(x),
            "seq": tf.contrib.layers.embed_sequence(jnp.asarray(IDS.clip(0)), 4, 3),
        }

    value, names = _in_model_fn(build)
    assert names == [
        "EmbedSequence/embeddings",
        "LayerNorm/beta",
        "LayerNorm/gamma",
        "fully_connected/biases",
        "fully_connected/weights",
        "fully_connected_1/biases",
        "fully_connected_1/weights",
    ]
    assert value["fc"].shape == (2, 4) and float(jnp.min(value["fc"])) >= 0.0  # ReLU default
    assert float(jnp.min(value["fc_linear"])) < 0.0  # activation_fn=None: linear
    assert value["flat"].shape == (2, 12)
    assert value["seq"].shape == (3, 3, 3)
    np.testing.assert_allclose(value["ln"], TF_NUMBERS["layer_norm"], rtol=1e-5)


def test_bow_encoder_averages_present_ids_as_tfs_sparse_lookup():
    def build():
        with tf.variable_scope("text"):  # TF: the default scope under the current one
            return tf.contrib.layers.bow_encoder(
                IDS, 4, 3, initializer=tf.constant_initializer(TABLE)
            )

    value, names = _in_model_fn(build)
    assert names == ["text/bow_encoder/embeddings"]
    np.testing.assert_allclose(value, TF_NUMBERS["bow"], rtol=1e-6)


def test_regularizers_follow_tf():
    w = jnp.array([[1.0, -2.0], [0.5, 0.0]])
    # l2: 0.1 * (1 + 4 + 0.25) / 2 = 0.2625; l1: 0.1 * (1 + 2 + 0.5) = 0.35.
    np.testing.assert_allclose(tf.contrib.layers.l2_regularizer(0.1)(w), 0.2625, rtol=1e-6)
    np.testing.assert_allclose(tf.contrib.layers.l1_regularizer(0.1)(w), 0.35, rtol=1e-6)
    assert tf.contrib.layers.l2_regularizer(0.0)(w) is None  # TF: scale 0 disables it
    with pytest.raises(ValueError, match="scale cannot be an integer: 1"):
        tf.contrib.layers.l2_regularizer(1)
    with pytest.raises(ValueError, match="Setting a scale less than 0 on a regularizer: -0.5"):
        tf.contrib.layers.l1_regularizer(-0.5)

    def build():
        x = jnp.ones((1, 2))
        tf.contrib.layers.fully_connected(
            x, 1, weights_initializer=tf.ones_initializer(),
            weights_regularizer=tf.contrib.layers.l2_regularizer(0.5),
            biases_regularizer=tf.contrib.layers.l2_regularizer(0.0),
        )  # fmt: skip
        return tf.losses.get_regularization_loss()

    value, _ = _in_model_fn(build)
    assert float(value) == 0.5  # 0.5 * (1 + 1) / 2; the disabled bias regularizer adds nothing


def test_optimize_loss_trains_with_tfs_names_and_options(tmp_path):
    x = np.linspace(-1, 1, 8, dtype=np.float32)[:, None]
    y = 3.0 * x[:, 0]

    def model_fn(features, labels, mode):
        w = tf.get_variable("w", [1, 1], initializer=tf.zeros_initializer())
        loss = tf.losses.mean_squared_error(labels, tf.squeeze(tf.matmul(features["x"], w), 1))
        train_op = tf.contrib.layers.optimize_loss(
            loss,
            tf.contrib.framework.get_or_create_global_step(),
            learning_rate=0.5,
            optimizer="SGD",
            clip_gradients=100.0,
            learning_rate_decay_fn=lambda lr, step: tf.train.exponential_decay(lr, step, 10, 0.9),
        )
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    model = tf.estimator.Estimator(model_fn, str(tmp_path))
    model.train(tf.estimator.inputs.numpy_input_fn({"x": x}, y, 8, None, False), steps=1)
    # Step 1 by hand: loss = mean((3x - 0)^2), dloss/dw = mean(-2 * 3x * x) = -6 mean(x^2);
    # mean(x^2) over linspace(-1, 1, 8) = 0.4286; lr 0.5 (decayed at step 0: 0.5);
    # w = 0 + 0.5 * 6 * 0.4286 = 1.2857.
    np.testing.assert_allclose(model.get_variable_value("w"), [[1.2857143]], rtol=1e-5)
    assert model.get_variable_value("OptimizeLoss/learning_rate") == 0.5
    with pytest.raises(ValueError, match=r"Optimizer name should be one of \[Adagrad, Adam"):
        _in_model_fn(lambda: tf.contrib.layers.optimize_loss(jnp.zeros(()), None, 0.1, "Sgd"))
    with pytest.raises(ValueError, match=r"gradient_noise_scale=\.\.\.\) is not supported"):
        tf.contrib.layers.optimize_loss(0.0, None, 0.1, "SGD", gradient_noise_scale=0.1)


def test_streaming_metrics_are_tf_metrics_with_predictions_first():
    # TF 2.15.1's tf.compat.v1.metrics on these inputs (tests/compat/test_compat_ops.py).
    accuracy = tf.contrib.metrics.streaming_accuracy(SCORES > 0.5, LABELS)
    assert float(accuracy[0]) == pytest.approx(0.8333333134651184)
    auc = tf.contrib.metrics.streaming_auc(SCORES, LABELS)
    assert float(auc[0]) == pytest.approx(0.8749996423721313, abs=1e-6)
    recall = tf.contrib.metrics.streaming_recall(SCORES > 0.5, LABELS)
    assert float(recall[0]) == pytest.approx(0.75)  # 3 of the 4 positives predicted
    assert float(tf.contrib.metrics.streaming_mean([1.0, 3.0])[0]) == 2.0


def test_map_and_batch_and_the_rest_of_contrib():
    dataset = tf.data.Dataset.range(5).apply(
        tf.contrib.data.map_and_batch(lambda v: v * 10, 2, drop_remainder=True)
    )
    assert [b.tolist() for b in dataset] == [[0, 10], [20, 30]]
    head = tf.contrib.estimator.regression_head(weight_column="w", label_dimension=2)
    assert head.logits_dimension == 2 and head.weight_column == "w"  # TF 1.15's order
    assert tf.contrib.framework.get_global_step() is None  # outside model_fn, as TF's
    with pytest.raises(tf.UnsupportedSymbolError, match=r"tf\.contrib\.learn .*tf\.estimator"):
        tf.contrib.learn  # noqa: B018
    with pytest.raises(tf.UnsupportedSymbolError, match=r"tf\.contrib\.layers\.conv2d_in_plane"):
        tf.contrib.layers.conv2d_in_plane  # noqa: B018
