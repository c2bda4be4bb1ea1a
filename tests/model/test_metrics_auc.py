"""Tests of estimator.metrics.auc and precision/recall_at_thresholds.

Expected values come from hand arithmetic (in comments) and from an independent NumPy
reference below: it compares every prediction with every threshold (a [T, N] matrix, as
TF 2.15's ``metrics_impl._confusion_matrix_at_thresholds`` does) and sums areas in float64
with explicit loops, where the library uses binary search, histograms and vector code.
The reference was checked against TF 2.15.1 on these and other inputs.
"""

import logging
import math

import jax
import numpy as np
import pytest

from estimator import metrics

EPS = 1e-6  # tf.compat.v1.metrics.auc's epsilon against division by zero


# ------------------------------------------------------------------ NumPy reference


def ref_thresholds(num_thresholds=200, thresholds=None):
    """TF's placement: -1e-7, i/(T-1) for i = 1..T-2 (or the sorted given ones), 1+1e-7."""
    if thresholds is None:
        inner = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    else:
        inner = sorted(thresholds)
    return np.array([-1e-7, *inner, 1 + 1e-7], np.float32)


def ref_counts(labels, predictions, weights, thresholds, keras_buckets=False):
    """(tp, fp, tn, fn) per threshold, float64."""
    y = np.asarray(labels).reshape(-1) != 0
    p = np.asarray(predictions, np.float32).reshape(-1)
    w = np.ones(p.shape) if weights is None else np.asarray(weights, np.float64)
    w = np.broadcast_to(w.reshape(-1) if w.ndim else w, p.shape)
    n = len(thresholds)
    if keras_buckets:
        # tf.keras (evenly spaced thresholds): bucket = max(ceil(p·(T-1)) - 1, 0) in
        # float32 on p clipped to [0, 1]; positive at thresholds 0..bucket.
        bucket = np.maximum(np.ceil(np.clip(p, 0, 1) * np.float32(n - 1)) - 1, 0)
        positive = np.arange(n)[:, None] <= bucket[None, :]
    else:
        positive = p[None, :] > thresholds[:, None]  # [T, N], compared in float32
    return (
        (positive & y) @ w,
        (positive & ~y) @ w,
        (~positive & ~y) @ w,
        (~positive & y) @ w,
    )


def ref_interpolated_pr(tp, fp, fn):
    """Davis & Goadrich (2006) PR area, TF's closed form, one interval at a time."""
    area = 0.0
    for i in range(len(tp) - 1):
        dtp, p_a, p_b = tp[i] - tp[i + 1], tp[i] + fp[i], tp[i + 1] + fp[i + 1]
        slope = dtp / (p_a - p_b) if p_a - p_b > 0 else 0.0
        intercept = tp[i + 1] - slope * p_b
        ratio = p_a / p_b if p_a > 0 and p_b > 0 else 1.0
        positives = tp[i + 1] + fn[i + 1]
        if positives > 0:
            area += slope * (dtp + intercept * math.log(ratio)) / positives
    return area


def ref_auc(labels, predictions, weights=None, num_thresholds=200, curve="ROC",
            method="trapezoidal", thresholds=None):  # fmt: skip
    thr = ref_thresholds(num_thresholds, thresholds)
    keras = method == "interpolation"
    even = thresholds is None or np.allclose(
        [0, *sorted(thresholds), 1], np.linspace(0, 1, len(thresholds) + 2), atol=1e-7
    )
    tp, fp, tn, fn = ref_counts(labels, predictions, weights, thr, keras and even)
    if curve == "PR" and method in ("careful_interpolation", "interpolation"):
        return ref_interpolated_pr(tp, fp, fn)
    if keras:  # divide_no_nan, no epsilon
        ratio = lambda a, b: np.divide(a, b, out=np.zeros_like(a), where=b != 0)  # noqa: E731
        x, y = ratio(fp, fp + tn), ratio(tp, tp + fn)
    else:
        recall = (tp + EPS) / (tp + fn + EPS)
        x, y = (
            (fp / (fp + tn + EPS), recall)
            if curve == "ROC"
            else (recall, (tp + EPS) / (tp + fp + EPS))
        )
    area = 0.0
    for i in range(len(thr) - 1):
        height = {"minoring": min, "majoring": max}.get(method, lambda a, b: (a + b) / 2)
        area += (x[i] - x[i + 1]) * height(y[i], y[i + 1])
    return area


# --------------------------------------------------------------------- test cases


def _cases():
    rng = np.random.default_rng(7)
    n = 24
    y = (rng.random(n) < 0.4).astype(np.float32)
    p = rng.random(n).astype(np.float32)
    w = (rng.random(n) * 3).astype(np.float32)
    w[::6] = 0
    # Predictions exactly on thresholds i/199: for 31, 53, 62, 103, 106 Keras' bucket
    # arithmetic and TF v1's comparison disagree; plus 0, 0.5 and 1.
    k = np.array([31, 53, 62, 103, 106, 1, 2, 99, 100, 150, 197, 198, 31, 53, 62, 103, 106])
    ties = np.concatenate([k / 199, [0.0, 0.5, 1.0, 0.0, 0.5, 1.0, 1 / 6]]).astype(np.float32)
    tie_y = (rng.random(n) < 0.5).astype(np.float32)
    return {
        "random": (y, p, None),
        "weighted, [B, 1] labels and weights": (y[:, None], p, w[:, None]),
        "ties at thresholds": (tie_y, ties, None),
        "ties, weighted": (tie_y, ties, w),
        "predictions only 0 and 1": (y, np.round(p), w),
        "few distinct predictions": (y, np.round(p * 4) / 4, None),
        "all positive": (np.ones(n), p, w),
        "all negative": (np.zeros(n), p, None),
        "all weights zero": (y, p, np.zeros(n)),
    }


CASES = _cases()
METHODS = ["trapezoidal", "careful_interpolation", "minoring", "majoring", "interpolation"]


@pytest.mark.parametrize(
    "case, num_thresholds",
    [(case, 200) for case in CASES] + [("random", 7), ("ties at thresholds", 7)],
)
def test_auc_matches_reference_for_every_curve_and_method(case, num_thresholds):
    # With 7 thresholds (i/6) the tie case has a prediction exactly on one, 1/6.
    labels, predictions, weights = CASES[case]
    for curve in ("ROC", "PR"):
        for method in METHODS:
            got = metrics.auc(labels, predictions, weights, num_thresholds, curve=curve,
                              summation_method=method).compute()  # fmt: skip
            want = ref_auc(labels, predictions, weights, num_thresholds, curve, method)
            np.testing.assert_allclose(got, want, atol=1e-6, rtol=0, err_msg=f"{curve} {method}")


@pytest.mark.parametrize("thresholds", [[0.75, 0.25, 0.5], [0.1, 0.35, 0.3, 0.3]])
@pytest.mark.parametrize("case", ["random", "ties, weighted", "all positive"])
def test_auc_with_given_thresholds_matches_reference(case, thresholds):
    # [0.25, 0.5, 0.75] is evenly spaced: Keras uses its bucket arithmetic; the other
    # list (with a duplicate) is compared directly. num_thresholds is then ignored.
    labels, predictions, weights = CASES[case]
    for curve in ("ROC", "PR"):
        for method in ("careful_interpolation", "majoring", "interpolation"):
            m = metrics.auc(labels, predictions, weights, 3, curve=curve,
                            summation_method=method, thresholds=thresholds)  # fmt: skip
            assert m.num_thresholds == len(thresholds) + 2
            want = ref_auc(labels, predictions, weights, None, curve, method, thresholds)
            np.testing.assert_allclose(m.compute(), want, atol=1e-6, err_msg=f"{curve} {method}")


@pytest.mark.parametrize("num_thresholds", [3, 7, 200, 1001])
def test_positions_are_exact_at_and_next_to_every_threshold(num_thresholds):
    # Every threshold, the float32 values just below and above it, and values outside
    # [0, 1] (reachable under jit, where the range is not checked): the counts must equal
    # TF's comparison "prediction > threshold" exactly. NaN is never positive.
    thr = ref_thresholds(num_thresholds)
    p = np.concatenate(
        [thr, np.nextafter(thr, np.float32(-2)), np.nextafter(thr, np.float32(2)),
         np.float32([0, 1, -0.5, 1.5, -1e-8, np.nan])]
    ).astype(np.float32)  # fmt: skip
    labels = np.ones(p.size)
    tp = jax.jit(lambda p: metrics.auc(labels, p, None, num_thresholds).true_positives)(p)
    np.testing.assert_array_equal(tp, (p[None, :] > thr[:, None]).sum(1))


def test_auc_hand_computed_three_thresholds():
    # tf.keras.metrics.AUC's docstring example. Thresholds [-1e-7, 0.5, 1+1e-7]; a
    # prediction is positive when > threshold (0.5 is not > 0.5):
    #   tp = [2, 1, 0], fp = [2, 0, 0], tn = [0, 2, 2], fn = [0, 1, 2]
    labels, predictions = [0, 0, 1, 1], [0.0, 0.5, 0.3, 0.9]
    # Keras: recall = [1, 1/2, 0], fpr = [1, 0, 0]; area = (1 - 0)·(1 + 1/2)/2 = 0.75.
    keras = metrics.auc(labels, predictions, None, 3, summation_method="interpolation")
    np.testing.assert_allclose(keras.compute(), 0.75, rtol=1e-7)
    np.testing.assert_array_equal(keras.true_positives, [2, 1, 0])
    np.testing.assert_array_equal(keras.false_positives, [2, 0, 0])
    np.testing.assert_array_equal(keras.true_negatives, [0, 2, 2])
    np.testing.assert_array_equal(keras.false_negatives, [0, 1, 2])
    # TF v1 adds 1e-6: recall = [1, (1+e)/(2+e), e/(2+e)], fpr = [2/(2+e), 0, 0].
    v1 = metrics.auc(labels, predictions, None, 3)
    e = EPS
    np.testing.assert_allclose(v1.compute(), 2 / (2 + e) * (1 + (1 + e) / (2 + e)) / 2, rtol=1e-6)
    # Minoring takes the lower height 1/2, majoring the upper 1 (times width 2/(2+e)).
    minoring = metrics.auc(labels, predictions, None, 3, summation_method="minoring")
    majoring = metrics.auc(labels, predictions, None, 3, summation_method="majoring")
    np.testing.assert_allclose(minoring.compute(), 2 / (2 + e) * (1 + e) / (2 + e), rtol=1e-6)
    np.testing.assert_allclose(majoring.compute(), 2 / (2 + e), rtol=1e-6)


def test_keras_bucketing_differs_from_v1_comparison_on_a_tie():
    # A positive at exactly float32(31/199) and a negative at 30.5/199. TF v1 compares:
    # both are > thresholds 0..30 and not > threshold 31, so they always tie and ROC AUC
    # is 0.5. Keras computes float32(31/199)·199 = 31.000002 -> ceil - 1 = bucket 31, so
    # at threshold 31 the positive is still positive and the negative is not: AUC 1.0.
    # From TF 2.15.1: tf.keras.metrics.AUC() -> 1.0 (ROC and PR);
    # tf.compat.v1.metrics.auc -> 0.5 (ROC trapezoidal and PR careful_interpolation).
    labels = [1.0, 0.0]
    predictions = np.array([31 / 199, 30.5 / 199], np.float32)
    assert float(metrics.auc(labels, predictions).compute()) == pytest.approx(0.5, abs=1e-6)
    pr_v1 = metrics.auc(labels, predictions, curve="PR", summation_method="careful_interpolation")
    assert float(pr_v1.compute()) == pytest.approx(0.5, abs=1e-6)
    for curve in ("ROC", "PR"):
        keras = metrics.auc(labels, predictions, curve=curve, summation_method="interpolation")
        assert float(keras.compute()) == pytest.approx(1.0, abs=1e-6)


def test_auc_of_one_class_or_no_weight():
    predictions = [0.2, 0.5, 0.9]
    for method in METHODS:
        # No negatives: fpr = 0 / (0 + 0 [+ 1e-6]) = 0 at every threshold: zero width.
        m = metrics.auc([1, 1, 1], predictions, None, 10, summation_method=method)
        assert float(m.compute()) == 0.0, method
        # No weight at all: every count is 0, so every ratio is 0 (or e/e = 1 with zero
        # width); the area is 0.
        m = metrics.auc([1, 0, 1], predictions, [0, 0, 0], 10, summation_method=method)
        assert float(m.compute()) == 0.0, method
    # No positives. TF v1: recall = (0 + e) / (0 + 0 + e) = 1 at every threshold and fpr
    # falls from 3 / (3 + e) to 0, so the area is 3 / (3 + e), about 1 (a TF v1 quirk).
    # Keras: recall = divide_no_nan(0, 0) = 0, area 0.
    v1 = metrics.auc([0, 0, 0], predictions, None, 10)
    np.testing.assert_allclose(v1.compute(), 3 / (3 + EPS), rtol=1e-6)
    keras = metrics.auc([0, 0, 0], predictions, None, 10, summation_method="interpolation")
    assert float(keras.compute()) == 0.0


def test_interpolation_clips_predictions_and_v1_checks_the_range():
    labels, predictions = [1, 0], [1.5, -0.2]
    # Keras clips to [1.0, 0.0]: perfectly separated, ROC AUC 1.
    keras = metrics.auc(labels, predictions, summation_method="interpolation")
    assert float(keras.compute()) == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match=r"auc: predictions must be in \[0, 1\]"):
        metrics.auc(labels, predictions)
    with pytest.raises(ValueError, match=r"recall_at_thresholds: predictions must be in \[0, 1\]"):
        metrics.recall_at_thresholds(labels, predictions, [0.5])
    # Under jit values cannot be checked: comparison as TF's, 1.5 > every threshold.
    traced = jax.jit(lambda y, p: metrics.auc(y, p).true_positives)(labels, predictions)
    np.testing.assert_array_equal(traced, np.ones(200))


def test_auc_invalid_options_raise():
    with pytest.raises(ValueError, match="auc: curve must be either ROC or PR. Curve 'roc'"):
        metrics.auc([1], [0.5], curve="roc")
    with pytest.raises(ValueError, match="auc: invalid summation_method 'riemann'"):
        metrics.auc([1], [0.5], summation_method="riemann")
    with pytest.raises(ValueError, match="auc: num_thresholds must be an integer > 1, got 1"):
        metrics.auc([1], [0.5], None, 1)
    with pytest.raises(ValueError, match="AUC.empty: num_thresholds must be an integer > 1"):
        metrics.AUC.empty(2.5)
    with pytest.raises(TypeError, match="auc: thresholds must be a static list of floats"):
        jax.jit(lambda t: metrics.auc([1], [0.5], thresholds=t))(np.array([0.5]))
    with pytest.raises(ValueError, match="auc: expected a non-empty list of float thresholds"):
        metrics.auc([1], [0.5], thresholds=[])


def test_pr_trapezoidal_logs_tf_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="estimator"):
        metrics.auc([1, 0], [0.6, 0.4], None, 5, curve="PR")
    assert "Trapezoidal rule is known to produce incorrect PR-AUCs" in caplog.text


# -------------------------------------------------------------------- at thresholds


def test_precision_recall_at_thresholds_hand_computed_keep_given_order():
    labels, predictions = [1, 0, 1, 0], [0.2, 0.4, 0.6, 0.8]
    thresholds = [0.5, 0.1, 0.6]
    # > 0.5: 0.6 (label 1), 0.8 (label 0)     -> tp 1, fp 1, fn 1 (0.2)
    # > 0.1: all four                          -> tp 2, fp 2, fn 0
    # > 0.6: only 0.8 (0.6 is not > 0.6)       -> tp 0, fp 1, fn 2
    # precision = tp / (1e-7 + tp + fp), recall = tp / (1e-7 + tp + fn)
    p = metrics.precision_at_thresholds(labels, predictions, thresholds)
    r = metrics.recall_at_thresholds(labels, predictions, thresholds)
    np.testing.assert_allclose(p.compute(), [1 / (2 + 1e-7), 2 / (4 + 1e-7), 0.0], rtol=1e-6)
    np.testing.assert_allclose(r.compute(), [1 / (2 + 1e-7), 2 / (2 + 1e-7), 0.0], rtol=1e-6)
    assert p.compute().shape == (3,) and p.thresholds == (0.5, 0.1, 0.6)


@pytest.mark.parametrize("case", CASES)
def test_at_thresholds_match_reference(case):
    labels, predictions, weights = CASES[case]
    thresholds = [0.9, 0.5, float(np.float32(31 / 199)), 0.0, 1.0, 0.5]
    tp, fp, _, fn = ref_counts(labels, predictions, weights, np.array(thresholds, np.float32))
    p = metrics.precision_at_thresholds(labels, predictions, thresholds, weights)
    r = metrics.recall_at_thresholds(labels, predictions, thresholds, weights)
    np.testing.assert_allclose(p.compute(), tp / (1e-7 + tp + fp), atol=1e-6)
    np.testing.assert_allclose(r.compute(), tp / (1e-7 + tp + fn), atol=1e-6)


def test_at_thresholds_invalid_thresholds_raise():
    with pytest.raises(ValueError, match="precision_at_thresholds: expected a non-empty list"):
        metrics.precision_at_thresholds([1], [0.5], [])
    with pytest.raises(TypeError, match="recall_at_thresholds: thresholds must be a static"):
        jax.jit(lambda t: metrics.recall_at_thresholds([1], [0.5], t))(np.array([0.5]))
