"""Tests of estimator.metrics.mean_per_class_accuracy and mean_iou (class-id metrics)."""

import jax
import numpy as np
import pytest

from estimator import metrics

# Labels and predictions used by the hand-computed tests; weighted confusion matrix
# cm[label, prediction] without weights:
#   label 0: predicted 0 once, 1 once   -> row [1, 1, 0]
#   label 1: predicted 1 twice          -> row [0, 2, 0]
#   label 2: predicted 0 once           -> row [1, 0, 0]
LABELS = [0, 0, 1, 1, 2]
PREDICTIONS = [0, 1, 1, 1, 0]


def ref_confusion(labels, predictions, num_classes, weights=None):
    cm = np.zeros((num_classes, num_classes))
    w = np.ones(len(labels)) if weights is None else np.asarray(weights, np.float64)
    for label, prediction, weight in zip(labels, predictions, w, strict=True):
        cm[label, prediction] += weight
    return cm


def ref_mean_per_class_accuracy(cm):
    # Mean over all classes of correct / total; a class without weight counts as 0.
    total = cm.sum(1)
    return np.mean([cm[c, c] / total[c] if total[c] > 0 else 0.0 for c in range(len(cm))])


def ref_mean_iou(cm):
    # IoU_c = cm[c,c] / (row_c + col_c - cm[c,c]), averaged over classes whose
    # denominator is not 0; 0 when there is none.
    ious = []
    for c in range(len(cm)):
        denominator = cm[c].sum() + cm[:, c].sum() - cm[c, c]
        if denominator != 0:
            ious.append(cm[c, c] / denominator)
    return np.mean(ious) if ious else 0.0


def test_mean_per_class_accuracy_hand_computed():
    # class 0: 1 of 2 right = 1/2; class 1: 2/2 = 1; class 2: 0/1 = 0 -> (1/2 + 1 + 0) / 3
    m = metrics.mean_per_class_accuracy(LABELS, PREDICTIONS, 3)
    np.testing.assert_allclose(m.compute(), 0.5, rtol=1e-7)
    np.testing.assert_array_equal(m.total, [2, 2, 1])
    np.testing.assert_array_equal(m.correct, [1, 2, 0])
    # A fourth class without examples still counts, as 0 (TF): 1.5 / 4.
    np.testing.assert_allclose(
        metrics.mean_per_class_accuracy(LABELS, PREDICTIONS, 4).compute(), 0.375, rtol=1e-7
    )
    # Weights [2, 1, 1, 1, 0]: class 0: 2 of 3; class 1: 1; class 2 removed -> 0.
    # (2/3 + 1 + 0) / 3 = 5/9
    weighted = metrics.mean_per_class_accuracy(LABELS, PREDICTIONS, 3, [2, 1, 1, 1, 0])
    np.testing.assert_allclose(weighted.compute(), 5 / 9, rtol=1e-6)


def test_mean_iou_hand_computed():
    # Rows (labels) [2, 2, 1], columns (predictions) [2, 3, 0], diagonal [1, 2, 0]:
    # IoU = [1 / (2+2-1), 2 / (2+3-2), 0 / (1+0-0)] = [1/3, 2/3, 0] -> mean 1/3.
    m = metrics.mean_iou(LABELS, PREDICTIONS, 3)
    np.testing.assert_allclose(m.compute(), 1 / 3, rtol=1e-6)
    np.testing.assert_array_equal(m.confusion_matrix, [[1, 1, 0], [0, 2, 0], [1, 0, 0]])
    # A fourth class absent from labels and predictions is left out of the mean: 1/3.
    np.testing.assert_allclose(metrics.mean_iou(LABELS, PREDICTIONS, 4).compute(), 1 / 3, rtol=1e-6)
    # Weights [2, 1, 1, 1, 0]: cm = [[2, 1, 0], [0, 2, 0], [0, 0, 0]]; class 2 has
    # denominator 0 and is left out: IoU = [2 / (3+2-2), 2 / (2+3-2)] -> 2/3.
    weighted = metrics.mean_iou(LABELS, PREDICTIONS, 3, [2, 1, 1, 1, 0])
    np.testing.assert_allclose(weighted.compute(), 2 / 3, rtol=1e-6)


@pytest.mark.parametrize("fn", [metrics.mean_per_class_accuracy, metrics.mean_iou])
def test_no_examples_give_zero(fn):
    assert float(fn(LABELS, PREDICTIONS, 3, [0, 0, 0, 0, 0]).compute()) == 0.0
    assert float(fn(np.zeros(0, int), np.zeros(0, int), 3).compute()) == 0.0


@pytest.mark.parametrize("num_classes", [4, 6])
def test_class_metrics_match_reference(num_classes):
    rng = np.random.default_rng(num_classes)
    labels = rng.integers(0, 4, 40)
    predictions = np.where(rng.random(40) < 0.6, labels, rng.integers(0, 4, 40))
    weights = rng.random(40) * 2
    weights[::4] = 0
    cm = ref_confusion(labels, predictions, num_classes, weights)
    got = metrics.mean_per_class_accuracy(labels, predictions, num_classes, weights)
    np.testing.assert_allclose(got.compute(), ref_mean_per_class_accuracy(cm), atol=1e-6)
    got = metrics.mean_iou(labels, predictions, num_classes, weights)
    np.testing.assert_allclose(got.confusion_matrix, cm, rtol=1e-6)
    np.testing.assert_allclose(got.compute(), ref_mean_iou(cm), atol=1e-6)


def test_shapes_are_flattened_and_weights_broadcast():
    # [B, 1] labels with [B] predictions; float predictions truncated to int labels' dtype.
    labels = np.array(LABELS)[:, None]
    predictions = np.array(PREDICTIONS) + 0.7
    np.testing.assert_allclose(metrics.mean_iou(labels, predictions, 3).compute(), 1 / 3, rtol=1e-6)
    # Segmentation: [B, H, W] ids with one weight per image, [B, 1, 1] (TF's rule: the
    # weights' rank must be the values' rank, give or take a trailing 1).
    seg_labels = np.array([[[0, 1], [1, 1]], [[2, 2], [0, 1]]])
    seg_predictions = np.array([[[0, 1], [0, 1]], [[2, 0], [0, 1]]])
    weights = np.array([1.0, 0.0])[:, None, None]  # the second image is removed
    # Image 1 only: cm = [[1, 0, 0], [1, 2, 0], [0, 0, 0]]
    # per-class accuracy [1/1, 2/3, 0 (no examples)] -> (1 + 2/3) / 3 = 5/9
    # IoU [1 / (1+2-1), 2 / (3+2-2)] = [1/2, 2/3], class 2 left out -> 7/12
    m = metrics.mean_per_class_accuracy(seg_labels, seg_predictions, 3, weights)
    np.testing.assert_allclose(m.compute(), 5 / 9, rtol=1e-6)
    m = metrics.mean_iou(seg_labels, seg_predictions, 3, weights)
    np.testing.assert_allclose(m.compute(), 7 / 12, rtol=1e-6)


def test_out_of_range_ids_raise_eagerly_and_are_ignored_under_jit():
    with pytest.raises(ValueError, match=r"mean_iou: labels must be class ids in \[0, num_cl"):
        metrics.mean_iou([0, 3], [0, 1], 3)
    with pytest.raises(ValueError, match=r"mean_iou: predictions must be class ids .* \[-1, 0\]"):
        metrics.mean_iou([0, 1], [0, -1], 3)
    with pytest.raises(ValueError, match=r"mean_per_class_accuracy: labels must be class ids"):
        metrics.mean_per_class_accuracy([0, 5], [0, 1], 3)
    # A wrong prediction id is just a wrong prediction for mean_per_class_accuracy (TF
    # does not check it): class 0 right (1/1), class 1 wrong (0/1) -> (1 + 0 + 0) / 3.
    np.testing.assert_allclose(
        metrics.mean_per_class_accuracy([0, 1], [0, 7], 3).compute(), 1 / 3, rtol=1e-6
    )
    # Under jit the ids cannot be checked; the example with label 3 is dropped: only
    # (0, 0) remains -> IoU of class 0 is 1, the others are absent -> 1.
    traced = jax.jit(lambda y, p: metrics.mean_iou(y, p, 3).compute())
    assert float(traced(np.array([0, 3]), np.array([0, 1]))) == 1.0


def test_invalid_num_classes_raise():
    with pytest.raises(ValueError, match="mean_iou: num_classes must be a positive Python int"):
        metrics.mean_iou([0], [0], 0)
    with pytest.raises(ValueError, match="mean_per_class_accuracy: num_classes must be a pos"):
        metrics.mean_per_class_accuracy([0], [0], 2.5)
    with pytest.raises(ValueError, match="MeanIoU.empty: num_classes must be a positive"):
        metrics.MeanIoU.empty(-1)
