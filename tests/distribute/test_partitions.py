"""``RunConfig(variable_partitions=...)``: variables sharded over the mesh, with their
optimizer slots; the same numbers as replicated; checkpoints restore onto other meshes."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh, PartitionSpec

import estimator as est

RNG = np.random.default_rng(0)
IDS = RNG.integers(0, 64, size=(8, 16)).astype(np.int32)
TARGETS = RNG.normal(size=(8, 16)).astype(np.float32)
TABLE = P_TABLE = PartitionSpec("data", None)


def model_fn(features, labels, mode):
    init = est.initializers.random_normal_initializer(stddev=0.1)
    table = est.get_variable("embedding/table", [64, 4], initializer=init)
    w = est.get_variable("w", [4], initializer=est.initializers.ones_initializer())
    prediction = table[features["ids"]] @ w
    loss = jnp.mean((prediction - labels) ** 2)
    return est.EstimatorSpec(
        mode,
        predictions=prediction,
        loss=loss,
        train_op=optax.adagrad(0.5),
        eval_metric_ops={"mse": est.metrics.mean_squared_error(labels, prediction)},
    )


def input_fn():
    return iter([({"ids": IDS[i]}, TARGETS[i]) for i in range(8)])


class SeeState(est.SessionRunHook):
    """Keeps the sharding specs of the state the run starts from."""

    def after_create_session(self, session, coord):
        state = session.state
        self.table = state.trainable["embedding/table"].sharding.spec
        self.w = state.trainable["w"].sharding.spec
        self.slots = {leaf.shape: leaf.sharding.spec for leaf in jax.tree.leaves(state.opt_state)}


def make(model_dir, devices=4, partitions=None, mesh=True):
    config = est.RunConfig(
        tf_random_seed=7,
        mesh=Mesh(np.array(jax.devices()[:devices]), ("data",)) if mesh else None,
        variable_partitions=partitions,
    )
    return est.Estimator(model_fn, str(model_dir), config)


def test_a_partitioned_table_and_its_slots_are_sharded_and_train_as_replicated(tmp_path):
    replicated = make(tmp_path / "replicated")
    replicated.train(input_fn, steps=8)
    sharded = make(tmp_path / "sharded", partitions={r"embedding/": P_TABLE})
    seen = SeeState()
    sharded.train(input_fn, steps=8, hooks=[seen])
    assert seen.table == P_TABLE and seen.w == PartitionSpec()
    assert seen.slots[(64, 4)] == P_TABLE  # Adagrad's accumulator of the table
    assert seen.slots[(4,)] == PartitionSpec()
    for name in ("embedding/table", "w"):
        np.testing.assert_allclose(
            sharded.get_variable_value(name),
            replicated.get_variable_value(name),
            rtol=1e-5,
            atol=1e-6,
        )
    # The state kept in memory after train() is still sharded for the next call.
    again = SeeState()
    sharded.train(input_fn, steps=1, hooks=[again])
    assert again.table == P_TABLE and again.slots[(64, 4)] == P_TABLE


@pytest.mark.slow
def test_a_sharded_checkpoint_restores_onto_other_meshes(tmp_path):
    trained = make(tmp_path, partitions={r"embedding/": P_TABLE})
    trained.train(input_fn, steps=8)
    expected = trained.evaluate(input_fn)
    on_two = make(tmp_path, devices=2, partitions={r"embedding/": P_TABLE})
    seen = SeeState()
    results = on_two.evaluate(input_fn, hooks=[seen])
    assert seen.table == P_TABLE
    assert results["mse"] == pytest.approx(expected["mse"], rel=1e-5)
    single = make(tmp_path, mesh=False)
    assert single.evaluate(input_fn)["mse"] == pytest.approx(expected["mse"], rel=1e-5)
    single.train(input_fn, steps=2)  # and training goes on from it, unsharded
    assert single.evaluate(input_fn)["global_step"] == 10


def test_partition_errors_say_what_to_change(tmp_path):
    with pytest.raises(ValueError, match=r"variable_partitions must be a dict \{regex"):
        est.RunConfig(variable_partitions={"table": ("data", None)})
    with pytest.raises(ValueError, match=r"shards variables over a mesh, but there is none"):
        make(tmp_path / "a", mesh=False, partitions={"table": P_TABLE})
    odd = make(tmp_path / "b", devices=4, partitions={r"^w$": PartitionSpec("data")})
    with pytest.raises(ValueError, match=r"'w' of shape \(4,\).*dimension 1 into 4 parts") as e:
        make(tmp_path / "c", devices=4, partitions={r"^w$": PartitionSpec(None, "data")}).train(
            input_fn, steps=1
        )
    assert "must exist and divide evenly" in str(e.value)
    odd.train(input_fn, steps=1)  # w's 4 entries over 4 devices: fine
