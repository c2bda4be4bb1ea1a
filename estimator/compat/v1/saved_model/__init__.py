"""``tf.saved_model`` (TF 1.15's ``tf.compat.v1.saved_model``): the names of signatures,
methods and tags (``signature_constants``, ``tag_constants``, and the same constants at the
top, as TF's), which Estimator programs use to name their ``export_outputs``.

Writing and loading SavedModels is the Estimator's (``Estimator.export_saved_model``;
``estimator.export.load``): the rest of ``tf.saved_model`` is refused with that named.
"""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1.saved_model import signature_constants as signature_constants
from estimator.compat.v1.saved_model import tag_constants as tag_constants
from estimator.compat.v1.saved_model.signature_constants import (
    CLASSIFY_INPUTS as CLASSIFY_INPUTS,
)
from estimator.compat.v1.saved_model.signature_constants import (
    CLASSIFY_METHOD_NAME as CLASSIFY_METHOD_NAME,
)
from estimator.compat.v1.saved_model.signature_constants import (
    CLASSIFY_OUTPUT_CLASSES as CLASSIFY_OUTPUT_CLASSES,
)
from estimator.compat.v1.saved_model.signature_constants import (
    CLASSIFY_OUTPUT_SCORES as CLASSIFY_OUTPUT_SCORES,
)
from estimator.compat.v1.saved_model.signature_constants import (
    DEFAULT_SERVING_SIGNATURE_DEF_KEY as DEFAULT_SERVING_SIGNATURE_DEF_KEY,
)
from estimator.compat.v1.saved_model.signature_constants import PREDICT_INPUTS as PREDICT_INPUTS
from estimator.compat.v1.saved_model.signature_constants import (
    PREDICT_METHOD_NAME as PREDICT_METHOD_NAME,
)
from estimator.compat.v1.saved_model.signature_constants import PREDICT_OUTPUTS as PREDICT_OUTPUTS
from estimator.compat.v1.saved_model.signature_constants import REGRESS_INPUTS as REGRESS_INPUTS
from estimator.compat.v1.saved_model.signature_constants import (
    REGRESS_METHOD_NAME as REGRESS_METHOD_NAME,
)
from estimator.compat.v1.saved_model.signature_constants import REGRESS_OUTPUTS as REGRESS_OUTPUTS
from estimator.compat.v1.saved_model.tag_constants import GPU as GPU
from estimator.compat.v1.saved_model.tag_constants import SERVING as SERVING
from estimator.compat.v1.saved_model.tag_constants import TPU as TPU
from estimator.compat.v1.saved_model.tag_constants import TRAINING as TRAINING

__all__ = [
    "signature_constants",
    "tag_constants",
    *signature_constants.__all__,
    *tag_constants.__all__,
]

__getattr__ = module_getattr("tf.saved_model", __name__)
