"""SDCA (``LinearSDCA``, the kernel, its losses) against TF 2.15.

TF 2.15.1 + tensorflow-estimator 2.15.0 ran the scripts described next to each number on
the same data; TF is never imported here. TF's kernel visits the examples of a batch in a
random order (from ``std::random_device``), so TF itself is reproducible only with one
example per call: the exact comparisons below use one-example batches; with larger batches
both converge to the same optimum, which is compared too.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import Mesh
from synthetic import lcg

import canned
import estimator as est
from canned import feature_column as fc
from canned.sdca import LinearSDCA, sdca_fprint, sdca_optimizer, sdca_shrink_l1

# ------------------------------------------------------------------ the kernel, every loss

SPARSE = [
    [(0, 1.0), (2, 0.5)], [(1, 1.0)], [(0, 2.0), (3, 1.0)], [(2, 1.0)], [(1, 0.5), (3, 0.5)],
    [(0, 1.0)], [(3, 2.0)], [(1, 1.0), (2, 1.0)],
]  # fmt: skip
X = np.array(
    [[0.5, -1.0], [1.5, 0.3], [-0.7, 0.8], [0.1, 0.1], [2.0, -0.5], [-1.2, -0.9], [0.9, 1.1],
     [-0.3, 0.4]],
    np.float32,
)  # fmt: skip
LABELS = {
    "binary": np.array([1, 0, 1, 1, 0, 0, 1, 0], np.float32),
    "real": np.array([0.5, 1.2, -0.3, 0.0, 2.0, -1.0, 0.7, 0.1], np.float32),
    "count": np.array([1, 0, 3, 2, 0, 1, 4, 0], np.float32),
}
WEIGHTS = np.array([1.0, 2.0, 0.5, 1.0, 1.0, 1.5, 1.0, 0.7], np.float32)
LOSS_LABELS = {
    "logistic_loss": "binary",
    "squared_loss": "real",
    "hinge_loss": "binary",
    "smooth_hinge_loss": "binary",
    "poisson_loss": "count",
}


def two_epochs_one_example_at_a_time(op, loss, labels, l1=0.5, l2=2.0):
    """Each example in turn, twice, through ``op`` (TF's ``sdca_optimizer`` signature): one
    sparse group (4 ids, with values), a dense group of 2 and a bias (dense ones), the
    example states and weights carried from call to call as ``_SDCAModel.minimize`` does."""
    table, dense, bias = np.zeros(4, np.float32), np.zeros(2, np.float32), np.zeros(1, np.float32)
    state = np.zeros((8, 4), np.float32)
    for _ in range(2):
        for i in range(8):
            ids = [f for f, _ in SPARSE[i]]
            unique = sorted(set(ids))
            new_state, sparse_delta, dense_delta = op(
                sparse_example_indices=[np.zeros(len(ids), np.int64)],
                sparse_feature_indices=[np.array(ids, np.int64)],
                sparse_feature_values=[np.array([v for _, v in SPARSE[i]], np.float32)],
                dense_features=[X[i : i + 1], np.ones((1, 1), np.float32)],
                example_weights=WEIGHTS[i : i + 1],
                example_labels=labels[i : i + 1],
                sparse_indices=[np.array(unique, np.int64)],
                sparse_weights=[table[unique]],
                dense_weights=[dense, bias],
                example_state_data=state[i : i + 1],
                loss_type=loss,
                l1=l1,
                l2=l2,
                num_loss_partitions=1,
                num_inner_iterations=1,
                adaptative=False,
            )
            state[i] = np.asarray(new_state)[0]
            table[unique] += np.asarray(sparse_delta[0]).ravel()
            dense += np.asarray(dense_delta[0]).ravel()
            bias += np.asarray(dense_delta[1]).ravel()
    return {"table": table, "dense": dense, "bias": bias, "dual": state[:, 0],
            "primal": state[:, 1], "dualloss": state[:, 2]}  # fmt: skip


# From TF 2.15.1: two_epochs_one_example_at_a_time(tf.compat.v1.train.sdca_optimizer, ...)
# (the unshrunk weights; the example states' dual, primal loss and dual loss).
TF_KERNEL = {
    "logistic_loss": {
        "table": [0.10842137, -0.592242181, 0.207334042, 0.404964805],
        "dense": [-0.222703189, 0.342074752],
        "bias": [-0.256443352],
        "dual": [
            0.454758137,
            -0.348218471,
            0.444318116,
            0.480464548,
            -0.389743596,
            -0.454822332,
            0.391321182,
            -0.418822229,
        ],
        "primal": [
            0.693147182,
            1.1902343,
            0.335099876,
            0.693574727,
            0.632413864,
            1.14869678,
            0.668713987,
            0.390110582,
        ],
        "dualloss": [
            -0.648103178,
            -1.12775493,
            -0.322114587,
            -0.673897862,
            -0.59047848,
            -0.97477138,
            -0.592536688,
            -0.467643231,
        ],
    },
    "squared_loss": {
        "table": [-0.0913679004, 0.34210819, 0.0219210815, 0.103642136],
        "dense": [0.948700428, -0.0248766989],
        "bias": [0.340474159],
        "dual": [
            0.117538318,
            0.178429455,
            -0.0457120128,
            -0.0864004344,
            0.511768162,
            -0.169708073,
            -0.0128718996,
            0.10210491,
        ],
        "primal": [
            1.27438943e-05,
            0.000504793657,
            0.000566445,
            0.010582827,
            0.273385346,
            0.0651524439,
            8.2501515e-08,
            0.0103462078,
        ],
        "dualloss": [
            -0.0743801668,
            -0.488827199,
            -0.0123051694,
            0.000389251072,
            -0.771594346,
            -0.182955533,
            0.0116312299,
            -0.0022699968,
        ],
    },
    "hinge_loss": {
        "table": [0.25, -0.900829494, 0.399999976, 0.541833878],
        "dense": [0.0453739017, 0.631946683],
        "bias": [-0.349963009],
        "dual": [1, -0.360728413, 1, 1, -0.760404229, -1, 0.481934935, -1],
        "primal": [
            1.13579655,
            1.08112264,
            0.457339466,
            0.851933718,
            0.768631101,
            2.04761934,
            0.833334327,
            0.386390299,
        ],
        "dualloss": [
            -0.571428597,
            -0.47235024,
            -0.28438285,
            -0.996132612,
            -0.493054301,
            -0.996890187,
            -0.244517729,
            -0.699999988,
        ],
    },
    "smooth_hinge_loss": {
        "table": [0.18281813, -0.639632583, 0.295642406, 0.418086946],
        "dense": [-0.076567471, 0.360733092],
        "bias": [-0.149168536],
        "dual": [
            0.595041335,
            -0.3045654,
            0.58961761,
            0.747578323,
            -0.432640463,
            -0.546015143,
            0.378842652,
            -0.648305893,
        ],
        "primal": [0.5, 0.662018538, 0.25, 0.5, 0.38088727, 1.05767047, 0.432738185, 0.225876167],
        "dualloss": [
            -0.297520667,
            -0.339463323,
            -0.147404402,
            -0.373825192,
            -0.240470544,
            -0.422546297,
            -0.197147503,
            -0.266652763,
        ],
    },
    "poisson_loss": {
        "table": [0.215303883, -0.731527448, 0.140005291, 0.747832835],
        "dense": [-0.483957887, 0.523377717],
        "bias": [-0.0797094703],
        "dual": [
            0.0660986826,
            -0.400934875,
            0.668769836,
            0.720564008,
            -0.375164777,
            -0.202840522,
            0.674431503,
            -0.676575422,
        ],
        "primal": [
            1.01594543,
            1.31281567,
            0.0791304335,
            1.02091062,
            0.5002352,
            1.60513103,
            -0.210994706,
            0.54705143,
        ],
        "dualloss": [
            -1,
            -1.29136777,
            -0.0910320953,
            -0.873362541,
            -0.630137682,
            -1.48386514,
            0.93770051,
            -0.615095735,
        ],
    },
}


@pytest.mark.parametrize("loss", sorted(LOSS_LABELS))
def test_kernel_matches_tfs_for_every_loss(loss):
    ours = two_epochs_one_example_at_a_time(sdca_optimizer, loss, LABELS[LOSS_LABELS[loss]])
    for key, expected in TF_KERNEL[loss].items():
        np.testing.assert_allclose(ours[key], expected, rtol=1e-5, atol=1e-6, err_msg=key)


def test_fingerprints_and_shrink_are_tfs():
    # From TF 2.15.1: tf.compat.v1.train.sdca_fprint(["abc", "1"]).
    np.testing.assert_array_equal(
        sdca_fprint(["abc", "1"]),
        [[4143508125394299908, -6879828354153669051], [5308794677172709703, 4629402678501957187]],
    )
    # sign(w) * max(|w| - l1 / l2, 0) with l1 / l2 = 0.25.
    (shrunk,) = sdca_shrink_l1([np.array([1.0, -0.1, -0.5, 0.25])], l1=0.5, l2=2.0)
    np.testing.assert_allclose(shrunk, [0.75, 0.0, -0.25, 0.0])
    with pytest.raises(ValueError, match="Unsupported loss_type"):
        two_epochs_one_example_at_a_time(sdca_optimizer, "cubic_loss", LABELS["real"])
    with pytest.raises(ValueError, match="Input must be a vector"):
        sdca_fprint([["a"]])


# ------------------------------------------------------------------ the linear estimators


def data(n=30, seed=11):
    """30 examples: x (2 numbers), c (two of "a", "b", "c", "" per example: repeats and
    blanks), a weight, a unique id; a binary and a real label."""
    u = lcg(seed, n * 6).reshape(n, 6)
    x = (u[:, :2] * 2 - 1).astype(np.float32)
    c = np.array(["a", "b", "c", ""], object)[(u[:, 2:4] * 4).astype(int)]
    w = (0.5 + u[:, 4]).astype(np.float32)[:, None]
    has_a = (c == "a").any(1)
    y = ((x[:, 0] - x[:, 1] + has_a - 0.2 + (u[:, 5] - 0.5)) > 0).astype(np.int64)[:, None]
    yr = (2 * x[:, 0] - x[:, 1] + (c == "b").any(1) + (u[:, 5] - 0.5)).astype(np.float32)
    ids = np.array([f"example-{i}" for i in range(n)], object)
    return {"x": x, "c": c, "w": w, "id": ids}, y, yr[:, None]


def _columns():
    return [fc.numeric_column("x", shape=(2,)),
            fc.categorical_column_with_vocabulary_list("c", ["a", "b", "c"])]  # fmt: skip


NAMES = ["linear/linear_model/x/weights", "linear/linear_model/c/weights",
         "linear/linear_model/bias_weights"]  # fmt: skip

# From TF 2.15.1: LinearClassifier / LinearRegressor(_columns(), weight_column="w",
# optimizer=LinearSDCA("id", ...)), trained on tf.data.Dataset.from_tensor_slices((features,
# labels)).repeat(epochs).batch(batch), then evaluated on the 30 examples in one batch:
# (kind, batch, epochs, LinearSDCA arguments) -> eval loss and the weights of NAMES.
TF_RUNS = {
    "classifier_one_example_per_step": (
        ("classifier", 1, 3,
         dict(symmetric_l1_regularization=0.5, symmetric_l2_regularization=2.0)),
        0.4243462383747101,
        [[0.9212969541549683, -0.7420247197151184],
         [0.46674180030822754, -0.47640013694763184, 0.0], [0.0]],
    ),
    "regressor_one_example_per_step": (
        ("regressor", 1, 3,
         dict(symmetric_l1_regularization=0.3, symmetric_l2_regularization=4.0)),
        0.33551520109176636,
        [[1.4525396823883057, -0.5536823868751526],
         [0.03096582740545273, 0.5801023244857788, -0.05333380401134491], [0.2243751436471939]],
    ),
    # Batches of 10, 60 epochs: converged (two TF runs agree to 1e-7 although TF's order is
    # random).
    "classifier_converged": (
        ("classifier", 10, 60, dict(symmetric_l2_regularization=2.0)),
        0.3984077572822571,
        [[1.038472056388855, -0.8829621076583862],
         [0.6073153018951416, -0.5204415321350098, 0.07057870179414749], [-0.05179918557405472]],
    ),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("run", sorted(TF_RUNS))
def test_linear_estimators_match_tf(tmp_path, run):
    (kind, batch, epochs, arguments), tf_loss, tf_weights = TF_RUNS[run]
    features, y, yr = data()
    sdca = LinearSDCA("id", table_capacity=64, **arguments)
    if kind == "classifier":
        model = canned.LinearClassifier(_columns(), str(tmp_path), weight_column="w",
                                        optimizer=sdca)  # fmt: skip
        labels = y
    else:
        model = canned.LinearRegressor(_columns(), str(tmp_path), weight_column="w",
                                       optimizer=sdca)  # fmt: skip
        labels = yr
    model.train(est.inputs.numpy_input_fn(features, labels, batch_size=batch,
                                          num_epochs=epochs, shuffle=False))  # fmt: skip
    assert model.get_variable_value("global_step") == 30 // batch * epochs
    loss = model.evaluate(est.inputs.numpy_input_fn(features, labels, batch_size=30,
                                                    shuffle=False))["loss"]  # fmt: skip
    assert abs(loss - tf_loss) < 2e-6, (loss, tf_loss)
    for name, expected in zip(NAMES, tf_weights, strict=True):
        np.testing.assert_allclose(model.get_variable_value(name).ravel(), expected, atol=2e-6)
    # TF's slots and table; the model's weights are the unshrunk ones after the L1 step.
    unshrunk = model.get_variable_value("linear/linear_model/x/weights_unshrunk").ravel()
    l1, l2 = (
        arguments.get("symmetric_l1_regularization", 0.0),
        arguments["symmetric_l2_regularization"],
    )
    np.testing.assert_allclose(
        np.sign(unshrunk) * np.maximum(np.abs(unshrunk) - l1 / l2, 0), tf_weights[0], atol=2e-6
    )
    assert model.get_variable_value("ShardedMutableHashTable-1-of-1-values").shape == (64, 4)
    assert model.get_variable_value("linear/sdca/examples_seen") == 30
    if kind == "classifier":
        _predicts_and_serves_without_example_ids(model, features, tmp_path)


@pytest.mark.slow
def test_a_mesh_trains_as_one_device(tmp_path):
    # Batches of 10 split over 2 devices (the example table, the sequential per-example
    # updates and their random order): the same variables and loss as on one device.
    features, y, _ = data()
    results = []
    for i, mesh in enumerate([None, Mesh(np.array(jax.devices()[:2]), ("data",))]):
        model = canned.LinearClassifier(
            _columns(), str(tmp_path / str(i)), weight_column="w",
            optimizer=LinearSDCA("id", table_capacity=64, symmetric_l2_regularization=1.0),
            config=est.RunConfig(mesh=mesh, tf_random_seed=3),
        )  # fmt: skip
        model.train(est.inputs.numpy_input_fn(features, y, batch_size=10, num_epochs=2,
                                              shuffle=False))  # fmt: skip
        loss = model.evaluate(est.inputs.numpy_input_fn(features, y, batch_size=30,
                                                        shuffle=False))["loss"]  # fmt: skip
        results.append((loss, [model.get_variable_value(name) for name in NAMES]))
    (loss, weights), (mesh_loss, mesh_weights) = results
    assert abs(mesh_loss - loss) < 1e-6
    for w, mesh_w in zip(weights, mesh_weights, strict=True):
        np.testing.assert_allclose(mesh_w, w, atol=1e-6)
    assert np.abs(weights[0]).max() > 0.1  # trained


def _predicts_and_serves_without_example_ids(model, features, tmp_path):
    # Nor the weights (as TF, only training and evaluation read them); given, they change
    # nothing, through predict() or a serving signature that parses them.
    without_ids = {k: v for k, v in features.items() if k not in ("id", "w")}
    (batch,) = model.predict(lambda: without_ids, yield_single_examples=False)
    (weighted,) = model.predict(
        lambda: {**without_ids, "w": features["w"]}, yield_single_examples=False
    )
    np.testing.assert_array_equal(weighted["logistic"], batch["logistic"])
    for spec, extra in [
        (fc.make_parse_example_spec(_columns()), {}),
        (fc.make_parse_example_spec([*_columns(), fc.numeric_column("w")]), {"w": features["w"]}),
    ]:
        export = model.export_saved_model(
            str(tmp_path / "export"), est.export.build_parsing_serving_input_receiver_fn(spec)
        )
        served = est.export.load(export).signatures["serving_default"](
            **{k: v.tolist() for k, v in {**without_ids, **extra}.items()}
        )
        np.testing.assert_allclose(served["scores"][:, 1], batch["logistic"].ravel(), atol=1e-6)


def test_errors_name_the_problem(tmp_path):
    sdca = LinearSDCA("id")
    # TF 2.15's messages.
    with pytest.raises(ValueError, match="symmetric_l2_regularization should be positive"):
        LinearSDCA("id", symmetric_l2_regularization=0.0)
    with pytest.raises(ValueError, match="symmetric_l1_regularization should be non-negative"):
        LinearSDCA("id", symmetric_l1_regularization=-1.0)
    with pytest.raises(ValueError, match="LinearSDCA cannot be used in a multi-class setting"):
        canned.LinearClassifier(_columns(), n_classes=3, optimizer=sdca)
    with pytest.raises(ValueError, match="LinearSDCA can only be used with one-dimensional"):
        canned.LinearRegressor(_columns(), label_dimension=2, optimizer=sdca)
    with pytest.raises(ValueError, match='sparse_combiner must be "sum" when optimizer'):
        canned.LinearClassifier(_columns(), optimizer=sdca, sparse_combiner="mean")
    with pytest.raises(ValueError, match="Unsupported head type"):
        canned.LinearEstimator(canned.PoissonRegressionHead(), _columns(), optimizer=sdca)
    with pytest.raises(ValueError, match="table_capacity must be a power of two"):
        LinearSDCA("id", table_capacity=100)
    features, y, yr = data()
    model = canned.LinearClassifier(_columns(), str(tmp_path / "a"), optimizer=sdca)
    with pytest.raises(ValueError, match="Only labels of 0.0 or 1.0 are supported right now"):
        model.train(lambda: (features, y * 0.5), steps=1)  # soft labels: not for SDCA
    without_ids = {k: v for k, v in features.items() if k != "id"}
    with pytest.raises(ValueError, match="Feature id is not in features dictionary: LinearSDCA"):
        model.train(lambda: (without_ids, y), steps=1)
    # 30 example ids, 16 slots: the run stops, naming the capacity.
    small = LinearSDCA("id", table_capacity=16)
    model = canned.LinearClassifier(_columns(), str(tmp_path / "b"), optimizer=small)
    with pytest.raises(ValueError, match="example table is full: its 16 slots"):
        model.train(lambda: (features, y), steps=2)


def _full_batch_passes(loss, labels, passes, adaptive):
    """``passes`` calls of sdca_optimizer on the whole batch (l2 = 2, no l1)."""
    table, dense, bias = np.zeros(4, np.float32), np.zeros(2, np.float32), np.zeros(1, np.float32)
    state = np.zeros((8, 4), np.float32)
    examples = [i for i in range(8) for _ in SPARSE[i]]
    ids = [f for row in SPARSE for f, _ in row]
    values = [v for row in SPARSE for _, v in row]
    for _ in range(passes):
        state, sparse_delta, dense_delta = sdca_optimizer(
            [np.array(examples)], [np.array(ids)], [np.array(values, np.float32)],
            [X, np.ones((8, 1), np.float32)], WEIGHTS, labels, [np.arange(4)], [table],
            [dense, bias], state, loss, l1=0.0, l2=2.0, num_loss_partitions=1,
            num_inner_iterations=1, adaptative=adaptive,
        )  # fmt: skip
        table = table + sparse_delta[0]
        dense, bias = dense + dense_delta[0], bias + dense_delta[1]
    return np.concatenate([table, dense, bias])


def test_full_batch_passes_reach_the_ridge_solution_in_order_and_adaptively():
    # Squared loss: SDCA's optimum is the weighted ridge regression
    # w* = (Xᵀ S X + l2 I)⁻¹ Xᵀ S y, with X the sparse group as 4 columns, the dense 2 and
    # the bias column: an independent closed form (float64 NumPy).
    design = np.zeros((8, 7))
    for i, row in enumerate(SPARSE):
        for f, v in row:
            design[i, f] = v
    design[:, 4:6], design[:, 6] = X, 1.0
    s, y = np.diag(WEIGHTS.astype(np.float64)), LABELS["real"].astype(np.float64)
    ridge = np.linalg.solve(design.T @ s @ design + 2.0 * np.eye(7), design.T @ s @ y)
    for adaptive in (False, True):
        w = _full_batch_passes("squared_loss", LABELS["real"], passes=200, adaptive=adaptive)
        np.testing.assert_allclose(w, ridge, atol=1e-5, err_msg=f"adaptive={adaptive}")
