"""Export for serving: ``jax.export`` artifacts with TF's signatures (``tf.estimator.export``).

``Estimator.export_saved_model(export_dir_base, serving_input_receiver_fn)`` writes::

    <export_dir_base>/<unix seconds>/
        manifest.json          signatures (inputs, outputs, dtypes, shapes), jax version,
                               platforms, global step, variables, the host-side input
                               transform (feature columns on strings), assets, and the
                               sha256 of every other file (paths relative to the export)
        functions/<sig>.jax    one serialized jax.export function per signature
                               (StableHLO; symbolic batch dimension "b"); with
                               as_text=True also <sig>.mlir
        variables/             the variables, saved with orbax (passed to the functions as
                               arguments, not baked in as constants)
        assets/                files the input transform reads (vocabularies)
        assets.extra/          files given as assets_extra

A function takes ``(variables, features, labels)`` — the features after the host-side
transform — and returns the signature's outputs; string outputs leave it as ids, named by
the vocabulary in the manifest. :func:`load` serves an export in any process with jax
installed, without the model's code. Nothing is pickled and no Python from the export runs,
but the StableHLO functions are executable code: load exports only from sources you trust.
``load`` refuses manifest paths that are absolute, unnormalized or lead out of the export
directory (symlinks included) and, unless ``verify_files=False``, any file whose sha256
differs from the manifest's or that the manifest does not list; it records no host path.

Command line (like TF's ``saved_model_cli``)::

    python -m estimator.export show <export_dir>
    python -m estimator.export run <export_dir> --signature serving_default --inputs x.json
    python -m estimator.export to_tf_saved_model <export_dir> <saved_model_dir>

A genuine TF SavedModel for TF Serving (the ``tf`` extra, TensorFlow >= 2.21) comes from
``export_saved_model(..., format="tf_saved_model")`` or :func:`to_tf_saved_model` on an
existing export; see ``estimator.export.tf_saved_model``.

Signatures follow TF 2.15's names and default rules (``serving_default``, ``predict``,
``classification``, ``regression``; alternatives as ``<receiver>:<signature>``), but a
classification or regression signature is exported for any receiver (TF keeps those only
for a single string input), so a canned classifier export always has ``serving_default``.
"""

from estimator.export._csv import CSVColumn as CSVColumn
from estimator.export._csv import csv_columns as csv_columns
from estimator.export._loader import LoadedModel as LoadedModel
from estimator.export._loader import Signature as Signature
from estimator.export._loader import load as load
from estimator.export._loader import read_variables as read_variables
from estimator.export._receivers import ServingInputReceiver as ServingInputReceiver
from estimator.export._receivers import SupervisedInputReceiver as SupervisedInputReceiver
from estimator.export._receivers import (
    TensorServingInputReceiver as TensorServingInputReceiver,
)
from estimator.export._receivers import (
    build_parsing_serving_input_receiver_fn as build_parsing_serving_input_receiver_fn,
)
from estimator.export._receivers import (
    build_raw_serving_input_receiver_fn as build_raw_serving_input_receiver_fn,
)
from estimator.export._receivers import (
    build_raw_supervised_input_receiver_fn as build_raw_supervised_input_receiver_fn,
)
from estimator.export.tf_saved_model import to_tf_saved_model as to_tf_saved_model
from estimator.model.export_output import ClassificationOutput as ClassificationOutput
from estimator.model.export_output import EvalOutput as EvalOutput
from estimator.model.export_output import ExportOutput as ExportOutput
from estimator.model.export_output import PredictOutput as PredictOutput
from estimator.model.export_output import RegressionOutput as RegressionOutput

__all__ = [
    "load",
    "LoadedModel",
    "Signature",
    "read_variables",
    "to_tf_saved_model",
    "ServingInputReceiver",
    "SupervisedInputReceiver",
    "TensorServingInputReceiver",
    "build_parsing_serving_input_receiver_fn",
    "build_raw_serving_input_receiver_fn",
    "build_raw_supervised_input_receiver_fn",
    "CSVColumn",
    "csv_columns",
    "ExportOutput",
    "PredictOutput",
    "ClassificationOutput",
    "RegressionOutput",
    "EvalOutput",
]
