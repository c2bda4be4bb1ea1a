"""What ``parse_example`` returns for sparse and ragged features: :class:`SparseValue`
(TF's ``tf.compat.v1.SparseTensorValue``) and :class:`RaggedValue` (a
``tf.RaggedTensor``'s values and nested row splits), as NumPy arrays."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

__all__ = ["RaggedValue", "SparseValue"]


class SparseValue(NamedTuple):
    """A sparse array in TF's COO form (``tf.compat.v1.SparseTensorValue``).

    The host phase of feature columns reads it as TF's ``SparseTensor`` input (a
    ``VarLenFeature`` parsed by ``parse_example``).
    """

    indices: np.ndarray  # shape=[nnz, rank], dtype=int64; row-major order
    values: np.ndarray  # shape=[nnz]; float32, int64 or object (bytes)
    dense_shape: np.ndarray  # shape=[rank], dtype=int64

    def to_dense(self, default_value: Any = None) -> np.ndarray:
        """The dense array of ``dense_shape``: ``values`` at ``indices``, else
        ``default_value`` (``0`` / ``b""`` when None), as ``tf.sparse.to_dense``."""
        dtype = self.values.dtype
        if default_value is None:
            default_value = b"" if dtype.kind == "O" else 0
        out = np.full(tuple(int(d) for d in self.dense_shape), default_value, dtype=dtype)
        if len(self.indices):
            out[tuple(self.indices.T)] = self.values
        return out


class RaggedValue(NamedTuple):
    """A ragged array: flat ``values`` and one row-splits vector per ragged dimension,
    outermost first (``tf.RaggedTensor.from_nested_row_splits``).

    It offers ``tf.RaggedTensor``'s ``row_splits``, ``nested_row_splits``, ``flat_values``,
    ``ragged_rank``, ``row_lengths()`` and ``to_list()``. ``values`` is the flat values:
    TF's ``values`` with one ragged dimension (what ``parse_example`` gives for a
    ``RaggedFeature`` without partitions); with more, TF's ``values`` is the next ragged
    level and the flat values are ``flat_values`` in both.
    """

    values: np.ndarray  # shape=[n_values]; float32, int64 or object (bytes)
    nested_row_splits: tuple[np.ndarray, ...]  # each shape=[rows + 1], int32 or int64

    @property
    def row_splits(self) -> np.ndarray:
        """The outermost row splits (``[rows + 1]``)."""
        return self.nested_row_splits[0]

    @property
    def flat_values(self) -> np.ndarray:
        """The innermost values (``values``)."""
        return self.values

    @property
    def ragged_rank(self) -> int:
        """The number of ragged dimensions."""
        return len(self.nested_row_splits)

    def to_list(self) -> list:
        """Nested Python lists, as ``tf.RaggedTensor.to_list``."""
        items: Any = self.values.tolist()
        for splits in reversed(self.nested_row_splits):
            items = [items[splits[i] : splits[i + 1]] for i in range(len(splits) - 1)]
        return items

    def row_lengths(self) -> np.ndarray:
        """The lengths of the outermost rows."""
        return np.diff(self.nested_row_splits[0])
