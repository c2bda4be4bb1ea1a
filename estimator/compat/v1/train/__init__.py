"""``tf.train`` (TF 1.15's ``tf.compat.v1.train``): optimizers, learning-rate decays, the
global step, session-run hooks, checkpoint helpers, ``init_from_checkpoint``, and the
``tf.Example`` protos (``Example``, ``Features``, ``Feature``, ``BytesList``, ``FloatList``,
``Int64List``, ...: ``estimator.io.protos``, TF's real schema).

Optimizers keep TF 1's defaults, update rules and slot names and return ``train_op`` s the
Estimator applies (``_optimizers``); decays are TF's formulas of the global step
(``_schedules``); hooks are the Estimator's own (same protocol and call order as TF's).
"""

from __future__ import annotations

from estimator.checkpoint import latest_checkpoint as _latest_checkpoint
from estimator.checkpoint import list_variables as _list_variables
from estimator.checkpoint import load_variable as _load_variable
from estimator.checkpoint.vocab_remap import VocabInfo as VocabInfo
from estimator.compat._unsupported import module_getattr
from estimator.compat.v1.errors import raising_tf_errors, tf_error
from estimator.compat.v1.train._init_from import init_from_checkpoint as init_from_checkpoint
from estimator.compat.v1.train._optimizers import AdadeltaOptimizer as AdadeltaOptimizer
from estimator.compat.v1.train._optimizers import AdagradOptimizer as AdagradOptimizer
from estimator.compat.v1.train._optimizers import AdamOptimizer as AdamOptimizer
from estimator.compat.v1.train._optimizers import FtrlOptimizer as FtrlOptimizer
from estimator.compat.v1.train._optimizers import (
    GradientDescentOptimizer as GradientDescentOptimizer,
)
from estimator.compat.v1.train._optimizers import MomentumOptimizer as MomentumOptimizer
from estimator.compat.v1.train._optimizers import Optimizer as Optimizer
from estimator.compat.v1.train._optimizers import RMSPropOptimizer as RMSPropOptimizer
from estimator.compat.v1.train._schedules import cosine_decay as cosine_decay
from estimator.compat.v1.train._schedules import cosine_decay_restarts as cosine_decay_restarts
from estimator.compat.v1.train._schedules import exponential_decay as exponential_decay
from estimator.compat.v1.train._schedules import inverse_time_decay as inverse_time_decay
from estimator.compat.v1.train._schedules import linear_cosine_decay as linear_cosine_decay
from estimator.compat.v1.train._schedules import natural_exp_decay as natural_exp_decay
from estimator.compat.v1.train._schedules import piecewise_constant as piecewise_constant
from estimator.compat.v1.train._schedules import (
    piecewise_constant_decay as piecewise_constant_decay,
)
from estimator.compat.v1.train._schedules import polynomial_decay as polynomial_decay
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
from estimator.io import fs as _fs
from estimator.io.protos import BytesList as BytesList
from estimator.io.protos import Example as Example
from estimator.io.protos import Feature as Feature
from estimator.io.protos import FeatureList as FeatureList
from estimator.io.protos import FeatureLists as FeatureLists
from estimator.io.protos import Features as Features
from estimator.io.protos import FloatList as FloatList
from estimator.io.protos import Int64List as Int64List
from estimator.io.protos import SequenceExample as SequenceExample
from estimator.model.variables import get_global_step as _get_global_step

__all__ = [
    "BytesList",
    "Example",
    "Feature",
    "FeatureList",
    "FeatureLists",
    "Features",
    "FloatList",
    "Int64List",
    "SequenceExample",
    "Optimizer",
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "RMSPropOptimizer",
    "AdadeltaOptimizer",
    "FtrlOptimizer",
    "exponential_decay",
    "natural_exp_decay",
    "inverse_time_decay",
    "piecewise_constant",
    "piecewise_constant_decay",
    "polynomial_decay",
    "cosine_decay",
    "cosine_decay_restarts",
    "linear_cosine_decay",
    "get_global_step",
    "get_or_create_global_step",
    "init_from_checkpoint",
    "Scaffold",
    "create_global_step",
    "latest_checkpoint",
    "list_variables",
    "load_variable",
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
    "VocabInfo",
]

__getattr__ = module_getattr("tf.train", __name__)


def get_global_step(graph=None):
    """``tf.train.get_global_step()``: the global step inside ``model_fn`` (a traced int32
    scalar; TF's is an int64 variable), None outside it."""
    del graph
    return _get_global_step()


def get_or_create_global_step(graph=None):
    """``tf.train.get_or_create_global_step()``: the same as :func:`get_global_step` (the
    Estimator always has one)."""
    del graph
    return _get_global_step()


def create_global_step(graph=None):
    """``tf.train.create_global_step()``: the Estimator's global step."""
    del graph
    return _get_global_step()


class Scaffold:
    """``tf.train.Scaffold()`` with nothing to customise (what ``scaffold_fn`` s return).

    Initialisation and saving belong to the Estimator here: variables take their
    initializers (or ``tf.train.init_from_checkpoint``) and orbax saves them. An empty
    ``Scaffold`` is accepted wherever TF takes one (``EstimatorSpec(scaffold=...)``,
    ``TPUEstimatorSpec(scaffold_fn=...)``).

    Raises:
      ValueError: any argument (init ops and functions, savers, summary ops), naming the
        replacement.
    """

    def __init__(
        self, init_op=None, init_feed_dict=None, init_fn=None, ready_op=None,
        ready_for_local_init_op=None, local_init_op=None, summary_op=None, saver=None,
        copy_from_scaffold=None, local_init_feed_dict=None,
    ) -> None:  # fmt: skip
        given = [k for k, v in locals().items() if k != "self" and v is not None]
        if given:
            raise ValueError(
                f"tf.train.Scaffold({', '.join(given)}=...) is not supported: the Estimator "
                "initialises variables (their initializers, or tf.train.init_from_checkpoint "
                "in model_fn) and saves checkpoints itself (RunConfig). Use tf.train.Scaffold()."
            )

    def finalize(self) -> Scaffold:
        """Returns the scaffold (nothing to build)."""
        return self


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """``tf.train.latest_checkpoint``: the newest checkpoint directory under
    ``checkpoint_dir`` (``<dir>/model.ckpt_<step>``), or None."""
    del latest_filename
    return _latest_checkpoint(checkpoint_dir)


def _checkpoint(ckpt_dir_or_file):
    """The checkpoint ``ckpt_dir_or_file`` names (itself, or a directory's latest)."""
    path = _latest_checkpoint(ckpt_dir_or_file)
    if path is not None:
        return path
    if not _fs.exists(ckpt_dir_or_file):
        raise tf_error(
            FileNotFoundError(
                "Unsuccessful TensorSliceReader constructor: Failed to find any matching files "
                f"for {ckpt_dir_or_file}"
            )
        )
    return ckpt_dir_or_file


def list_variables(ckpt_dir_or_file):
    """``tf.train.list_variables``: ``[(name, shape)]`` of a checkpoint or of the latest
    one in a directory.

    Raises:
      tf.errors.NotFoundError: no checkpoint there (TF's message).
      tf.errors.DataLossError: a damaged checkpoint.
    """
    path = _checkpoint(ckpt_dir_or_file)
    with raising_tf_errors():
        return _list_variables(path)


def load_variable(ckpt_dir_or_file, name):
    """``tf.train.load_variable``: one variable's value as a NumPy array.

    Raises:
      tf.errors.NotFoundError: no checkpoint there, or no such variable in it (TF's
        messages first).
      tf.errors.DataLossError: a damaged checkpoint.
    """
    path = _checkpoint(ckpt_dir_or_file)
    name = name.removesuffix(":0")
    with raising_tf_errors():
        names = {n for n, _ in _list_variables(path)}
    if name not in names:
        raise tf_error(
            FileNotFoundError(f"Key {name} not found in checkpoint {path}"),
            message=f"Key {name} not found in checkpoint",
        )
    with raising_tf_errors():
        return _load_variable(path, name)
