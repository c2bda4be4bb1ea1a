"""More of TF 2.15's public surface: the head-taking
estimators, ``add_metrics`` and the parsing specs with label and weight."""

import numpy as np
import pytest

import canned
import estimator as est
from canned import feature_column as fc

X = np.array([[0.5, -1.0], [1.5, 0.3], [-0.7, 0.8], [0.1, 0.1]], np.float32)
C = np.array([["a"], ["b"], ["c"], ["a"]], object)
FEATURES = {"x": X, "c": C, "w": np.array([[1.0], [2.0], [0.5], [1.0]], np.float32)}
Y = np.array([0, 1, 1, 0])
NUM = fc.numeric_column("x", shape=(2,))
CAT = fc.categorical_column_with_vocabulary_list("c", ["a", "b", "c"])


def _variables(model):
    return {n: model.get_variable_value(n) for n in model.get_variable_names()}


@pytest.mark.parametrize("kind", ["linear", "dnn", "wide_deep", "baseline"])
def test_head_taking_estimators_equal_the_classifiers(tmp_path, kind):
    # TF builds XClassifier as XEstimator with the binary head: the same seed gives the same
    # variables, step for step (weights included).
    config = est.RunConfig(tf_random_seed=3)
    head = canned.BinaryClassHead(weight_column="w")
    a, b = {
        "linear": (
            lambda: canned.LinearClassifier([NUM, CAT], str(tmp_path / "a"), weight_column="w",
                                            config=config),
            lambda: canned.LinearEstimator(head, [NUM, CAT], str(tmp_path / "b"), config=config),
        ),
        "dnn": (
            lambda: canned.DNNClassifier([3], [NUM], str(tmp_path / "a"), weight_column="w",
                                         config=config),
            lambda: canned.DNNEstimator(head, [3], [NUM], str(tmp_path / "b"), config=config),
        ),
        "wide_deep": (
            lambda: canned.DNNLinearCombinedClassifier(
                str(tmp_path / "a"), [CAT], dnn_feature_columns=[NUM], dnn_hidden_units=[3],
                weight_column="w", config=config),
            lambda: canned.DNNLinearCombinedEstimator(
                head, str(tmp_path / "b"), [CAT], dnn_feature_columns=[NUM],
                dnn_hidden_units=[3], config=config),
        ),
        "baseline": (
            lambda: canned.BaselineClassifier(str(tmp_path / "a"), weight_column="w",
                                              config=config),
            lambda: canned.BaselineEstimator(head, str(tmp_path / "b"), config=config),
        ),
    }[kind]  # fmt: skip
    classifier, estimator = a(), b()
    for model in (classifier, estimator):
        model.train(lambda: (FEATURES, Y), steps=3)
    left, right = _variables(classifier), _variables(estimator)
    assert sorted(left) == sorted(right)
    for name in left:
        np.testing.assert_array_equal(left[name], right[name], err_msg=name)


@pytest.mark.slow
def test_add_metrics_adds_to_evaluation_only(tmp_path):
    model = canned.LinearClassifier([NUM], str(tmp_path))
    model.train(lambda: (FEATURES, Y), steps=2)

    def metric_fn(labels, predictions, features):
        assert set(features) >= {"x"}
        return {"mean_logistic": est.metrics.mean(predictions["logistic"])}

    extended = est.add_metrics(model, metric_fn)
    assert extended.model_dir == model.model_dir
    before = model.evaluate(lambda: (FEATURES, Y), steps=1)
    after = extended.evaluate(lambda: (FEATURES, Y), steps=1)
    assert set(after) == set(before) | {"mean_logistic"}
    # The new metric is the mean of what the model predicts; the others are unchanged.
    (batch,) = model.predict(lambda: FEATURES, yield_single_examples=False)
    assert abs(after["mean_logistic"] - float(np.mean(batch["logistic"]))) < 1e-6
    assert after["auc"] == before["auc"] and after["global_step"] == 2
    with pytest.raises(ValueError, match="has following not expected args: \\['mode'\\]"):
        est.add_metrics(model, lambda labels, mode: {})


def test_parse_example_specs_with_label_and_weight():
    spec = canned.classifier_parse_example_spec([NUM, CAT], "label", weight_column="w")
    assert spec["label"] == est.preprocessing.FixedLenFeature((1,), np.int64)
    assert spec["w"] == est.preprocessing.FixedLenFeature((1,), np.float32)
    assert set(spec) == {"x", "c", "label", "w"}
    spec = canned.regressor_parse_example_spec([NUM], "y", label_dimension=2, label_default=0.0)
    assert spec["y"] == est.preprocessing.FixedLenFeature((2,), np.float32, 0.0)
    # TF's messages.
    with pytest.raises(ValueError, match="^label should not be used as feature. label_key: x"):
        canned.classifier_parse_example_spec([NUM], "x")
    with pytest.raises(ValueError, match="^weight_column should not be used as feature"):
        canned.regressor_parse_example_spec([NUM], "y", weight_column="x")
