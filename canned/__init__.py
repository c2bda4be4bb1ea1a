"""Canned estimators built on the public ``estimator`` API: heads, feature columns, FTRL.

A canned estimator is built exactly as a user's would be (TF 2.15's design): a head
(loss, predictions, metrics, ``EstimatorSpec``) plus a logit function over feature columns,
closed over in a ``model_fn`` passed to ``estimator.Estimator``.
"""

from canned import experimental as experimental
from canned import feature_column as feature_column
from canned import head as head
from canned import rnn as rnn
from canned import sdca as sdca
from canned._ftrl import FtrlState as FtrlState
from canned._ftrl import ftrl as ftrl
from canned.baseline import BaselineClassifier as BaselineClassifier
from canned.baseline import BaselineEstimator as BaselineEstimator
from canned.baseline import BaselineRegressor as BaselineRegressor
from canned.dnn import DNNClassifier as DNNClassifier
from canned.dnn import DNNEstimator as DNNEstimator
from canned.dnn import DNNRegressor as DNNRegressor
from canned.dnn_linear_combined import (
    DNNLinearCombinedClassifier as DNNLinearCombinedClassifier,
)
from canned.dnn_linear_combined import (
    DNNLinearCombinedEstimator as DNNLinearCombinedEstimator,
)
from canned.dnn_linear_combined import DNNLinearCombinedRegressor as DNNLinearCombinedRegressor
from canned.head import BinaryClassHead as BinaryClassHead
from canned.head import Head as Head
from canned.head import LogisticRegressionHead as LogisticRegressionHead
from canned.head import MultiClassHead as MultiClassHead
from canned.head import MultiHead as MultiHead
from canned.head import MultiLabelHead as MultiLabelHead
from canned.head import PoissonRegressionHead as PoissonRegressionHead
from canned.head import RegressionHead as RegressionHead
from canned.linear import LinearClassifier as LinearClassifier
from canned.linear import LinearEstimator as LinearEstimator
from canned.linear import LinearRegressor as LinearRegressor
from canned.optimizers import get_optimizer_instance as get_optimizer_instance
from canned.parsing_utils import classifier_parse_example_spec as classifier_parse_example_spec
from canned.parsing_utils import regressor_parse_example_spec as regressor_parse_example_spec

__all__ = [
    "experimental",
    "feature_column",
    "head",
    "rnn",
    "sdca",
    "Head",
    "BinaryClassHead",
    "MultiClassHead",
    "MultiLabelHead",
    "MultiHead",
    "RegressionHead",
    "PoissonRegressionHead",
    "LogisticRegressionHead",
    "LinearClassifier",
    "LinearRegressor",
    "DNNClassifier",
    "DNNRegressor",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedRegressor",
    "BaselineClassifier",
    "BaselineRegressor",
    "LinearEstimator",
    "DNNEstimator",
    "DNNLinearCombinedEstimator",
    "BaselineEstimator",
    "FtrlState",
    "ftrl",
    "get_optimizer_instance",
    "classifier_parse_example_spec",
    "regressor_parse_example_spec",
]
