"""A genuine TF SavedModel from an export, for TF Serving (the ``tf`` extra: TF >= 2.21).

``Estimator.export_saved_model(..., format="tf_saved_model")`` writes one directly;
:func:`to_tf_saved_model` (``python -m estimator.export to_tf_saved_model SRC DST``)
converts an existing ``jax.export`` artifact without the model's code. The result is what
TF Estimator 2.15 writes for the same receiver and head, loadable by TF Serving,
``tf.saved_model.load`` and ``saved_model_cli``::

    <dir>/saved_model.pb     one MetaGraphDef, tag "serve", with TF's signature defs
    <dir>/variables/         the variables under their TF names (linear/linear_model/...)
    <dir>/assets/            vocabulary files (vocabulary-file columns)
    <dir>/assets.extra/      copied from the export

Signatures, method names and input/output keys follow TF 2.15: with a parsing receiver
(``build_parsing_serving_input_receiver_fn``) every signature reads serialized
``tf.Example`` protos from the placeholder ``input_example_tensor``, named ``inputs`` in
``classification``/``regression`` signatures (``tensorflow/serving/classify`` and
``/regress``, so TF Serving's Classify and Regress APIs accept them) and ``examples`` in
``predict``; ``serving_default`` is the head's default. ``class_ids`` is int64 as TF's
heads give it. The model's step is the signature's ``jax.export`` function run by
``XlaCallModule`` (``jax2tf``, symbolic batch kept); the feature columns' host phase is
rebuilt as TF ops (``tf.io.parse_example``, ``tf.lookup`` tables, hashing, ``Bucketize``,
``tf.sparse.cross_hashed``; see ``_host_ops``).

Differences from TF 2.15, and why:

* A classification or regression signature of a receiver other than one string input
  (TF drops those) is written as a predict signature over the receiver's inputs, so the
  export still has ``serving_default``.
* Only PREDICT-mode exports convert (TF also writes ``train``/``eval`` meta graphs);
  other modes are refused at export time.
* Custom host ops (``register_op``) have no TF form and are refused at export time.
* Running it needs TensorFlow (or TF Serving) built on TF >= 2.21: older releases cannot
  run jax 0.10's serialized functions.
"""

from __future__ import annotations

import os


def to_tf_saved_model(
    export_dir, output_dir, *, as_text: bool = False, verify_files: bool = True
) -> bytes:
    """Writes the TF SavedModel of an export made by ``Estimator.export_saved_model``.

    Args:
      export_dir: the export (``<base>/<unix seconds>``; str, bytes or PathLike).
      output_dir: the SavedModel directory to create (must not exist); written to a
        temporary sibling and renamed when complete. For TF Serving, name it by its
        version: ``<model base path>/<integer>``.
      as_text: write ``saved_model.pbtxt`` instead of ``saved_model.pb``.
      verify_files: check the export's sha256 sums first (see ``estimator.export.load``).

    Returns:
      ``output_dir`` as bytes (as ``export_saved_model`` returns its path).

    Raises:
      ValueError: if the export has a host op with no TF form, signatures of a mode other
        than PREDICT, or ``output_dir`` exists (checked before TensorFlow is imported).
      ImportError: without TensorFlow >= 2.21 (``pip install 'jax-estimator[tf]'``).
    """
    from estimator.export.tf_saved_model._builder import build

    export_dir = os.fsdecode(export_dir)
    output_dir = os.fsdecode(output_dir)
    return build(export_dir, output_dir, as_text=as_text, verify_files=verify_files).encode()


__all__ = ["to_tf_saved_model"]
