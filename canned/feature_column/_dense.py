"""Dense views of categorical columns: ``indicator_column``, ``embedding_column`` and
``shared_embeddings``."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from canned.feature_column._base import CategoricalColumn, DenseColumn
from canned.feature_column._lookup import check_combiner, safe_embedding_lookup
from estimator import initializers
from estimator.model import variables as est_variables


@dataclass(frozen=True)
class IndicatorColumn(DenseColumn):
    """See :func:`indicator_column`."""

    categorical_column: CategoricalColumn

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_indicator"

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return self.categorical_column.parse_example_spec

    @property
    def parents(self) -> list[Any]:
        return [self.categorical_column]

    @property
    def variable_shape(self) -> tuple[int, ...]:
        return (self.categorical_column.num_buckets,)

    def _dense_tensor(self, features: Mapping[str, Any], *, trainable: bool = True) -> jax.Array:
        ids, weights = self.categorical_column._ids_and_weights(features)
        n = self.categorical_column.num_buckets
        values = jnp.ones(ids.shape, jnp.float32) if weights is None else weights
        rows = jnp.broadcast_to(jnp.arange(ids.shape[0])[:, None], ids.shape)
        # Ids of -1 go out of range and are dropped; repeated ids add up (counts / weights).
        columns = jnp.where(ids >= 0, ids, n)
        return jnp.zeros((ids.shape[0], n), jnp.float32).at[rows, columns].add(values, mode="drop")


def indicator_column(categorical_column: CategoricalColumn) -> IndicatorColumn:
    """Multi-hot representation of a categorical column (``tf.feature_column.indicator_column``).

    ``[batch_size, num_buckets]``: the count of each id in the example (``["bob", "bob"]``
    gives 2), or the sum of its weights for a ``weighted_categorical_column``. The name is
    ``<column>_indicator``.

    Raises:
      ValueError: if ``categorical_column`` is not a CategoricalColumn (TF's message).
    """
    if not isinstance(categorical_column, CategoricalColumn):
        raise ValueError(
            "Unsupported input type. Input must be a CategoricalColumn. Given: "
            f"{categorical_column}"
        )
    return IndicatorColumn(categorical_column)


@dataclass(frozen=True)
class EmbeddingColumn(DenseColumn):
    """See :func:`embedding_column`."""

    categorical_column: CategoricalColumn
    dimension: int
    combiner: str
    initializer: Callable
    max_norm: float | None = None
    trainable: bool = True

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_embedding"

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return self.categorical_column.parse_example_spec

    @property
    def parents(self) -> list[Any]:
        return [self.categorical_column]

    @property
    def variable_shape(self) -> tuple[int, ...]:
        return (self.dimension,)

    def _table(self, name: str, trainable: bool) -> jax.Array:
        return est_variables.get_variable(
            name,
            shape=(self.categorical_column.num_buckets, self.dimension),
            dtype=jnp.float32,
            initializer=self.initializer,
            trainable=self.trainable and trainable,
        )

    def _embedding_weights(self, trainable: bool) -> jax.Array:
        return self._table("embedding_weights", trainable)

    def _dense_tensor(self, features: Mapping[str, Any], *, trainable: bool = True) -> jax.Array:
        embedding_weights = self._embedding_weights(trainable)
        ids, weights = self.categorical_column._ids_and_weights(features)
        return safe_embedding_lookup(
            embedding_weights, ids, weights, self.combiner, max_norm=self.max_norm
        )


def embedding_column(
    categorical_column: CategoricalColumn,
    dimension: int,
    combiner: str = "mean",
    initializer: Callable | None = None,
    ckpt_to_load_from: str | None = None,
    tensor_name_in_ckpt: str | None = None,
    max_norm: float | None = None,
    trainable: bool = True,
    use_safe_embedding_lookup: bool = True,
) -> EmbeddingColumn:
    """Dense embedding of a categorical column (``tf.feature_column.embedding_column``).

    Creates ``embedding_weights`` (``[num_buckets, dimension]``) in the column's variable
    scope (``input_layer/<column>_embedding/embedding_weights``) and combines the rows of
    each example's ids with ``combiner`` (see ``safe_embedding_lookup``: ids of -1 dropped,
    empty examples give zeros). The name is ``<column>_embedding``.

    Args:
      categorical_column: the column giving the ids.
      dimension: embedding size, > 0.
      combiner: ``"mean"`` (default), ``"sqrtn"`` or ``"sum"``.
      initializer: ``(key, shape, dtype) -> array``; default TF's
        ``truncated_normal(mean=0, stddev=1/sqrt(dimension))``.
      ckpt_to_load_from, tensor_name_in_ckpt: not supported (must both be None): use
        ``Estimator(warm_start_from=...)`` to start from another checkpoint.
      max_norm: if set, looked-up rows are rescaled to an l2 norm of at most this.
      trainable: whether the embedding is trained.
      use_safe_embedding_lookup: accepted for compatibility; the lookup is always safe.

    Raises:
      ValueError: for a dimension < 1, only one of the two checkpoint arguments, a
        non-callable initializer (TF's messages), or an unknown combiner.
      NotImplementedError: if the checkpoint arguments are given.
    """
    del use_safe_embedding_lookup
    initializer = _checked_arguments(
        categorical_column, dimension, combiner, initializer, ckpt_to_load_from, tensor_name_in_ckpt
    )
    return EmbeddingColumn(
        categorical_column, dimension, combiner, initializer, max_norm, bool(trainable)
    )


def _checked_arguments(
    categorical_column, dimension, combiner, initializer, ckpt_to_load_from, tensor_name_in_ckpt
) -> Callable:
    """TF's checks of an embedding's arguments; returns the initializer to use."""
    if dimension is None or dimension < 1:
        raise ValueError(f"Invalid dimension {dimension}.")
    if (ckpt_to_load_from is None) != (tensor_name_in_ckpt is None):
        raise ValueError(
            "Must specify both `ckpt_to_load_from` and `tensor_name_in_ckpt` or none of them."
        )
    if initializer is not None and not callable(initializer):
        raise ValueError(
            "initializer must be callable if specified. Embedding of column_name: "
            f"{categorical_column.name}"
        )
    if ckpt_to_load_from is not None:
        raise NotImplementedError(
            "embedding_column(ckpt_to_load_from=...) is not supported. Warm-start the "
            "embedding instead: Estimator(..., warm_start_from=WarmStartSettings("
            "ckpt_to_initialize_from=..., vars_to_warm_start=..., "
            "var_name_to_prev_var_name={...}))."
        )
    if not isinstance(categorical_column, CategoricalColumn):
        raise ValueError(
            "embedding_column: categorical_column must be a CategoricalColumn (from "
            f"categorical_column_with_* or crossed_column). Given: {categorical_column}"
        )
    check_combiner(combiner)
    if initializer is None:
        initializer = initializers.truncated_normal_initializer(
            mean=0.0, stddev=1 / math.sqrt(dimension)
        )
    return initializer


@dataclass(frozen=True)
class SharedEmbeddingColumn(EmbeddingColumn):
    """See :func:`shared_embeddings`."""

    shared_embedding_collection_name: str = ""

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_shared_embedding"

    def _embedding_weights(self, trainable: bool) -> jax.Array:
        with est_variables.root_scope():  # one table for all the columns, named from the root
            return self._table(self.shared_embedding_collection_name, trainable)


def shared_embeddings(
    categorical_columns: list[CategoricalColumn],
    dimension: int,
    combiner: str = "mean",
    initializer: Callable | None = None,
    shared_embedding_collection_name: str | None = None,
    ckpt_to_load_from: str | None = None,
    tensor_name_in_ckpt: str | None = None,
    max_norm: float | None = None,
    trainable: bool = True,
    use_safe_embedding_lookup: bool = True,
) -> list[SharedEmbeddingColumn]:
    """Embeddings of several categorical columns that share one table
    (``tf.feature_column.shared_embeddings``).

    One variable ``[num_buckets, dimension]`` named ``shared_embedding_collection_name``
    (default: the columns' sorted names joined by ``_``, then ``_shared_embedding``, e.g.
    ``a_b_shared_embedding``) at the root of the variable names, as TF; each returned column
    (``<column>_shared_embedding``, in the given order) looks up its own ids in it, combined
    with ``combiner`` as :func:`embedding_column`.

    Better than TF: TF 2.15's V2 canned estimators never train a shared table (it is not
    among the Keras model's variables, so it keeps its initial values); here it is trained
    like any other embedding.

    Args:
      categorical_columns: columns of one type, all with the same ``num_buckets``.
      Others: as :func:`embedding_column`.

    Returns:
      A list of columns, one per categorical column.

    Raises:
      ValueError: TF's messages for columns of different types or bucket counts, and the
        :func:`embedding_column` argument errors.
      NotImplementedError: if the checkpoint arguments are given.
    """
    del use_safe_embedding_lookup
    columns = list(categorical_columns)
    if not columns:
        raise ValueError(f"categorical_columns must not be empty. Given: {categorical_columns}")
    first = columns[0]
    for column in columns:
        if type(column) is not type(first):
            raise ValueError(
                "To use shared_embedding_column, all categorical_columns must have the same "
                "type, or be weighted_categorical_column or sequence column of the same type. "
                f"Given column: {first} of type: {type(first)} does not match given column: "
                f"{column} of type: {type(column)}"
            )
        if column.num_buckets != first.num_buckets:
            raise ValueError(  # TF 2.15's message, its double space included
                "To use shared_embedding_column, all categorical_columns must have the same "
                f"number of buckets. Given column: {first} with buckets: {first.num_buckets} "
                f"does  not match column: {column} with buckets: {column.num_buckets}"
            )
        initializer = _checked_arguments(
            column, dimension, combiner, initializer, ckpt_to_load_from, tensor_name_in_ckpt
        )
    name = shared_embedding_collection_name or (
        "_".join(sorted(c.name for c in columns)) + "_shared_embedding"
    )
    return [
        SharedEmbeddingColumn(
            column, dimension, combiner, initializer, max_norm, bool(trainable), name
        )
        for column in columns
    ]
