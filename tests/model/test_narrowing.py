"""No silent narrowing of 64-bit integers (the integer width policy in
``estimator.inputs.dtypes.check_int_range``): labels and features that don't fit the device's
32-bit integers are refused with the value and the fix, and the feature columns' host
phase keeps int64 ids intact for every categorical column kind."""

import farmhash
import numpy as np
import optax
import pytest

import estimator as est
from canned import feature_column as fc

BIG = 3_000_000_000  # > 2**31 - 1; int32 would wrap it to -1294967296
WRAPPED = -1294967296  # BIG - 2**32


def model_fn(features, labels, mode):
    x = features["x"]
    logits = est.layers.dense(x.astype("float32"), 1)
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions={"x": x})
    loss = (logits**2).mean()
    metrics = {"label_min": est.metrics.mean(labels.astype("float32").min())}
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1), eval_metric_ops=metrics)


def _train(tmp_path, x, y):
    e = est.Estimator(model_fn, str(tmp_path))
    e.train(lambda: ({"x": x}, y), steps=1)
    return e


def test_int64_label_that_does_not_fit_is_refused(tmp_path):
    x = np.ones((4, 2), np.int64)
    y = np.array([0, 1, 2**33 + 1, 2], np.int64)  # int32 would make it 1
    with pytest.raises(
        ValueError,
        match=r"labels holds the int64 value 8589934593 \(at flat "
        r"index 2\).*would silently become 1.*jax_enable_x64",
    ):
        _train(tmp_path, x, y)


def test_int64_feature_that_does_not_fit_is_refused(tmp_path):
    x = np.array([[1, BIG]], np.int64)
    with pytest.raises(
        ValueError,
        match=rf"features\['x'\] holds the int64 value {BIG}.*"
        rf"become {WRAPPED}",
    ):
        _train(tmp_path, x, np.zeros(1, np.int64))


def test_uint64_feature_that_does_not_fit_uint32_is_refused(tmp_path):
    x = np.array([[2**32]], np.uint64)
    with pytest.raises(ValueError, match=r"features\['x'\] holds the uint64 value 4294967296"):
        _train(tmp_path, x, np.zeros(1, np.int64))


def test_int64_values_that_fit_arrive_unchanged(tmp_path):
    x = np.array([[2**31 - 1, -(2**31)]], np.int64)  # the int32 extremes
    y = np.array([-(2**31)], np.int64)
    e = _train(tmp_path, x, y)
    (prediction,) = e.predict(lambda: {"x": x})
    assert prediction["x"].dtype == np.int32
    assert prediction["x"].tolist() == [2**31 - 1, -(2**31)]
    assert e.evaluate(lambda: ({"x": x}, y), steps=1)["label_min"] == -(2.0**31)


def _ids(column, values):
    transform = fc.input_transform([column])
    (out,) = transform.apply({"k": values})[0].values()
    return np.asarray(out).ravel().tolist()


def test_hash_bucket_of_int64_hashes_the_full_value():
    column = fc.categorical_column_with_hash_bucket("k", 1000, dtype=np.int64)
    # TF hashes the decimal string of the int64 value (StringToHashBucketFast(AsString)).
    assert _ids(column, np.array([[BIG]], np.int64)) == [farmhash.fingerprint64(str(BIG)) % 1000]


def test_identity_of_int64_out_of_range_is_an_error_not_a_dropped_id():
    # A wrapped (negative) id would be dropped silently; the real value is out of range.
    column = fc.categorical_column_with_identity("k", 10)
    with pytest.raises(ValueError, match=rf"value {BIG} of feature 'k' is out of range"):
        _ids(column, np.array([[BIG]], np.int64))


def test_vocabulary_of_int64_finds_the_full_value():
    column = fc.categorical_column_with_vocabulary_list("k", [7, BIG], dtype=np.int64)
    assert _ids(column, np.array([[BIG], [WRAPPED]], np.int64)) == [1, -1]


def test_cross_and_weighted_columns_keep_int64_ids():
    cross = fc.crossed_column(["k", "s"], 10**6)  # raw int64 "k" crossed with strings
    transform = fc.input_transform([cross])
    s = np.array([["a"], ["a"]])
    (out,) = transform.apply({"k": np.array([[BIG], [WRAPPED]], np.int64), "s": s})[0].values()
    ids = np.asarray(out).ravel()
    assert ids[0] != ids[1]  # the two values were not merged by a wrap
    weighted = fc.weighted_categorical_column(fc.categorical_column_with_identity("k", 10), "w")
    transform = fc.input_transform([weighted])
    with pytest.raises(ValueError, match=rf"value {BIG} of feature 'k' is out of range"):
        transform.apply({"k": np.array([[BIG]], np.int64), "w": np.ones((1, 1), np.float32)})


def test_categorical_ints_beyond_int64_are_refused():
    column = fc.categorical_column_with_hash_bucket("k", 10, dtype=np.int64)
    with pytest.raises(
        ValueError,
        match=r"feature 'k' holds the integer 9223372036854775808, "
        "which does not fit int64",
    ):
        _ids(column, np.array([[2**63]], np.uint64))
    with pytest.raises(ValueError, match=r"holds the integer 1180591620717411303424"):
        _ids(column, np.array([[2**70]], object))


def test_object_array_of_numbers_is_converted(tmp_path):
    x = np.array([[1, 2.5]], object)  # what pandas' .values gives for a mixed column
    e = _train(tmp_path, np.array([[1, 2]], object), np.array([0], object))
    (prediction,) = e.predict(lambda: {"x": x})
    assert prediction["x"].dtype == np.float32 and prediction["x"].tolist() == [1.0, 2.5]


def test_object_array_with_a_non_number_names_the_element(tmp_path):
    x = np.array([[1.0, None]], object)  # a missing value in a pandas column
    with pytest.raises(
        TypeError,
        match=r"features\['x'\] is an object array whose element "
        r"None \(of type NoneType, at flat index 1\) is not a number",
    ):
        _train(tmp_path, x, np.zeros(1, np.int64))
