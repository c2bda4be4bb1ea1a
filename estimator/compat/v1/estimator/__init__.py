"""``tf.estimator`` (TF 2.15's ``tf.compat.v1.estimator``): the Estimator, its specs, hooks,
exporters and the canned estimators.

Everything but ``EstimatorSpec`` is the core's own (``estimator``): same arguments,
defaults and messages. ``EstimatorSpec`` also converts TF 1 values (``tf.metrics`` pairs,
``minimize`` train ops; see ``_spec``). The canned estimators and heads come from the
``canned`` package with TF 1's defaults (``canned._compat_v1``: ``loss_reduction=SUM``,
TF 1 optimizers and learning rates), imported when first asked for: the core never imports
``canned`` at import time (see ``estimator.compat.v1``). ``tf.estimator.tpu`` is
``TPUEstimator`` on JAX devices (``tpu``).
"""

from __future__ import annotations

import importlib

from estimator import add_metrics as add_metrics
from estimator.compat._unsupported import module_getattr as _module_getattr
from estimator.compat.v1.estimator import experimental as experimental
from estimator.compat.v1.estimator import export as export
from estimator.compat.v1.estimator import inputs as inputs
from estimator.compat.v1.estimator import tpu as tpu
from estimator.compat.v1.estimator._spec import EstimatorSpec as EstimatorSpec
from estimator.estimator import Estimator as Estimator
from estimator.hooks.basic import CheckpointSaverHook as CheckpointSaverHook
from estimator.hooks.basic import CheckpointSaverListener as CheckpointSaverListener
from estimator.hooks.basic import FinalOpsHook as FinalOpsHook
from estimator.hooks.basic import GlobalStepWaiterHook as GlobalStepWaiterHook
from estimator.hooks.basic import LoggingTensorHook as LoggingTensorHook
from estimator.hooks.basic import NanLossDuringTrainingError as NanLossDuringTrainingError
from estimator.hooks.basic import NanTensorHook as NanTensorHook
from estimator.hooks.basic import SecondOrStepTimer as SecondOrStepTimer
from estimator.hooks.basic import StepCounterHook as StepCounterHook
from estimator.hooks.basic import StopAtStepHook as StopAtStepHook
from estimator.hooks.feed_fn import FeedFnHook as FeedFnHook
from estimator.hooks.profiler import ProfilerHook as ProfilerHook
from estimator.hooks.session_run_hook import SessionRunArgs as SessionRunArgs
from estimator.hooks.session_run_hook import SessionRunContext as SessionRunContext
from estimator.hooks.session_run_hook import SessionRunHook as SessionRunHook
from estimator.hooks.session_run_hook import SessionRunValues as SessionRunValues
from estimator.mode_keys import ModeKeys as ModeKeys
from estimator.run_config import RunConfig as RunConfig
from estimator.summary import SummarySaverHook as SummarySaverHook
from estimator.training.exporter import BestExporter as BestExporter
from estimator.training.exporter import Exporter as Exporter
from estimator.training.exporter import FinalExporter as FinalExporter
from estimator.training.exporter import LatestExporter as LatestExporter
from estimator.training.run import EvalSpec as EvalSpec
from estimator.training.run import TrainSpec as TrainSpec
from estimator.training.run import train_and_evaluate as train_and_evaluate
from estimator.vocab_remap import VocabInfo as VocabInfo
from estimator.warm_starting import WarmStartSettings as WarmStartSettings

#: Names served by ``canned._compat_v1`` (TF 1's canned estimators and TF 2.15's heads).
CANNED = (
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
)

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
    *CANNED,
]

_unsupported_getattr = _module_getattr("tf.estimator", __name__)


def __getattr__(name: str):
    if name in CANNED:
        # Deferred by design: canned builds on estimator, so the core reaches it only here,
        # by module path, when a program asks for a canned estimator.
        return getattr(importlib.import_module("canned._compat_v1"), name)
    return _unsupported_getattr(name)
