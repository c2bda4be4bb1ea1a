"""``estimator.compat.v1.losses``: TF 1's losses, weights and reductions, against TF 2.15.1.

``EXPECTED`` was printed by this script (tensorflow-cpu 2.15.1, ``tf.compat.v1`` graph mode;
the inputs are the module constants below)::

    R = tf.losses.Reduction
    for reduction in (R.SUM_BY_NONZERO_WEIGHTS, R.SUM, R.MEAN, R.SUM_OVER_BATCH_SIZE, R.NONE):
        for w in (1.0, W_VEC):
            tf.losses.mean_squared_error(LABELS, PREDS, w, reduction=reduction)
            tf.losses.absolute_difference(LABELS, PREDS, w, reduction=reduction)
            tf.losses.huber_loss(LABELS, PREDS, w, delta=1.0, reduction=reduction)
            tf.losses.log_loss(BIN_LABELS, PROBS, w, reduction=reduction)
            tf.losses.hinge_loss(BIN_LABELS, BIN_LOGITS, w, reduction=reduction)
            tf.losses.sigmoid_cross_entropy(BIN_LABELS, BIN_LOGITS, w, label_smoothing=0.1, ...)
            tf.losses.softmax_cross_entropy(ONEHOT, LOGITS, w, label_smoothing=0.2)  # W_VEC[:, 0]
            tf.losses.sparse_softmax_cross_entropy(IDS, LOGITS, w, reduction=reduction)
    tf.losses.cosine_distance(tf.nn.l2_normalize(LOGITS, 1), tf.nn.l2_normalize(ONEHOT, 1), axis=1)
    tf.losses.mean_pairwise_squared_error([[1, 2, 3], [0, 1, 5]], [[1.5, 2, 2], [1, 1, 1]],
                                          [[1.0], [0.5]])
    tf.losses.mean_squared_error(LABELS, PREDS, 0.0)   # every weight 0: 0, not NaN
"""

import jax.numpy as jnp
import numpy as np
import pytest

import estimator as est
import estimator.compat.v1 as tf

LABELS = np.array([[1.0], [0.0], [2.0], [-1.0]], np.float32)
PREDS = np.array([[0.5], [0.2], [3.5], [-1.0]], np.float32)
W_VEC = np.array([[1.0], [0.0], [2.0], [0.5]], np.float32)
LOGITS = np.array(
    [[2.0, -1.0, 0.5], [0.1, 0.2, 0.3], [-1.0, 3.0, 0.0], [1.0, 1.0, 1.0]], np.float32
)
IDS = np.array([0, 2, 1, 1], np.int32)
ONEHOT = np.eye(3, dtype=np.float32)[IDS]
BIN_LABELS = np.array([[1.0], [0.0], [1.0], [0.0]], np.float32)
BIN_LOGITS = np.array([[1.5], [-0.3], [-2.0], [4.0]], np.float32)
PROBS = np.array([[0.9], [0.2], [0.4], [0.7]], np.float32)

EXPECTED = {
    ("mean_squared_error", "SUM_BY_NONZERO_WEIGHTS", "w1"): 0.6349999904632568,
    ("absolute_difference", "SUM_BY_NONZERO_WEIGHTS", "w1"): 0.550000011920929,
    ("huber_loss", "SUM_BY_NONZERO_WEIGHTS", "w1"): 0.2862499952316284,
    ("log_loss", "SUM_BY_NONZERO_WEIGHTS", "w1"): 0.6121916770935059,
    ("hinge_loss", "SUM_BY_NONZERO_WEIGHTS", "w1"): 2.174999952316284,
    ("sigmoid_cross_entropy", "SUM_BY_NONZERO_WEIGHTS", "w1"): 1.6727116107940674,
    ("softmax_cross_entropy", "SUM_BY_NONZERO_WEIGHTS", "w1"): 0.7986042499542236,
    ("sparse_softmax_cross_entropy", "SUM_BY_NONZERO_WEIGHTS", "w1"): 0.6019375920295715,
    ("mean_squared_error", "SUM_BY_NONZERO_WEIGHTS", "wvec"): 1.5833333730697632,
    ("absolute_difference", "SUM_BY_NONZERO_WEIGHTS", "wvec"): 1.1666666269302368,
    ("huber_loss", "SUM_BY_NONZERO_WEIGHTS", "wvec"): 0.7083333134651184,
    ("log_loss", "SUM_BY_NONZERO_WEIGHTS", "wvec"): 0.8466425538063049,
    ("hinge_loss", "SUM_BY_NONZERO_WEIGHTS", "wvec"): 2.8333332538604736,
    ("sigmoid_cross_entropy", "SUM_BY_NONZERO_WEIGHTS", "wvec"): 2.0797812938690186,
    ("softmax_cross_entropy", "SUM_BY_NONZERO_WEIGHTS", "wvec"): 0.7185729146003723,
    ("sparse_softmax_cross_entropy", "SUM_BY_NONZERO_WEIGHTS", "wvec"): 0.30746176838874817,
    ("mean_squared_error", "SUM", "w1"): 2.5399999618530273,
    ("absolute_difference", "SUM", "w1"): 2.200000047683716,
    ("huber_loss", "SUM", "w1"): 1.1449999809265137,
    ("log_loss", "SUM", "w1"): 2.4487667083740234,
    ("hinge_loss", "SUM", "w1"): 8.699999809265137,
    ("sigmoid_cross_entropy", "SUM", "w1"): 6.6908464431762695,
    ("softmax_cross_entropy", "SUM", "w1"): 3.1944169998168945,
    ("sparse_softmax_cross_entropy", "SUM", "w1"): 2.407750368118286,
    ("mean_squared_error", "SUM", "wvec"): 4.75,
    ("absolute_difference", "SUM", "wvec"): 3.5,
    ("huber_loss", "SUM", "wvec"): 2.125,
    ("log_loss", "SUM", "wvec"): 2.5399277210235596,
    ("hinge_loss", "SUM", "wvec"): 8.5,
    ("sigmoid_cross_entropy", "SUM", "wvec"): 6.239344120025635,
    ("softmax_cross_entropy", "SUM", "wvec"): 2.1557188034057617,
    ("sparse_softmax_cross_entropy", "SUM", "wvec"): 0.9223853349685669,
    ("mean_squared_error", "MEAN", "w1"): 0.6349999904632568,
    ("absolute_difference", "MEAN", "w1"): 0.550000011920929,
    ("huber_loss", "MEAN", "w1"): 0.2862499952316284,
    ("log_loss", "MEAN", "w1"): 0.6121916770935059,
    ("hinge_loss", "MEAN", "w1"): 2.174999952316284,
    ("sigmoid_cross_entropy", "MEAN", "w1"): 1.6727116107940674,
    ("softmax_cross_entropy", "MEAN", "w1"): 0.7986042499542236,
    ("sparse_softmax_cross_entropy", "MEAN", "w1"): 0.6019375920295715,
    ("mean_squared_error", "MEAN", "wvec"): 1.3571428060531616,
    ("absolute_difference", "MEAN", "wvec"): 1.0,
    ("huber_loss", "MEAN", "wvec"): 0.6071428656578064,
    ("log_loss", "MEAN", "wvec"): 0.7256936430931091,
    ("hinge_loss", "MEAN", "wvec"): 2.4285714626312256,
    ("sigmoid_cross_entropy", "MEAN", "wvec"): 1.7826697826385498,
    ("softmax_cross_entropy", "MEAN", "wvec"): 0.6159196496009827,
    ("sparse_softmax_cross_entropy", "MEAN", "wvec"): 0.263538658618927,
    ("mean_squared_error", "SUM_OVER_BATCH_SIZE", "w1"): 0.6349999904632568,
    ("absolute_difference", "SUM_OVER_BATCH_SIZE", "w1"): 0.550000011920929,
    ("huber_loss", "SUM_OVER_BATCH_SIZE", "w1"): 0.2862499952316284,
    ("log_loss", "SUM_OVER_BATCH_SIZE", "w1"): 0.6121916770935059,
    ("hinge_loss", "SUM_OVER_BATCH_SIZE", "w1"): 2.174999952316284,
    ("sigmoid_cross_entropy", "SUM_OVER_BATCH_SIZE", "w1"): 1.6727116107940674,
    ("softmax_cross_entropy", "SUM_OVER_BATCH_SIZE", "w1"): 0.7986042499542236,
    ("sparse_softmax_cross_entropy", "SUM_OVER_BATCH_SIZE", "w1"): 0.6019375920295715,
    ("mean_squared_error", "SUM_OVER_BATCH_SIZE", "wvec"): 1.1875,
    ("absolute_difference", "SUM_OVER_BATCH_SIZE", "wvec"): 0.875,
    ("huber_loss", "SUM_OVER_BATCH_SIZE", "wvec"): 0.53125,
    ("log_loss", "SUM_OVER_BATCH_SIZE", "wvec"): 0.6349819302558899,
    ("hinge_loss", "SUM_OVER_BATCH_SIZE", "wvec"): 2.125,
    ("sigmoid_cross_entropy", "SUM_OVER_BATCH_SIZE", "wvec"): 1.5598360300064087,
    ("softmax_cross_entropy", "SUM_OVER_BATCH_SIZE", "wvec"): 0.5389297008514404,
    ("sparse_softmax_cross_entropy", "SUM_OVER_BATCH_SIZE", "wvec"): 0.23059633374214172,
    ("mean_squared_error", "NONE", "w1"): [[0.25], [0.04000000283122063], [2.25], [0.0]],
    ("absolute_difference", "NONE", "w1"): [[0.5], [0.20000000298023224], [1.5], [0.0]],
    ("huber_loss", "NONE", "w1"): [[0.125], [0.020000001415610313], [1.0], [0.0]],
    ("log_loss", "NONE", "w1"): [
        [0.10536041110754013],
        [0.22314338386058807],
        [0.9162905216217041],
        [1.2039724588394165],
    ],
    ("hinge_loss", "NONE", "w1"): [[0.0], [0.699999988079071], [3.0], [5.0]],
    ("sigmoid_cross_entropy", "NONE", "w1"): [
        [0.27641332149505615],
        [0.5693552494049072],
        [2.026927947998047],
        [3.8181498050689697],
    ],
    ("softmax_cross_entropy", "NONE", "w1"): [
        0.5413113236427307,
        1.0219428539276123,
        0.5325506329536438,
        1.0986124277114868,
    ],
    ("sparse_softmax_cross_entropy", "NONE", "w1"): [
        0.24131132662296295,
        1.0019428730010986,
        0.06588391214609146,
        1.0986123085021973,
    ],
    ("mean_squared_error", "NONE", "wvec"): [[0.25], [0.0], [4.5], [0.0]],
    ("absolute_difference", "NONE", "wvec"): [[0.5], [0.0], [3.0], [0.0]],
    ("huber_loss", "NONE", "wvec"): [[0.125], [0.0], [2.0], [0.0]],
    ("log_loss", "NONE", "wvec"): [
        [0.10536041110754013],
        [0.0],
        [1.8325810432434082],
        [0.6019862294197083],
    ],
    ("hinge_loss", "NONE", "wvec"): [[0.0], [0.0], [6.0], [2.5]],
    ("sigmoid_cross_entropy", "NONE", "wvec"): [
        [0.27641332149505615],
        [0.0],
        [4.053855895996094],
        [1.9090749025344849],
    ],
    ("softmax_cross_entropy", "NONE", "wvec"): [
        0.5413113236427307,
        0.0,
        1.0651012659072876,
        0.5493062138557434,
    ],
    ("sparse_softmax_cross_entropy", "NONE", "wvec"): [
        0.24131132662296295,
        0.0,
        0.13176782429218292,
        0.5493061542510986,
    ],
    ("cosine_distance",): 0.19982782006263733,
    ("mean_pairwise_squared_error",): 8.166666984558105,
    ("zero_weights",): 0.0,
}

R = tf.losses.Reduction
REDUCTIONS = {
    "SUM_BY_NONZERO_WEIGHTS": R.SUM_BY_NONZERO_WEIGHTS,
    "SUM": R.SUM,
    "MEAN": R.MEAN,
    "SUM_OVER_BATCH_SIZE": R.SUM_OVER_BATCH_SIZE,
    "NONE": R.NONE,
}


def _loss(name, w, wname, reduction):
    cases = {
        "mean_squared_error": lambda: tf.losses.mean_squared_error(
            LABELS, PREDS, w, reduction=reduction
        ),
        "absolute_difference": lambda: tf.losses.absolute_difference(
            LABELS, PREDS, w, reduction=reduction
        ),
        "huber_loss": lambda: tf.losses.huber_loss(
            LABELS, PREDS, w, delta=1.0, reduction=reduction
        ),
        "log_loss": lambda: tf.losses.log_loss(BIN_LABELS, PROBS, w, reduction=reduction),
        "hinge_loss": lambda: tf.losses.hinge_loss(BIN_LABELS, BIN_LOGITS, w, reduction=reduction),
        "sigmoid_cross_entropy": lambda: tf.losses.sigmoid_cross_entropy(
            BIN_LABELS, BIN_LOGITS, w, label_smoothing=0.1, reduction=reduction
        ),
        "softmax_cross_entropy": lambda: tf.losses.softmax_cross_entropy(
            ONEHOT,
            LOGITS,
            w if wname == "w1" else W_VEC[:, 0],
            label_smoothing=0.2,
            reduction=reduction,
        ),
        "sparse_softmax_cross_entropy": lambda: tf.losses.sparse_softmax_cross_entropy(
            IDS, LOGITS, w, reduction=reduction
        ),
    }
    return cases[name]()


@pytest.mark.parametrize(
    "key", sorted(k for k in EXPECTED if len(k) == 3), ids=lambda k: "-".join(k)
)
def test_loss_with_weights_and_reduction_matches_tf(key):
    name, reduction, wname = key
    w = 1.0 if wname == "w1" else W_VEC
    value = _loss(name, w, wname, REDUCTIONS[reduction])
    np.testing.assert_allclose(np.asarray(value), EXPECTED[key], rtol=2e-6, atol=1e-7)
    if reduction != "NONE":
        assert value.shape == () and value.dtype == jnp.float32


def test_other_losses_match_tf():
    distance = tf.losses.cosine_distance(
        tf.nn.l2_normalize(LOGITS, 1), tf.nn.l2_normalize(ONEHOT, 1), axis=1
    )
    np.testing.assert_allclose(distance, EXPECTED[("cosine_distance",)], rtol=2e-6)
    pairwise = tf.losses.mean_pairwise_squared_error(
        np.array([[1.0, 2.0, 3.0], [0.0, 1.0, 5.0]], np.float32),
        np.array([[1.5, 2.0, 2.0], [1.0, 1.0, 1.0]], np.float32),
        np.array([[1.0], [0.5]], np.float32),
    )
    np.testing.assert_allclose(pairwise, EXPECTED[("mean_pairwise_squared_error",)], rtol=2e-6)
    zero = tf.losses.mean_squared_error(LABELS, PREDS, 0.0)
    assert float(zero) == EXPECTED[("zero_weights",)] == 0.0


def test_loss_errors_have_tfs_messages():
    with pytest.raises(ValueError, match="weights can not be broadcast to values. values.rank=2"):
        tf.losses.mean_squared_error(LABELS, PREDS, weights=np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"Shapes \(4,\) and \(4, 1\) are incompatible"):
        tf.losses.mean_squared_error(LABELS, PREDS[:, 0])
    with pytest.raises(ValueError, match="Argument `labels` must not be None"):
        tf.losses.absolute_difference(None, PREDS)
    with pytest.raises(ValueError, match="Invalid Reduction Key bogus"):
        tf.losses.compute_weighted_loss(PREDS, reduction="bogus")
    with pytest.raises(ValueError, match="You must specify argument `axis`"):
        tf.losses.cosine_distance(LABELS, PREDS)


def test_losses_collect_into_get_total_loss(tmp_path):
    # TF: each tf.losses.* adds to GraphKeys.LOSSES; get_total_loss adds the regularization
    # losses (here 0.5 * sum(w^2) from the dense layer's kernel_regularizer).
    seen = {}

    def model_fn(features, labels, mode):
        logits = tf.layers.dense(
            features["x"],
            1,
            kernel_initializer=tf.ones_initializer(),
            kernel_regularizer=lambda w: 0.5 * tf.reduce_sum(tf.square(w)),
        )
        target = tf.ones_like(logits)
        mse = tf.losses.mean_squared_error(target, logits)
        abs_diff = tf.losses.absolute_difference(target, logits, loss_collection=None)
        total = tf.losses.get_total_loss()
        seen.update(
            n_losses=len(tf.losses.get_losses()),
            n_reg=len(tf.losses.get_regularization_losses()),
            n_collection=len(tf.get_collection(tf.GraphKeys.LOSSES)),
        )
        predictions = {"total": total[None], "mse": mse[None], "abs": abs_diff[None]}
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)

    x = np.array([[1.0, 2.0]], np.float32)
    estimator = est.Estimator(model_fn, str(tmp_path))
    out = next(estimator.predict(lambda: {"x": x}, yield_single_examples=False))
    # logits = 1 + 2 = 3 (ones kernel, zero bias): mse = (3 - 1)^2 = 4, |3 - 1| = 2; the
    # regularizer 0.5 * (1 + 1) = 1; total = 4 + 1 (abs_diff was kept out of the collection).
    assert seen == {"n_losses": 1, "n_reg": 1, "n_collection": 1}
    np.testing.assert_allclose(out["mse"], [4.0])
    np.testing.assert_allclose(out["abs"], [2.0])
    np.testing.assert_allclose(out["total"], [5.0])
