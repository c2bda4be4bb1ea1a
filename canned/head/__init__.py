"""TF 2.15's canned heads: loss, predictions, metrics and ``EstimatorSpec`` on top of logits.

A head turns a model's logits into everything an ``EstimatorSpec`` needs, so a custom
``model_fn`` (or a canned estimator) is a logit function plus a head::

    import optax
    import estimator as est
    from canned import head as head_lib

    head = head_lib.BinaryClassHead(label_vocabulary=["<=50K", ">50K"])

    def model_fn(features, labels, mode):
        logits = est.layers.dense(features["x"], head.logits_dimension)
        return head.create_estimator_spec(
            features=features, mode=mode, logits=logits, labels=labels,
            optimizer=optax.adagrad(0.1))

    # String labels become ids on the host, before the batch reaches the device:
    ids = head.prepare_labels(np.array(["<=50K", ">50K"]))   # float32 [[0.], [1.]]

Keys users see are in :mod:`canned.head.keys` (``PredictionKeys``, ``MetricKeys``,
``Reduction``). Differences from TF are listed in :mod:`canned.head._base`.
"""

from canned.head._base import Head as Head
from canned.head._binary import BinaryClassHead as BinaryClassHead
from canned.head._multi_class import MultiClassHead as MultiClassHead
from canned.head._multi_head import MultiHead as MultiHead
from canned.head._multi_label import MultiLabelHead as MultiLabelHead
from canned.head._regression import LogisticRegressionHead as LogisticRegressionHead
from canned.head._regression import PoissonRegressionHead as PoissonRegressionHead
from canned.head._regression import RegressionHead as RegressionHead
from canned.head._sequential import SequentialHeadWrapper as SequentialHeadWrapper
from canned.head.keys import CLASSIFY_SERVING_KEY as CLASSIFY_SERVING_KEY
from canned.head.keys import DEFAULT_SERVING_KEY as DEFAULT_SERVING_KEY
from canned.head.keys import PREDICT_SERVING_KEY as PREDICT_SERVING_KEY
from canned.head.keys import REGRESS_SERVING_KEY as REGRESS_SERVING_KEY
from canned.head.keys import MetricKeys as MetricKeys
from canned.head.keys import PredictionKeys as PredictionKeys
from canned.head.keys import Reduction as Reduction

__all__ = [
    "Head",
    "BinaryClassHead",
    "MultiClassHead",
    "MultiLabelHead",
    "MultiHead",
    "RegressionHead",
    "PoissonRegressionHead",
    "LogisticRegressionHead",
    "SequentialHeadWrapper",
    "MetricKeys",
    "PredictionKeys",
    "Reduction",
    "DEFAULT_SERVING_KEY",
    "CLASSIFY_SERVING_KEY",
    "REGRESS_SERVING_KEY",
    "PREDICT_SERVING_KEY",
]
