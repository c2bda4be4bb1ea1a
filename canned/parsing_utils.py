"""Parsing specs with the label and weight: ``classifier_parse_example_spec`` and
``regressor_parse_example_spec`` (``tf.estimator``, TF 2.15's ``canned/parsing_utils.py``).

Used to read training data in the same format as serving data: the feature columns'
parsing spec plus a ``FixedLenFeature`` for the label and one for the weight column.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from canned import feature_column as fc
from estimator.preprocessing import FixedLenFeature

__all__ = ["classifier_parse_example_spec", "regressor_parse_example_spec"]


def _with_label_and_weight(columns, label_key, label_spec, weight_column) -> dict:
    spec = dict(fc.make_parse_example_spec(columns))
    if label_key in spec:
        raise ValueError(
            f"label should not be used as feature. label_key: {label_key}, features: {spec.keys()}"
        )
    spec[label_key] = label_spec
    if weight_column is None:
        return spec
    if isinstance(weight_column, str):
        weight_column = fc.numeric_column(weight_column)
    if not isinstance(weight_column, fc.NumericColumn):
        raise ValueError(
            "weight_column should be an instance of tf.feature_column.numeric_column. "
            f"Given type: {type(weight_column)} value: {weight_column}"
        )
    if weight_column.key in spec:
        raise ValueError(
            f"weight_column should not be used as feature. weight_column: "
            f"{weight_column.key}, features: {spec.keys()}"
        )
    spec.update(weight_column.parse_example_spec)
    return spec


def classifier_parse_example_spec(
    feature_columns: Iterable,
    label_key: str,
    label_dtype=np.int64,
    label_default=None,
    weight_column=None,
) -> dict:
    """The parsing spec of ``feature_columns`` plus the label ``FixedLenFeature((1,),
    label_dtype, label_default)`` and the weight column's spec.

    Args:
      feature_columns: columns from ``canned.feature_column``.
      label_key: the label's key (not a feature's).
      label_dtype: ``np.int64`` (default) for class ids, ``str`` for class names.
      label_default: the label of examples without one; None: required.
      weight_column: a key or ``numeric_column`` of per-example weights.

    Returns:
      ``{key: FixedLenFeature | VarLenFeature}``.

    Raises:
      ValueError: TF's messages when the label or weight key is also a feature, or the
        weight column is not numeric.
    """
    label = FixedLenFeature((1,), label_dtype, label_default)
    return _with_label_and_weight(feature_columns, label_key, label, weight_column)


def regressor_parse_example_spec(
    feature_columns: Iterable,
    label_key: str,
    label_dtype=np.float32,
    label_default=None,
    label_dimension: int = 1,
    weight_column=None,
) -> dict:
    """As :func:`classifier_parse_example_spec`, with the label
    ``FixedLenFeature((label_dimension,), label_dtype, label_default)``, float32 by
    default."""
    label = FixedLenFeature((label_dimension,), label_dtype, label_default)
    return _with_label_and_weight(feature_columns, label_key, label, weight_column)
