"""``MultiLabelHead`` against TF 2.15.1: the numbers below were printed by
``tf.estimator.MultiLabelHead`` (tensorflow 2.15.1, tensorflow-estimator 2.15.0) on the same
logits, labels and weights (loss, every metric's ``result()``, predictions, messages)."""

import jax
import numpy as np
import optax
import pytest

import canned
import estimator as est
from canned.head import MultiLabelHead, Reduction

LOGITS = np.array(
    [[-1.0, 1.0, 0.5], [-1.5, 1.5, -0.2], [2.0, -0.5, 0.1], [0.3, 0.2, -2.0]], np.float32
)
LABELS = np.array([[1, 0, 1], [1, 1, 0], [0, 0, 1], [1, 0, 0]], np.float32)
WEIGHTS = np.array([[1.0], [2.0], [0.5], [1.5]], np.float32)
# The same labels as TF's SparseTensor rows: class ids, and names with a vocabulary.
SPARSE_IDS = [[0, 2], [0, 1], [2], [0]]
SPARSE_NAMES = [["a", "c"], ["a", "b"], ["c"], ["a"]]


def _results(metric_dict):
    return {k: float(m.compute()) for k, m in metric_dict.items()}


def test_loss_and_metrics_are_tfs():
    head = MultiLabelHead(3)
    # From TF 2.15.1: loss 0.8605324625968933, auc 0.5, auc_precision_recall 0.4698992967605591.
    # By hand, the loss: the mean over the 12 (example, class) sigmoid cross-entropies.
    x, z = LOGITS, LABELS
    by_hand = np.mean(np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x))))
    loss = float(head.loss(LABELS, LOGITS, features={}))
    assert loss == pytest.approx(0.8605324625968933, rel=1e-6)
    assert loss == pytest.approx(by_hand, rel=1e-6)
    results = _results(head.eval_metrics(LABELS, LOGITS, features={}))
    assert results == pytest.approx(
        {
            "average_loss": 0.8605324625968933,
            "auc": 0.5,
            "auc_precision_recall": 0.4698992967605591,
        },
        rel=1e-5,
    )


def test_weighted_thresholds_and_per_class_metrics_are_tfs():
    head = MultiLabelHead(
        3, weight_column="w", thresholds=[0.3, 0.6], classes_for_class_based_metrics=[0, 2]
    )
    features = {"w": WEIGHTS}
    regularization = [np.float32(0.25)]
    # From TF 2.15.1: 0.9953637719154358 = sum(w * mean-over-classes loss) / 4; with
    # regularization_losses=[0.25] it is 0.25 more.
    loss = float(head.loss(LABELS, LOGITS, features))
    assert loss == pytest.approx(0.9953637719154358, rel=1e-6)
    regularized = float(head.loss(LABELS, LOGITS, features, regularization_losses=regularization))
    assert regularized == pytest.approx(0.9953637719154358 + 0.25, rel=1e-6)
    results = _results(head.eval_metrics(LABELS, LOGITS, features, regularization))
    expected = {
        "average_loss": 0.7962909936904907,
        "auc": 0.59375,
        "auc_precision_recall": 0.601367712020874,
        "regularization_loss": 0.25,
        "accuracy/positive_threshold_0.3": 0.4333333373069763,
        "precision/positive_threshold_0.3": 0.4761904776096344,
        "recall/positive_threshold_0.3": 0.625,
        "accuracy/positive_threshold_0.6": 0.5666666626930237,
        "precision/positive_threshold_0.6": 0.6666666865348816,
        "recall/positive_threshold_0.6": 0.375,
        "probability_mean/class0": 0.3871709704399109,
        "auc/class0": 0.0,
        "auc_precision_recall/class0": 0.7441571950912476,
        "probability_mean/class2": 0.39281708002090454,
        "auc/class2": 1.0,
        "auc_precision_recall/class2": 1.0,
    }
    assert results.keys() == expected.keys()
    assert results == pytest.approx(expected, rel=1e-5, abs=1e-6)
    # SUM reduction (TF 2.15.1: 3.981455087661743 = 4 x the weighted mean 0.99536 - 0.25).
    summed = MultiLabelHead(3, weight_column="w", loss_reduction=Reduction.SUM)
    assert float(summed.loss(LABELS, LOGITS, features)) == pytest.approx(3.981455087661743, 1e-6)


def test_sparse_ids_and_names_become_the_same_multi_hot_labels():
    assert MultiLabelHead(3).prepare_labels(SPARSE_IDS).tolist() == LABELS.tolist()
    head = MultiLabelHead(
        3, label_vocabulary=["a", "b", "c"], classes_for_class_based_metrics=["b"]
    )
    labels = head.prepare_labels(SPARSE_NAMES)
    assert labels.tolist() == LABELS.tolist()
    # From TF 2.15.1 with string SparseTensor labels: loss 0.8605324625968933 and
    results = _results(head.eval_metrics(labels, LOGITS, features={}))
    assert results == pytest.approx(
        {
            "average_loss": 0.8605324625968933,
            "auc": 0.5,
            "auc_precision_recall": 0.4698992967605591,
            "probability_mean/b": 0.6190019845962524,
            "auc/b": 1.0,
            "auc_precision_recall/b": 1.0,
        },
        rel=1e-5,
    )
    # Bytes and "" padding (a dense string array of per-example names) are taken too.
    padded = np.array([[b"a", b"c"], [b"a", b"b"], [b"c", b""], [b"a", b""]], dtype=object)
    assert head.prepare_labels(padded).tolist() == LABELS.tolist()


def test_predictions_and_export_outputs_are_tfs():
    head = MultiLabelHead(3, label_vocabulary=["a", "b", "c"])
    predictions = head.predictions(LOGITS)
    # From TF 2.15.1: probabilities = sigmoid(logits); classes = every name in each row.
    np.testing.assert_allclose(
        predictions["probabilities"][0],
        [0.2689414322376251, 0.7310585975646973, 0.622459352016449],
        rtol=1e-6,
    )
    assert predictions["classes"].to_numpy().tolist() == [[b"a", b"b", b"c"]] * 4
    spec = head.create_estimator_spec(features={}, mode=est.ModeKeys.PREDICT, logits=LOGITS)
    assert sorted(spec.export_outputs) == ["classification", "predict", "serving_default"]
    classification = spec.export_outputs["classification"]
    assert classification.scores.shape == (4, 3) and classification.classes.ids.shape == (4, 3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [  # TF 2.15.1's messages
        ({"n_classes": 1}, "n_classes must be > 1 for multi-label classification. Given: 1"),
        ({"thresholds": [1.5]}, r"thresholds must be in \(0, 1\) range. Given: 1.5"),
        ({"label_vocabulary": "abc"}, "label_vocabulary must be a list or tuple. Given type: "),
        ({"label_vocabulary": ["a", "b"]}, r"Length of label_vocabulary must be n_classes \(3\)"),
        (
            {"classes_for_class_based_metrics": [3]},
            r"All classes_for_class_based_metrics must be in range \[0, 2\]. Given: 3",
        ),
        (
            {"classes_for_class_based_metrics": ["a"]},
            "label_vocabulary must be provided when classes_for_class_based_metrics are strings",
        ),
    ],
)
def test_constructor_errors_are_tfs(kwargs, message):
    kwargs = {"n_classes": 3, **kwargs}
    with pytest.raises(ValueError, match=message):
        MultiLabelHead(**kwargs)


def test_bad_labels_say_what_arrived():
    head = MultiLabelHead(3)
    # TF 2.15.1: "labels must be an integer indicator Tensor with values in [0, 1]".
    with pytest.raises(
        ValueError, match=r"integer indicator Tensor with values in \[0, 1\]; got \[2.0\]"
    ):
        head.prepare_labels(np.array([[2, 0, 1]] * 4))
    with pytest.raises(ValueError, match=r"integer indicator Tensor with values in \[0, 1\]"):
        head.loss(np.array([[2, 0, 1]] * 4, np.float32), LOGITS, features={})
    with pytest.raises(ValueError, match=r"values in \[0, 3\); got 3"):
        head.prepare_labels([[0, 3]])
    with pytest.raises(ValueError, match="no label_vocabulary"):
        head.prepare_labels([["a"]])
    with pytest.raises(ValueError, match=r"shape \[batch_size, 3\]; got \(4, 2\)"):
        head.prepare_labels(np.zeros((4, 2)))


def test_dnn_estimator_with_a_multi_label_head_learns_and_exports(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 4)).astype(np.float32)
    labels = np.stack([x[:, 0] > 0, x[:, 1] + x[:, 2] > 0, x[:, 3] < 0], axis=1).astype(np.float32)
    head = MultiLabelHead(3)
    estimator = canned.DNNEstimator(
        head=head,
        hidden_units=[16],
        feature_columns=[canned.feature_column.numeric_column("x", shape=(4,))],
        model_dir=str(tmp_path),
        optimizer=optax.adam(0.05),
        config=est.RunConfig(tf_random_seed=1),
    )
    input_fn = est.inputs.numpy_input_fn(
        {"x": x}, labels, batch_size=32, num_epochs=20, shuffle=True
    )
    estimator.train(input_fn)
    results = estimator.evaluate(
        est.inputs.numpy_input_fn({"x": x}, labels, batch_size=64, shuffle=False)
    )
    assert results["auc"] > 0.95  # three separable questions
    receiver = est.export.build_raw_serving_input_receiver_fn({"x": x[:1]})
    path = estimator.export_saved_model(str(tmp_path / "export"), receiver)
    served = est.export.load(path).signatures["predict"](x=x[:8])
    probabilities = jax.nn.sigmoid(served["logits"])
    np.testing.assert_allclose(served["probabilities"], probabilities, rtol=1e-6)
