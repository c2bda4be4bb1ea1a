"""``estimator.modules`` — Flax NNX, Flax Linen, Equinox and
Keras 3 modules inside a ``model_fn``, their parameters ordinary Estimator variables.

Every library writes the same small network (``NETS``): an embedding table looked up with
``est.layers.embedding_lookup``, a dense layer, batch normalization, ReLU, dropout and a
dense output, on features ``x`` ``[batch, 4]`` and ``ids`` ``[batch, 2]``. Each test runs
for every library.

Keras needs ``KERAS_BACKEND=jax`` before it is first imported: ``tests/conftest.py`` sets
it for every test process (``test_keras_runs_on_jaxs_backend_in_the_test_process``).
"""

from __future__ import annotations

import os
import subprocess
import sys

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import Mesh, PartitionSpec

import estimator as est

LIBRARIES = ["nnx", "linen", "equinox", "keras"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

VOCAB = 32  # ids are drawn below 16: rows 16 to 31 are never looked up
RNG = np.random.default_rng(0)
BATCHES = [
    (
        {
            "x": RNG.normal(size=(8, 4)).astype(np.float32),
            "ids": RNG.integers(0, VOCAB // 2, size=(8, 2)).astype(np.int32),
        },
        RNG.integers(0, 2, size=8).astype(np.int32),
    )
    for _ in range(4)
]


# --- The network, once per library --------------------------------------------------------


class NnxNet(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.table = nnx.Param(jax.random.normal(rngs.params(), (VOCAB, 4)) * 0.1)
        self.hidden = nnx.Linear(8, 8, rngs=rngs)
        self.bn = nnx.BatchNorm(8, rngs=rngs)
        self.dropout = nnx.Dropout(0.25, rngs=rngs)
        self.out = nnx.Linear(8, 2, rngs=rngs)

    def __call__(self, x, ids):
        embedded = est.layers.embedding_lookup(self.table.get_value(), ids).mean(axis=1)
        h = self.bn(self.hidden(jnp.concatenate([x, embedded], axis=-1)))
        return self.out(self.dropout(nnx.relu(h)))


class LinenNet(nn.Module):
    @nn.compact
    def __call__(self, x, ids, train: bool):
        table = self.param("table", nn.initializers.normal(0.1), (VOCAB, 4))
        embedded = est.layers.embedding_lookup(table, ids).mean(axis=1)
        h = nn.Dense(8)(jnp.concatenate([x, embedded], axis=-1))
        h = nn.relu(nn.BatchNorm(use_running_average=not train)(h))
        return nn.Dense(2)(nn.Dropout(0.25, deterministic=not train)(h))


class EqxNet(eqx.Module):
    table: jax.Array
    hidden: eqx.nn.Linear
    bn: eqx.nn.BatchNorm
    dropout: eqx.nn.Dropout
    out: eqx.nn.Linear

    def __init__(self, key):
        k0, k1, k2 = jax.random.split(key, 3)
        self.table = jax.random.normal(k0, (VOCAB, 4)) * 0.1
        self.hidden = eqx.nn.Linear(8, 8, key=k1)
        self.bn = eqx.nn.BatchNorm(8, axis_name="batch", mode="ema")
        self.dropout = eqx.nn.Dropout(0.25)
        self.out = eqx.nn.Linear(8, 2, key=k2)

    def __call__(self, x, ids, state, *, key=None):  # a batch: vmaps its layers itself
        embedded = est.layers.embedding_lookup(self.table, ids).mean(axis=1)
        h = jax.vmap(self.hidden)(jnp.concatenate([x, embedded], axis=-1))
        bn = jax.vmap(self.bn, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
        # eqx.nn.BatchNorm needs inputs of its state's dtype (float32) under a mixed policy.
        h, state = bn(h.astype(jnp.float32), state)
        keys = None if key is None else jax.random.split(key, h.shape[0])
        h = jax.vmap(self.dropout)(jax.nn.relu(h), key=keys)
        return jax.vmap(self.out)(h), state


def keras_net():
    import keras

    class KerasNet(keras.Model):
        def __init__(self):
            super().__init__(name="keras_net")
            self.hidden = keras.layers.Dense(8)
            self.bn = keras.layers.BatchNormalization()
            self.dropout = keras.layers.Dropout(0.25)
            self.out = keras.layers.Dense(2)

        def build(self, x_shape, ids_shape):
            init = keras.initializers.RandomNormal(stddev=0.1)
            self.table = self.add_weight(shape=(VOCAB, 4), initializer=init, name="table")

        def call(self, x, ids, training=False):
            embedded = est.layers.embedding_lookup(self.table.value, ids).mean(axis=1)
            h = self.bn(
                self.hidden(keras.ops.concatenate([x, embedded], axis=-1)), training=training
            )
            return self.out(self.dropout(keras.ops.relu(h), training=training))

    return KerasNet()


SCOPES = {"nnx": "nnx_net", "linen": "linen_net", "equinox": "eqx_net", "keras": "keras_net"}

#: (trainable, non-trainable) variable names without the scope.
NAMES = {
    "nnx": (
        ["bn/bias", "bn/scale", "hidden/bias", "hidden/kernel", "out/bias", "out/kernel", "table"],
        ["bn/mean", "bn/var"],
    ),
    "linen": (
        [
            "BatchNorm_0/bias",
            "BatchNorm_0/scale",
            "Dense_0/bias",
            "Dense_0/kernel",
            "Dense_1/bias",
            "Dense_1/kernel",
            "table",
        ],
        ["BatchNorm_0/mean", "BatchNorm_0/var"],
    ),
    "equinox": (
        ["bn/bias", "bn/weight", "hidden/bias", "hidden/weight", "out/bias", "out/weight", "table"],
        ["bn/ema_first_time_index", "bn/ema_state_index/0", "bn/ema_state_index/1"],
    ),
    "keras": (
        [
            "batch_normalization/beta",
            "batch_normalization/gamma",
            "dense/bias",
            "dense/kernel",
            "dense_1/bias",
            "dense_1/kernel",
            "table",
        ],
        ["batch_normalization/moving_mean", "batch_normalization/moving_variance"],
    ),
}
#: The hidden layer's kernel and the batch norm's moving mean, without the scope.
HIDDEN = {"nnx": "hidden/kernel", "linen": "Dense_0/kernel", "equinox": "hidden/weight"}
HIDDEN["keras"] = "dense/kernel"
MEAN = {"nnx": "bn/mean", "linen": "BatchNorm_0/mean", "equinox": "bn/ema_state_index/0"}
MEAN["keras"] = "batch_normalization/moving_mean"


def logits_of(library: str, features):
    x, ids = features["x"], features["ids"]
    if library == "nnx":
        return est.modules.nnx(NnxNet, x, ids)
    if library == "linen":
        return est.modules.linen(LinenNet(), x, ids)
    if library == "equinox":
        return est.modules.equinox(eqx.nn.make_with_state(EqxNet), x, ids, name="eqx_net")
    return est.modules.keras(keras_net(), x, ids)  # a new Keras model on every call


def make_model_fn(library: str, make_tx=None):
    make_tx = make_tx or sparse_sgd

    def model_fn(features, labels, mode):
        logits = logits_of(library, features)
        est.identity(logits, "logits")
        predictions = {"logits": logits, "class_ids": jnp.argmax(logits, -1)}
        if mode == est.ModeKeys.PREDICT:
            return est.EstimatorSpec(mode, predictions=predictions)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        return est.EstimatorSpec(mode, loss=loss, predictions=predictions, train_op=make_tx())

    return model_fn


STEPS = len(BATCHES)


def sparse_sgd():
    return est.sparse_updates(optax.sgd(0.1))


def input_fn(steps=STEPS):
    return lambda: iter(BATCHES[:steps])


class States(est.SessionRunHook):
    """The state the run starts from and the one it ends with (on the host), and how the
    variables were laid out on the devices."""

    def after_create_session(self, session, coord):
        variables = {**session.state.trainable, **session.state.non_trainable}
        self.specs = {n: getattr(v.sharding, "spec", None) for n, v in variables.items()}
        self.initial = jax.device_get(session.state)

    def end(self, session):
        self.final = jax.device_get(session.state)


class Fetch(est.SessionRunHook):
    """The array named ``name`` at every step."""

    def __init__(self, name):
        self.name, self.values = name, []

    def before_run(self, run_context):
        return est.SessionRunArgs(self.name)

    def after_run(self, run_context, run_values):
        self.values.append(np.asarray(run_values.results))


NO_CHECKPOINTS = {"save_checkpoints_steps": None, "save_checkpoints_secs": None}


def train(library, model_dir, steps=STEPS, hooks=(), seed=7, **kwargs):
    """Trains ``library``'s net ``steps`` steps; ``kwargs``: ``make_tx`` (default the
    row-wise SGD of the shared Estimator, so that programs repeat and come from JAX's
    compilation cache), ``warm_start_from`` and ``RunConfig`` arguments."""
    make_tx = kwargs.pop("make_tx", sparse_sgd)
    warm_start_from = kwargs.pop("warm_start_from", None)
    config = est.RunConfig(tf_random_seed=seed, **kwargs)
    estimator = est.Estimator(
        make_model_fn(library, make_tx), str(model_dir), config, warm_start_from=warm_start_from
    )
    states = States()
    estimator.train(input_fn(steps), hooks=[states, *hooks])
    return estimator, states


@pytest.fixture(scope="module", params=LIBRARIES)
def trained(request, tmp_path_factory):
    """``(library, Estimator trained 4 steps, its States)``, shared by the tests below:
    ``steps_per_execution`` 32 (the default), SGD declared row-wise (sparse updates)."""
    library = request.param
    estimator, states = train(library, tmp_path_factory.mktemp(library))
    return library, estimator, states


def predictions(estimator):
    features = {k: np.concatenate([b[0][k] for b in BATCHES]) for k in ("x", "ids")}
    fn = est.inputs.numpy_input_fn(features, batch_size=8, shuffle=False)
    return features, np.stack([p["logits"] for p in estimator.predict(fn)])


# --- Requirement 1: modules as Estimator variables -----------------------------------------


def test_parameters_are_variables_named_by_their_path_in_the_module(trained):
    library, estimator, states = trained
    scope = SCOPES[library]
    trainable, non_trainable = NAMES[library]
    assert sorted(states.initial.trainable) == [f"{scope}/{n}" for n in trainable]
    assert sorted(states.initial.non_trainable) == [f"{scope}/{n}" for n in non_trainable]
    assert estimator.get_variable_names() == sorted(
        [f"{scope}/{n}" for n in trainable + non_trainable] + ["global_step"]
    )
    # The module's own initialisers: batch norm starts at mean 0; the table from the
    # N(0, 0.1) initialiser each net declares.
    np.testing.assert_array_equal(states.initial.non_trainable[f"{scope}/{MEAN[library]}"], 0)
    table = states.initial.trainable[f"{scope}/table"]
    assert table.shape == (VOCAB, 4) and 0.05 < table.std() < 0.15


def test_training_flag_keys_per_step_and_initial_values_from_the_seed(trained, tmp_path):
    library, estimator, states = trained
    # Training twice on one batch with a learning rate of 0: the parameters and the batch
    # statistics are the same at both steps, so the logits differ only by dropout's mask.
    fetch, zero = Fetch("logits"), States()
    model = est.Estimator(
        make_model_fn(library, lambda: optax.sgd(0.0)),
        str(tmp_path),
        est.RunConfig(tf_random_seed=7, steps_per_execution=1, **NO_CHECKPOINTS),
    )
    model.train(lambda: iter([BATCHES[0]] * 2), hooks=[fetch, zero])
    first, second = fetch.values
    assert np.abs(first - second).max() > 1e-3
    # The same seed gave the same initial values as the shared Estimator's.
    for name, value in states.initial.trainable.items():
        np.testing.assert_array_equal(zero.initial.trainable[name], value, err_msg=name)
    # Prediction runs the module in inference mode (no dropout, moving statistics): one
    # batch twice gives the same logits.
    out = list(estimator.predict(lambda: iter([BATCHES[0][0]] * 2), yield_single_examples=False))
    np.testing.assert_array_equal(out[0]["logits"], out[1]["logits"])


# --- Requirement 2: everything else keeps working --------------------------------------


@pytest.mark.slow
def test_checkpoint_restore_export_and_resume(trained, tmp_path, monkeypatch):
    library, estimator, states = trained
    scope = SCOPES[library]
    for group in (states.final.trainable, states.final.non_trainable):
        for name, value in group.items():
            np.testing.assert_array_equal(estimator.get_variable_value(name), value, err_msg=name)
    # Batch statistics were updated by training (est.assign), as est.layers' batch norm.
    mean = f"{scope}/{MEAN[library]}"
    assert np.abs(estimator.get_variable_value(mean)).max() > 0
    # A new Estimator on the model_dir restores the same model...
    features, expected = predictions(estimator)
    restored = est.Estimator(make_model_fn(library), estimator.model_dir, estimator.config)
    np.testing.assert_array_equal(predictions(restored)[1], expected)
    # ...and exports it. The served function is StableHLO: loading and calling it imports
    # no module library (each import of flax, equinox or keras fails here).
    receiver = est.export.build_raw_serving_input_receiver_fn(
        {
            "x": jax.ShapeDtypeStruct((None, 4), jnp.float32),
            "ids": jax.ShapeDtypeStruct((None, 2), jnp.int32),
        }
    )
    path = restored.export_saved_model(str(tmp_path), receiver)
    with monkeypatch.context() as blocked:
        for name in list(sys.modules):
            if name.split(".")[0] in ("flax", "equinox", "keras"):
                blocked.setitem(sys.modules, name, None)
        served = est.export.load(path).signatures["serving_default"](**features)
    np.testing.assert_allclose(np.asarray(served["logits"]), expected, rtol=1e-6, atol=1e-6)
    # Evaluation leaves the statistics alone; training resumes from the checkpoint's step.
    restored.evaluate(input_fn())
    np.testing.assert_array_equal(
        restored.get_variable_value(mean), states.final.non_trainable[mean]
    )
    resumed = States()
    restored.train(input_fn(2), hooks=[resumed])
    assert int(resumed.initial.global_step) == STEPS
    assert restored.get_variable_value("global_step") == STEPS + 2


def test_warm_start_selects_module_variables_by_name(trained, tmp_path):
    library, estimator, _ = trained
    scope, hidden = SCOPES[library], HIDDEN[library]
    pattern = f"{scope}/{hidden.split('/')[0]}/"  # the hidden layer's kernel and bias
    settings = est.WarmStartSettings(estimator.model_dir, vars_to_warm_start=pattern + ".*")
    _, warm = train(library, tmp_path, steps=1, seed=8, warm_start_from=settings, **NO_CHECKPOINTS)
    for name, value in warm.initial.trainable.items():
        # Selected: the source's values; the rest: this Estimator's own (another seed).
        same = np.array_equal(value, estimator.get_variable_value(name))
        assert same == name.startswith(pattern), name


@pytest.mark.slow
def test_sparse_updates_steps_per_execution_and_partitions_train_the_same(trained, tmp_path):
    library, sparse, rows = trained  # 32 steps per call, the table updated row by row
    table = f"{SCOPES[library]}/table"
    assert sparse.runtime.compiler(est.ModeKeys.TRAIN).info.row_tables == (table,)
    dense, one = train(
        library,
        tmp_path / "one",
        make_tx=lambda: optax.sgd(0.1),
        steps_per_execution=1,
        **NO_CHECKPOINTS,
    )
    assert dense.runtime.compiler(est.ModeKeys.TRAIN).info.row_tables == ()
    _, partitioned = train(
        library,
        tmp_path / "sharded",
        mesh=Mesh(np.array(jax.devices()[:4]), ("data",)),
        variable_partitions={r"/table$": PartitionSpec("data", None)},
        **NO_CHECKPOINTS,
    )
    assert partitioned.specs[table] == PartitionSpec("data", None)
    assert partitioned.specs[f"{SCOPES[library]}/{HIDDEN[library]}"] == PartitionSpec()
    for other in (one.final, partitioned.final):
        for group, reference in (
            (other.trainable, rows.final.trainable),
            (other.non_trainable, rows.final.non_trainable),
        ):
            for name, value in group.items():
                np.testing.assert_allclose(
                    value, reference[name], rtol=1e-5, atol=1e-6, err_msg=name
                )
    # Rows no batch looked up kept their initial values.
    looked_up = np.unique(np.concatenate([b[0]["ids"].ravel() for b in BATCHES]))
    untouched = np.setdiff1d(np.arange(VOCAB), looked_up)
    assert len(untouched) > 0
    np.testing.assert_array_equal(
        rows.final.trainable[table][untouched], rows.initial.trainable[table][untouched]
    )


@pytest.mark.parametrize("library", LIBRARIES)
def test_mixed_bfloat16_modules_compute_in_bfloat16_on_float32_variables(library, tmp_path):
    seen = []

    def model_fn(features, labels, mode):
        logits = logits_of(library, features)
        seen.append(logits.dtype)
        if library == "equinox":  # eqx.nn.BatchNorm returns float32: its state is float32
            seen[-1] = est.modules.equinox(
                lambda key: eqx.nn.Linear(4, 2, key=key), features["x"], vmap=True
            ).dtype
        loss = optax.softmax_cross_entropy_with_integer_labels(
            logits.astype(jnp.float32), labels
        ).mean()
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1))

    config = est.RunConfig(tf_random_seed=7, dtype_policy="mixed_bfloat16", **NO_CHECKPOINTS)
    states = States()
    est.Estimator(model_fn, str(tmp_path), config).train(input_fn(2), hooks=[states])
    assert set(seen) == {jnp.dtype(jnp.bfloat16)}
    for group in (states.final.trainable, states.final.non_trainable):
        for name, value in group.items():
            if jnp.issubdtype(value.dtype, jnp.floating):
                assert value.dtype == jnp.float32, name
    assert np.abs(states.final.non_trainable[f"{SCOPES[library]}/{MEAN[library]}"]).max() > 0


# --- Errors ---------------------------------------------------------------------------------


def run_model_fn(body):
    """Runs ``body(features)`` inside a model_fn (the Estimator's ``model_fn`` property:
    TF's, one eager run creating the variables)."""

    def model_fn(features, mode):
        body(features)
        return est.EstimatorSpec(mode, predictions=features["x"])

    est.Estimator(model_fn).model_fn(BATCHES[0][0], None, est.ModeKeys.PREDICT, None)


def test_adapters_name_what_they_expected_and_what_arrived():
    with pytest.raises(TypeError, match=r"make\(rngs\) must return an nnx.Module.*returned int"):
        run_model_fn(lambda f: est.modules.nnx(lambda rngs: 3, f["x"]))
    with pytest.raises(TypeError, match=r"takes a flax.linen.Module.*got NnxNet"):
        run_model_fn(lambda f: est.modules.linen(NnxNet(nnx.Rngs(0)), f["x"], f["ids"]))
    with pytest.raises(TypeError, match=r"Remove mutable="):
        run_model_fn(lambda f: est.modules.linen(LinenNet(), f["x"], f["ids"], mutable=True))
    with pytest.raises(TypeError, match=r"make\(key\) must return an eqx.Module.*returned str"):
        run_model_fn(lambda f: est.modules.equinox(lambda key: "net", f["x"]))
    with pytest.raises(TypeError, match=r"takes a non-empty string such as 'encoder'; got 3"):
        run_model_fn(lambda f: est.modules.nnx(NnxNet, f["x"], f["ids"], name=3))
    with pytest.raises(RuntimeError, match=r"estimator.modules.nnx was called outside model_fn"):
        est.modules.nnx(NnxNet, BATCHES[0][0]["x"], BATCHES[0][0]["ids"])


def test_a_missing_library_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "flax.nnx", None)
    with pytest.raises(ImportError, match=r"needs Flax.*pip install 'jax-estimator\[flax\]'"):
        run_model_fn(lambda f: est.modules.nnx(NnxNet, f["x"], f["ids"]))


def test_keras_on_another_backend_is_refused_with_the_fix(monkeypatch):
    # Keras as this process would have it after TensorFlow imported it: its backend is
    # TensorFlow's (a stand-in module: importing the real Keras here would fix its backend
    # for the whole test process).
    class Backend:
        @staticmethod
        def backend():
            return "tensorflow"

    monkeypatch.setitem(sys.modules, "keras", type(sys)("keras"))
    sys.modules["keras"].backend = Backend
    with pytest.raises(
        RuntimeError,
        match=r"imported with the 'tensorflow' backend.*KERAS_BACKEND=jax before anything "
        r"imports keras or tensorflow",
    ):
        run_model_fn(lambda f: est.modules.keras(object(), f["x"]))


@pytest.mark.slow
def test_import_estimator_imports_no_module_library():
    script = (
        "import sys, estimator\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('flax', 'equinox', 'keras', 'tensorflow')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_keras_runs_on_jaxs_backend_in_the_test_process():
    import keras

    assert keras.backend.backend() == "jax"
    assert "keras" in LIBRARIES
