"""What every canned estimator shares: the host phase, the weight column, the head."""

from __future__ import annotations

from typing import Any

import estimator as est
from canned import feature_column as fc
from canned.head import (
    BinaryClassHead,
    LogisticRegressionHead,
    MultiClassHead,
    MultiHead,
    MultiLabelHead,
    PoissonRegressionHead,
    RegressionHead,
)
from estimator.model import padding

__all__ = [
    "HostTransform",
    "check_columns",
    "classifier_head",
    "host_transform",
    "masks_padding",
    "model_features",
    "regressor_head",
    "weight_key",
]


class HostTransform:
    """The host phase of a canned estimator: feature columns, then the head's labels.

    Delegates ``to_config``/``assets``/``input_spec`` to the feature columns'
    ``InputTransform`` (what exports record); labels are not part of serving, and neither
    is the weight column: as in TF, only training and evaluation need the weight feature
    (the head raises TF's ``Feature w is not in features dictionary.`` without it), so
    ``predict()`` and serving requests go without it.

    Args:
      transform: the feature columns' ``estimator.preprocessing.InputTransform``.
      head: a head with ``prepare_labels(np.ndarray) -> np.ndarray``.
      weight: the weight column's own ``InputTransform``, applied when a batch has its
        feature (None: no weight column).
    """

    def __init__(self, transform: est.preprocessing.InputTransform, head, weight=None) -> None:
        self.transform = transform
        self.head = head
        self.weight = weight
        self._weight_keys = () if weight is None else tuple(weight.input_spec())

    @property
    def row_wise(self) -> bool:
        """Row by row when the feature columns' transform is (labels always are)."""
        return self.transform.row_wise and (self.weight is None or self.weight.row_wise)

    def features(self, features) -> dict:
        """The feature columns' host phase of ``features``, with the weight column's when
        the batch has that feature."""
        out, _ = self.transform.apply(features, None)
        keys = self._weight_keys
        if keys and isinstance(features, dict) and all(k in features for k in keys):
            weights, _ = self.weight.apply({k: features[k] for k in keys}, None)
            out = {**out, **weights}
        return out

    def apply(self, features, labels=None):
        features = self.features(features)
        if labels is not None:
            labels = self.head.prepare_labels(labels)
        return features, labels

    def to_config(self) -> dict:
        return self.transform.to_config()

    def assets(self) -> tuple[str, ...]:
        return self.transform.assets()

    def input_spec(self) -> dict:
        return self.transform.input_spec()


def weight_key(weight_column) -> tuple[str | None, Any]:
    """``(key, normalizer_fn)`` of a ``weight_column`` given as a key or numeric column."""
    if weight_column is None:
        return None, None
    if isinstance(weight_column, str):
        return weight_column, None
    if isinstance(weight_column, fc.NumericColumn):
        return weight_column.key, weight_column.normalizer_fn
    raise TypeError(
        "Weight column must be either a string or _NumericColumn. Given type: "
        f"{type(weight_column)}."
    )


def check_columns(feature_columns) -> tuple:
    columns = tuple(feature_columns or ())
    if not columns:
        raise ValueError("feature_columns should not be empty.")
    return columns


def classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction):
    """TF's canned classifier head: binary for ``n_classes == 2``, else multi-class.

    Raises:
      ValueError: "n_classes cannot be None", and the heads' own checks.
    """
    if n_classes is None:
        raise ValueError("n_classes cannot be None")
    key, _ = weight_key(weight_column)
    if n_classes == 2:
        return BinaryClassHead(
            weight_column=key, label_vocabulary=label_vocabulary, loss_reduction=loss_reduction
        )
    return MultiClassHead(
        n_classes,
        weight_column=key,
        label_vocabulary=label_vocabulary,
        loss_reduction=loss_reduction,
    )


def host_transform(columns: tuple, weight_column, head) -> HostTransform:
    """The host phase of ``columns`` plus the weight column's feature, then the labels."""
    key, _ = weight_key(weight_column)
    weight = None if key is None else fc.input_transform([fc.numeric_column(key)])
    return HostTransform(fc.input_transform(columns), head, weight)


_MASKING_HEADS = (
    BinaryClassHead,
    MultiClassHead,
    MultiLabelHead,
    RegressionHead,
    PoissonRegressionHead,
    LogisticRegressionHead,
)
_OWN_LOSS = (PoissonRegressionHead, LogisticRegressionHead)  # their loss_fn is TF's


def masks_padding(head, columns=(), weight_column=None, activation_fn=None) -> bool:
    """Whether a canned ``model_fn`` of ``head``, feature ``columns``, ``weight_column`` and
    the DNN's ``activation_fn`` reduces over examples only through a padded batch's row mask
    (``estimator.model.padding``): its head is one of this package's heads (or a
    ``MultiHead`` of them) without a user ``loss_fn``, and every function of the user's it
    applies to a batch on the device (numeric columns' and the weight column's
    ``normalizer_fn``, a regression head's ``inverse_link_fn``, ``activation_fn``) is
    elementwise (``estimator.model.padding.elementwise``). Not ``SequentialHeadWrapper``
    (its examples are time steps), nor a subclass of a head, whose reductions are unknown.
    """
    functions = [(activation_fn, (2, 3))] if activation_fn is not None else []
    _, normalizer = weight_key(weight_column)
    functions.append((normalizer, (2,)))
    functions += [
        (c.normalizer_fn, (2, *c.shape)) for c in columns if isinstance(c, fc.NumericColumn)
    ]
    return _head_masks_padding(head) and all(
        fn is None or padding.elementwise(fn, shape) for fn, shape in functions
    )


def _head_masks_padding(head) -> bool:
    if type(head) is MultiHead:
        return all(_head_masks_padding(h) for h in head.heads)
    if type(head) not in _MASKING_HEADS:
        return False
    if type(head) in _OWN_LOSS:
        return True
    link = getattr(head, "_inverse_link_fn", None)
    return head._loss_fn is None and (
        link is None or padding.elementwise(link, (2, head.logits_dimension))
    )


def regressor_head(label_dimension, weight_column, loss_reduction) -> RegressionHead:
    """TF's canned regressor head (squared error)."""
    key, _ = weight_key(weight_column)
    return RegressionHead(
        label_dimension=label_dimension, weight_column=key, loss_reduction=loss_reduction
    )


def model_features(features, weight_column) -> dict:
    """``features`` checked as TF's canned model_fns do, with the weight column's
    ``normalizer_fn`` applied (inside ``model_fn``, on the device).

    Raises:
      ValueError: TF's message when ``features`` is not a dict.
    """
    if not isinstance(features, dict):
        raise ValueError(
            f"features should be a dictionary of `Tensor`s. Given type: {type(features)}"
        )
    key, normalizer = weight_key(weight_column)
    if normalizer is not None and key in features:  # predict() goes without weights
        features = {**features, key: normalizer(features[key])}
    return features
