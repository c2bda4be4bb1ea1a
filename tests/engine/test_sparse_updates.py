"""Sparse updates of lookup tables.

Tables read only through lookups are trained row by row: gradients for the looked-up rows,
the optimizer applied to those rows and their slots, scattered back; small tables are
updated whole under a mask of the looked-up rows instead (``WHOLE_ROWS_PER_ID``), with the
same result. For SGD, Adagrad and FTRL a row without gradient does not change under the
dense update either, so every path must give the same variables and slots; the dense
reference here is the same optimizer with its row-wise mark stripped (a plain
``optax.GradientTransformation``).
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh, PartitionSpec

import canned
import estimator as est
from canned import feature_column as fc
from estimator.compat import v1 as tf
from estimator.engine import init_run, table_groups
from estimator.engine import sparse as sparse_engine
from estimator.model.function import ModelFunction
from estimator.model.rows import lookup_rows

RNG = np.random.default_rng(0)
N = 192
WORDS = np.array([f"w{i}" for i in range(40)] + [""], dtype=object)
FEATURES = {
    "hashed": RNG.choice(WORDS, size=N),
    "vocab": RNG.choice(["a", "b", "c", "zz", ""], size=N).astype(object),  # zz: OOV
    "multi": RNG.choice(WORDS, size=(N, 3)),  # multivalent, with repeats and missing
    "age": RNG.uniform(18, 80, size=N).astype(np.float32),
    "weight": RNG.uniform(0.5, 2.0, size=N).astype(np.float32),
}
LABELS = (RNG.uniform(size=N) < 0.35).astype(np.int64)


def dense(transform):
    """The same transformation without its row-wise mark: the dense update."""
    return optax.GradientTransformation(transform.init, transform.update)


def linear_columns():
    hashed = fc.categorical_column_with_hash_bucket("hashed", 50)
    vocab = fc.categorical_column_with_vocabulary_list("vocab", ["a", "b", "c"], num_oov_buckets=2)
    return [
        hashed,
        vocab,
        fc.categorical_column_with_hash_bucket("multi", 30),
        fc.crossed_column(["hashed", vocab], 70),
        fc.bucketized_column(fc.numeric_column("age"), [30.0, 45.0, 60.0]),
    ]


class KeepState(est.SessionRunHook):
    """Keeps the final train state (variables and optimizer slots) on the host."""

    def end(self, session):
        self.state = jax.device_get(session.state)


def train(model, steps=None, epochs=2, batch_size=32, fn=None):
    keep = KeepState()
    fn = fn or est.inputs.numpy_input_fn(
        FEATURES, LABELS, batch_size=batch_size, num_epochs=epochs, shuffle=False
    )
    model.train(fn, steps=steps, hooks=[keep])
    model.final_state = keep.state
    return model


def assert_same_variables(a, b, rtol=1e-5, atol=1e-7):
    """Trainable variables and optimizer slots of the last train() of each are equal."""
    sa, sb = a.final_state, b.final_state
    assert sorted(sa.trainable) == sorted(sb.trainable)
    for name in sa.trainable:
        np.testing.assert_allclose(
            sa.trainable[name], sb.trainable[name], rtol=rtol, atol=atol, err_msg=name
        )
    slots_a, slots_b = jax.tree.leaves(sa.opt_state), jax.tree.leaves(sb.opt_state)
    assert len(slots_a) == len(slots_b)
    for x, y in zip(slots_a, slots_b, strict=True):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


def row_tables(model):
    return model.runtime.compiler(est.ModeKeys.TRAIN).info.row_tables


@pytest.fixture(params=["whole", "rows"])
def strategy(request, monkeypatch):
    """Each table updated whole under a row mask (the tables here are small), or row by
    row (gathered and scattered), as a table of more than ``WHOLE_ROWS_PER_ID`` rows per
    looked-up id is."""
    if request.param == "rows":
        monkeypatch.setattr(sparse_engine, "WHOLE_ROWS_PER_ID", 0)
    return request.param


def test_small_tables_are_updated_whole_without_summing_equal_ids(tmp_path):
    # 50, 5, 30, 70 and 4 rows, 32 to 96 ids a step: at most 16 rows per id, so every table
    # is updated whole under a mask of its looked-up rows; the step has no [ids, ids]
    # equality matrix (a dot) or sort to sum the gradients of equal ids.
    model = canned.LinearClassifier(
        linear_columns(), str(tmp_path), config=est.RunConfig(tf_random_seed=1)
    )
    train(model, steps=2)
    assert len(row_tables(model)) == 5  # still TF's sparse semantics (see the FTRL tests)
    (program,) = [
        p.executable
        for key, p in model.runtime.compiler(est.ModeKeys.TRAIN)._queue._programs.items()
        if key[0] == "step"
    ]
    hlo = program.as_text()
    assert " dot(" not in hlo and " sort(" not in hlo
    # 64 rows for 4 ids is 16 per id: whole; 65 rows: row by row.
    assert sparse_engine.whole_tables(
        {"a": 4, "b": 4}, {"a": np.zeros(64), "b": np.zeros(65)}
    ) == frozenset({"a"})


@pytest.mark.slow
def test_linear_classifier_row_updates_equal_the_dense_ftrl(tmp_path, strategy):
    config = est.RunConfig(tf_random_seed=1)
    sparse = canned.LinearClassifier(linear_columns(), str(tmp_path / "s"), config=config)
    plain = canned.LinearClassifier(
        linear_columns(),
        str(tmp_path / "d"),
        optimizer=lambda: dense(canned.ftrl(0.2)),
        weight_column="weight",
        config=config,
    )
    sparse_weighted = canned.LinearClassifier(
        linear_columns(), str(tmp_path / "w"), weight_column="weight", config=config
    )
    train(sparse)
    train(plain)
    train(sparse_weighted)
    # Every categorical column's weights (bucketized too) are updated row by row...
    assert row_tables(sparse) == tuple(
        f"linear/linear_model/{c}/weights"
        for c in ("age_bucketized", "hashed", "hashed_X_vocab", "multi", "vocab")
    )
    assert row_tables(plain) == ()  # ...and the unmarked FTRL updates them densely.
    # Weights and FTRL slots (accumulator, linear) as the dense update gives them; the
    # weighted pair shows that example weights reach the row gradients.
    assert_same_variables(sparse_weighted, plain)
    # A row never looked up keeps the initial slots: accumulator 0.1, linear 0.
    ftrl_state = [
        leaf for leaf in jax.tree.leaves(sparse.final_state.opt_state) if np.shape(leaf) == (50, 1)
    ]
    accumulator, linear = ftrl_state  # FtrlState's order: accumulator, then linear
    looked_up = {
        int(i)
        for i in fc.categorical_column_with_hash_bucket("hashed", 50)
        .host_op.apply(FEATURES)
        .ids.ravel()
        if i >= 0
    }
    untouched = sorted(set(range(50)) - looked_up)
    assert untouched, "the data should leave some of the 50 buckets empty"
    np.testing.assert_array_equal(accumulator[untouched], np.float32(0.1))
    np.testing.assert_array_equal(linear[untouched], 0.0)
    assert (accumulator[sorted(looked_up)] > np.float32(0.1)).all()


@pytest.mark.slow
def test_dnn_embedding_tables_row_updates_equal_the_dense_adagrad(tmp_path):
    def columns():
        return [
            fc.embedding_column(fc.categorical_column_with_hash_bucket("hashed", 60), 4),
            fc.embedding_column(fc.categorical_column_with_hash_bucket("multi", 30), 3, "sqrtn"),
            fc.numeric_column("age", normalizer_fn=lambda x: (x - 50.0) / 20.0),
        ]

    config = est.RunConfig(tf_random_seed=3)
    sparse = canned.DNNClassifier([8], columns(), str(tmp_path / "s"), config=config)
    plain = canned.DNNClassifier(
        [8],
        columns(),
        str(tmp_path / "d"),
        optimizer=lambda: dense(canned.get_optimizer_instance("Adagrad", 0.05)),
        config=config,
    )
    sparse_05 = canned.DNNClassifier(
        [8],
        columns(),
        str(tmp_path / "s05"),
        optimizer=lambda: canned.get_optimizer_instance("Adagrad", 0.05),
        config=config,
    )
    for model in (sparse, plain, sparse_05):
        train(model)
    prefix = "dnn/input_from_feature_columns/input_layer"
    assert row_tables(sparse) == (
        f"{prefix}/hashed_embedding/embedding_weights",
        f"{prefix}/multi_embedding/embedding_weights",
    )
    assert_same_variables(sparse_05, plain, rtol=2e-5, atol=1e-6)


def embedding_model_fn(features, labels, mode, params):
    table = est.get_variable(
        "embedding/table", [20, 3], initializer=est.initializers.random_normal_initializer()
    )
    # lookup_rows (the feature columns' lookup) reads -1 as "no row"; the public
    # est.layers.embedding_lookup refuses ids out of range, as TF's.
    rows = lookup_rows(table, features["ids"])  # [batch, 2, 3]
    logits = jnp.sum(rows, axis=(1, 2))
    loss = jnp.mean((logits - labels) ** 2)
    if params["dense_use"]:
        loss = loss + 0.01 * jnp.sum(table**2)  # the table read whole: no row updates
    return est.EstimatorSpec(mode, loss=loss, predictions=logits, train_op=params["opt"])


IDS = RNG.integers(-1, 12, size=(64, 2)).astype(np.int32)  # -1: no row; rows 12-19 never
TARGETS = RNG.normal(size=64).astype(np.float32)


def embedding_estimator(tmp_path, name, opt, dense_use=False, **config):
    return est.Estimator(
        embedding_model_fn,
        str(tmp_path / name),
        est.RunConfig(tf_random_seed=5, **config),
        params={"opt": opt, "dense_use": dense_use},
    )


def embedding_input(epochs=3):
    return est.inputs.numpy_input_fn(
        {"ids": IDS}, TARGETS, batch_size=16, num_epochs=epochs, shuffle=False
    )


@pytest.mark.parametrize(
    "dense_use, rows, sort",
    [(False, False, False), (False, True, False), (False, True, True), (True, False, False)],
    ids=["whole", "eq", "sort", "dense"],
)
def test_embedding_lookup_with_sparse_updates_equals_the_dense_adagrad(
    tmp_path, monkeypatch, dense_use, rows, sort
):
    if rows:  # row by row, as a large table (20 rows for 32 ids a step is updated whole)
        monkeypatch.setattr(sparse_engine, "WHOLE_ROWS_PER_ID", 0)
    if sort:  # equal ids summed by sorting (large batches) instead of an equality matrix
        monkeypatch.setattr(sparse_engine, "MATMUL_MAX_IDS", 0)
    sparse = embedding_estimator(tmp_path, "s", est.sparse_updates(optax.adagrad(0.1)), dense_use)
    plain = embedding_estimator(tmp_path, "d", optax.adagrad(0.1), dense_use)
    train(sparse, fn=embedding_input())
    train(plain, fn=embedding_input())
    assert row_tables(sparse) == (() if dense_use else ("embedding/table",))
    assert_same_variables(sparse, plain)


def test_optimizers_that_move_rows_without_gradient_need_lazy(tmp_path):
    for moving in (optax.adam(0.1), optax.sgd(0.1, momentum=0.9), optax.rmsprop(0.1)):
        with pytest.raises(ValueError, match="changes a row that has no gradient.*lazy=True"):
            est.sparse_updates(moving)
    with pytest.raises(ValueError, match="updates a row from the values of other rows"):
        est.sparse_updates(optax.chain(optax.clip_by_global_norm(0.01), optax.sgd(0.1)))
    # lazy=True: the looked-up rows only (TF Addons' LazyAdam). Batch 1 looks up rows 0-7,
    # batch 2 rows 0-3 only: lazily rows 4-7 keep their values in step 2; the dense Adam
    # moves them with the momentum of step 1.
    ids = np.array([[i % 8, (i + 1) % 8] for i in range(16)] + [[i % 4, -1] for i in range(16)])
    targets = np.linspace(-1.0, 1.0, 32, dtype=np.float32)

    class Tables(est.SessionRunHook):
        def after_run(self, run_context, run_values):
            self.seen.append(jax.device_get(run_context.session.state.trainable)["embedding/table"])

    def run(name, opt):
        e = embedding_estimator(tmp_path, name, opt)
        fn = est.inputs.numpy_input_fn({"ids": ids}, targets, batch_size=16, shuffle=False)
        hook = Tables()
        hook.seen = []
        e.train(fn, hooks=[hook])
        return hook.seen

    lazy = run("lazy", est.sparse_updates(optax.adam(0.1), lazy=True))
    plain = run("adam", optax.adam(0.1))
    np.testing.assert_allclose(lazy[0], plain[0], rtol=1e-6)  # every row had its gradient
    np.testing.assert_array_equal(lazy[1][4:8], lazy[0][4:8])
    assert np.abs(plain[1][4:8] - plain[0][4:8]).min() > 1e-3
    assert np.abs(lazy[1][:4] - lazy[0][:4]).min() > 1e-3


def test_ftrl_rows_not_looked_up_keep_their_values_as_tfs_sparse_kernel(tmp_path, strategy):
    # A table that starts non-zero: TF's SparseApplyFtrl never touches rows absent from the
    # batch; the dense FTRL recomputes every row from z = 0 and so sets them to 0.
    def model_fn(features, labels, mode, params):
        table = est.get_variable("table", [20, 1], initializer=est.initializers.ones_initializer())
        logits = jnp.sum(lookup_rows(table, features["ids"]), axis=(1, 2))  # -1: no row
        loss = jnp.mean((logits - labels) ** 2)
        return est.EstimatorSpec(mode, loss=loss, predictions=logits, train_op=params["opt"])

    def run(name, opt):
        e = est.Estimator(model_fn, str(tmp_path / name), params={"opt": opt})
        e.train(embedding_input(1))
        return e.get_variable_value("table")[12:, 0]  # rows 12-19: never looked up

    np.testing.assert_array_equal(run("sparse", canned.ftrl(0.2)), np.ones(8))
    np.testing.assert_array_equal(run("dense", dense(canned.ftrl(0.2))), np.zeros(8))


def test_a_non_finite_loss_leaves_tables_and_slots_unchanged(tmp_path, strategy):
    targets = TARGETS.copy()
    targets[20] = np.nan  # in the second batch of 16
    e = embedding_estimator(tmp_path, "nan", est.sparse_updates(optax.adagrad(0.1)))
    good = embedding_estimator(tmp_path, "good", est.sparse_updates(optax.adagrad(0.1)))
    fn = est.inputs.numpy_input_fn({"ids": IDS}, targets, batch_size=16, shuffle=False)
    keep = KeepState()
    with pytest.raises(est.NanLossDuringTrainingError):
        e.train(fn, hooks=[keep])
    e.final_state = keep.state
    train(good, steps=1, fn=embedding_input(1))  # the one finite step
    assert e.get_variable_value("global_step") == 1  # saved as the NaN's step, unchanged
    assert_same_variables(e, good, rtol=0, atol=0)


def test_resuming_from_a_checkpoint_continues_the_row_updates(tmp_path):
    opt = est.sparse_updates(optax.adagrad(0.1))
    straight = embedding_estimator(tmp_path, "straight", opt)
    train(straight, fn=embedding_input(2))
    resumed = embedding_estimator(tmp_path, "resumed", opt)
    resumed.train(embedding_input(1))
    again = embedding_estimator(tmp_path, "resumed", opt)  # a new Estimator: restores
    train(again, fn=embedding_input(1))
    assert_same_variables(straight, again, rtol=1e-6)
    # Fused calls of several steps and calls of one step run the same program.
    assert again.runtime.compile_counts()["train"] == 1


def test_sharded_tables_update_rows_as_replicated_ones(tmp_path):
    opt = est.sparse_updates(optax.adagrad(0.1))
    mesh = Mesh(np.array(jax.devices()[:4]), ("data",))
    single = embedding_estimator(tmp_path, "one", opt)
    sharded = embedding_estimator(
        tmp_path,
        "sharded",
        opt,
        mesh=mesh,
        variable_partitions={r"embedding/": PartitionSpec("data", None)},
    )
    train(single, fn=embedding_input(1))
    train(sharded, fn=embedding_input(1))
    assert row_tables(sharded) == ("embedding/table",)
    assert_same_variables(single, sharded, rtol=1e-5)


def test_tf1_optimizers_update_looked_up_rows_as_tfs_sparse_kernels(tmp_path):
    # TF 1 code through estimator.compat.v1: tf.nn.embedding_lookup trained by
    # AdagradOptimizer.minimize gets the row updates; MomentumOptimizer stays dense.
    import estimator.compat.v1 as tf

    class DenseAdagrad(tf.train.AdagradOptimizer):
        row_wise = False  # the same rule, updated densely: the reference

    def model_fn(features, labels, mode, params):
        table = tf.get_variable("embedding", [20, 3], initializer=tf.random_normal_initializer())
        ids = tf.maximum(features["ids"], 0)  # TF's lookup refuses -1
        logits = tf.reduce_sum(tf.nn.embedding_lookup(table, ids), axis=[1, 2])
        loss = tf.reduce_mean(tf.square(logits - labels))
        train_op = params["opt"]().minimize(loss, global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def run(name, opt):
        e = est.Estimator(
            model_fn, str(tmp_path / name), est.RunConfig(tf_random_seed=5), params={"opt": opt}
        )
        return train(e, fn=embedding_input(2))

    sparse = run("adagrad", lambda: tf.train.AdagradOptimizer(0.1))
    plain = run("dense", lambda: DenseAdagrad(0.1))
    momentum = run("momentum", lambda: tf.train.MomentumOptimizer(0.1, 0.9))
    assert row_tables(sparse) == ("embedding",)
    assert row_tables(plain) == () and row_tables(momentum) == ()
    assert_same_variables(sparse, plain)


@pytest.mark.parametrize("dense_use", [False, True], ids=["lookups", "dense"])
@pytest.mark.parametrize("opt", ["adagrad", "plain"])
def test_the_init_runs_plan_equals_the_planning_runs(dense_use, opt):
    # Two independent analyses of the same model: the init run's trace (lookups gather
    # from copies; init_run.abstract_init) and the planning run's (lookups read shadows;
    # sparse.plan). They agree on the tables and on the ids per step (16 rows x 2 ids).
    params = {
        "opt": est.sparse_updates(optax.adagrad(0.1)) if opt == "adagrad" else optax.adagrad(0.1),
        "dense_use": dense_use,
    }
    features, labels = {"ids": IDS[:16]}, TARGETS[:16]
    model = ModelFunction(embedding_model_fn, params, None, seed=0)
    state = init_run.abstract_init(model, est.ModeKeys.TRAIN, features, labels, model.key_data)
    (from_init,) = model.sparse_plans.values()

    def run(trainable, access, non_trainable, features, labels, global_step, rng):
        variables = {"trainable": trainable, "non_trainable": non_trainable}
        spec, _ = model.apply(
            est.ModeKeys.TRAIN, features, labels, variables, global_step, access, rng
        )
        return spec.loss, spec.train_op

    args = (state.non_trainable, features, labels, state.global_step, state.rng)
    planned = sparse_engine.plan(run, state.trainable, args)
    expected = {} if dense_use or opt == "plain" else {"embedding/table": 32}
    assert from_init == planned == expected


def test_a_table_replaced_by_init_from_checkpoint_after_its_reads_stays_dense(tmp_path):
    # BERT-style: model_fn reads the table (a lookup and a dense read), then
    # init_from_checkpoint replaces its initial value. The init run's trace must not take
    # the replaced value's lack of uses for "read only through lookups": the dense read's
    # gradient would be lost. Sparse and dense Adagrad then train the same table.
    source = str(tmp_path / "source")

    def model_fn(features, labels, mode, params):
        table = est.get_variable(
            "emb/table", [20, 3], initializer=est.initializers.random_normal_initializer()
        )
        rows = lookup_rows(table, features["ids"])  # -1: no row
        loss = jnp.mean((jnp.sum(rows, axis=(1, 2)) - labels) ** 2) + 0.01 * jnp.sum(table**2)
        if params["from"]:
            tf.train.init_from_checkpoint(params["from"], {"emb/": "emb/"})
        return est.EstimatorSpec(mode, loss=loss, predictions=rows, train_op=params["opt"])

    fn = est.inputs.numpy_input_fn({"ids": IDS[:16]}, TARGETS[:16], batch_size=16, shuffle=False)
    est.Estimator(model_fn, source, params={"opt": optax.adagrad(0.1), "from": None}).train(fn)
    tables = {}
    for name, opt in (("sparse", est.sparse_updates(optax.adagrad(0.1))), ("dense", None)):
        params = {"opt": opt or optax.adagrad(0.1), "from": source}
        e = est.Estimator(model_fn, str(tmp_path / name), params=params)
        e.train(fn)
        assert row_tables(e) == ()
        tables[name] = e.get_variable_value("emb/table")
    np.testing.assert_array_equal(tables["sparse"], tables["dense"])


# --- tables under one elementwise rule: one array in the step -------------------------------

SCOPED_TABLES = {  # name: (rows, row width); ids of each go up to rows + 2 (out of range)
    "linear/a": (5, 1),
    "linear/b": (9, 1),
    "linear/c": (4, 2),  # another row shape: not with a and b
    "dnn/e1": (6, 1),  # another rule (Adagrad, its own scope): not with a and b
    "dnn/e2": (8, 1),
}
SCOPED_IDS = {
    name: RNG.integers(-1, rows + 3, size=(64, 2)).astype(np.int32)
    for name, (rows, _) in SCOPED_TABLES.items()
}


def scoped_model_fn(features, labels, mode, params):
    logits = est.get_variable("linear/bias", [1], initializer=est.initializers.zeros_initializer())[
        0
    ]
    for name, (rows, width) in SCOPED_TABLES.items():
        # FTRL's weights start at zero, as TF's linear models' (its dense update sets the
        # weights of rows without gradient from their slots: zero at the start).
        initial = est.initializers.random_normal_initializer()
        if name.startswith("linear/"):
            initial = est.initializers.zeros_initializer()
        table = est.get_variable(name, [rows, width], initializer=initial)
        logits = logits + jnp.sum(lookup_rows(table, features[name]), axis=(1, 2))
    loss = jnp.mean((logits - labels) ** 2)
    return est.EstimatorSpec(mode, loss=loss, predictions=logits, train_op=params["opt"]())


def scoped_estimator(path, plain=False):
    from canned.optimizers import get_optimizer_instance

    def opt():
        ftrl, adagrad = canned.ftrl(0.2), get_optimizer_instance("Adagrad", 0.1)
        if plain:
            ftrl, adagrad = dense(ftrl), dense(adagrad)
        return est.train_op_by_scope({"linear": ftrl, "dnn": adagrad})

    return est.Estimator(
        scoped_model_fn, str(path), est.RunConfig(tf_random_seed=3), params={"opt": opt}
    )


def scoped_input(epochs=2):
    return est.inputs.numpy_input_fn(
        SCOPED_IDS, TARGETS, batch_size=16, num_epochs=epochs, shuffle=False
    )


@pytest.fixture
def formed_groups(monkeypatch):
    """The table groups each train step was traced with (table_groups.table_groups's results)."""
    formed = []
    real = table_groups.table_groups

    def spy(whole, trainable, rule):
        groups = real(whole, trainable, rule)
        formed.append(tuple(g.names for g in groups))
        return groups

    monkeypatch.setattr(table_groups, "table_groups", spy)
    return formed


def test_tables_under_one_elementwise_rule_are_updated_as_one_array(tmp_path, formed_groups):
    grouped = train(scoped_estimator(tmp_path / "g"), fn=scoped_input())
    # Same row shape and the same scope's FTRL (or Adagrad): one array each; linear/c (2
    # wide) alone. The step's trace checks them against its train_op's rule.
    assert set(formed_groups) == {(("dnn/e1", "dnn/e2"), ("linear/a", "linear/b"))}
    plain = train(scoped_estimator(tmp_path / "d", plain=True), fn=scoped_input())
    assert row_tables(plain) == ()
    assert row_tables(grouped) == tuple(sorted(SCOPED_TABLES))
    # Tables, FTRL's and Adagrad's slots as the dense update gives them (ids out of range
    # and -1 looked up nothing), each table still a variable of its own.
    assert {n: v.shape for n, v in grouped.final_state.trainable.items()} == {
        "linear/bias": (1,),
        **{n: shape for n, shape in SCOPED_TABLES.items()},
    }
    assert_same_variables(grouped, plain)


def test_a_resumed_training_groups_the_tables_as_a_first_one(tmp_path, formed_groups):
    straight = train(scoped_estimator(tmp_path / "straight"), fn=scoped_input(2))
    first_program = _step_hlo(straight)
    scoped_estimator(tmp_path / "resumed").train(scoped_input(1))
    formed_groups.clear()
    # A new Estimator restores the state from the checkpoint, with no init run to show the
    # train_op's rule: the step's first trace finds it and the step is traced again.
    again = train(scoped_estimator(tmp_path / "resumed"), fn=scoped_input(1))
    assert formed_groups[0] == () and formed_groups[-1] == (
        ("dnn/e1", "dnn/e2"),
        ("linear/a", "linear/b"),
    )
    assert_same_variables(straight, again, rtol=1e-6)
    assert again.runtime.compile_counts()["train"] == 1
    assert _step_hlo(again) == first_program  # one program: one compilation cache entry


def _step_hlo(model) -> str:
    (program,) = [
        p.executable
        for key, p in model.runtime.compiler(est.ModeKeys.TRAIN)._queue._programs.items()
        if key[0] == "step"
    ]
    return program.as_text()


def test_grouped_tables_partitioned_over_a_mesh_update_as_replicated_ones(tmp_path, formed_groups):
    from canned.optimizers import get_optimizer_instance

    sizes = {"emb/a": 8, "emb/b": 12}  # rows divisible by the 4 devices
    ids = {
        n: RNG.integers(-1, rows + 2, size=(64, 2)).astype(np.int32) for n, rows in sizes.items()
    }

    def model_fn(features, labels, mode, params):
        logits = 0.0
        for name, rows in sizes.items():
            table = est.get_variable(
                name, [rows, 1], initializer=est.initializers.random_normal_initializer()
            )
            logits = logits + jnp.sum(lookup_rows(table, features[name]), axis=(1, 2))
        loss = jnp.mean((logits - labels) ** 2)
        train_op = get_optimizer_instance("Adagrad", 0.1)
        return est.EstimatorSpec(mode, loss=loss, predictions=logits, train_op=train_op)

    def estimator(name, **config):
        return est.Estimator(
            model_fn, str(tmp_path / name), est.RunConfig(tf_random_seed=3, **config)
        )

    fn = est.inputs.numpy_input_fn(ids, TARGETS, batch_size=16, num_epochs=2, shuffle=False)
    single = train(estimator("one"), fn=fn)
    sharded = train(
        estimator(
            "sharded",
            mesh=Mesh(np.array(jax.devices()[:4]), ("data",)),
            variable_partitions={r"emb/": PartitionSpec("data", None)},
        ),
        fn=fn,
    )
    assert set(formed_groups) == {(("emb/a", "emb/b"),)}
    assert_same_variables(single, sharded, rtol=1e-5)


def test_a_rule_whose_state_holds_more_than_slots_is_refused_with_the_tables_named(tmp_path):
    from estimator.model.train_op import ELEMENTWISE, mark_row_wise

    # Row-wise SGD that counts steps per variable (a scalar of its own for each): it cannot
    # be applied to two tables as one array, whatever its rule promises.
    def init(params):
        return {"steps": {name: jnp.zeros((), jnp.int32) for name in params}}

    def update(grads, state, params=None):
        steps = {name: count + 1 for name, count in state["steps"].items()}
        return jax.tree.map(lambda g: -0.1 * g, grads), {"steps": steps}

    counting = mark_row_wise(optax.GradientTransformation(init, update), rule=ELEMENTWISE)
    model = est.Estimator(
        scoped_model_fn,
        str(tmp_path),
        est.RunConfig(tf_random_seed=3),
        params={"opt": lambda: counting},
    )
    with pytest.raises(ValueError) as raised:
        model.train(scoped_input(1))
    assert str(raised.value) == (
        "The train_op's row_rule puts ['dnn/e1', 'dnn/e2', 'linear/a', 'linear/b'] under "
        "one update, but its state holds something other than slots of their shape for them "
        "(a state of each variable's own); mark it without a rule "
        "(mark_row_wise(transform, rule=None)) to update them one by one."
    )
