"""Host-side label preparation (NumPy) and the label messages of TF 2.15's ``base_head``.

XLA has no strings, so a classification head's string labels become class ids before the
batch reaches the device: ``head.prepare_labels`` runs these vectorized NumPy functions
(a canned estimator calls it in its input transform).
"""

from __future__ import annotations

from typing import Any

import numpy as np

LABEL_NONE_ERR_MSG = (
    "You must provide a labels Tensor. Given: None. Suggested troubleshooting steps: Check "
    "that your data contains your label feature. Check that your input_fn properly parses "
    "and returns labels."
)
MISMATCHED_LABEL_DIM_ERR_MSG = (
    "Mismatched label shape. Expected labels dimension={}.  Received {}. Suggested Fix: If "
    "your classifier expects one-hot encoding label, check your n_classes argument to the "
    "estimator and/or the shape of your label. Otherwise, check the shape of your label."
)
LABEL_SHAPE_ERR_MSG = (
    "labels shape must be [D0, D1, ... DN, {}]. Suggested Fix: check your n_classes argument "
    "to the head and/or the shape of your label."
)


def as_host_array(labels: Any) -> np.ndarray:
    if labels is None:
        raise ValueError(LABEL_NONE_ERR_MSG)
    arr = np.asarray(labels)
    if arr.dtype.kind == "O":  # e.g. from pandas: strings or numbers in an object array
        items = arr.ravel().tolist()
        types = set(map(type, items))  # one pass in C, not a Python step per label
        if types <= {str}:
            arr = np.array(items, dtype=str).reshape(np.shape(labels))
        elif types <= {str, bytes}:
            arr = np.array([x.decode() if isinstance(x, bytes) else x for x in items], dtype=str)
            arr = arr.reshape(np.shape(labels))
        else:
            arr = np.array(items).reshape(np.shape(labels))
    return arr


def host_reshape(labels: np.ndarray, label_dimension: int) -> np.ndarray:
    """``[B]`` -> ``[B, 1]``; checks the last dimension is ``label_dimension`` (TF's messages)."""
    if labels.ndim == 1:
        labels = labels[:, None]
    if labels.ndim < 2:
        raise ValueError(
            f"labels must have rank at least 2.  Received rank {labels.ndim}, shape "
            f"{labels.shape}. Give one label per example: shape [batch_size] or "
            f"[batch_size, {label_dimension}]."
        )
    if labels.shape[-1] != label_dimension:
        raise ValueError(MISMATCHED_LABEL_DIM_ERR_MSG.format(label_dimension, labels.shape[-1]))
    return labels


def _show(values: np.ndarray, limit: int = 10) -> str:
    values = np.unique(values)
    shown = ", ".join(repr(v.item()) for v in values[:limit])
    more = f", ... ({len(values)} distinct)" if len(values) > limit else ""
    return f"[{shown}{more}]"


def check_host_label_range(labels: np.ndarray, n_classes: int) -> None:
    """TF's ``check_label_range`` on NumPy labels, naming the offending values."""
    high = ~(labels <= n_classes - 1)  # NaN fails here, as TF's assert_less_equal
    if np.any(high):
        raise ValueError(
            f"Labels must be <= {n_classes} - 1; got {_show(labels[high])}. Labels are class "
            f"ids in [0, {n_classes}); use label_vocabulary for labels that are names."
        )
    low = labels < 0
    if np.any(low):
        raise ValueError(
            f"Labels must be >= 0; got {_show(labels[low])}. Labels are class ids in "
            f"[0, {n_classes})."
        )


def host_label_ids(
    labels: Any,
    *,
    vocabulary: tuple[str, ...] | None,
    n_classes: int,
    allow_float: bool,
    dtype: Any,
) -> np.ndarray:
    """Class ids ``[B, 1]`` of ``dtype`` from strings (via ``vocabulary``) or numbers.

    Raises:
      ValueError: wrong dtype for the configuration, labels outside the vocabulary or
        outside ``[0, n_classes)``, or a wrong shape.
    """
    arr = as_host_array(labels)
    is_string = arr.dtype.kind in "US"
    if vocabulary is not None:
        if not is_string:
            raise ValueError(
                "Labels dtype should be string if there is a vocabulary. Instead got "
                f"{arr.dtype}. Pass the class names of label_vocabulary={list(vocabulary)!r}, "
                "or drop label_vocabulary to use class ids."
            )
        if arr.dtype.kind == "S":
            arr = np.char.decode(arr, "utf-8")
        arr = host_reshape(arr, 1)
        uniq, inverse = np.unique(arr, return_inverse=True)
        table = {v: i for i, v in enumerate(vocabulary)}
        uniq_ids = np.array([table.get(str(u), -1) for u in uniq], dtype=np.int64)
        unknown = uniq[uniq_ids < 0]
        if unknown.size:
            raise ValueError(
                f"Labels must be in label_vocabulary {list(vocabulary)!r}; got unknown labels "
                f"{_show(unknown)}. Add them to label_vocabulary or fix the data. (TF 2.15 maps "
                "them to -1 and fails with 'Labels must be >= 0'.)"
            )
        return uniq_ids[inverse].reshape(arr.shape).astype(dtype)
    kinds = "biuf" if allow_float else "iu"
    if arr.dtype.kind not in kinds:
        wanted = "integer or float" if allow_float else "integer"
        hint = (
            f"pass label_vocabulary=[...] (the {n_classes} class names) to use string labels"
            if is_string
            else "cast them, e.g. labels.astype(np.int32)"
        )
        raise ValueError(
            f"Labels dtype should be {wanted}. Instead got {arr.dtype}. Labels are class ids "
            f"in [0, {n_classes}) without a label_vocabulary; {hint}."
        )
    arr = host_reshape(arr, 1)
    check_host_label_range(arr, n_classes)
    return arr.astype(dtype)
