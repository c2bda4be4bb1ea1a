"""The ``estimator.compat`` namespaces: what they cover, how they refuse the rest, the check
command, the layering (the core never imports ``canned``; compat sits above it), TF 1 canned
defaults."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import estimator.compat as tf_top
import estimator.compat.v1 as tf
from estimator.compat import check

# The public names of TF 2.15.1's tf.compat.v1 namespaces (`dir()` without underscores).
TF_NAMES = {
    "estimator": "BaselineClassifier BaselineEstimator BaselineRegressor BestExporter "
    "BinaryClassHead CheckpointSaverHook CheckpointSaverListener DNNClassifier DNNEstimator "
    "DNNLinearCombinedClassifier DNNLinearCombinedEstimator DNNLinearCombinedRegressor "
    "DNNRegressor Estimator EstimatorSpec EvalSpec Exporter FeedFnHook FinalExporter "
    "FinalOpsHook GlobalStepWaiterHook Head LatestExporter LinearClassifier LinearEstimator "
    "LinearRegressor LoggingTensorHook LogisticRegressionHead ModeKeys MultiClassHead MultiHead "
    "MultiLabelHead NanLossDuringTrainingError NanTensorHook PoissonRegressionHead ProfilerHook "
    "RegressionHead RunConfig SecondOrStepTimer SessionRunArgs SessionRunContext SessionRunHook "
    "SessionRunValues StepCounterHook StopAtStepHook SummarySaverHook TrainSpec VocabInfo "
    "WarmStartSettings add_metrics classifier_parse_example_spec experimental export inputs "
    "regressor_parse_example_spec tpu train_and_evaluate",
    "estimator.export": "ClassificationOutput EvalOutput ExportOutput PredictOutput "
    "RegressionOutput ServingInputReceiver TensorServingInputReceiver "
    "build_parsing_serving_input_receiver_fn build_raw_serving_input_receiver_fn",
    "estimator.inputs": "numpy_input_fn pandas_input_fn",
    "estimator.experimental": "InMemoryEvaluatorHook KMeans LinearSDCA "
    "build_raw_supervised_input_receiver_fn call_logit_fn dnn_logit_fn_builder "
    "linear_logit_fn_builder make_early_stopping_hook make_stop_at_checkpoint_step_hook "
    "stop_if_higher_hook stop_if_lower_hook stop_if_no_decrease_hook stop_if_no_increase_hook",
    "losses": "Reduction absolute_difference add_loss compute_weighted_loss cosine_distance "
    "get_losses get_regularization_loss get_regularization_losses get_total_loss hinge_loss "
    "huber_loss log_loss mean_pairwise_squared_error mean_squared_error sigmoid_cross_entropy "
    "softmax_cross_entropy sparse_softmax_cross_entropy",
    "metrics": "accuracy auc average_precision_at_k false_negatives "
    "false_negatives_at_thresholds false_positives false_positives_at_thresholds mean "
    "mean_absolute_error mean_cosine_distance mean_iou mean_per_class_accuracy "
    "mean_relative_error mean_squared_error mean_tensor percentage_below precision "
    "precision_at_k precision_at_thresholds precision_at_top_k recall recall_at_k "
    "recall_at_thresholds recall_at_top_k root_mean_squared_error sensitivity_at_specificity "
    "sparse_average_precision_at_k sparse_precision_at_k specificity_at_sensitivity "
    "true_negatives true_negatives_at_thresholds true_positives true_positives_at_thresholds",
    "layers": "AveragePooling1D AveragePooling2D AveragePooling3D BatchNormalization Conv1D "
    "Conv2D Conv2DTranspose Conv3D Conv3DTranspose Dense Dropout Flatten InputSpec Layer "
    "MaxPooling1D MaxPooling2D MaxPooling3D SeparableConv1D SeparableConv2D average_pooling1d "
    "average_pooling2d average_pooling3d batch_normalization conv1d conv2d conv2d_transpose "
    "conv3d conv3d_transpose dense dropout experimental flatten max_pooling1d max_pooling2d "
    "max_pooling3d separable_conv1d separable_conv2d",
    "summary": "Event FileWriter FileWriterCache SessionLog Summary SummaryDescription "
    "TaggedRunMetadata all_v2_summary_ops audio get_summary_description histogram image "
    "initialize merge merge_all scalar tensor_summary text",
    "data": "AUTOTUNE Dataset DatasetSpec FixedLengthRecordDataset INFINITE_CARDINALITY Iterator "
    "NumpyIterator Options TFRecordDataset TextLineDataset ThreadingOptions UNKNOWN_CARDINALITY "
    "experimental get_output_classes get_output_shapes get_output_types "
    "make_initializable_iterator make_one_shot_iterator",
    "train": "AdadeltaOptimizer AdagradDAOptimizer AdagradOptimizer AdamOptimizer BytesList "
    "Checkpoint CheckpointManager CheckpointOptions CheckpointSaverHook "
    "CheckpointSaverListener ChiefSessionCreator ClusterDef ClusterSpec Coordinator Example "
    "ExponentialMovingAverage Feature FeatureList FeatureLists Features FeedFnHook "
    "FinalOpsHook FloatList FtrlOptimizer GlobalStepWaiterHook GradientDescentOptimizer "
    "Int64List JobDef LoggingTensorHook LooperThread MomentumOptimizer MonitoredSession "
    "MonitoredTrainingSession NanLossDuringTrainingError NanTensorHook NewCheckpointReader "
    "Optimizer ProfilerHook ProximalAdagradOptimizer ProximalGradientDescentOptimizer "
    "QueueRunner RMSPropOptimizer Saver SaverDef Scaffold SecondOrStepTimer SequenceExample "
    "Server ServerDef SessionCreator SessionManager SessionRunArgs SessionRunContext "
    "SessionRunHook SessionRunValues SingularMonitoredSession StepCounterHook StopAtStepHook "
    "SummarySaverHook Supervisor SyncReplicasOptimizer VocabInfo WorkerSessionCreator "
    "add_queue_runner assert_global_step basic_train_loop batch batch_join checkpoint_exists "
    "checkpoints_iterator cosine_decay cosine_decay_restarts create_global_step "
    "do_quantize_training_on_graphdef experimental exponential_decay export_meta_graph "
    "generate_checkpoint_state_proto get_checkpoint_mtimes get_checkpoint_state "
    "get_global_step get_or_create_global_step global_step import_meta_graph "
    "init_from_checkpoint input_producer inverse_time_decay latest_checkpoint limit_epochs "
    "linear_cosine_decay list_variables load_checkpoint load_variable match_filenames_once "
    "maybe_batch maybe_batch_join maybe_shuffle_batch maybe_shuffle_batch_join "
    "natural_exp_decay noisy_linear_cosine_decay piecewise_constant piecewise_constant_decay "
    "polynomial_decay queue_runner range_input_producer remove_checkpoint "
    "replica_device_setter sdca_fprint sdca_optimizer sdca_shrink_l1 shuffle_batch "
    "shuffle_batch_join slice_input_producer start_queue_runners string_input_producer "
    "summary_iterator update_checkpoint_state warm_start write_graph",
    "feature_column": "bucketized_column categorical_column_with_hash_bucket "
    "categorical_column_with_identity categorical_column_with_vocabulary_file "
    "categorical_column_with_vocabulary_list crossed_column embedding_column indicator_column "
    "input_layer linear_model make_parse_example_spec numeric_column "
    "sequence_categorical_column_with_hash_bucket sequence_categorical_column_with_identity "
    "sequence_categorical_column_with_vocabulary_file "
    "sequence_categorical_column_with_vocabulary_list sequence_numeric_column "
    "shared_embedding_columns weighted_categorical_column",
}

# The least surface TF 1 Estimator programs need.
REQUIRED = """
estimator.Estimator estimator.EstimatorSpec estimator.ModeKeys estimator.RunConfig
estimator.TrainSpec estimator.EvalSpec estimator.train_and_evaluate estimator.BestExporter
estimator.FinalExporter estimator.LatestExporter estimator.inputs.numpy_input_fn
estimator.export.ServingInputReceiver estimator.export.PredictOutput
estimator.experimental.stop_if_no_decrease_hook estimator.experimental.stop_if_higher_hook
estimator.LinearClassifier estimator.DNNClassifier feature_column.numeric_column
feature_column.crossed_column feature_column.input_layer
layers.dense layers.conv1d layers.conv2d layers.max_pooling1d layers.max_pooling2d
layers.average_pooling1d layers.average_pooling2d layers.dropout layers.batch_normalization
layers.flatten nn.relu nn.relu6 nn.elu nn.selu nn.sigmoid nn.tanh nn.softmax nn.log_softmax
nn.l2_normalize nn.dropout nn.embedding_lookup nn.sparse_softmax_cross_entropy_with_logits
nn.sigmoid_cross_entropy_with_logits nn.softmax_cross_entropy_with_logits_v2
reduce_sum reduce_mean reduce_max reduce_min reduce_prod argmax argmin cast reshape concat
stack expand_dims squeeze matmul where one_hot equal greater less newaxis shape constant
zeros ones float32 int32 int64 string bool
losses.sparse_softmax_cross_entropy losses.mean_squared_error losses.Reduction
metrics.accuracy metrics.auc metrics.mean_squared_error metrics.precision metrics.recall
summary.scalar summary.histogram summary.text
train.get_global_step train.get_or_create_global_step train.GradientDescentOptimizer
train.MomentumOptimizer train.AdagradOptimizer train.AdamOptimizer train.RMSPropOptimizer
train.FtrlOptimizer train.exponential_decay train.piecewise_constant train.polynomial_decay
train.cosine_decay train.LoggingTensorHook train.SessionRunHook train.StopAtStepHook
get_variable variable_scope identity GraphKeys control_dependencies logging.info
logging.set_verbosity data.Dataset data.TextLineDataset decode_csv
""".split()


def _resolve(path: str):
    obj = tf
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("path", REQUIRED)
def test_the_issues_surface_is_covered(path):
    assert _resolve(path) is not None or path == "newaxis"


@pytest.mark.parametrize("namespace", sorted(TF_NAMES))
def test_every_tf_name_is_provided_or_refused_with_a_hint(namespace):
    provided = []
    for name in TF_NAMES[namespace].split():
        try:
            _resolve(f"{namespace}.{name}")
            provided.append(name)
        except AttributeError as error:  # never a bare AttributeError: always ours
            assert isinstance(error, tf.UnsupportedSymbolError), (namespace, name)
            assert f"tf.{namespace}.{name} is not supported" in str(error)
    assert provided  # and the counts below say how much
    minimum = {
        "estimator": 57,
        "estimator.export": 9,
        "estimator.inputs": 2,
        "estimator.experimental": 9,
        "losses": 17,
        "metrics": 15,
        "layers": 20,
        "summary": 5,
        "data": 8,
        "feature_column": 13,
        "train": 43,
    }
    assert len(provided) >= minimum[namespace], (namespace, sorted(provided))


def test_unsupported_symbols_name_the_replacement():
    with pytest.raises(tf.UnsupportedSymbolError, match=r"tf\.Graph is not supported .* no graph"):
        tf.Graph()
    with pytest.raises(NotImplementedError, match="tf.train.Saver .* Checkpoints are written"):
        tf.train.Saver()
    with pytest.raises(AttributeError, match=r"tf\.keras\.layers is not supported.*tf\.layers"):
        tf.keras.layers  # noqa: B018
    with pytest.raises(tf.UnsupportedSymbolError, match="jax.lax.while_loop"):
        tf.while_loop  # noqa: B018
    with pytest.raises(tf.UnsupportedSymbolError, match="tf.feature_column.sequence_numeric"):
        tf.feature_column.sequence_numeric_column("x")
    assert getattr(tf.nn, "ctc_loss", None) is None  # hasattr/getattr keep working
    assert not hasattr(tf, "no_such_symbol")


def test_tensorflow_style_top_level_namespace():
    assert tf_top.compat.v1 is tf
    assert float(tf_top.reduce_mean([1.0, 3.0])) == 2.0
    assert tf_top.train.AdamOptimizer is tf.train.AdamOptimizer
    with pytest.raises(tf.UnsupportedSymbolError, match="tf.compat.v2 is not supported"):
        tf_top.compat.v2  # noqa: B018


@pytest.mark.slow
def test_the_core_never_imports_canned_and_compat_builds_on_it():
    code = textwrap.dedent(
        """
        import sys
        import estimator, estimator.export, estimator.serve, estimator.training
        assert not [m for m in sys.modules if m.split(".")[0] == "canned"], "imported canned"
        import estimator.compat.v1 as tf
        import canned
        assert issubclass(tf.estimator.LinearClassifier, canned.LinearClassifier)
        assert tf.feature_column.numeric_column is canned.feature_column.numeric_column
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.stdout.strip() == "ok", result.stderr[-2000:]


PROGRAM = """
import numpy as np
import tensorflow as tf
from tensorflow.compat.v1 import estimator as tf_estimator

def model_fn(features, labels, mode):
    net = tf.layers.dense(features["x"], 10, activation=tf.nn.relu)
    graph = tf.Graph()
    train_op = tf.train.AdamOptimizer(1e-3).minimize(tf.reduce_mean(net))
    ema = tf.train.ExponentialMovingAverage(0.9)
    return tf_estimator.EstimatorSpec(mode, train_op=train_op)

ds = tf.data.Dataset.from_tensor_slices(np.zeros(3)).shuffle(3).batch(2)
"""


def test_check_command_lists_symbols_and_coverage(tmp_path, capsys):
    path = tmp_path / "program.py"
    path.write_text(PROGRAM)
    status = check.main([str(path)])
    out = capsys.readouterr().out
    assert status == 1
    assert "ok       tf.layers.dense" in out
    assert "ok       tf.data.Dataset.from_tensor_slices" in out
    assert "ok       tf.estimator.EstimatorSpec" in out  # through `from ... import estimator`
    assert "MISSING  tf.Graph" in out and "no graph or session" in out
    assert "MISSING  tf.train.ExponentialMovingAverage" in out and "optax.ema" in out
    assert "ok       tf.data.Dataset.shuffle" in out  # methods on datasets count too
    # the imported name (tf.estimator) and the optimizer's method (through the object) count
    assert "ok       tf.train.AdamOptimizer.minimize" in out
    assert "12 TF symbols, 10 covered, 2 missing." in out

    good = tmp_path / "good.py"
    good.write_text("import tensorflow.compat.v1 as tf\nx = tf.nn.relu(tf.ones([2]))\n")
    assert check.main([str(good)]) == 0
    assert "2 TF symbols, 2 covered." in capsys.readouterr().out
    bad = tmp_path / "bad.py"
    bad.write_text("def (:\n")
    assert check.main([str(bad)]) == 2


@pytest.mark.slow
def test_check_runs_as_a_module(tmp_path):
    path = tmp_path / "p.py"
    path.write_text("import tensorflow as tf\ntf.train.AdagradOptimizer(0.1)\n")
    result = subprocess.run(
        [sys.executable, "-m", "estimator.compat.check", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "ok       tf.train.AdagradOptimizer" in result.stdout


def _train_linear(tmp_path, **kwargs):
    x = np.array([[1.0], [2.0], [-1.0]], np.float32)
    y = np.array([1, 0, 1], np.int32)
    model = tf.estimator.LinearClassifier(
        [tf.feature_column.numeric_column("x")], model_dir=str(tmp_path), **kwargs
    )
    input_fn = tf.estimator.inputs.numpy_input_fn(
        {"x": x}, y, batch_size=3, shuffle=False, num_epochs=None
    )
    model.train(input_fn, steps=2)
    return (
        model.get_variable_value("linear/linear_model/x/weights"),
        model.get_variable_value("linear/linear_model/bias_weights"),
    )


def test_tf1_canned_defaults_match_tf(tmp_path):
    # TF 2.15.1: tf.compat.v1.estimator.LinearClassifier([numeric_column("x")]) trained 2 steps
    # on x = [[1], [2], [-1]], y = [1, 0, 1] with numpy_input_fn(batch_size=3): TF 1's
    # defaults, FtrlOptimizer(0.2) and loss_reduction=SUM.
    weights, bias = _train_linear(tmp_path / "default")
    np.testing.assert_allclose(weights, [[-0.311972051858902]], rtol=1e-5)
    np.testing.assert_allclose(bias, [0.29333019256591797], rtol=1e-5)
    # ... and with optimizer=tf.train.GradientDescentOptimizer(0.5),
    # loss_reduction=tf.losses.Reduction.SUM_OVER_BATCH_SIZE (a TF 1 optimizer instance).
    weights, bias = _train_linear(
        tmp_path / "sgd",
        optimizer=tf.train.GradientDescentOptimizer(0.5),
        loss_reduction=tf.losses.Reduction.SUM_OVER_BATCH_SIZE,
    )
    np.testing.assert_allclose(weights, [[-0.2987748980522156]], rtol=1e-5)
    np.testing.assert_allclose(bias, [0.17013688385486603], rtol=1e-5)


def test_tf_compat_v1_spelled_inside_the_v1_namespace():
    # TF 2 code written as tf.compat.v1.X with `import estimator.compat.v1 as tf`: tf.compat.v1 is
    # the namespace itself, in programs and in the checker.
    assert tf.compat.v1 is tf
    assert tf.compat.v1.layers.dense is tf.layers.dense
    assert tf.compat.v1.estimator.RunConfig is tf.estimator.RunConfig
    with pytest.raises(tf.UnsupportedSymbolError, match="tf.compat.v2 is not supported"):
        tf.compat.v2  # noqa: B018
    symbols = check.scan_source(
        "import estimator.compat.v1 as tf\ntf.compat.v1.train.AdamOptimizer(0.1)\n"
    )
    assert [(s.name, check.resolve(s.path)[0]) for s in symbols] == [
        ("tf.compat.v1.train.AdamOptimizer", True)
    ]


def test_check_follows_datasets_and_iterators_through_variables(tmp_path, capsys):
    # Methods on dataset values are symbols too (before: not listed at all).
    path = tmp_path / "input.py"
    path.write_text(
        textwrap.dedent(
            """
            import tensorflow as tf
            def input_fn(path):
                ds = tf.data.TextLineDataset(path).skip(1)
                ds = ds.map(lambda line: tf.decode_csv(line, [[0.0], [""]]))
                ds = ds.unbatch()
                it = ds.make_initializable_iterator()
                return it.get_next()
            def other():
                ds = tf.data.Dataset.from_tensor_slices([1]).shuffle(3).batch(2)
                return ds.make_one_shot_iterator().get_next(), {}.items()
            """
        )
    )
    assert check.main([str(path)]) == 1
    out = capsys.readouterr().out
    for symbol in (
        "tf.data.Dataset.skip",
        "tf.data.Dataset.map",
        "tf.data.Dataset.make_initializable_iterator",
        "tf.data.Dataset.shuffle",
        "tf.data.Dataset.batch",
        "tf.data.Dataset.make_one_shot_iterator",
        "tf.data.Iterator.get_next",
    ):
        assert f"ok       {symbol} " in out, symbol
    assert "MISSING  tf.data.Dataset.unbatch" in out
    assert "items" not in out  # methods of other values are not TF symbols
    assert out.endswith("11 TF symbols, 10 covered, 1 missing.\n")
