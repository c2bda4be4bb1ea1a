"""``tf.estimator`` (TF 2.15's ``tf.compat.v1.estimator``): the Estimator, its specs, hooks,
exporters and the canned estimators.

Everything but ``EstimatorSpec`` is the core's own (``estimator``): same arguments,
defaults and messages. ``EstimatorSpec`` also converts TF 1 values (``tf.metrics`` pairs,
``minimize`` train ops; see ``_spec``). The canned estimators and heads come from
the ``canned`` package with TF 1's defaults (``estimator.compat.v1._canned``:
``loss_reduction=SUM``, TF 1 optimizers and learning rates); ``estimator.compat`` is the top
layer, above ``canned``. ``tf.estimator.tpu`` is ``TPUEstimator`` on JAX devices (``tpu``).
"""

from __future__ import annotations

from estimator.checkpoint import VocabInfo as VocabInfo
from estimator.compat._unsupported import module_getattr as _module_getattr
from estimator.compat.v1._canned import BaselineClassifier as BaselineClassifier
from estimator.compat.v1._canned import BaselineEstimator as BaselineEstimator
from estimator.compat.v1._canned import BaselineRegressor as BaselineRegressor
from estimator.compat.v1._canned import BinaryClassHead as BinaryClassHead
from estimator.compat.v1._canned import DNNClassifier as DNNClassifier
from estimator.compat.v1._canned import DNNEstimator as DNNEstimator
from estimator.compat.v1._canned import DNNLinearCombinedClassifier as DNNLinearCombinedClassifier
from estimator.compat.v1._canned import DNNLinearCombinedEstimator as DNNLinearCombinedEstimator
from estimator.compat.v1._canned import DNNLinearCombinedRegressor as DNNLinearCombinedRegressor
from estimator.compat.v1._canned import DNNRegressor as DNNRegressor
from estimator.compat.v1._canned import Head as Head
from estimator.compat.v1._canned import LinearClassifier as LinearClassifier
from estimator.compat.v1._canned import LinearEstimator as LinearEstimator
from estimator.compat.v1._canned import LinearRegressor as LinearRegressor
from estimator.compat.v1._canned import LogisticRegressionHead as LogisticRegressionHead
from estimator.compat.v1._canned import MultiClassHead as MultiClassHead
from estimator.compat.v1._canned import MultiHead as MultiHead
from estimator.compat.v1._canned import MultiLabelHead as MultiLabelHead
from estimator.compat.v1._canned import PoissonRegressionHead as PoissonRegressionHead
from estimator.compat.v1._canned import RegressionHead as RegressionHead
from estimator.compat.v1._canned import (
    classifier_parse_example_spec as classifier_parse_example_spec,
)
from estimator.compat.v1._canned import regressor_parse_example_spec as regressor_parse_example_spec
from estimator.compat.v1.estimator import experimental as experimental
from estimator.compat.v1.estimator import export as export
from estimator.compat.v1.estimator import inputs as inputs
from estimator.compat.v1.estimator import tpu as tpu
from estimator.compat.v1.estimator._extenders import add_metrics as add_metrics
from estimator.compat.v1.estimator._spec import EstimatorSpec as EstimatorSpec
from estimator.config import RunConfig as RunConfig
from estimator.estimator import Estimator as Estimator
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
from estimator.hooks.session_run_hook import SessionRunArgs as SessionRunArgs
from estimator.hooks.session_run_hook import SessionRunContext as SessionRunContext
from estimator.hooks.session_run_hook import SessionRunHook as SessionRunHook
from estimator.hooks.session_run_hook import SessionRunValues as SessionRunValues
from estimator.mode_keys import ModeKeys as ModeKeys
from estimator.training.exporter import BestExporter as BestExporter
from estimator.training.exporter import Exporter as Exporter
from estimator.training.exporter import FinalExporter as FinalExporter
from estimator.training.exporter import LatestExporter as LatestExporter
from estimator.training.run import EvalSpec as EvalSpec
from estimator.training.run import TrainSpec as TrainSpec
from estimator.training.run import train_and_evaluate as train_and_evaluate
from estimator.warm_starting import WarmStartSettings as WarmStartSettings

__all__ = [
    "Estimator",
    "EstimatorSpec",
    "ModeKeys",
    "RunConfig",
    "TrainSpec",
    "EvalSpec",
    "train_and_evaluate",
    "Exporter",
    "BestExporter",
    "FinalExporter",
    "LatestExporter",
    "WarmStartSettings",
    "VocabInfo",
    "add_metrics",
    "SessionRunHook",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunValues",
    "LoggingTensorHook",
    "StopAtStepHook",
    "NanTensorHook",
    "NanLossDuringTrainingError",
    "CheckpointSaverHook",
    "CheckpointSaverListener",
    "StepCounterHook",
    "SummarySaverHook",
    "ProfilerHook",
    "FinalOpsHook",
    "GlobalStepWaiterHook",
    "FeedFnHook",
    "SecondOrStepTimer",
    "export",
    "inputs",
    "experimental",
    "tpu",
    "BaselineClassifier",
    "BaselineEstimator",
    "BaselineRegressor",
    "DNNClassifier",
    "DNNEstimator",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedEstimator",
    "DNNLinearCombinedRegressor",
    "DNNRegressor",
    "LinearClassifier",
    "LinearEstimator",
    "LinearRegressor",
    "Head",
    "BinaryClassHead",
    "MultiClassHead",
    "MultiHead",
    "MultiLabelHead",
    "RegressionHead",
    "PoissonRegressionHead",
    "LogisticRegressionHead",
    "classifier_parse_example_spec",
    "regressor_parse_example_spec",
]

_unsupported_getattr = _module_getattr("tf.estimator", __name__)


def __getattr__(name: str):
    return _unsupported_getattr(name)
