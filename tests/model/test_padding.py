"""A shorter last batch runs padded in the full batches' program (estimator.model.padding).

The reference of each comparison is the same Estimator with padding turned off: the
engine's unpadded path, which compiles a second program for the shorter batch and which
the TF-literal tests of the heads, metrics and FTRL check.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh

import canned
import estimator as est
from canned import feature_column as fc
from canned import head as head_lib
from estimator.fn_args import fn_args
from estimator.model.padding import MASK_KEY, RowPadding, elementwise

RNG = np.random.default_rng(3)
N = 75  # batches of 16: four full ones, then one of 11
WORDS = np.array([f"w{i}" for i in range(30)], dtype=object)
FEATURES = {
    "word": RNG.choice(WORDS, size=N),
    "multi": RNG.choice(WORDS, size=(N, 2)),
    "age": RNG.uniform(18, 80, size=N).astype(np.float32),
    "weight": RNG.uniform(0.5, 2.0, size=N).astype(np.float32),
}
BINARY = (RNG.uniform(size=N) < 0.4).astype(np.int64)
CLASSES = RNG.integers(0, 3, size=N)
TARGETS = RNG.normal(size=(N, 2)).astype(np.float32)


def columns():
    return [
        fc.categorical_column_with_hash_bucket("word", 20),
        fc.categorical_column_with_hash_bucket("multi", 15),
        fc.bucketized_column(fc.numeric_column("age"), [30.0, 50.0]),
        fc.numeric_column("age"),
    ]


def deep_columns():
    return [
        fc.embedding_column(fc.categorical_column_with_hash_bucket("word", 20), 3),
        fc.embedding_column(fc.categorical_column_with_hash_bucket("multi", 15), 2, "sqrtn"),
        fc.numeric_column("age", normalizer_fn=lambda x: (x - 50.0) / 20.0),
    ]


class KeepState(est.SessionRunHook):
    def end(self, session):
        self.state = jax.device_get(session.state)


def fit(model, labels):
    """Two epochs of training (150 examples: 9 batches of 16, then one of 6), then
    evaluation (4 batches of 16, then one of 11): ``(final state, metrics)``."""
    keep = KeepState()
    model.train(
        est.inputs.numpy_input_fn(FEATURES, labels, batch_size=16, num_epochs=2, shuffle=True),
        hooks=[keep],
    )
    metrics = model.evaluate(
        est.inputs.numpy_input_fn(FEATURES, labels, batch_size=16, shuffle=False)
    )
    return keep.state, metrics


MODELS = {
    # FTRL with L2 shrinkage changes every row it touches, gradient or not: padded examples
    # (copies of the batch's first one) must look up only rows the batch looks up.
    "binary_weighted_shrinkage": (
        lambda d, c: canned.LinearClassifier(
            columns(),
            d,
            weight_column="weight",
            optimizer=lambda: canned.ftrl(0.2, l2_shrinkage_regularization_strength=0.5),
            config=c,
        ),
        BINARY,
    ),
    "three_classes_mean_combiner": (
        lambda d, c: canned.LinearClassifier(
            columns(), d, n_classes=3, sparse_combiner="mean", config=c
        ),
        CLASSES,
    ),
    "multi_label_weighted": (
        lambda d, c: canned.LinearEstimator(
            head_lib.MultiLabelHead(
                3, weight_column="weight", thresholds=[0.3], classes_for_class_based_metrics=[1]
            ),
            columns(),
            d,
            config=c,
        ),
        (RNG.uniform(size=(N, 3)) < 0.4).astype(np.int64),
    ),
    "multi_head": (
        lambda d, c: canned.LinearEstimator(
            head_lib.MultiHead(
                [
                    head_lib.BinaryClassHead(name="clicked"),
                    head_lib.RegressionHead(name="spent", weight_column="weight"),
                ]
            ),
            columns(),
            d,
            config=c,
        ),
        {"clicked": BINARY, "spent": TARGETS[:, :1]},
    ),
    "dnn": (
        lambda d, c: canned.DNNClassifier([8, 4], deep_columns(), d, n_classes=3, config=c),
        CLASSES,
    ),
    "regression_2d_sum": (
        lambda d, c: canned.LinearRegressor(
            columns(),
            d,
            label_dimension=2,
            loss_reduction=head_lib.Reduction.SUM,
            weight_column="weight",
            config=c,
        ),
        TARGETS,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_a_padded_last_batch_gives_the_shorter_batchs_step_and_metrics(tmp_path, kind):
    make, labels = MODELS[kind]
    config = est.RunConfig(tf_random_seed=7)
    padded = make(str(tmp_path / "padded"), config)
    unpadded = make(str(tmp_path / "unpadded"), config)
    unpadded.runtime.model.masks_padding = False  # the engine's path without padding
    assert_same_runs(padded, unpadded, labels)


def assert_same_runs(padded, unpadded, labels):
    state, metrics = fit(padded, labels)
    state_ref, metrics_ref = fit(unpadded, labels)
    # One program per mode with padding; the shorter batches compile their own without.
    assert padded.runtime.compile_counts() == {"train": 1, "eval": 1}
    assert unpadded.runtime.compile_counts() == {"train": 2, "eval": 2}
    for name in state_ref.trainable:
        np.testing.assert_allclose(
            state.trainable[name], state_ref.trainable[name], rtol=2e-5, atol=1e-6, err_msg=name
        )
    for a, b in zip(
        jax.tree.leaves(state.opt_state), jax.tree.leaves(state_ref.opt_state), strict=True
    ):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)
    assert sorted(metrics) == sorted(metrics_ref)
    for key, value in metrics_ref.items():
        np.testing.assert_allclose(metrics[key], value, rtol=2e-5, atol=1e-6, err_msg=key)


@pytest.mark.slow
def test_a_padded_last_batch_shards_over_a_mesh(tmp_path):
    """The last batch of 11 does not split over 4 devices (it used to be replicated);
    padded to 16 it is sharded like the others, with the single device's results."""
    mesh = Mesh(np.array(jax.devices()[:4]), ("data",))
    make, labels = MODELS["binary_weighted_shrinkage"]
    sharded = make(str(tmp_path / "mesh"), est.RunConfig(tf_random_seed=7, mesh=mesh))
    single = make(str(tmp_path / "one"), est.RunConfig(tf_random_seed=7))
    single.runtime.model.masks_padding = False
    (state, metrics), (state_ref, metrics_ref) = fit(sharded, labels), fit(single, labels)
    assert sharded.runtime.compile_counts() == {"train": 1, "eval": 1}
    for name in state_ref.trainable:
        np.testing.assert_allclose(
            state.trainable[name], state_ref.trainable[name], rtol=2e-5, atol=1e-6, err_msg=name
        )
    for key, value in metrics_ref.items():
        np.testing.assert_allclose(metrics[key], value, rtol=2e-5, atol=1e-6, err_msg=key)


def test_model_fn_reads_the_row_mask_never_a_feature(tmp_path):
    seen = []

    @est.masks_padding
    def model_fn(features, labels, mode):
        mask = est.row_mask()
        seen.append((mode, sorted(features), None if mask is None else mask.shape))
        w = est.get_variable("w", [1], initializer=est.initializers.zeros_initializer())
        predictions = features["x"] * w
        if mode == est.ModeKeys.PREDICT:
            return est.EstimatorSpec(mode, predictions={"y": predictions})
        est.identity(mask, name="mask")
        loss = jnp.sum(mask * (predictions - labels) ** 2) / jnp.sum(mask)
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1))

    masks = []

    class Fetch(est.SessionRunHook):
        def before_run(self, run_context):
            return est.SessionRunArgs("mask")

        def after_run(self, run_context, run_values):
            masks.append(np.asarray(run_values.results).tolist())

    x = np.arange(10, dtype=np.float32)
    model = est.Estimator(model_fn, str(tmp_path), config=est.RunConfig(steps_per_execution=1))
    feed = est.inputs.numpy_input_fn({"x": x}, 2 * x, batch_size=4, shuffle=False)
    model.train(feed, hooks=[Fetch()])
    # Batches of 4, 4 and 2: the last is padded to 4 and masked.
    assert masks == [[1.0] * 4, [1.0] * 4, [1.0, 1.0, 0.0, 0.0]]
    assert model.runtime.compile_counts() == {"train": 1}
    predictions = [p["y"] for p in model.predict(feed)]
    assert len(predictions) == 10  # predict() is never padded
    assert {s[1] == ["x"] for s in seen} == {True}  # the mask is not a feature
    assert {s[2] for s in seen if s[0] == est.ModeKeys.TRAIN} == {(4,)}
    assert {s[2] for s in seen if s[0] == est.ModeKeys.PREDICT} == {None}


def test_a_head_refuses_logits_without_a_row_per_example_of_a_padded_batch(tmp_path):
    head = head_lib.BinaryClassHead()

    @est.masks_padding
    def model_fn(features, labels, mode):
        logits = est.layers.dense(features["x"], 1)
        return head.create_estimator_spec(
            features=features,
            mode=mode,
            logits=logits[:2],
            labels=labels[:2],
            optimizer=optax.sgd(0.1),
        )

    x = np.ones((6, 1), np.float32)
    model = est.Estimator(model_fn, str(tmp_path))
    with pytest.raises(
        ValueError, match=r"padded to 4 examples, but the logits have shape \(2, 1\)"
    ):
        model.train(est.inputs.numpy_input_fn({"x": x}, np.ones(6), batch_size=4, shuffle=False))


def test_row_padding_repeats_the_first_example_up_to_the_first_batchs_size():
    pad = RowPadding()
    full = ({"a": np.arange(4.0), "b": np.ones((4, 2), np.int32)}, np.arange(4))
    features, labels = pad(*full)
    np.testing.assert_array_equal(features[MASK_KEY], np.ones(4, np.float32))
    assert features["a"] is full[0]["a"]  # full batches are not copied
    features, labels = pad(
        {"a": np.array([5.0, 6.0]), "b": np.full((2, 2), 3, np.int32)}, np.array([7, 8])
    )
    np.testing.assert_array_equal(features["a"], [5.0, 6.0, 5.0, 5.0])
    np.testing.assert_array_equal(features["b"], np.full((4, 2), 3))
    np.testing.assert_array_equal(labels, [7, 8, 7, 7])
    np.testing.assert_array_equal(features[MASK_KEY], [1.0, 1.0, 0.0, 0.0])
    # A batch larger than the first is not cut: it gets a mask of its own size.
    features, _ = pad({"a": np.zeros(6), "b": np.zeros((6, 2))}, np.zeros(6))
    assert features[MASK_KEY].shape == (6,) and features["a"].shape == (6,)
    # Features that are not a dict of batch-major arrays pass as they are.
    assert RowPadding()(np.zeros((3, 2)), None)[0].shape == (3, 2)
    odd = ({"a": np.zeros(3), "scalar": np.float32(1)}, None)
    assert MASK_KEY not in RowPadding()(*odd)[0]


def test_a_block_of_full_batches_gets_the_masks_each_batch_would():
    # 3 batches of 4 rows one after the other: each batch alone gets a mask of 4 ones, so
    # the block gets 12 ones; its arrays are not copied.
    block = ({"a": np.arange(12.0), "b": np.ones((12, 2), np.int32)}, np.arange(12))
    pad = RowPadding()
    features, labels = pad.block(*block, 3)  # the first batches seen: 4 rows each
    np.testing.assert_array_equal(features[MASK_KEY], np.ones(12, np.float32))
    assert features["a"] is block[0]["a"] and labels is block[1]
    one, _ = pad({"a": np.arange(4.0), "b": np.ones((4, 2), np.int32)}, np.arange(4))
    np.testing.assert_array_equal(one[MASK_KEY], np.ones(4, np.float32))  # as set by it
    # Rows that are not all host arrays of the block's length: left to batch by batch.
    assert pad.block({"a": np.arange(12.0), "s": np.float32(1)}, None, 3) is None
    # Padding off (features not a dict): the block passes as it is, as each batch would.
    off = RowPadding()
    assert off.block(np.zeros((12, 2)), None, 3)[0].shape == (12, 2)
    assert off(np.zeros((4, 2)), None)[0].shape == (4, 2)


@pytest.mark.slow
def test_wide_and_deep_padded_steps_and_summaries_are_the_shorter_batchs(tmp_path):
    """The comparison of ``assert_same_runs`` for wide & deep (weighted), with every
    step's summaries written (save_summary_steps=1): the last of the 10 steps is the
    padded one (6 examples of 16). Its hidden-layer zero fractions and activation
    histograms (TF's DNN summaries) leave out the padded rows."""
    config = est.RunConfig(tf_random_seed=7, save_summary_steps=1)

    def make(name):
        return canned.DNNLinearCombinedClassifier(
            str(tmp_path / name),
            linear_feature_columns=columns(),
            dnn_feature_columns=deep_columns(),
            dnn_hidden_units=[8, 4],
            weight_column="weight",
            config=config,
        )

    padded, unpadded = make("padded"), make("unpadded")
    unpadded.runtime.model.masks_padding = False
    assert_same_runs(padded, unpadded, BINARY)
    a, b = events(padded.model_dir), events(unpadded.model_dir)
    scalars, histograms = a.Tags()["scalars"], a.Tags()["histograms"]
    assert "dnn/hiddenlayer_0/fraction_of_zero_values" in scalars
    assert "dnn/hiddenlayer_1/activation" in histograms and "linear/activation" in histograms
    assert not [t for t in scalars + histograms if "row_mask" in t]
    assert sorted(scalars) == sorted(b.Tags()["scalars"])
    for tag in scalars:
        if tag == "global_step/sec":
            continue
        last, last_ref = a.Scalars(tag)[-1], b.Scalars(tag)[-1]
        assert last.step == last_ref.step == 9
        np.testing.assert_allclose(last.value, last_ref.value, rtol=2e-5, atol=1e-6, err_msg=tag)
    for tag in histograms:
        last, last_ref = a.Histograms(tag)[-1], b.Histograms(tag)[-1]
        assert last.step == last_ref.step == 9
        h, h_ref = last.histogram_value, last_ref.histogram_value
        assert h.num == h_ref.num  # the 6 real rows' values only
        np.testing.assert_allclose(
            [h.sum, h.min, h.max], [h_ref.sum, h_ref.min, h_ref.max], rtol=2e-5, atol=1e-6
        )


def test_batch_normalization_keeps_its_own_program_for_the_last_batch(tmp_path):
    """Batch statistics would include padded rows: a DNN with batch_norm is not padded."""
    model = canned.DNNClassifier([4], deep_columns(), str(tmp_path), batch_norm=True)
    assert not model.runtime.model.masks_padding
    assert canned.DNNClassifier(
        [4], deep_columns(), str(tmp_path / "b")
    ).runtime.model.masks_padding


def events(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(logdir, size_guidance={"scalars": 0, "histograms": 0})
    accumulator.Reload()
    return accumulator


def test_elementwise_tells_functions_that_cannot_see_other_examples():
    for fn in (lambda x: (x - 50.0) / 20.0, jax.nn.relu, jnp.exp, jax.nn.selu):
        assert elementwise(fn, (2, 3))
    assert elementwise(lambda x: jnp.where(x > 0, x, 0.1 * x), (2, 1))
    for fn in (
        lambda x: (x - x.mean()) / x.std(),  # batch statistics
        lambda x: x / jnp.sum(x, -1, keepdims=True),  # a reduction (per example, but unproven)
        lambda x: x - x[0],  # another example's value
        lambda x: float(x),  # cannot be traced
    ):
        assert not elementwise(fn, (2, 3))


def _marked(model) -> bool:
    return model.runtime.model.masks_padding


def test_functions_of_the_users_that_are_not_elementwise_keep_batches_unpadded(tmp_path):
    """A canned model runs padded batches only when every function of the user's it applies
    on the device works example by example: TF gives a batch-statistics normalizer or loss
    the shorter batch's examples alone."""
    d = str(tmp_path)

    def age(normalizer):
        return [fc.numeric_column("age", normalizer_fn=normalizer)]

    batch_mean = lambda x: x - jnp.mean(x)  # noqa: E731
    assert _marked(canned.LinearRegressor(age(lambda x: (x - 50.0) / 20.0), d))
    assert not _marked(canned.LinearRegressor(age(batch_mean), d))
    weight = fc.numeric_column("weight", normalizer_fn=lambda w: w / jnp.mean(w))
    assert not _marked(canned.LinearClassifier(columns(), d, weight_column=weight))
    assert _marked(canned.DNNRegressor([4], deep_columns(), d, activation_fn=jax.nn.elu))
    assert not _marked(canned.DNNRegressor([4], deep_columns(), d, activation_fn=batch_mean))
    assert not _marked(
        canned.DNNLinearCombinedRegressor(
            d, columns(), dnn_feature_columns=age(batch_mean), dnn_hidden_units=[4]
        )
    )

    def loss_fn(labels, logits):
        return (labels - logits) ** 2

    heads = {
        head_lib.PoissonRegressionHead(): True,  # TF's own loss and exp link
        head_lib.RegressionHead(inverse_link_fn=jnp.exp): True,
        head_lib.RegressionHead(inverse_link_fn=batch_mean): False,
        head_lib.RegressionHead(loss_fn=loss_fn): False,  # a user loss may reduce over rows
        head_lib.MultiHead(
            [head_lib.BinaryClassHead(name="a"), head_lib.RegressionHead(name="b", loss_fn=loss_fn)]
        ): False,
    }
    for head, expected in heads.items():
        assert _marked(canned.LinearEstimator(head, columns(), d)) is expected


def test_only_per_example_histograms_leave_the_padding_out(tmp_path):
    @est.masks_padding
    def model_fn(features, labels, mode):
        w = est.get_variable("w", [4, 3], initializer=est.initializers.ones_initializer())
        x = features["x"] @ w  # [batch, 3]
        est.summary.histogram("w", w)  # [4, 3] like a batch of 4: all 12 values, always
        est.summary.histogram("x", x, per_example=True)
        loss = jnp.sum(est.row_mask() * jnp.sum(x, 1)) / jnp.sum(est.row_mask())
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.0))

    model = est.Estimator(model_fn, str(tmp_path), est.RunConfig(save_summary_steps=1))
    x = np.ones((6, 4), np.float32)
    model.train(est.inputs.numpy_input_fn({"x": x}, None, batch_size=4, shuffle=False))
    acc = events(str(tmp_path))
    assert [h.histogram_value.num for h in acc.Histograms("w")] == [12, 12]
    assert [h.histogram_value.num for h in acc.Histograms("x")] == [12, 6]  # 2 real rows


def test_marking_wraps_the_function_and_works_on_methods():
    class Model:
        def model_fn(self, features, labels, mode):
            raise AssertionError("not called")

    model = Model()
    marked = est.masks_padding(model.model_fn)
    assert marked.masks_padding and not hasattr(Model.model_fn, "masks_padding")
    assert fn_args(marked) == ("features", "labels", "mode")
