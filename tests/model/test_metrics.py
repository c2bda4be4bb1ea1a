"""Tests of estimator.metrics: the Metric contract, means, counts, weights, devices.

AUC and the *_at_thresholds metrics are in test_metrics_auc.py, the class-id metrics in
test_metrics_classes.py. Expected numbers are derived by hand in the comments.
"""

import dataclasses
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from estimator import metrics
from estimator.metrics import _base


def _batch(n, seed=0):
    """Labels {0,1}, probabilities, weights (every 5th zero) and 3-class ids, all [n]."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.4).astype(np.float32)
    p = rng.random(n).astype(np.float32)
    w = (rng.random(n) * 2).astype(np.float32)
    w[::5] = 0
    cy = rng.integers(0, 3, n).astype(np.int32)
    cp = rng.integers(0, 3, n).astype(np.int32)
    return y, p, w, cy, cp


def _all_metrics(y, p, w, cy, cp):
    """One metric of every kind for a batch (AUC with TF v1 and with Keras statistics)."""
    hard = p > 0.5
    m = {
        "accuracy": metrics.accuracy(y, hard, w),
        "accuracy_baseline": metrics.accuracy_baseline(y, w),
        "mean": metrics.mean(p, w),
        "mse": metrics.mean_squared_error(y, p, w),
        "rmse": metrics.root_mean_squared_error(y, p, w),
        "mae": metrics.mean_absolute_error(y, p, w),
        "tp": metrics.true_positives(y, hard, w),
        "fp": metrics.false_positives(y, hard, w),
        "tn": metrics.true_negatives(y, hard, w),
        "fn": metrics.false_negatives(y, hard, w),
        "precision": metrics.precision(y, hard, w),
        "recall": metrics.recall(y, hard, w),
        "precision_at": metrics.precision_at_thresholds(y, p, [0.7, 0.3, 0.5], w),
        "recall_at": metrics.recall_at_thresholds(y, p, [0.7, 0.3, 0.5], w),
        "mean_per_class_accuracy": metrics.mean_per_class_accuracy(cy, cp, 3, w),
        "mean_iou": metrics.mean_iou(cy, cp, 3, w),
    }
    # The statistics are TF v1's (binary search) or Keras' (bucket arithmetic, used by
    # "interpolation"); summation methods differ only in compute().
    m["auc"] = metrics.auc(y, p, w)
    m["auc_pr"] = metrics.auc(y, p, w, 7, curve="PR", summation_method="careful_interpolation")
    m["auc_pr_keras"] = metrics.auc(y, p, w, 50, curve="PR", summation_method="interpolation")
    return m


def _compute_all(m):
    return {k: v.compute() for k, v in m.items()}


# Shared compiled functions: compiling every metric takes ~1 s per input shape on CPU.
_create = jax.jit(_all_metrics)
_compute = jax.jit(_compute_all)


def _assert_values_close(a, b, rtol=1e-6, atol=1e-6):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(
            np.asarray(a[k]), np.asarray(b[k]), rtol=rtol, atol=atol, err_msg=k
        )


# ------------------------------------------------------------------ module docs


def test_module_synopsis_runs(capsys):
    code = metrics.__doc__.split("::\n", 1)[1].split("\nEvery statistic")[0]
    exec(textwrap.dedent(code), {})
    out = capsys.readouterr().out
    assert "'accuracy':" in out and "'auc':" in out


def test_all_names_are_exported():
    for name in metrics.__all__:
        assert hasattr(metrics, name), name
    assert set(metrics.__all__) >= {"Metric", "accuracy", "auc", "mean_iou", "AUC"}


# -------------------------------------------------------------- Metric contract


def test_metrics_are_frozen_pytrees_with_static_config():
    m = metrics.auc([1, 0], [0.8, 0.2], num_thresholds=7, curve="PR", summation_method="minoring")
    leaves, treedef = jax.tree.flatten(m)
    assert [x.shape for x in leaves] == [(7,)] * 4  # tp, fp, tn, fn
    rebuilt = jax.tree.unflatten(treedef, leaves)
    assert (rebuilt.num_thresholds, rebuilt.curve, rebuilt.summation_method) == (
        7,
        "PR",
        "minoring",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.curve = "ROC"
    assert isinstance(m, metrics.Metric)


def _empty_like(m):
    """``type(m).empty(...)`` with the configuration of ``m``."""
    cls = type(m)
    if cls is metrics.AUC:
        return cls.empty(m.num_thresholds, curve=m.curve, summation_method=m.summation_method)
    if cls in (metrics.PrecisionAtThresholds, metrics.RecallAtThresholds):
        return cls.empty(m.thresholds)
    if cls in (metrics.MeanIoU, metrics.MeanPerClassAccuracy):
        return cls.empty(m.num_classes)
    return cls.empty()


def test_empty_is_zeros_like_and_computes_to_zero():
    created = _create(*_batch(16))
    empty = {k: _empty_like(m) for k, m in created.items()}
    for key, m in created.items():
        zeros = jax.tree.map(jnp.zeros_like, m)
        assert jax.tree.structure(empty[key]) == jax.tree.structure(zeros), key
        for a, b in zip(jax.tree.leaves(empty[key]), jax.tree.leaves(zeros), strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype == jnp.float32, key
            assert np.all(np.asarray(a) == 0), key

    of_empty, of_created = jax.device_get((_compute(empty), _compute(created)))
    merged = {k: empty[k].merge(created[k]) for k in empty}
    # Every value of "no examples" is 0: TF's divide_no_nan / where(den > 0) rules.
    # (v1 ROC AUC: fpr = 0 / (0 + 0 + 1e-6) = 0 at every threshold, so the area is 0.)
    _assert_values_close(of_empty, {k: np.zeros_like(v) for k, v in of_created.items()}, 0, 0)
    # Merging with the empty state changes nothing.
    _assert_values_close(jax.device_get(_compute(merged)), of_created)


def test_a_user_subclass_gets_merge_and_the_checks():
    @jax.tree_util.register_dataclass
    @dataclasses.dataclass(frozen=True)
    class SumOfSquares(metrics.Metric):
        total: jax.Array
        scale: float = dataclasses.field(metadata={"static": True}, default=1.0)

        def compute(self):
            return self.total * self.scale

    a, b = SumOfSquares(jnp.float32(1 + 4)), SumOfSquares(jnp.float32(9))
    assert float(jax.jit(lambda a, b: a.merge(b).compute())(a, b)) == 14.0  # 1 + 4 + 9
    with pytest.raises(ValueError, match="Expected same scale: 1.0 != 2.0"):
        a.merge(SumOfSquares(jnp.float32(9), scale=2.0))


def test_merge_of_different_types_raises():
    with pytest.raises(TypeError, match="Expected same metric type: Accuracy != Precision"):
        metrics.accuracy([1], [1]).merge(metrics.precision([1], [1]))
    # Same statistics, different class: a Mean is not an Accuracy.
    with pytest.raises(TypeError, match="Expected same metric type: Mean != Accuracy"):
        metrics.mean([1.0]).merge(metrics.accuracy([1], [1]))


def test_merge_of_different_configurations_raises():
    a = metrics.AUC.empty(5)
    with pytest.raises(ValueError, match="Expected same num_thresholds: 5 != 7"):
        a.merge(metrics.AUC.empty(7))
    with pytest.raises(ValueError, match="Expected same curve: 'ROC' != 'PR'"):
        a.merge(metrics.AUC.empty(5, curve="PR"))
    with pytest.raises(ValueError, match="Expected same summation_method: 'trapezoidal' != 'm"):
        a.merge(metrics.AUC.empty(5, summation_method="majoring"))
    with pytest.raises(ValueError, match="Expected same num_classes: 3 != 4"):
        metrics.MeanIoU.empty(3).merge(metrics.MeanIoU.empty(4))
    with pytest.raises(ValueError, match=r"Expected same thresholds: \(0.5,\) != \(0.6,\)"):
        metrics.RecallAtThresholds.empty([0.5]).merge(metrics.RecallAtThresholds.empty([0.6]))


def test_merge_checks_statistic_shapes():
    a = metrics.Mean(total=jnp.zeros(()), count=jnp.zeros(()))
    b = metrics.Mean(total=jnp.zeros((2,)), count=jnp.zeros((2,)))
    with pytest.raises(ValueError, match=r"Expected same shape of total: \(\) != \(2,\)"):
        a.merge(b)


def test_eval_step_and_compute_compile_once_for_a_fixed_shape():
    traces = {"step": 0, "compute": 0}

    @jax.jit
    def step(acc, *batch):
        traces["step"] += 1
        new = _all_metrics(*batch)
        return {k: acc[k].merge(new[k]) for k in acc}

    @jax.jit
    def compute(acc):
        traces["compute"] += 1
        return _compute_all(acc)

    batches = [_batch(16, seed) for seed in range(3)]
    acc = jax.tree.map(jnp.zeros_like, jax.eval_shape(_all_metrics, *batches[0]))
    for batch in batches:
        acc = step(acc, *batch)
    values = jax.device_get(compute(acc))
    compute(acc)
    assert traces == {"step": 1, "compute": 1}
    # Three batches merged on device equal the metrics of the 48 examples at once.
    whole = [np.concatenate(parts) for parts in zip(*batches, strict=True)]
    _assert_values_close(values, jax.device_get(_compute(_create(*whole))))


def test_uneven_pieces_merged_equal_the_whole_batch():
    # Pieces of 5 and 11 examples (e.g. a final partial batch) and an empty state, merged
    # in another order than the examples came: the statistics are sums. (The metrics with
    # vector or matrix statistics; the scalar ones are sums the same way.)
    def some_metrics(y, p, w, cy, cp):
        return {
            "auc": metrics.auc(y, p, w),
            "auc_pr_keras": metrics.auc(y, p, w, curve="PR", summation_method="interpolation"),
            "recall_at": metrics.recall_at_thresholds(y, p, [0.7, 0.3, 0.5], w),
            "mean_iou": metrics.mean_iou(cy, cp, 3, w),
            "accuracy": metrics.accuracy(y, p > 0.5, w),
        }

    create = jax.jit(some_metrics)
    batch = _batch(16, seed=1)
    whole = _compute_all(create(*batch))
    first, rest = create(*(a[:5] for a in batch)), create(*(a[5:] for a in batch))
    merged = {k: rest[k].merge(_empty_like(first[k])).merge(first[k]) for k in first}
    _assert_values_close(_compute_all(merged), whole)


def test_sharded_batch_over_four_devices_equals_single_device():
    devices = jax.devices()
    assert len(devices) == 4, "tests/conftest.py sets --xla_force_host_platform_device_count=4"
    batch = _batch(48, seed=2)
    single = jax.device_get(_compute(_create(*batch)))  # on the default device

    mesh = Mesh(np.array(devices), ("data",))
    sharded = [jax.device_put(a, NamedSharding(mesh, P("data"))) for a in batch]
    assert {s.data.shape for s in sharded[0].addressable_shards} == {(12,)}
    assert len(sharded[0].sharding.device_set) == 4
    # Every metric computed in one jitted function over the sharded batch.
    values = jax.jit(lambda *b: _compute_all(_all_metrics(*b)))(*sharded)
    _assert_values_close(jax.device_get(values), single)

    # Each device's own statistics (shard_map), merged afterwards with Metric.merge.
    def per_device(*shard):
        return jax.tree.map(lambda x: x[None], _all_metrics(*shard))

    stacked = jax.jit(
        jax.shard_map(per_device, mesh=mesh, in_specs=P("data"), out_specs=P("data"))
    )(*sharded)
    stacked = jax.device_get(stacked)
    pieces = [jax.tree.map(lambda x, d=d: x[d], stacked) for d in range(4)]
    assert jax.tree.leaves(pieces[0])[0].shape == jax.tree.leaves(single["tp"])[0].shape
    merged = pieces[0]
    for piece in pieces[1:]:
        merged = {k: merged[k].merge(piece[k]) for k in merged}
    _assert_values_close(jax.device_get(_compute(merged)), single)


# -------------------------------------------------------------------- means


def test_mean_hand_computed():
    # (1·1 + 2·0 + 3·0 + 4·1) / (1 + 0 + 0 + 1) = 5 / 2
    assert float(metrics.mean([1.0, 2.0, 3.0, 4.0], [1, 0, 0, 1]).compute()) == 2.5
    # No weights: (1 + 2 + 3 + 4) / 4
    assert float(metrics.mean(jnp.array([[1, 2], [3, 4]])).compute()) == 2.5
    # All weights zero: 0 / 0 -> 0 (div_no_nan).
    assert float(metrics.mean([1.0, 2.0], [0, 0]).compute()) == 0.0
    # A weight of 0 removes even a NaN value: (2·1) / 1.
    assert float(metrics.mean([np.nan, 2.0], [0, 1]).compute()) == 2.0
    # TF divides by maximum(count, 0): a negative total weight gives 0.
    assert float(metrics.mean([1.0, 2.0], [-1, -1]).compute()) == 0.0


def test_accuracy_hand_computed():
    # 3 of 4 equal.
    assert float(metrics.accuracy([1, 2, 3, 4], [0, 2, 3, 4]).compute()) == 0.75
    # Weights [1, 1, 0, 0]: (0·1 + 1·1) / 2.
    assert float(metrics.accuracy([1, 2, 3, 4], [0, 2, 3, 4], [1, 1, 0, 0]).compute()) == 0.5
    # [B, 1] labels with [B] predictions; float predictions cast to int labels' dtype
    # (1.7 -> 1, 0.2 -> 0, 2.9 -> 2): all three equal.
    labels = np.array([[1], [0], [2]], np.int32)
    assert float(metrics.accuracy(labels, np.array([1.7, 0.2, 2.9])).compute()) == 1.0


def test_regression_errors_hand_computed():
    labels, predictions = [1.0, 2.0, 3.0], [[2.0], [2.0], [5.0]]
    # Squared errors 1, 0, 4 -> 5/3; absolute errors 1, 0, 2 -> 1.
    np.testing.assert_allclose(metrics.mean_squared_error(labels, predictions).compute(), 5 / 3)
    np.testing.assert_allclose(
        metrics.root_mean_squared_error(labels, predictions).compute(), np.sqrt(5 / 3), rtol=1e-6
    )
    assert float(metrics.mean_absolute_error(labels, predictions).compute()) == 1.0
    # Weights [0, 1, 1]: (0 + 4) / 2 = 2 and (0 + 2) / 2 = 1.
    assert float(metrics.mean_squared_error(labels, predictions, [0, 1, 1]).compute()) == 2.0
    assert float(metrics.mean_absolute_error(labels, predictions, [0, 1, 1]).compute()) == 1.0
    # RMSE takes the root after merging: sqrt((1 + 0 + 4) / 3), not a mean of roots.
    merged = metrics.root_mean_squared_error(labels[:1], predictions[:1]).merge(
        metrics.root_mean_squared_error(labels[1:], predictions[1:])
    )
    np.testing.assert_allclose(merged.compute(), np.sqrt(5 / 3), rtol=1e-6)


def test_accuracy_baseline_hand_computed():
    # label mean 0.75 -> max(0.75, 0.25); mean 0.25 -> max(0.25, 0.75).
    assert float(metrics.accuracy_baseline([1, 1, 1, 0]).compute()) == 0.75
    assert float(metrics.accuracy_baseline([[0], [0], [0], [1]]).compute()) == 0.75
    # Weighted: (1·1 + 0·3) / 4 = 0.25 -> 0.75.
    assert float(metrics.accuracy_baseline([1, 0], [1, 3]).compute()) == 0.75
    # No weight at all -> 0 (TF's divide_no_nan).
    assert float(metrics.accuracy_baseline([1, 0], [0, 0]).compute()) == 0.0


# ------------------------------------------------------------ binary counts


def test_binary_counts_precision_recall_hand_computed():
    labels = [1, 1, 0, 0, 1]
    predictions = [1.0, 0.0, 1.0, 0.0, 0.3]  # 0.3 is nonzero: a positive prediction (TF v1)
    weights = [1.0, 2.0, 3.0, 4.0, 5.0]
    # tp = w0 + w4 = 6, fn = w1 = 2, fp = w2 = 3, tn = w3 = 4.
    assert float(metrics.true_positives(labels, predictions, weights).compute()) == 6
    assert float(metrics.false_negatives(labels, predictions, weights).compute()) == 2
    assert float(metrics.false_positives(labels, predictions, weights).compute()) == 3
    assert float(metrics.true_negatives(labels, predictions, weights).compute()) == 4
    np.testing.assert_allclose(metrics.precision(labels, predictions, weights).compute(), 6 / 9)
    np.testing.assert_allclose(metrics.recall(labels, predictions, weights).compute(), 6 / 8)
    # Unweighted: tp 2, fp 1, fn 1.
    np.testing.assert_allclose(metrics.precision(labels, predictions).compute(), 2 / 3)


@pytest.mark.parametrize(
    "labels, predictions, weights",
    [
        ([1, 0, 1], [0, 0, 0], None),  # no positive prediction: precision 0, recall 0
        ([0, 0, 0], [1, 0, 1], None),  # no positive label: precision 0, recall 0
        ([1, 0, 1], [1, 1, 1], [0, 0, 0]),  # all weights zero
    ],
)
def test_precision_recall_are_zero_without_denominator(labels, predictions, weights):
    assert float(metrics.precision(labels, predictions, weights).compute()) == 0.0
    assert float(metrics.recall(labels, predictions, weights).compute()) == 0.0


def test_name_argument_is_accepted_for_tf_code():
    m = metrics.accuracy(labels=[1, 0], predictions=[1, 1], name="acc_op")
    assert float(m.compute()) == 0.5


# -------------------------------------------------------------- shapes, weights


@pytest.mark.parametrize(
    "labels_shape, predictions_shape, weights_shape",
    [((4,), (4,), (4,)), ((4, 1), (4,), (4,)), ((4,), (4, 1), (4, 1)), ((4, 1), (4, 1), (4,))],
)
def test_batch_and_batch_by_one_shapes_mix(labels_shape, predictions_shape, weights_shape):
    labels = np.array([1, 0, 1, 1]).reshape(labels_shape)
    predictions = np.array([1, 0, 0, 1]).reshape(predictions_shape)
    weights = np.array([1.0, 2.0, 3.0, 0.0]).reshape(weights_shape)
    # Correct: examples 0 and 1 (weights 1 + 2); wrong: example 2 (3); removed: 3.
    assert float(metrics.accuracy(labels, predictions, weights).compute()) == 0.5
    # tp = 1 (ex. 0), fn = 3 (ex. 2).
    assert float(metrics.recall(labels, predictions, weights).compute()) == 0.25


def test_weights_broadcast_over_trailing_dimensions():
    values = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    # Per-example weights [2] expand to [2, 1]: (1+2+3)·1 + (4+5+6)·3 = 51 over 3·1 + 3·3 = 12.
    np.testing.assert_allclose(metrics.mean(values, [1.0, 3.0]).compute(), 51 / 12, rtol=1e-6)
    # Per-column weights [[1, 0, 2]]: (1 + 4)·1 + (3 + 6)·2 = 23 over (1 + 0 + 2)·2 = 6.
    np.testing.assert_allclose(metrics.mean(values, [[1.0, 0.0, 2.0]]).compute(), 23 / 6, rtol=1e-6)
    # Scalar: the plain mean 21 / 6.
    assert float(metrics.mean(values, 5.0).compute()) == 3.5


@pytest.mark.parametrize(
    "values_shape, weights_shape",
    [((3,), (2,)), ((2, 3), (3,)), ((2, 3), (2, 2)), ((3,), (3, 2)), ((3,), (1, 1, 3))],
)
def test_weights_that_cannot_broadcast_raise(values_shape, weights_shape):
    with pytest.raises(ValueError, match=r"mean: weights can not be broadcast to values"):
        metrics.mean(np.ones(values_shape), np.ones(weights_shape))
    with pytest.raises(ValueError, match=r"auc: weights can not be broadcast to values"):
        metrics.auc(np.ones(values_shape), np.ones(values_shape), np.ones(weights_shape))


def test_mismatched_labels_and_predictions_raise():
    with pytest.raises(
        ValueError, match=r"accuracy: expected labels and predictions of the same shape"
    ):
        metrics.accuracy([1, 0, 1], [1, 0, 1, 1])
    with pytest.raises(ValueError, match=r"got labels \(2, 2\) and predictions \(2, 3\)"):
        metrics.precision(np.ones((2, 2)), np.ones((2, 3)))


def test_non_array_input_raises():
    with pytest.raises(ValueError, match="mean: values must be an array, got None"):
        metrics.mean(None)
    with pytest.raises(TypeError, match="accuracy: labels must be array-like, got str"):
        metrics.accuracy("abc", [1])


def test_div_no_nan_matches_tf():
    # tf.math.divide_no_nan: 0 where the denominator is 0, even for 0/0 and 1/0.
    out = _base.div_no_nan(jnp.array([1.0, 0.0, 6.0]), jnp.array([0.0, 0.0, 3.0]))
    np.testing.assert_array_equal(out, [0.0, 0.0, 2.0])
