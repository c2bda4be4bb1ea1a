"""Every public name of TF 2.15's Estimator surface exists here.

The lists are TF 2.15.1's (tensorflow-cpu 2.15.1 + tensorflow-estimator 2.15.0), printed by
this script in that environment (134 names)::

    import tensorflow as tf

    def public(m):
        return sorted(n for n in dir(m) if not n.startswith("_"))

    for m in (tf.estimator, tf.estimator.experimental, tf.estimator.export,
              tf.estimator.Estimator, tf.estimator.RunConfig, tf.feature_column):
        print(public(m))

Where they live here: ``tf.estimator.X`` in ``estimator`` (the core) or ``canned`` (canned
estimators and heads); ``tf.estimator.experimental.X`` in ``estimator.experimental`` (the
canned ones once ``canned`` is imported) and all of them in ``canned.experimental``;
``tf.estimator.export.X`` in ``estimator.export``; ``tf.feature_column.X`` in
``canned.feature_column``. A name whose TF meaning has no JAX counterpart exists and raises
an error naming the alternative.
"""

from __future__ import annotations

import pytest

import canned
import estimator as est

TF_ESTIMATOR = [
    "BaselineClassifier",
    "BaselineEstimator",
    "BaselineRegressor",
    "BestExporter",
    "BinaryClassHead",
    "CheckpointSaverHook",
    "CheckpointSaverListener",
    "DNNClassifier",
    "DNNEstimator",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedEstimator",
    "DNNLinearCombinedRegressor",
    "DNNRegressor",
    "Estimator",
    "EstimatorSpec",
    "EvalSpec",
    "Exporter",
    "FeedFnHook",
    "FinalExporter",
    "FinalOpsHook",
    "GlobalStepWaiterHook",
    "Head",
    "LatestExporter",
    "LinearClassifier",
    "LinearEstimator",
    "LinearRegressor",
    "LoggingTensorHook",
    "LogisticRegressionHead",
    "ModeKeys",
    "MultiClassHead",
    "MultiHead",
    "MultiLabelHead",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "PoissonRegressionHead",
    "ProfilerHook",
    "RegressionHead",
    "RunConfig",
    "SecondOrStepTimer",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "StepCounterHook",
    "StopAtStepHook",
    "SummarySaverHook",
    "TrainSpec",
    "VocabInfo",
    "WarmStartSettings",
    "add_metrics",
    "classifier_parse_example_spec",
    "experimental",
    "export",
    "regressor_parse_example_spec",
    "train_and_evaluate",
]  # tf.estimator: 55
TF_EXPERIMENTAL = [
    "InMemoryEvaluatorHook",
    "LinearSDCA",
    "RNNClassifier",
    "RNNEstimator",
    "build_raw_supervised_input_receiver_fn",
    "call_logit_fn",
    "make_early_stopping_hook",
    "make_stop_at_checkpoint_step_hook",
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook",
]  # tf.estimator.experimental: 12
TF_EXPORT = [
    "ClassificationOutput",
    "EvalOutput",
    "ExportOutput",
    "PredictOutput",
    "RegressionOutput",
    "ServingInputReceiver",
    "TensorServingInputReceiver",
    "build_parsing_serving_input_receiver_fn",
    "build_raw_serving_input_receiver_fn",
]  # tf.estimator.export: 9
TF_ESTIMATOR_ATTRIBUTES = [
    "config",
    "eval_dir",
    "evaluate",
    "experimental_export_all_saved_models",
    "export_saved_model",
    "export_savedmodel",
    "get_variable_names",
    "get_variable_value",
    "latest_checkpoint",
    "model_dir",
    "model_fn",
    "params",
    "predict",
    "train",
]  # tf.estimator.Estimator: 14
TF_RUN_CONFIG_ATTRIBUTES = [
    "checkpoint_save_graph_def",
    "cluster_spec",
    "device_fn",
    "eval_distribute",
    "evaluation_master",
    "experimental_max_worker_delay_secs",
    "global_id_in_cluster",
    "is_chief",
    "keep_checkpoint_every_n_hours",
    "keep_checkpoint_max",
    "log_step_count_steps",
    "master",
    "model_dir",
    "num_ps_replicas",
    "num_worker_replicas",
    "protocol",
    "replace",
    "save_checkpoints_secs",
    "save_checkpoints_steps",
    "save_summary_steps",
    "service",
    "session_config",
    "session_creation_timeout_secs",
    "task_id",
    "task_type",
    "tf_random_seed",
    "train_distribute",
]  # tf.estimator.RunConfig: 27
TF_FEATURE_COLUMN = [
    "bucketized_column",
    "categorical_column_with_hash_bucket",
    "categorical_column_with_identity",
    "categorical_column_with_vocabulary_file",
    "categorical_column_with_vocabulary_list",
    "crossed_column",
    "embedding_column",
    "indicator_column",
    "make_parse_example_spec",
    "numeric_column",
    "sequence_categorical_column_with_hash_bucket",
    "sequence_categorical_column_with_identity",
    "sequence_categorical_column_with_vocabulary_file",
    "sequence_categorical_column_with_vocabulary_list",
    "sequence_numeric_column",
    "shared_embeddings",
    "weighted_categorical_column",
]  # tf.feature_column: 17


def _tf_estimator(name: str):
    found = [getattr(module, name) for module in (est, canned) if hasattr(module, name)]
    assert found, f"tf.estimator.{name} has no counterpart in estimator or canned"
    return found[0]


def test_the_lists_are_tfs_134_names():
    lists = (TF_ESTIMATOR, TF_EXPERIMENTAL, TF_EXPORT, TF_ESTIMATOR_ATTRIBUTES,
             TF_RUN_CONFIG_ATTRIBUTES, TF_FEATURE_COLUMN)  # fmt: skip
    assert [len(names) for names in lists] == [55, 12, 9, 14, 27, 17]
    assert sum(map(len, lists)) == 134


@pytest.mark.parametrize("name", TF_ESTIMATOR)
def test_tf_estimator(name):
    obj = _tf_estimator(name)
    if name in ("experimental", "export"):
        assert obj is getattr(est, name)
    else:
        assert callable(obj), name


@pytest.mark.parametrize("name", TF_EXPERIMENTAL)
def test_tf_estimator_experimental(name):
    assert callable(getattr(canned.experimental, name))
    assert getattr(est.experimental, name) is getattr(canned.experimental, name)


@pytest.mark.parametrize("name", TF_EXPORT)
def test_tf_estimator_export(name):
    assert callable(getattr(est.export, name))


@pytest.mark.parametrize("name", TF_ESTIMATOR_ATTRIBUTES)
def test_estimator_attributes(name):
    # On the class, so every Estimator (canned ones included) has it.
    assert hasattr(est.Estimator, name)
    assert hasattr(canned.experimental.RNNClassifier, name)


# tf.estimator.RunConfig()'s values in TF 2.15.1 without TF_CONFIG, read there (and
# cluster_spec: a ClusterSpec whose as_dict() is {}).
TF_RUN_CONFIG_DEFAULTS = {
    "checkpoint_save_graph_def": True,
    "device_fn": None,
    "eval_distribute": None,
    "evaluation_master": "",
    "experimental_max_worker_delay_secs": None,
    "global_id_in_cluster": 0,
    "is_chief": True,
    "keep_checkpoint_every_n_hours": 10000,
    "keep_checkpoint_max": 5,
    "log_step_count_steps": 100,
    "master": "",
    "model_dir": None,
    "num_ps_replicas": 0,
    "num_worker_replicas": 1,
    "protocol": None,
    "save_checkpoints_secs": 600,
    "save_checkpoints_steps": None,
    "save_summary_steps": 100,
    "service": None,
    "session_config": None,
    "session_creation_timeout_secs": 7200,
    "task_id": 0,
    "task_type": "worker",
    "tf_random_seed": None,
    "train_distribute": None,
}


@pytest.mark.parametrize("name", TF_RUN_CONFIG_ATTRIBUTES)
def test_run_config_attributes(name, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    config = est.RunConfig()
    if name == "replace":  # the one method: a new config with a field changed
        assert config.replace(save_summary_steps=7).save_summary_steps == 7
        assert config.save_summary_steps == 100
        return
    value = getattr(config, name)
    if name == "cluster_spec":
        assert value.as_dict() == {} and value.jobs == []
        return
    expected = TF_RUN_CONFIG_DEFAULTS[name]
    assert value == expected and type(value) is type(expected), (name, value)


@pytest.mark.parametrize("name", TF_FEATURE_COLUMN)
def test_tf_feature_column(name):
    assert callable(getattr(canned.feature_column, name))


def test_names_without_a_jax_counterpart_raise_naming_the_alternative():
    with pytest.raises(ValueError, match="Put the values into what input_fn returns"):
        est.FeedFnHook(lambda: {})
    for argument in ("train_distribute", "eval_distribute"):
        with pytest.raises(ValueError, match="pass mesh=jax.sharding.Mesh"):
            est.RunConfig(**{argument: object()})
