"""User-facing input functions (``tf.compat.v1.estimator.inputs`` and more):
:func:`numpy_input_fn` over in-memory arrays (``numpy_io``, with the :class:`Batches` it
returns) and :func:`tfrecord_input_fn` over TFRecord files of ``tf.Example``
(``tfrecord_io``); ``dtypes`` holds the rules for the dtypes batches enter a step with.

What an ``input_fn`` may return, and how the Estimator reads it, is
``estimator.engine.input_pipeline``'s (the host input pipeline).
"""

from estimator.inputs.numpy_io import Batches as Batches
from estimator.inputs.numpy_io import apply_to_rows as apply_to_rows
from estimator.inputs.numpy_io import numpy_input_fn as numpy_input_fn
from estimator.inputs.tfrecord_io import tfrecord_input_fn as tfrecord_input_fn

__all__ = ["numpy_input_fn", "tfrecord_input_fn"]
