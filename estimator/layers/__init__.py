"""``tf.compat.v1.layers`` as functions over ``estimator.get_variable``.

Each layer takes TF's arguments, with TF's defaults, and creates TF's variables under
TF's names: an unnamed layer is named ``dense``, ``dense_1``, ... in the current
``variable_scope`` (counts restart on every ``model_fn`` call); ``name="logits"`` gives
``logits/kernel`` and ``logits/bias``. Kernels default to ``glorot_uniform``, biases to
zeros. Layouts are TF's: ``[batch, ..., features]`` for dense, NHWC (``channels_last``)
for images, kernels ``[in, out]`` / ``[height, width, in, out]``.

Arguments that configure TF graph machinery (``kernel_constraint``, ``reuse``,
``activity_regularizer`` ...) are accepted; constraints are applied to the value read,
``activity_regularizer`` adds to ``estimator.get_regularization_loss()``.

The modules follow TF's own split: :mod:`~estimator.layers.core` (``dense``, ``dropout``,
``flatten``, ``embedding_lookup``), :mod:`~estimator.layers.normalization`
(``batch_normalization``), :mod:`~estimator.layers.convolutional` (``conv1d``, ``conv2d``)
and :mod:`~estimator.layers.pooling`; the kernels they run are ``estimator.layers.convolution``'s
and their default initializers ``estimator.initializers``'.
"""

from estimator.layers.convolutional import conv1d as conv1d
from estimator.layers.convolutional import conv2d as conv2d
from estimator.layers.core import dense as dense
from estimator.layers.core import dropout as dropout
from estimator.layers.core import embedding_lookup as embedding_lookup
from estimator.layers.core import flatten as flatten
from estimator.layers.normalization import batch_normalization as batch_normalization
from estimator.layers.pooling import average_pooling1d as average_pooling1d
from estimator.layers.pooling import average_pooling2d as average_pooling2d
from estimator.layers.pooling import max_pooling1d as max_pooling1d
from estimator.layers.pooling import max_pooling2d as max_pooling2d

__all__ = [
    "dense",
    "dropout",
    "batch_normalization",
    "conv1d",
    "conv2d",
    "max_pooling1d",
    "max_pooling2d",
    "average_pooling1d",
    "average_pooling2d",
    "flatten",
    "embedding_lookup",
]
