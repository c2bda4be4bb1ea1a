"""Stochastic Dual Coordinate Ascent (SDCA) for linear models: TF 2.15's
``tf.estimator.experimental.LinearSDCA`` and its kernel.

``LinearSDCA`` is given as the ``optimizer`` of ``LinearClassifier`` (binary, logistic
loss), ``LinearRegressor`` (squared loss) or ``LinearEstimator``::

    import canned

    sdca = canned.experimental.LinearSDCA(example_id_column="id",
                                          symmetric_l2_regularization=2.0)
    model = canned.LinearClassifier(columns, optimizer=sdca)
    model.train(lambda: ({"id": ids, **features}, labels), steps=100)

The kernel (``SdcaOptimizerV2``: the logistic, squared, hinge, smooth hinge and Poisson
losses) is also here with TF 1's op names and arguments: :func:`sdca_optimizer`,
:func:`sdca_fprint`, :func:`sdca_shrink_l1` (``tf.compat.v1.train.*``).
"""

from canned.sdca._linear import LinearSDCA as LinearSDCA
from canned.sdca._losses import LOSSES as LOSSES
from canned.sdca._ops import sdca_fprint as sdca_fprint
from canned.sdca._ops import sdca_optimizer as sdca_optimizer
from canned.sdca._ops import sdca_shrink_l1 as sdca_shrink_l1

__all__ = ["LinearSDCA", "LOSSES", "sdca_fprint", "sdca_optimizer", "sdca_shrink_l1"]
