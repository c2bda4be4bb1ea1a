"""Recurrent models: TF 2.15's ``RNNEstimator`` / ``RNNClassifier``
(``tf.estimator.experimental``) and the Keras-style cells they are built from.

The estimators take sequence feature columns (``canned.feature_column.sequence_*``); the
cells (``LSTMCell``, ``GRUCell``, ``SimpleRNNCell``, ``StackedRNNCells``) and :func:`rnn`
(``tf.keras.layers.RNN`` as a ``jax.lax.scan``) also work in a user's ``model_fn``::

    import canned
    import canned.feature_column as fc

    tokens = fc.sequence_categorical_column_with_identity("tokens", num_buckets=100)
    model = canned.RNNClassifier([fc.embedding_column(tokens, 8)], units=16, cell_type="lstm")
    model.train(lambda: ({"tokens": ids_padded_with_minus_one}, labels), steps=200)
"""

from canned.rnn._cells import GRUCell as GRUCell
from canned.rnn._cells import LSTMCell as LSTMCell
from canned.rnn._cells import SimpleRNNCell as SimpleRNNCell
from canned.rnn._cells import StackedRNNCells as StackedRNNCells
from canned.rnn._cells import rnn as rnn
from canned.rnn._cells import scan as scan
from canned.rnn._estimator import USE_DEFAULT as USE_DEFAULT
from canned.rnn._estimator import RNNClassifier as RNNClassifier
from canned.rnn._estimator import RNNEstimator as RNNEstimator

__all__ = [
    "RNNClassifier",
    "RNNEstimator",
    "USE_DEFAULT",
    "LSTMCell",
    "GRUCell",
    "SimpleRNNCell",
    "StackedRNNCells",
    "rnn",
    "scan",
]
