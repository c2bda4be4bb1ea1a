"""Checkpoints of an Estimator's train state, written with orbax-checkpoint.

A checkpoint is the directory ``<model_dir>/model.ckpt_<global_step>`` written by an orbax
``CheckpointManager`` (atomically: orbax writes to a temporary directory and renames it
when complete, so a process killed mid-save leaves the previous checkpoint as the latest).
It holds three items:

* ``variables`` — ``{"trainable": {name: array}, "non_trainable": {name: array}}``;
* ``opt_state`` — the optimizer state in its saved form (``estimator.checkpoint.tree_form``:
  nested dicts keyed by name; older checkpoints hold optax's own structure, read the
  same way), absent when saved without one;
* ``meta`` — JSON: ``global_step``, ``variables`` (name -> shape, dtype, trainable),
  ``opt_state`` (each leaf's names, shape and dtype, when there is one), the jax version,
  and a CRC32C checksum of every array in ``variables`` and ``opt_state``
  (``estimator.checkpoint.checksums``): enough to list or read variables, and to know the state's
  structure, without the model code.

Every read checks what it reads, as TF's tensor bundles do (``tf.errors.DataLossError``):
the metadata against the directory's step, the arrays against their checksums (orbax and
TensorStore check only their own index files: a flipped bit in an array's bytes loaded
silently as a different model). Damage of any kind raises :class:`DataLossError` naming the
checkpoint, what is wrong and the previous checkpoint; ``RunConfig(restore_fallback=True)``
makes ``train()`` resume from the newest intact checkpoint instead.

``model_dir`` may be a storage URL (``estimator.io.fs``). orbax writes ``gs://`` itself
(through TensorStore; a step directory is complete when it holds orbax's
``commit_success.txt``); for other protocols (``s3://``, ...), which orbax cannot write,
each checkpoint is written to a local staging directory and published to the URL in the
background when complete, ``commit_success.txt`` last (``estimator.io.staging``), and read
through a local copy. Retention applies to the URL too: the newest
``keep_checkpoint_max`` published checkpoints stay, with those the writer's policy keeps.

Modules: ``paths`` (step directories, the latest and previous checkpoint, quarantine),
``writer`` (:class:`Checkpointer`: saving and retention), ``reader`` (metadata, variables,
restore, :class:`DataLossError`), ``checksums`` and ``tree_form`` (an optimizer state's saved
form and its CRC32C checksums), ``vocab_remap`` (warm start across vocabularies) and ``lock``
(one training process per ``model_dir``).

TF names checkpoints ``model.ckpt-<step>``; orbax's step naming needs an underscore.
Retention follows ``RunConfig``: the newest ``keep_checkpoint_max`` (0/None keeps all),
plus one every ``keep_checkpoint_every_n_hours`` as TF's ``Saver`` (timed from when the
writer was created). The newest checkpoint is never deleted.
"""

from estimator.checkpoint.lock import ModelDirBusyError as ModelDirBusyError
from estimator.checkpoint.lock import ModelDirLock as ModelDirLock
from estimator.checkpoint.paths import STEP_DIR as STEP_DIR
from estimator.checkpoint.paths import STEP_PREFIX as STEP_PREFIX
from estimator.checkpoint.paths import checkpoint_step as checkpoint_step
from estimator.checkpoint.paths import complete_steps as complete_steps
from estimator.checkpoint.paths import latest_checkpoint as latest_checkpoint
from estimator.checkpoint.paths import previous_checkpoint as previous_checkpoint
from estimator.checkpoint.paths import quarantine as quarantine
from estimator.checkpoint.paths import resolve as resolve
from estimator.checkpoint.paths import step_dir as step_dir
from estimator.checkpoint.reader import DataLossError as DataLossError
from estimator.checkpoint.reader import abstract_variables as abstract_variables
from estimator.checkpoint.reader import describe_mismatch as describe_mismatch
from estimator.checkpoint.reader import list_variables as list_variables
from estimator.checkpoint.reader import load_variable as load_variable
from estimator.checkpoint.reader import read_checkpoint as read_checkpoint
from estimator.checkpoint.reader import read_meta as read_meta
from estimator.checkpoint.reader import restore as restore
from estimator.checkpoint.reader import verify_checkpoint as verify_checkpoint
from estimator.checkpoint.vocab_remap import VocabInfo as VocabInfo
from estimator.checkpoint.writer import Checkpointer as Checkpointer
from estimator.checkpoint.writer import multiprocessing_options as multiprocessing_options
from estimator.checkpoint.writer import process_local as process_local
from estimator.checkpoint.writer import variable_specs as variable_specs

__all__ = [
    "Checkpointer",
    "DataLossError",
    "ModelDirBusyError",
    "VocabInfo",
    "latest_checkpoint",
    "list_variables",
    "load_variable",
]
