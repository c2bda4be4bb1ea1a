"""Tests for ``estimator/run_config.py``.

Defaults, messages, ``replace`` and the TF_CONFIG properties are compared with TF 2.15:
values marked "from TF 2.15.1" were printed by ``tf.estimator.RunConfig()`` of
tensorflow 2.15.1 / tensorflow_estimator 2.15.0 under the same TF_CONFIG.
"""

import json
import pathlib

import jax
import numpy as np
import pytest

import estimator as est
from estimator.config import TaskType

_SAVE_ERR = r"^`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set\.$"


@pytest.fixture(autouse=True)
def _no_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)


def _with_tf_config(monkeypatch, tf_config):
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    return est.RunConfig()


# --- defaults -----------------------------------------------------------------------------


def test_defaults_are_tfs():
    c = est.RunConfig()
    # From TF 2.15.1: 100 None 600 5 10000 100 None None 7200 True.
    assert c.save_summary_steps == 100
    assert c.save_checkpoints_steps is None
    assert c.save_checkpoints_secs == 600
    assert c.keep_checkpoint_max == 5
    assert c.keep_checkpoint_every_n_hours == 10000
    assert c.log_step_count_steps == 100
    assert c.tf_random_seed is None and c.random_seed is None
    assert c.model_dir is None
    assert c.session_creation_timeout_secs == 7200
    assert c.checkpoint_save_graph_def is True
    assert c.session_config is None and c.device_fn is None and c.protocol is None
    assert c.mesh is None and c.steps_per_execution == 32


@pytest.mark.parametrize(
    "kwargs, steps, secs",
    [
        # From TF 2.15.1: (5, None), (None, 5), (None, None) x3.
        (dict(save_checkpoints_steps=5), 5, None),
        (dict(save_checkpoints_secs=5), None, 5),
        (dict(save_checkpoints_steps=None, save_checkpoints_secs=None), None, None),
        (dict(save_checkpoints_steps=None), None, None),
        (dict(save_checkpoints_secs=None), None, None),
    ],
)
def test_checkpoint_interval_defaulting(kwargs, steps, secs):
    c = est.RunConfig(**kwargs)
    assert (c.save_checkpoints_steps, c.save_checkpoints_secs) == (steps, secs)


def test_both_checkpoint_intervals_is_an_error():
    with pytest.raises(ValueError, match=_SAVE_ERR):
        est.RunConfig(save_checkpoints_steps=10, save_checkpoints_secs=10)


def test_model_dir_pathlike_becomes_str(tmp_path):
    c = est.RunConfig(model_dir=pathlib.Path(tmp_path) / "m")
    assert c.model_dir == str(tmp_path / "m")


def test_keep_checkpoint_max_zero_or_none_allowed():
    assert est.RunConfig(keep_checkpoint_max=0).keep_checkpoint_max == 0
    assert est.RunConfig(keep_checkpoint_max=None).keep_checkpoint_max is None
    assert est.RunConfig(save_summary_steps=0).save_summary_steps == 0


# --- validation messages (TF's _validate_properties) --------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(model_dir=""), r"^model_dir should be non-empty"),
        (dict(save_summary_steps=-1), r"^save_summary_steps should be >= 0$"),
        (dict(save_checkpoints_steps=-1), r"^save_checkpoints_steps should be >= 0$"),
        (dict(save_checkpoints_secs=-1), r"^save_checkpoints_secs should be >= 0$"),
        (dict(keep_checkpoint_max=-1), r"^keep_checkpoint_max should be >= 0$"),
        (dict(keep_checkpoint_every_n_hours=0), r"^keep_checkpoint_every_n_hours should be > 0$"),
        (dict(log_step_count_steps=0), r"^log_step_count_steps should be > 0$"),
        (dict(tf_random_seed=1.5), r"^tf_random_seed must be integer\.$"),
        (dict(tf_random_seed="1"), r"^tf_random_seed must be integer\.$"),
        (
            dict(experimental_max_worker_delay_secs=1.5),
            r"^experimental_max_worker_delay_secs must be an integer if set\.$",
        ),
        (dict(session_creation_timeout_secs=0), r"^session_creation_timeout_secs should be > 0$"),
        (dict(protocol="http"), r"^protocol should be grpc or grpc\+verbs$"),
        (dict(steps_per_execution=0), r"^steps_per_execution must be an integer >= 1, given: 0$"),
        (dict(steps_per_execution=2.0), r"^steps_per_execution must be an integer >= 1, given"),
        (dict(mesh="data"), r"^mesh must be a jax\.sharding\.Mesh, given: 'data'$"),
    ],
)
def test_validation_messages(kwargs, message):
    with pytest.raises(ValueError, match=message):
        est.RunConfig(**kwargs)


def test_bool_seed_rejected():
    # Divergence: TF 2.15.1 accepts tf_random_seed=True (bool is an int); we reject it.
    with pytest.raises(ValueError, match="tf_random_seed must be integer"):
        est.RunConfig(tf_random_seed=True)


@pytest.mark.parametrize("name", ["train_distribute", "eval_distribute", "experimental_distribute"])
def test_tf_distribute_strategies_point_to_mesh(name):
    with pytest.raises(ValueError, match=rf"^{name} takes a tf\.distribute strategy.*mesh="):
        est.RunConfig(**{name: object()})


def test_mesh_accepted():
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("data",))
    c = est.RunConfig(mesh=mesh, steps_per_execution=1)
    assert c.mesh is mesh and c.steps_per_execution == 1
    assert c.replace(save_summary_steps=5).mesh is mesh


# --- random_seed alias --------------------------------------------------------------------


def test_random_seed_alias():
    c = est.RunConfig(random_seed=7)
    assert c.tf_random_seed == 7 and c.random_seed == 7
    assert est.RunConfig(tf_random_seed=7, random_seed=7).random_seed == 7
    with pytest.raises(ValueError, match=r"tf_random_seed=1 and random_seed=2 disagree"):
        est.RunConfig(tf_random_seed=1, random_seed=2)
    assert c.replace(random_seed=9).tf_random_seed == 9
    assert c.replace(tf_random_seed=3).random_seed == 3


# --- immutability -------------------------------------------------------------------------


def test_immutable():
    c = est.RunConfig()
    with pytest.raises(AttributeError, match=r"RunConfig is immutable: use config\.replace"):
        c.model_dir = "x"
    with pytest.raises(AttributeError, match="immutable"):
        c._save_summary_steps = 3
    with pytest.raises(AttributeError, match="immutable"):
        c.new_attribute = 1
    assert c.model_dir is None and c.save_summary_steps == 100


# --- replace ------------------------------------------------------------------------------


def test_replace_returns_a_new_config():
    c = est.RunConfig(model_dir="/tmp/a", tf_random_seed=1)
    d = c.replace(model_dir="/tmp/b", save_summary_steps=7, keep_checkpoint_max=2)
    assert (d.model_dir, d.save_summary_steps, d.keep_checkpoint_max) == ("/tmp/b", 7, 2)
    assert d.tf_random_seed == 1
    assert (c.model_dir, c.save_summary_steps, c.keep_checkpoint_max) == ("/tmp/a", 100, 5)


@pytest.mark.parametrize(
    "start, change, steps, secs",
    [
        # From TF 2.15.1: RunConfig().replace(save_checkpoints_steps=30) -> (30, None);
        # RunConfig(save_checkpoints_steps=5).replace(save_checkpoints_secs=30) -> (None, 30);
        # ...replace(save_checkpoints_secs=None) -> (5, None); both None -> (None, None).
        ({}, dict(save_checkpoints_steps=30), 30, None),
        (dict(save_checkpoints_steps=5), dict(save_checkpoints_secs=30), None, 30),
        (dict(save_checkpoints_steps=5), dict(save_checkpoints_secs=None), 5, None),
        ({}, dict(save_checkpoints_steps=None), None, 600),
        (
            dict(save_checkpoints_steps=5),
            dict(save_checkpoints_steps=None, save_checkpoints_secs=None),
            None,
            None,
        ),
        ({}, dict(save_checkpoints_steps=3, save_checkpoints_secs=None), 3, None),
    ],
)
def test_replace_checkpoint_intervals(start, change, steps, secs):
    c = est.RunConfig(**start).replace(**change)
    assert (c.save_checkpoints_steps, c.save_checkpoints_secs) == (steps, secs)


def test_replace_both_checkpoint_intervals_is_an_error():
    with pytest.raises(ValueError, match=_SAVE_ERR):
        est.RunConfig().replace(save_checkpoints_secs=3, save_checkpoints_steps=4)


def test_replace_unknown_key_lists_tfs_allowed_properties():
    with pytest.raises(
        ValueError,
        match=r"^Replacing foo is not supported\. Allowed properties are \['model_dir', "
        r"'tf_random_seed', .*'checkpoint_save_graph_def'\]\.$",
    ):
        est.RunConfig().replace(foo=3)
    with pytest.raises(ValueError, match="Replacing cluster_spec is not supported"):
        est.RunConfig().replace(cluster_spec={})


def test_replace_validates():
    with pytest.raises(ValueError, match="^save_summary_steps should be >= 0$"):
        est.RunConfig().replace(save_summary_steps=-1)
    with pytest.raises(ValueError, match="model_dir should be non-empty"):
        est.RunConfig().replace(model_dir="")


def test_replace_tf_only_fields():
    c = est.RunConfig().replace(session_creation_timeout_secs=3, checkpoint_save_graph_def=False)
    assert c.session_creation_timeout_secs == 3 and c.checkpoint_save_graph_def is False
    assert est.RunConfig().replace(steps_per_execution=4).steps_per_execution == 4


# --- TF_CONFIG ----------------------------------------------------------------------------

_CLUSTER = {"chief": ["h0:1"], "worker": ["h1:1", "h2:1", "h3:1"], "ps": ["p0:1", "p1:1"]}


@pytest.mark.parametrize("tf_config", [None, {}, {"task": {"type": "worker", "index": 0}}])
def test_no_cluster_is_worker_0_chief(monkeypatch, tf_config):
    if tf_config is not None:
        monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    c = est.RunConfig()
    # From TF 2.15.1 (all three): worker 0, is_chief True, 1 worker, 0 ps, global id 0.
    assert (c.task_type, c.task_id, c.is_chief) == ("worker", 0, True)
    assert (c.num_worker_replicas, c.num_ps_replicas, c.global_id_in_cluster) == (1, 0, 0)
    assert c.cluster_spec == {}
    assert c.master == "" and c.evaluation_master == ""


@pytest.mark.parametrize(
    "task_type, index, is_chief, global_id",
    [
        # From TF 2.15.1 with _CLUSTER: num_worker_replicas=4 (chief + 3 workers) and
        # num_ps_replicas=2 for every training task; global ids chief 0, workers 1..3
        # (worker 2 -> 3), ps 4 and 5.
        ("chief", 0, True, 0),
        ("worker", 0, False, 1),
        ("worker", 2, False, 3),
        ("ps", 0, False, 4),
        ("ps", 1, False, 5),
    ],
)
def test_cluster_task_properties(monkeypatch, task_type, index, is_chief, global_id):
    c = _with_tf_config(
        monkeypatch, {"cluster": _CLUSTER, "task": {"type": task_type, "index": index}}
    )
    assert (c.task_type, c.task_id, c.is_chief) == (task_type, index, is_chief)
    assert c.num_worker_replicas == 4 and c.num_ps_replicas == 2
    assert c.global_id_in_cluster == global_id
    assert c.cluster_spec == _CLUSTER


def test_evaluator_is_outside_the_training_cluster(monkeypatch):
    c = _with_tf_config(
        monkeypatch, {"cluster": _CLUSTER, "task": {"type": "evaluator", "index": 0}}
    )
    # From TF 2.15.1: evaluator 0, not chief, 0 workers, 0 ps, global id None, empty cluster.
    assert (c.task_type, c.task_id, c.is_chief) == ("evaluator", 0, False)
    assert (c.num_worker_replicas, c.num_ps_replicas) == (0, 0)
    assert c.global_id_in_cluster is None
    assert c.cluster_spec == {}


def test_evaluator_job_sorted_among_other_jobs(monkeypatch):
    cluster = {"chief": ["c:1"], "worker": ["w:1"], "evaluator": ["e:1"]}
    c = _with_tf_config(monkeypatch, {"cluster": cluster, "task": {"type": "worker", "index": 0}})
    # From TF 2.15.1: global id 2 = chief (1 task) + "evaluator" (sorts before "worker", 1
    # task); num_worker_replicas 2 (chief + worker).
    assert c.global_id_in_cluster == 2 and c.num_worker_replicas == 2 and not c.is_chief


@pytest.mark.parametrize(
    "task_type, index, is_chief, global_id",
    # From TF 2.15.1, legacy "master" cluster {master: 1, worker: 2, ps: 1}: 3 worker
    # replicas, 1 ps; master is chief with id 0; worker 1 -> id 2; ps 0 -> id 3.
    [("master", 0, True, 0), ("worker", 1, False, 2), ("ps", 0, False, 3)],
)
def test_legacy_master_cluster(monkeypatch, task_type, index, is_chief, global_id):
    cluster = {"master": ["m:1"], "worker": ["a:1", "b:1"], "ps": ["p:1"]}
    c = _with_tf_config(
        monkeypatch, {"cluster": cluster, "task": {"type": task_type, "index": index}}
    )
    assert (c.is_chief, c.global_id_in_cluster) == (is_chief, global_id)
    assert (c.num_worker_replicas, c.num_ps_replicas) == (3, 1)


@pytest.mark.parametrize(
    "tf_config, message",
    [
        # Each message as TF 2.15.1 raises it for the same TF_CONFIG.
        (
            {"task": {"type": "chief", "index": 0}},
            r'^If "cluster" is not set in TF_CONFIG, task type must be WORKER\.$',
        ),
        (
            {"task": {"type": "worker", "index": 1}},
            r'^If "cluster" is not set in TF_CONFIG, task index must be 0\.$',
        ),
        (
            {"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}},
            r'^If "cluster" is set in TF_CONFIG, it must have one "chief" node\.$',
        ),
        (
            {"cluster": {"chief": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}},
            r'^The "cluster" in TF_CONFIG must have only one "chief" node\.$',
        ),
        (
            {"cluster": _CLUSTER, "task": {"index": 0}},
            r'^If "cluster" is set in TF_CONFIG, task type must be set\.$',
        ),
        (
            {"cluster": _CLUSTER, "task": {"type": "worker"}},
            r'^If "cluster" is set in TF_CONFIG, task index must be set\.$',
        ),
        (
            {"cluster": _CLUSTER, "task": {"type": "worker", "index": -1}},
            r"^Task index must be non-negative number\.$",
        ),
        (
            {"cluster": _CLUSTER, "task": {"type": "foo", "index": 0}},
            r"^foo is not a valid task_type in the cluster_spec:\n.*\n\nNote that these values "
            r"may be coming from the TF_CONFIG environment variable\.$",
        ),
        (
            {"cluster": _CLUSTER, "task": {"type": "worker", "index": 3}},
            r"^3 is not a valid task_id for task_type worker in the cluster_spec:\n",
        ),
        (
            {
                "cluster": {"master": ["m:1"], "chief": ["c:1"]},
                "task": {"type": "master", "index": 0},
            },
            r"^If `master` node exists in `cluster`, job `chief` is not supported\.$",
        ),
        (
            {"cluster": {"master": ["m:1"]}, "task": {"type": "evaluator", "index": 0}},
            r"^If `master` node exists in `cluster`, task_type `evaluator` is not supported\.$",
        ),
        ({"model_dir": ""}, r"^model_dir in TF_CONFIG should be non-empty\.$"),
    ],
)
def test_tf_config_errors(monkeypatch, tf_config, message):
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    with pytest.raises(ValueError, match=message):
        est.RunConfig()


def test_model_dir_from_tf_config(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"model_dir": "/tmp/from_env"}))
    assert est.RunConfig().model_dir == "/tmp/from_env"
    assert est.RunConfig(model_dir="/tmp/from_env").model_dir == "/tmp/from_env"
    with pytest.raises(
        ValueError,
        match=r"^`model_dir` provided in RunConfig construct, if set, must have the same value "
        r"as the model_dir in TF_CONFIG\. model_dir: /tmp/other\n"
        r'TF_CONFIG\["model_dir"\]: /tmp/from_env\.\n$',
    ):
        est.RunConfig(model_dir="/tmp/other")


def test_task_type_constants():
    assert (TaskType.MASTER, TaskType.PS, TaskType.WORKER) == ("master", "ps", "worker")
    assert (TaskType.CHIEF, TaskType.EVALUATOR) == ("chief", "evaluator")


def test_repr_shows_main_fields():
    r = repr(est.RunConfig(model_dir="/tmp/m", save_checkpoints_steps=10))
    assert r.startswith("RunConfig(model_dir='/tmp/m'")
    assert "save_checkpoints_steps=10" in r and "save_checkpoints_secs=None" in r


def test_replace_deep_copies_like_tf(monkeypatch):
    """TF 2.15's ``RunConfig._replace`` starts from ``copy.deepcopy(self)``: a subclass, task
    properties a subclass overrides and an evaluator's cluster survive ``replace``, and
    TF_CONFIG is not read again."""

    class MyConfig(est.RunConfig):
        @property
        def task_type(self):
            return "my_type"

    replaced = MyConfig().replace(save_summary_steps=7)
    assert type(replaced) is MyConfig and replaced.task_type == "my_type"
    assert replaced.save_summary_steps == 7

    evaluator = {
        "cluster": {"chief": ["h:1"], "worker": ["h:2"]},
        "task": {"type": "evaluator", "index": 0},
    }
    monkeypatch.setenv("TF_CONFIG", json.dumps(evaluator))
    config = est.RunConfig()
    monkeypatch.delenv("TF_CONFIG")  # replace must not read it again
    copy = config.replace(tf_random_seed=3)
    assert (copy.task_type, copy.task_id, copy.is_chief) == ("evaluator", 0, False)
    assert copy.tf_random_seed == 3 and config.tf_random_seed is None
    # Validation and the checkpoint rule still apply.
    assert copy.replace(save_checkpoints_steps=5).save_checkpoints_secs is None
    with pytest.raises(ValueError, match="save_summary_steps should be >= 0"):
        copy.replace(save_summary_steps=-1)


def test_master_service_and_cluster_spec_as_tf(monkeypatch):
    # From TF 2.15.1 under the same TF_CONFIGs: master '' locally, grpc://<own address> in a
    # cluster of several nodes, '' for a one-node cluster and for the evaluator;
    # evaluation_master from eval_session_master on the evaluator only; service from TF_CONFIG.
    config = est.RunConfig()
    assert (config.master, config.evaluation_master, config.service) == ("", "", None)
    assert config.cluster_spec.as_dict() == {}
    cluster = {"chief": ["h:1"], "worker": ["h:2", "h:3"]}
    worker = _with_tf_config(
        monkeypatch,
        {"cluster": cluster, "task": {"type": "worker", "index": 1}, "service": {"a": 1}},
    )
    assert worker.master == "grpc://h:3" and worker.evaluation_master == ""
    assert worker.service == {"a": 1}
    assert worker.cluster_spec.as_dict() == cluster and worker.cluster_spec.jobs == [
        "chief",
        "worker",
    ]
    assert worker.cluster_spec.job_tasks("worker") == ["h:2", "h:3"]
    one = _with_tf_config(
        monkeypatch, {"cluster": {"chief": ["h:1"]}, "task": {"type": "chief", "index": 0}}
    )
    assert one.master == ""
    evaluator = _with_tf_config(
        monkeypatch,
        {
            "cluster": cluster,
            "task": {"type": "evaluator", "index": 0},
            "eval_session_master": "grpc://e:1",
        },
    )
    assert (evaluator.master, evaluator.evaluation_master) == ("", "grpc://e:1")
    with pytest.raises(TypeError, match='If "service" is set in TF_CONFIG, it must be a dict'):
        _with_tf_config(monkeypatch, {"service": "x"})


def test_device_fn_is_validated_as_tf():
    with pytest.raises(
        ValueError, match='^device_fn must be callable with exactly one argument "op".$'
    ):
        est.RunConfig(device_fn=3)
    with pytest.raises(ValueError, match="device_fn must be callable"):
        est.RunConfig(device_fn=lambda op, other: None)
    assert est.RunConfig(device_fn=lambda op: "/cpu:0").device_fn(None) == "/cpu:0"
