"""``tf.summary`` (TF 1.15's ``tf.compat.v1.summary``): ``scalar``, ``histogram``, ``text``
inside ``model_fn``, written to TensorBoard by the Estimator (``estimator.summary``).

``collections``/``family`` are accepted; ``family`` prefixes the tag as TF does
(``family/name``). ``merge_all`` returns None: the Estimator's ``SummarySaverHook`` writes
every summary of the step. Outside ``model_fn`` the functions do nothing (TF's summaries
there would never be run by an Estimator either).
"""

from __future__ import annotations

from estimator import summary as _summary
from estimator.compat._unsupported import module_getattr
from estimator.compat.v1._base import in_model_fn
from estimator.hooks import SummarySaverHook as SummarySaverHook

__all__ = ["scalar", "histogram", "text", "merge_all", "merge", "SummarySaverHook"]

__getattr__ = module_getattr("tf.summary", __name__)


def _tag(name: str, family: str | None) -> str:
    return f"{family}/{name}" if family else name


def scalar(name, tensor, collections=None, family=None):
    """``tf.summary.scalar``: a scalar summary (e.g. ``accuracy[1]`` of ``tf.metrics``).

    Raises:
      ValueError: a value that is not a scalar.
    """
    del collections
    if in_model_fn():
        _summary.scalar(_tag(name, family), tensor)


def histogram(name, values, collections=None, family=None):
    """``tf.summary.histogram``: a histogram summary of ``values``."""
    del collections
    if in_model_fn():
        _summary.histogram(_tag(name, family), values)


def text(name, tensor, collections=None):
    """``tf.summary.text``: a text summary; the text is a Python string fixed when
    ``model_fn`` is traced (strings cannot be traced).

    Raises:
      TypeError: for anything but a Python string.
    """
    del collections
    if in_model_fn():
        _summary.text(name, tensor)


def merge_all(key=None, scope=None, name=None):
    """``tf.summary.merge_all``: None (the Estimator writes every summary)."""
    return None


def merge(inputs, collections=None, name=None):
    """``tf.summary.merge``: None (the Estimator writes every summary)."""
    return None
