"""``linear_model``: logits as a weighted sum of feature columns (TF's LinearModel)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from canned.feature_column._base import (
    CategoricalColumn,
    DenseColumn,
    FeatureColumn,
    check_batch_sizes,
    normalize_feature_columns,
)
from canned.feature_column._dense import IndicatorColumn
from canned.feature_column._lookup import check_combiner, safe_embedding_lookup
from estimator import initializers
from estimator.model import variables as est_variables


def linear_model(
    features: Mapping[str, Any],
    feature_columns: Iterable[FeatureColumn],
    units: int = 1,
    sparse_combiner: str = "sum",
    weight_collections: Any = None,
    trainable: bool = True,
    cols_to_vars: dict | None = None,
) -> jax.Array:
    """Linear predictions from feature columns (``tf.compat.v1.feature_column.linear_model``).

    Call it inside ``model_fn`` on the output of the host phase
    (``input_transform(feature_columns).apply``). In a variable scope ``linear_model``
    (made unique: ``linear_model_1`` for a second call) it creates, zero-initialised, as
    TF's LinearModel:

    * ``<column.name>/weights``: ``[n, units]``, with ``n = num_buckets`` for categorical
      columns (including bucketized and crossed) and ``n = prod(variable_shape)`` for dense
      ones (numeric, indicator, embedding);
    * ``bias_weights``: ``[units]``.

    The canned linear estimators call it inside ``variable_scope("linear")``, which gives
    TF's names: ``linear/linear_model/age/weights``, ``linear/linear_model/bias_weights``.

    Columns are taken in order of name. A dense column contributes ``x @ weights`` (``x``
    reshaped to ``[batch_size, n]``); a categorical column contributes
    ``safe_embedding_lookup(weights, ids, id_weights, sparse_combiner)``: for the example
    ``{"a", "b"}`` with ``sparse_combiner="mean"`` that is ``(w_a + w_b) / 2``; ids of -1
    (missing values) are ignored and an example without ids contributes 0.

    Args:
      features: ``{key: array}`` from the host phase (see ``canned.feature_column``).
      feature_columns: dense and categorical columns.
      units: output width (1 for binary classification and regression).
      sparse_combiner: ``"sum"`` (default), ``"mean"`` or ``"sqrtn"``: how a multivalent
        categorical column's weights are combined.
      weight_collections: ignored (no graph collections in JAX).
      trainable: whether the weights are trainable.
      cols_to_vars: if a dict, filled with ``{column: [weights], "bias": [bias_weights]}``.

    Returns:
      ``float32 [batch_size, units]`` logits.

    Raises:
      ValueError: for invalid columns (TF's messages), an unknown ``sparse_combiner``, a
        feature missing from ``features``, or columns with different batch sizes.
    """
    del weight_collections
    check_combiner(sparse_combiner)
    columns = normalize_feature_columns(feature_columns)
    for column in columns:
        if not isinstance(column, DenseColumn | CategoricalColumn):
            raise ValueError(
                "Items of feature_columns must be either a _DenseColumn or _CategoricalColumn. "
                f"Given: {column}"
            )
    zeros = initializers.zeros_initializer()
    sums = []
    with est_variables.variable_scope(None, default_name="linear_model"):
        for column in columns:
            with est_variables.variable_scope(column._var_scope_name):
                created = []
                sums.append(
                    _weighted_sum(column, features, units, sparse_combiner, trainable, created)
                )
                if cols_to_vars is not None:
                    cols_to_vars[column] = created
        check_batch_sizes(sums, columns)
        bias = est_variables.get_variable(
            "bias_weights",
            shape=(units,),
            dtype=jnp.float32,
            initializer=zeros,
            trainable=trainable,
        )
    if cols_to_vars is not None:
        cols_to_vars["bias"] = [bias]
    return sum(sums[1:], sums[0]) + bias


def _weighted_sum(
    column: FeatureColumn,
    features: Mapping[str, Any],
    units: int,
    sparse_combiner: str,
    trainable: bool,
    created: list,
) -> jax.Array:
    def weights_of(n: int) -> jax.Array:
        weights = est_variables.get_variable(
            "weights",
            shape=(n, units),
            dtype=jnp.float32,
            initializer=initializers.zeros_initializer(),
            trainable=trainable,
        )
        created.append(weights)
        return weights

    if isinstance(column, CategoricalColumn):
        ids, id_weights = column._ids_and_weights(features)
        weights = weights_of(column.num_buckets)
        return safe_embedding_lookup(weights, ids, id_weights, sparse_combiner)
    if isinstance(column, IndicatorColumn):
        # indicator(x) @ W == Σ_j w_j W[id_j]: a sum lookup, without the [batch, n] multi-hot.
        ids, id_weights = column.categorical_column._ids_and_weights(features)
        weights = weights_of(column.categorical_column.num_buckets)
        return safe_embedding_lookup(weights, ids, id_weights, "sum")
    # Numeric and embedding columns: the dense tensor (embedding_weights are created first,
    # in this scope, as TF does) times the weights.
    x = column._dense_tensor(features, trainable=trainable)
    n = math.prod(column.variable_shape)
    return jnp.reshape(x, (x.shape[0], n)) @ weights_of(n)
