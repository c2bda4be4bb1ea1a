"""``tf.contrib`` (TF 1.15): the subset Estimator programs use.

TF 2 removed ``tf.contrib``; TF 1.15 programs still use it. Provided, with TF 1.15's names
and defaults (each module says what it covers and where it comes from):

* ``tf.contrib.layers``: ``fully_connected``, ``flatten``, ``layer_norm``,
  ``embed_sequence``, ``bow_encoder``, ``optimize_loss``, ``l1_regularizer``,
  ``l2_regularizer``, ``xavier_initializer``;
* ``tf.contrib.framework``: ``get_global_step``, ``get_or_create_global_step``;
* ``tf.contrib.lookup``: ``index_table_from_tensor``/``_file``,
  ``index_to_string_table_from_tensor``/``_file``, ``HashTable``;
* ``tf.contrib.data``: ``map_and_batch``, ``shuffle_and_repeat``;
* ``tf.contrib.estimator``: what moved to ``tf.estimator`` in TF 2 (heads, ``*Estimator``,
  early stopping, ...);
* ``tf.contrib.metrics``: the ``streaming_*`` metrics that are ``tf.metrics``;
* ``tf.contrib.tpu``: ``TPUEstimator`` and companions (on JAX devices);
* ``tf.contrib.summary``: what a TPU ``host_call`` writes with;
* ``tf.contrib.rnn``: TF 1's recurrent cells (``tf.nn.rnn_cell``'s) and ``LSTMBlockCell``;
* ``tf.contrib.crf``: the linear-chain CRF (log likelihood, Viterbi decoding).

Everything else in ``tf.contrib`` is refused with its replacement named.
"""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1.contrib import crf as crf
from estimator.compat.v1.contrib import data as data
from estimator.compat.v1.contrib import estimator as estimator
from estimator.compat.v1.contrib import framework as framework
from estimator.compat.v1.contrib import layers as layers
from estimator.compat.v1.contrib import lookup as lookup
from estimator.compat.v1.contrib import metrics as metrics
from estimator.compat.v1.contrib import rnn as rnn
from estimator.compat.v1.contrib import summary as summary
from estimator.compat.v1.contrib import tpu as tpu

__all__ = [
    "crf",
    "data",
    "estimator",
    "framework",
    "layers",
    "lookup",
    "metrics",
    "rnn",
    "summary",
    "tpu",
]

__getattr__ = module_getattr("tf.contrib", __name__)
