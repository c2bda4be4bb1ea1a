"""jax-estimator: TensorFlow Estimator's ``model_fn`` -> ``EstimatorSpec`` API on JAX.

Port a TF 1.x/2.x Estimator by changing the imports and the optimizer line::

    import estimator as est

    def model_fn(features, labels, mode, params):
        logits = est.layers.dense(features["x"], 1)
        ...
        return est.EstimatorSpec(mode, loss=loss, train_op=optax.adagrad(0.1), ...)

The guides (``docs/``) have the porting tables. The package's layers, bottom to top (base, hooks,
model, inputs, distribute, engine, export, estimator, training, serve and compat; then
``canned``), and which module is in which: ``docs/architecture.md``, enforced by
``tests/test_layout.py``.
"""

# First: estimator.config.platform notes the root logger's handlers before the imports below
# (release_root_logger, at the end).
import estimator.config.platform as _platform
from estimator import distribute as distribute
from estimator import early_stopping as early_stopping
from estimator import events as events
from estimator import experimental as experimental
from estimator import export as export
from estimator import handlers as handlers
from estimator import initializers as initializers
from estimator import inputs as inputs
from estimator import io as io
from estimator import layers as layers
from estimator import metrics as metrics
from estimator import modules as modules
from estimator import preprocessing as preprocessing
from estimator import summary as summary
from estimator.checkpoint import Checkpointer as Checkpointer
from estimator.checkpoint import ModelDirBusyError as ModelDirBusyError
from estimator.checkpoint import VocabInfo as VocabInfo
from estimator.config import RunConfig as RunConfig
from estimator.early_stopping import make_early_stopping_hook as make_early_stopping_hook
from estimator.early_stopping import stop_if_higher_hook as stop_if_higher_hook
from estimator.early_stopping import stop_if_lower_hook as stop_if_lower_hook
from estimator.early_stopping import stop_if_no_decrease_hook as stop_if_no_decrease_hook
from estimator.early_stopping import stop_if_no_increase_hook as stop_if_no_increase_hook
from estimator.estimator import Estimator as Estimator
from estimator.extenders import add_metrics as add_metrics
from estimator.hooks import CheckpointSaverHook as CheckpointSaverHook
from estimator.hooks import CheckpointSaverListener as CheckpointSaverListener
from estimator.hooks import FinalOpsHook as FinalOpsHook
from estimator.hooks import GlobalStepWaiterHook as GlobalStepWaiterHook
from estimator.hooks import LoggingTensorHook as LoggingTensorHook
from estimator.hooks import NanLossDuringTrainingError as NanLossDuringTrainingError
from estimator.hooks import NanTensorHook as NanTensorHook
from estimator.hooks import SecondOrStepTimer as SecondOrStepTimer
from estimator.hooks import StepCounterHook as StepCounterHook
from estimator.hooks import StopAtStepHook as StopAtStepHook
from estimator.hooks import SummarySaverHook as SummarySaverHook
from estimator.hooks.feed_fn import FeedFnHook as FeedFnHook
from estimator.hooks.profiler import ProfilerHook as ProfilerHook
from estimator.hooks.progress import ProgressBarHook as ProgressBarHook
from estimator.hooks.session_run_hook import SessionRunArgs as SessionRunArgs
from estimator.hooks.session_run_hook import SessionRunContext as SessionRunContext
from estimator.hooks.session_run_hook import SessionRunHook as SessionRunHook
from estimator.hooks.session_run_hook import SessionRunValues as SessionRunValues
from estimator.mode_keys import ModeKeys as ModeKeys
from estimator.model.export_output import ClassificationOutput as ClassificationOutput
from estimator.model.export_output import ExportOutput as ExportOutput
from estimator.model.export_output import PredictOutput as PredictOutput
from estimator.model.export_output import RegressionOutput as RegressionOutput
from estimator.model.padding import masks_padding as masks_padding
from estimator.model.padding import row_mask as row_mask
from estimator.model.spec import EstimatorSpec as EstimatorSpec
from estimator.model.strings import IndexToString as IndexToString
from estimator.model.strings import index_to_string as index_to_string
from estimator.model.train_op import sparse_updates as sparse_updates
from estimator.model.train_op import train_op_by_scope as train_op_by_scope
from estimator.model.variables import assign as assign
from estimator.model.variables import get_global_step as get_global_step
from estimator.model.variables import get_regularization_loss as get_regularization_loss
from estimator.model.variables import get_variable as get_variable
from estimator.model.variables import identity as identity
from estimator.model.variables import next_rng_key as next_rng_key
from estimator.model.variables import variable_scope as variable_scope
from estimator.training.exporter import BestExporter as BestExporter
from estimator.training.exporter import Exporter as Exporter
from estimator.training.exporter import FinalExporter as FinalExporter
from estimator.training.exporter import LatestExporter as LatestExporter
from estimator.training.in_memory_evaluator import InMemoryEvaluatorHook as InMemoryEvaluatorHook
from estimator.training.run import EvalSpec as EvalSpec
from estimator.training.run import TrainSpec as TrainSpec
from estimator.training.run import train_and_evaluate as train_and_evaluate
from estimator.warm_starting import WarmStartSettings as WarmStartSettings

__all__ = [
    "distribute",
    "events",
    "early_stopping",
    "experimental",
    "export",
    "handlers",
    "initializers",
    "inputs",
    "io",
    "layers",
    "metrics",
    "modules",
    "preprocessing",
    "summary",
    "Checkpointer",
    "Estimator",
    "ClassificationOutput",
    "ExportOutput",
    "PredictOutput",
    "RegressionOutput",
    "CheckpointSaverHook",
    "CheckpointSaverListener",
    "LoggingTensorHook",
    "NanLossDuringTrainingError",
    "ModelDirBusyError",
    "NanTensorHook",
    "SecondOrStepTimer",
    "StepCounterHook",
    "StopAtStepHook",
    "ModeKeys",
    "EstimatorSpec",
    "RunConfig",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "IndexToString",
    "index_to_string",
    "SummarySaverHook",
    "assign",
    "get_global_step",
    "get_regularization_loss",
    "get_variable",
    "identity",
    "next_rng_key",
    "variable_scope",
    "make_early_stopping_hook",
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook",
    "BestExporter",
    "Exporter",
    "FinalExporter",
    "LatestExporter",
    "FinalOpsHook",
    "FeedFnHook",
    "GlobalStepWaiterHook",
    "InMemoryEvaluatorHook",
    "ProfilerHook",
    "ProgressBarHook",
    "EvalSpec",
    "TrainSpec",
    "train_and_evaluate",
    "masks_padding",
    "row_mask",
    "sparse_updates",
    "train_op_by_scope",
    "add_metrics",
    "VocabInfo",
    "WarmStartSettings",
]

_platform.release_root_logger()
