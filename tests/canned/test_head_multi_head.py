"""``MultiHead`` against TF 2.15.1: the numbers, keys and messages below were printed by
``tf.estimator.MultiHead([MultiLabelHead(2, name="head1"), MultiClassHead(3,
name="head2")], head_weights=[1., 2.])`` (tensorflow 2.15.1, tensorflow-estimator 2.15.0)
on the same logits and labels."""

import jax
import numpy as np
import optax
import pytest

import estimator as est
from canned.head import MultiClassHead, MultiHead, MultiLabelHead

LOGITS = {
    "head1": np.array([[-1.0, 1.0], [-1.5, 0.5], [0.2, 0.3]], np.float32),
    "head2": np.array([[2.0, -1.0, 0.5], [0.1, 0.2, 0.3], [-1.0, 1.0, 0.0]], np.float32),
}
LABELS = {
    "head1": np.array([[1, 0], [1, 1], [0, 1]], np.float32),
    "head2": np.array([[0], [2], [1]], np.int32),
}
FEATURES = {"x": np.zeros((3, 1), np.float32)}


def make():
    heads = [MultiLabelHead(2, name="head1"), MultiClassHead(3, name="head2")]
    return MultiHead(heads, head_weights=[1.0, 2.0])


def test_loss_is_the_weighted_sum_of_the_heads():
    head = make()
    assert head.name == "head1_head2" and head.logits_dimension == 5  # as TF
    loss1 = float(head.heads[0].loss(LABELS["head1"], LOGITS["head1"], FEATURES))
    loss2 = float(head.heads[1].loss(LABELS["head2"], LOGITS["head2"], FEATURES))
    # TF 2.15.1: 2.1263246536254883 = 1.0257513523101807 + 2 x 0.5502867102622986.
    assert float(head.loss(LABELS, LOGITS, FEATURES)) == pytest.approx(2.1263246536254883, 1e-6)
    assert float(head.loss(LABELS, LOGITS, FEATURES)) == pytest.approx(loss1 + 2 * loss2, 1e-6)
    # One array of logits [3, 2 + 3] is split in the heads' order (TF: the same loss).
    concat = np.concatenate([LOGITS["head1"], LOGITS["head2"]], axis=1)
    assert float(head.loss(LABELS, concat, FEATURES)) == pytest.approx(2.1263246536254883, 1e-6)
    regularized = head.loss(LABELS, LOGITS, FEATURES, regularization_losses=[np.float32(0.5)])
    assert float(regularized) == pytest.approx(2.6263246536254883, 1e-6)  # TF 2.15.1


def test_metrics_are_tfs():
    head = make()
    results = {
        k: float(m.compute())
        for k, m in head.eval_metrics(LABELS, LOGITS, FEATURES, [np.float32(0.5)]).items()
    }
    expected = {  # TF 2.15.1
        "regularization_loss/head1_head2": 0.5,
        "loss/head1": 1.0257513523101807,
        "loss/head2": 0.5502867102622986,
        "average_loss/head1": 1.0257513523101807,
        "auc/head1": 0.25,
        "auc_precision_recall/head1": 0.5226143598556519,
        "average_loss/head2": 0.5502867102622986,
        "accuracy/head2": 1.0,
    }
    assert results.keys() == expected.keys()
    assert results == pytest.approx(expected, rel=1e-5)


def test_predictions_and_export_outputs_are_keyed_as_tf():
    head = make()
    spec = head.create_estimator_spec(FEATURES, est.ModeKeys.PREDICT, LOGITS)
    assert sorted(spec.predictions) == [  # TF 2.15.1
        ("head1", "classes"),
        ("head1", "logits"),
        ("head1", "probabilities"),
        ("head2", "all_class_ids"),
        ("head2", "all_classes"),
        ("head2", "class_ids"),
        ("head2", "classes"),
        ("head2", "logits"),
        ("head2", "probabilities"),
    ]
    kinds = {k: type(v).__name__ for k, v in spec.export_outputs.items()}
    assert kinds == {  # TF 2.15.1
        "serving_default": "ClassificationOutput",
        "head1": "ClassificationOutput",
        "head1/classification": "ClassificationOutput",
        "head1/predict": "PredictOutput",
        "head2": "ClassificationOutput",
        "head2/classification": "ClassificationOutput",
        "head2/predict": "PredictOutput",
        "predict": "PredictOutput",
    }
    assert sorted(spec.export_outputs["predict"].outputs) == [
        f"{h}/{k}" for h, k in sorted(spec.predictions)
    ]


@pytest.mark.parametrize(
    ("call", "message"),
    [  # TF 2.15.1's messages
        (lambda: MultiHead([]), r"Must specify heads. Given: \[\]"),
        (
            lambda: MultiHead([MultiLabelHead(2, name="a"), MultiLabelHead(2, name="b")], [1.0]),
            r"heads and head_weights must have the same size. Given len\(heads\): 2. Given "
            r"len\(head_weights\): 1.",
        ),
        (
            lambda: MultiHead([MultiLabelHead(2, name="a"), MultiClassHead(3)]),
            "All given heads must have name specified. Given: ",
        ),
        (
            lambda: make().loss(LABELS, {"head1": LOGITS["head1"]}, FEATURES),
            r"logits has missing values for head\(s\): \['head2'\]",
        ),
        (lambda: make().loss(LABELS["head1"], LOGITS, FEATURES), "labels must be a dict. Given: "),
        (
            lambda: make().loss({"head1": LABELS["head1"]}, LOGITS, FEATURES),
            r"labels has missing values for head\(s\): \['head2'\]",
        ),
        (
            # TF says "should equal 4 but is 5" (its two numbers swapped); ours are in order.
            lambda: make().loss(LABELS, np.zeros((3, 4), np.float32), FEATURES),
            r"Could not split logits of shape \[3, 4\] among the heads with individual logits "
            r"dimensions: \[2, 3\]. The last dimension of the logits tensor should equal 5 but "
            r"is 4.",
        ),
    ],
)
def test_errors_are_tfs(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_model_fn_with_a_multi_head_trains_evaluates_exports_and_predicts(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(192, 3)).astype(np.float32)
    labels = {
        "tags": np.stack([x[:, 0] > 0, x[:, 1] > 0], axis=1).astype(np.float32),
        "kind": np.argmax(x, axis=1).astype(np.int32)[:, None],
    }
    head = MultiHead([MultiLabelHead(2, name="tags"), MultiClassHead(3, name="kind")])

    def model_fn(features, labels, mode):
        hidden = est.layers.dense(features["x"], 16, activation=jax.nn.relu)
        logits = est.layers.dense(hidden, head.logits_dimension)  # split: 2 + 3
        return head.create_estimator_spec(
            features, mode, logits, labels, optimizer=optax.adam(0.05)
        )

    e = est.Estimator(model_fn, str(tmp_path), est.RunConfig(tf_random_seed=0))
    train = est.inputs.numpy_input_fn({"x": x}, labels, batch_size=32, num_epochs=15, shuffle=True)
    e.train(train)
    results = e.evaluate(est.inputs.numpy_input_fn({"x": x}, labels, batch_size=64, shuffle=False))
    assert results["auc/tags"] > 0.95 and results["accuracy/kind"] > 0.8
    assert results["loss"] == pytest.approx(results["loss/tags"] + results["loss/kind"], rel=1e-4)
    first = next(e.predict(est.inputs.numpy_input_fn({"x": x[:4]}, shuffle=False)))
    assert first[("kind", "classes")] in (b"0", b"1", b"2")
    receiver = est.export.build_raw_serving_input_receiver_fn({"x": x[:1]})
    loaded = est.export.load(e.export_saved_model(str(tmp_path / "export"), receiver))
    served = loaded.signatures["predict"](x=x[:4])
    assert {"tags/probabilities", "kind/class_ids"} <= set(served)
    assert {"serving_default", "tags", "kind/classification"} <= set(loaded.signatures)
