"""``tf.data`` (TF 1.15's ``tf.compat.v1.data``) on grain: ``Dataset``, ``TextLineDataset``,
``TFRecordDataset`` and ``experimental``. See ``_dataset`` for how a pipeline runs and how
it differs from TF's; the Estimator reads a ``Dataset`` returned by an ``input_fn`` through
``as_numpy_iterator()``, as it reads a real ``tf.data.Dataset`` when TensorFlow is
installed; TF 1's ``make_one_shot_iterator().get_next()`` at the end of an ``input_fn`` works
too (``_iterator``).
"""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1.data import experimental as experimental
from estimator.compat.v1.data._dataset import AUTOTUNE as AUTOTUNE
from estimator.compat.v1.data._dataset import Dataset as Dataset
from estimator.compat.v1.data._iterator import Iterator as Iterator
from estimator.compat.v1.data._iterator import (
    make_initializable_iterator as make_initializable_iterator,
)
from estimator.compat.v1.data._iterator import make_one_shot_iterator as make_one_shot_iterator
from estimator.compat.v1.data._readers import TextLineDataset as TextLineDataset
from estimator.compat.v1.data._readers import TFRecordDataset as TFRecordDataset

__all__ = [
    "AUTOTUNE",
    "Dataset",
    "Iterator",
    "TFRecordDataset",
    "TextLineDataset",
    "experimental",
    "make_initializable_iterator",
    "make_one_shot_iterator",
    "Options",
]

__getattr__ = module_getattr("tf.data", __name__)


class Options:
    """``tf.data.Options``: accepted (``Dataset.with_options`` ignores it)."""

    def __init__(self) -> None:
        self.experimental_deterministic = True
