"""``estimator.compat.v1`` ops, ``tf.nn``, ``tf.layers`` 1-D layers and ``tf.metrics`` pairs
against TF 2.15.1.

``EXPECTED_OPS`` / ``EXPECTED_METRICS`` were printed by this script (tensorflow-cpu 2.15.1,
``tf.compat.v1`` graph mode; inputs are the module constants below)::

    X = [[-2.0, -0.5, 0.0], [0.5, 3.0, 7.0]]
    ops = {"relu6": tf.nn.relu6(X), ..., "one_hot": tf.one_hot([0, 2, -1], 3, on_value=5.0,
           off_value=-1.0), ...}                         # exactly the calls in OPS below
    metrics = {"accuracy": tf.metrics.accuracy(LABELS, SCORES > 0.5), ...}   # METRICS below
    sess.run(tf.local_variables_initializer()); sess.run(update_op); print(sess.run(value))
"""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import estimator as est
import estimator.compat.v1 as tf

X = np.array([[-2.0, -0.5, 0.0], [0.5, 3.0, 7.0]], np.float32)
LABELS = np.array([1, 0, 1, 1, 0, 1], np.int32)
SCORES = np.array([0.9, 0.4, 0.35, 0.8, 0.1, 0.55], np.float32)
W = np.array([1.0, 2.0, 0.5, 1.0, 0.0, 1.0], np.float32)
CLS = np.array([2, 0, 1, 1, 0, 2], np.int32)
PRED_CLS = np.array([2, 1, 1, 0, 0, 2], np.int32)
REG_L = np.array([1.0, 2.0, -1.0, 0.5, 3.0, 0.0], np.float32)
REG_P = np.array([1.5, 1.0, -1.0, 1.5, 2.0, 0.5], np.float32)
Z = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.5]], np.float32)
SEQ = np.arange(12, dtype=np.float32).reshape(1, 6, 2)
POOL_IN = np.arange(10, dtype=np.float32).reshape(1, 5, 2)

EXPECTED_METRICS = {
    "metric_accuracy": 0.8333333134651184,
    "metric_accuracy_w": 0.9090909361839294,
    "metric_auc": 0.8749996423721313,
    "metric_auc_pr": 0.9437497854232788,
    "metric_auc_careful": 0.8571425080299377,
    "metric_precision": 1.0,
    "metric_recall": 0.8571428656578064,
    "metric_mean": 0.9090909361839294,
    "metric_mse": 0.5833333134651184,
    "metric_rmse": 0.7977240085601807,
    "metric_mae": 0.6666666865348816,
    "metric_mpca": 0.6666666865348816,
    "metric_miou": 0.5555555820465088,
    "metric_tp": 3.0,
    "metric_fn": 1.0,
    "metric_p_at_t": [0.800000011920929, 1.0, 0.9999998807907104],
    "metric_r_at_t": [1.0, 0.75, 0.25],
}

EXPECTED_OPS = {
    "relu6": [[0.0, 0.0, 0.0], [0.5, 3.0, 6.0]],
    "elu": [[-0.8646647334098816, -0.39346933364868164, 0.0], [0.5, 3.0, 7.0]],
    "selu": [
        [-1.5201665163040161, -0.6917581558227539, 0.0],
        [0.5253505110740662, 3.1521029472351074, 7.354907035827637],
    ],
    "leaky_relu": [[-0.4000000059604645, -0.10000000149011612, 0.0], [0.5, 3.0, 7.0]],
    "softplus": [
        [0.12692800164222717, 0.4740769863128662, 0.6931471824645996],
        [0.9740769863128662, 3.0485873222351074, 7.000911712646484],
    ],
    "softsign": [
        [-0.6666666865348816, -0.3333333432674408, 0.0],
        [0.3333333432674408, 0.75, 0.875],
    ],
    "log_softmax": [
        [-2.5549569129943848, -1.0549569129943848, -0.55495685338974],
        [-6.519625186920166, -4.019625186920166, -0.019625181332230568],
    ],
    "softmax_dim0": [
        [0.07585818320512772, 0.02931223064661026, 0.0009110512328334153],
        [0.9241418242454529, 0.970687747001648, 0.9990890026092529],
    ],
    "l2_normalize": [
        [-0.9701425433158875, -0.24253563582897186, 0.0],
        [0.06551218032836914, 0.39307308197021484, 0.917170524597168],
    ],
    "sigmoid_xent": [
        [0.12692800164222717, 0.9740769863128662, 0.6931471824645996],
        [0.4740769863128662, 3.0485873222351074, 3.5009114742279053],
    ],
    "softmax_xent_v2": [1.0549569129943848, 2.519625186920166],
    "sparse_xent": [0.55495685338974, 6.519625186920166],
    "weighted_xent": [
        [0.12692809104919434, 1.9481539726257324, 1.3862943649291992],
        [0.9481539726257324, 3.0485873222351074, 3.5013670921325684],
    ],
    "moments_mean": [-0.75, 1.25, 3.5],
    "moments_var": [1.5625, 3.0625, 12.25],
    "l2_loss": 31.25,
    "reduce_logsumexp": [0.55495685338974, 7.019625186920166],
    "argmax_default": [1, 1, 1],
    "argmin_1": [0, 0],
    "reduce_mean_int": 3,
    "clip_by_norm": [
        [-1.940285086631775, -0.4850712716579437, 0.0],
        [0.13102436065673828, 0.7861461639404297, 1.8343409299850464],
    ],
    "cumsum_exclusive_reverse": [[-0.5, 0.0, 0.0], [10.0, 7.0, 0.0]],
    "div_int": [3, -4],
    "truediv_int": [3.5, -3.5],
    "one_hot": [[5.0, -1.0, -1.0], [-1.0, -1.0, 5.0], [-1.0, -1.0, -1.0]],
    "cast_trunc": [-1, 1, 2],
    "round": [0.0, 2.0, 2.0, -0.0],
    "in_top_k": [True, True],
    "squared_difference": [[9.0, 2.25, 1.0], [0.25, 4.0, 36.0]],
    "where_rows": [[-2.0, -0.5, 0.0], [0.0, 0.0, 0.0]],
    "confusion": [[1, 1, 0], [1, 1, 0], [0, 0, 2]],
    "conv1d": [
        [
            [5.699999809265137, 6.300000190734863],
            [11.5, 13.0],
            [17.5, 20.200000762939453],
            [23.5, 27.399999618530273],
            [29.5, 34.599998474121094],
            [12.90000057220459, 16.700000762939453],
        ]
    ],
    "avgpool1d_same": [[[1.0, 2.0], [5.0, 6.0], [8.0, 9.0]]],
    "maxpool1d": [[[2.0, 3.0], [4.0, 5.0], [6.0, 7.0], [8.0, 9.0]]],
}

METRICS = {
    "accuracy": lambda: tf.metrics.accuracy(LABELS, SCORES > 0.5),
    "accuracy_w": lambda: tf.metrics.accuracy(LABELS, SCORES > 0.5, weights=W),
    "auc": lambda: tf.metrics.auc(LABELS, SCORES),
    "auc_pr": lambda: tf.metrics.auc(LABELS, SCORES, curve="PR"),
    "auc_careful": lambda: tf.metrics.auc(
        LABELS, SCORES, weights=W, summation_method="careful_interpolation"
    ),
    "precision": lambda: tf.metrics.precision(LABELS, SCORES > 0.5),
    "recall": lambda: tf.metrics.recall(LABELS, SCORES > 0.5, weights=W),
    "mean": lambda: tf.metrics.mean(REG_P, weights=W),
    "mse": lambda: tf.metrics.mean_squared_error(REG_L, REG_P),
    "rmse": lambda: tf.metrics.root_mean_squared_error(REG_L, REG_P, weights=W),
    "mae": lambda: tf.metrics.mean_absolute_error(REG_L, REG_P),
    "mpca": lambda: tf.metrics.mean_per_class_accuracy(CLS, PRED_CLS, 3),
    "miou": lambda: tf.metrics.mean_iou(CLS, PRED_CLS, 3),
    "tp": lambda: tf.metrics.true_positives(LABELS, SCORES > 0.5),
    "fn": lambda: tf.metrics.false_negatives(LABELS, SCORES > 0.5),
    "p_at_t": lambda: tf.metrics.precision_at_thresholds(LABELS, SCORES, [0.3, 0.5, 0.85]),
    "r_at_t": lambda: tf.metrics.recall_at_thresholds(LABELS, SCORES, [0.3, 0.5, 0.85]),
}

OPS = {
    "relu6": lambda: tf.nn.relu6(X),
    "elu": lambda: tf.nn.elu(X),
    "selu": lambda: tf.nn.selu(X),
    "leaky_relu": lambda: tf.nn.leaky_relu(X),
    "softplus": lambda: tf.nn.softplus(X),
    "softsign": lambda: tf.nn.softsign(X),
    "log_softmax": lambda: tf.nn.log_softmax(X),
    "softmax_dim0": lambda: tf.nn.softmax(X, axis=0),
    "l2_normalize": lambda: tf.nn.l2_normalize(X, axis=1),
    "sigmoid_xent": lambda: tf.nn.sigmoid_cross_entropy_with_logits(labels=Z, logits=X),
    "softmax_xent_v2": lambda: tf.nn.softmax_cross_entropy_with_logits_v2(
        labels=np.array([[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]], np.float32), logits=X
    ),
    "sparse_xent": lambda: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=np.array([2, 0]), logits=X
    ),
    "weighted_xent": lambda: tf.nn.weighted_cross_entropy_with_logits(
        labels=Z, logits=X, pos_weight=2.0
    ),
    "moments_mean": lambda: tf.nn.moments(X, axes=[0])[0],
    "moments_var": lambda: tf.nn.moments(X, axes=[0])[1],
    "l2_loss": lambda: tf.nn.l2_loss(X),
    "reduce_logsumexp": lambda: tf.reduce_logsumexp(X, axis=1),
    "argmax_default": lambda: tf.argmax(X),
    "argmin_1": lambda: tf.argmin(X, 1),
    "reduce_mean_int": lambda: tf.reduce_mean(np.array([[1, 2], [4, 6]], np.int32)),
    "clip_by_norm": lambda: tf.clip_by_norm(X, 2.0, axes=[1]),
    "cumsum_exclusive_reverse": lambda: tf.cumsum(X, axis=1, exclusive=True, reverse=True),
    "div_int": lambda: tf.div(np.array([7, -7], np.int32), np.array([2, 2], np.int32)),
    "truediv_int": lambda: tf.truediv(np.array([7, -7], np.int32), np.array([2, 2], np.int32)),
    "one_hot": lambda: tf.one_hot(np.array([0, 2, -1]), 3, on_value=5.0, off_value=-1.0),
    "cast_trunc": lambda: tf.cast(np.array([-1.7, 1.7, 2.5], np.float32), tf.int32),
    "round": lambda: tf.round(np.array([0.5, 1.5, 2.5, -0.5], np.float32)),
    "in_top_k": lambda: tf.nn.in_top_k(X, np.array([1, 2]), 2),
    "squared_difference": lambda: tf.squared_difference(X, 1.0),
    "where_rows": lambda: tf.where(np.array([True, False]), X, tf.zeros_like(X)),
    "confusion": lambda: tf.confusion_matrix(CLS, PRED_CLS, num_classes=3),
    "avgpool1d_same": lambda: tf.layers.average_pooling1d(POOL_IN, 2, 2, padding="same"),
    "maxpool1d": lambda: tf.layers.max_pooling1d(POOL_IN, 2, 1),
}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_pairs_match_tf(name):
    pair = METRICS[name]()
    value, update_op = pair
    assert isinstance(pair.metric, est.metrics.Metric)
    np.testing.assert_allclose(value, EXPECTED_METRICS["metric_" + name], rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(update_op, value)


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_match_tf(name):
    np.testing.assert_allclose(np.asarray(OPS[name]()), EXPECTED_OPS[name], rtol=2e-6, atol=1e-6)


def _run(model_fn, tmp_path, features):
    estimator = est.Estimator(model_fn, str(tmp_path))
    return next(estimator.predict(lambda: features, yield_single_examples=False))


def test_conv1d_layer_matches_tf_and_names_its_variables(tmp_path):
    names = {}

    def model_fn(features, mode):
        kernel = np.arange(12, dtype=np.float32).reshape(3, 2, 2) / 10.0
        out = tf.layers.conv1d(
            features["x"],
            2,
            3,
            padding="same",
            kernel_initializer=tf.constant_initializer(kernel),
            bias_initializer=tf.constant_initializer(0.5),
        )
        tf.layers.conv1d(features["x"], 4, 2)  # a second one: conv1d_1
        names.update(
            {
                v: tuple(np.shape(x))
                for v, x in zip(_trainable_names(), tf.trainable_variables(), strict=True)
            }
        )
        return tf.estimator.EstimatorSpec(mode, predictions={"y": out})

    out = _run(model_fn, tmp_path, {"x": SEQ})["y"]
    # TF 2.15.1: tf.layers.conv1d(SEQ, 2, 3, padding="same", kernel_initializer=
    # constant(arange(12).reshape(3, 2, 2) / 10), bias_initializer=constant(0.5)).
    np.testing.assert_allclose(out, EXPECTED_OPS["conv1d"], rtol=2e-6)
    assert names == {
        "conv1d/kernel": (3, 2, 2),
        "conv1d/bias": (2,),
        "conv1d_1/kernel": (2, 2, 4),
        "conv1d_1/bias": (4,),
    }


def _trainable_names():
    from estimator.model.variables import current_frame

    frame = current_frame()
    return [frame.by_id[id(v)] for v in tf.trainable_variables()]


def test_layer_objects_share_variables_and_follow_tf_names(tmp_path):
    def model_fn(features, labels, mode):
        shared = tf.layers.Dense(3, name="shared")
        a = shared(features["x"])
        b = shared(features["x"] * 2.0)
        c = tf.layers.Dense(2)(a)  # auto-named: dense
        d = tf.layers.dense(c, 1)  # dense_1
        with tf.variable_scope("tower"):
            e = tf.layers.conv2d(tf.reshape(features["x"], [-1, 2, 2, 1]), 2, 1)
        predictions = {"a": a, "b": b, "d": d, "e": tf.layers.flatten(e)}
        loss = tf.reduce_sum(d) + tf.reduce_sum(e)
        train_op = tf.train.GradientDescentOptimizer(0.0).minimize(loss)
        return tf.estimator.EstimatorSpec(mode, predictions, loss, train_op)

    estimator = tf.estimator.Estimator(model_fn, str(tmp_path))
    x = np.ones((1, 4), np.float32)
    estimator.train(lambda: ({"x": x}, None), steps=1)
    out = next(estimator.predict(lambda: {"x": x}))
    # b is the same layer on 2x: linear with a zero bias, so exactly twice a.
    np.testing.assert_allclose(out["b"], 2 * out["a"], rtol=1e-6)
    assert set(estimator.get_variable_names()) >= {
        "shared/kernel",
        "shared/bias",
        "dense/kernel",
        "dense_1/kernel",
        "tower/conv2d/kernel",
        "tower/conv2d/bias",
    }
    assert estimator.get_variable_value("shared/kernel").shape == (4, 3)


def test_name_argument_names_values_for_logging_hooks(tmp_path, caplog):
    def model_fn(features, labels, mode):
        logits = tf.layers.dense(features["x"], 3)
        tf.nn.softmax(logits, name="softmax_tensor")
        tf.identity(tf.reduce_sum(logits), name="total")
        with tf.variable_scope("scope"):
            tf.reduce_mean(logits, name="mean")
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    hook = tf.train.LoggingTensorHook(
        {"p": "softmax_tensor", "t": "total:0", "m": "scope/mean"}, every_n_iter=1
    )
    estimator = tf.estimator.Estimator(model_fn, str(tmp_path))
    x = np.ones((2, 4), np.float32)
    with caplog.at_level("INFO"):
        estimator.train(lambda: ({"x": x}, np.array([0, 1], np.int32)), steps=1, hooks=[hook])
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "p = [[" in logged and "t = " in logged and "m = " in logged


def test_static_shapes_and_dtypes():
    x = jnp.zeros((4, 3))
    shape = tf.shape(x)
    assert shape.tolist() == [4, 3] and isinstance(shape, np.ndarray)
    assert tf.reshape(x, [tf.shape(x)[0], -1]).shape == (4, 3)  # a static integer
    assert tf.cast(x, tf.int64).dtype == jax.dtypes.canonicalize_dtype(np.int64)
    assert tf.argmax(x, 1).dtype == jax.dtypes.canonicalize_dtype(np.int64)
    assert tf.constant(1.5).dtype == jnp.float32
    assert isinstance(x, tf.Tensor)
    assert tf.placeholder(tf.float32, [None, 4]) == jax.ShapeDtypeStruct((None, 4), jnp.float32)


def test_string_values_stay_on_the_host():
    # What input functions do with string features: NumPy, as jax arrays hold numbers only.
    words = np.array([b"a", b"bb", b"a"], dtype=object)
    np.testing.assert_array_equal(tf.equal(words, b"a"), [True, False, True])
    assert tf.reshape(words, [3, 1]).shape == (3, 1)
    np.testing.assert_array_equal(tf.concat([words, words], 0)[3:], words)


def test_control_flow_and_collections(tmp_path):
    def model_fn(features, mode):
        x = features["x"]
        y = tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: x - 1.0)
        z = tf.map_fn(lambda row: tf.reduce_sum(row), x)
        s = tf.scan(lambda acc, v: acc + v, tf.range(1.0, 4.0), initializer=0.0)
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            y = tf.identity(y)
        return tf.estimator.EstimatorSpec(mode, predictions={"y": y, "z": z, "s": s[None]})

    out = _run(model_fn, tmp_path, {"x": np.array([[1.0, 2.0]], np.float32)})
    np.testing.assert_allclose(out["y"], [[2.0, 4.0]])  # sum 3 > 0: x * 2
    np.testing.assert_allclose(out["z"], [3.0])
    np.testing.assert_allclose(out["s"], [[1.0, 3.0, 6.0]])  # running sums of 1, 2, 3


def test_assign_updates_non_trainable_state(tmp_path):
    def model_fn(features, labels, mode):
        count = tf.get_variable("count", [], initializer=tf.zeros_initializer(), trainable=False)
        tf.assign_add(count, 1.0)
        w = tf.get_variable("w", [1], initializer=tf.zeros_initializer)  # the class: TF's form
        loss = tf.reduce_sum(tf.square(w - 1.0))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    estimator = tf.estimator.Estimator(model_fn, str(tmp_path))
    estimator.train(lambda: ({"x": np.zeros((1, 1), np.float32)}, None), steps=3)
    assert float(estimator.get_variable_value("count")) == 3.0

    def bad(features, labels, mode):
        tf.assign_add(tf.train.get_global_step(), 1)

    with pytest.raises(ValueError, match="the Estimator advances the global step by itself"):
        tf.estimator.Estimator(bad, str(tmp_path / "b")).train(lambda: {"x": X}, steps=1)


def test_constant_with_a_shape_follows_tf1():
    # TF 1's tf.constant: one value fills the shape, a shorter list is padded with its last
    # value, a longer one is refused.
    np.testing.assert_array_equal(tf.constant(1.0, shape=[2, 2]), np.ones((2, 2)))
    np.testing.assert_array_equal(tf.constant([1, 2, 3, 4], shape=[2, 2]), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(tf.constant([1, 2], shape=[2, 2]), [[1, 2], [2, 2]])
    with pytest.raises(ValueError, match="Too many elements provided. Needed at most 2"):
        tf.constant([1, 2, 3], shape=[2])


def test_serving_input_receiver_fn_with_placeholders_exports(tmp_path):
    def model_fn(features, labels, mode):
        logits = tf.layers.dense(features["x"], 2, kernel_initializer=tf.ones_initializer())
        predictions = {"probabilities": tf.nn.softmax(logits), "classes": tf.argmax(logits, 1)}
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=predictions)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.GradientDescentOptimizer(0.0).minimize(loss)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def serving_input_receiver_fn():  # TF 1's form
        x = tf.placeholder(dtype=tf.float32, shape=[None, 3], name="x")
        return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})

    estimator = tf.estimator.Estimator(model_fn, str(tmp_path / "model"))
    estimator.train(lambda: ({"x": np.ones((2, 3), np.float32)}, np.zeros(2, np.int32)), steps=1)
    path = estimator.export_saved_model(str(tmp_path / "export"), serving_input_receiver_fn)
    served = est.export.load(path).signatures["serving_default"]
    out = served(x=np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 1.0]], np.float32))
    # ones kernel, zero bias, learning rate 0: both logits equal, probabilities 1/2.
    np.testing.assert_allclose(out["probabilities"], np.full((2, 2), 0.5), rtol=1e-6)


def test_logging_goes_to_the_tensorflow_logger(caplog):
    with caplog.at_level("INFO", logger="tensorflow"):
        tf.logging.info("step %d", 3)
        tf.logging.warn("careful")
    assert [r.getMessage() for r in caplog.records if r.name == "tensorflow"] == [
        "step 3",
        "careful",
    ]
    before = {name: logging.getLogger(name).level for name in ("tensorflow", "estimator")}
    try:
        tf.logging.set_verbosity(tf.logging.ERROR)
        assert tf.logging.get_verbosity() == tf.logging.ERROR == logging.ERROR
        assert logging.getLogger("estimator").level == logging.ERROR  # the Estimator's too
    finally:
        for name, level in before.items():
            logging.getLogger(name).setLevel(level)


def test_sparse_softmax_cross_entropy_needs_no_gather_and_gives_nan_outside_the_classes():
    logits = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]], np.float32)

    def loss(x, labels):
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=x).sum()

    # The label's logit is a masked sum: no gather forward, no scatter in the gradient.
    jaxpr = str(jax.make_jaxpr(jax.grad(loss))(logits, np.array([2, 0])))
    assert "gather" not in jaxpr and "scatter" not in jaxpr
    # log(e^1 + e^2 + e^0.5) - 0.5 = 2.4644 - 0.5 (row 0, label 2).
    out = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=np.array([2, 3]), logits=logits)
    np.testing.assert_allclose(out[0], np.log(np.exp([1.0, 2.0, 0.5]).sum()) - 0.5, rtol=1e-6)
    assert np.isnan(out[1])  # label 3 of 3 classes (TF's GPU kernel: NaN; its CPU kernel raises)
