"""``input_layer``: the dense input of a DNN from feature columns."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from canned.feature_column._base import (
    DenseColumn,
    FeatureColumn,
    check_batch_sizes,
    normalize_feature_columns,
)
from canned.feature_column._dense import EmbeddingColumn
from canned.feature_column._sequence import SequenceCategoricalColumn
from estimator.model import variables as est_variables


def input_layer(
    features: Mapping[str, Any],
    feature_columns: Iterable[FeatureColumn],
    weight_collections: Any = None,
    trainable: bool = True,
    cols_to_vars: dict | None = None,
    cols_to_output_tensors: dict | None = None,
) -> jax.Array:
    """Concatenated dense tensors of the columns (``tf.compat.v1.feature_column.input_layer``).

    Call it inside ``model_fn`` on the output of the host phase. Columns are taken in order
    of name; each gives ``[batch_size, prod(variable_shape)]``: a numeric column its
    (normalized) value, ``bucketized_column`` and ``indicator_column`` a one-hot / multi-hot
    vector, ``embedding_column`` the combined embedding, created as
    ``input_layer/<column.name>/embedding_weights`` (the scope is made unique:
    ``input_layer_1`` for a second call). TF's DNN estimators call it inside
    ``variable_scope("dnn/input_from_feature_columns")``.

    Args:
      features: ``{key: array}`` from the host phase (see ``canned.feature_column``).
      feature_columns: dense columns; wrap categorical ones in ``indicator_column`` or
        ``embedding_column``.
      weight_collections: ignored (no graph collections in JAX).
      trainable: whether created variables (embeddings) are trainable.
      cols_to_vars: if a dict, filled with ``{column: [variables]}``.
      cols_to_output_tensors: if a dict, filled with ``{column: [batch_size, n] tensor}``.

    Returns:
      ``float32 [batch_size, Σ prod(variable_shape)]``.

    Raises:
      ValueError: for invalid or non-dense columns (TF's messages), a missing feature, or
        columns with different batch sizes.
    """
    del weight_collections
    return dense_inputs(
        features,
        feature_columns,
        scope="input_layer",
        trainable=trainable,
        cols_to_vars=cols_to_vars,
        cols_to_output_tensors=cols_to_output_tensors,
    )


def dense_inputs(
    features: Mapping[str, Any],
    feature_columns: Iterable[FeatureColumn],
    *,
    scope: str,
    trainable: bool = True,
    cols_to_vars: dict | None = None,
    cols_to_output_tensors: dict | None = None,
) -> jax.Array:
    """:func:`input_layer` in the variable scope ``scope`` (made unique), e.g. Keras's
    ``dense_features`` for ``DenseFeatures``."""
    columns = normalize_feature_columns(feature_columns)
    for column in columns:
        inner = getattr(column, "categorical_column", None)
        if isinstance(inner, SequenceCategoricalColumn):
            kind = "embedding_column" if isinstance(column, EmbeddingColumn) else "indicator_column"
            raise ValueError(  # TF 2.15's message
                f"In {kind}: {column.name}. categorical_column must not be of type "
                "SequenceCategoricalColumn. Suggested fix A: If you wish to use DenseFeatures, "
                "use a non-sequence categorical_column_with_*. Suggested fix B: If you wish to "
                "create sequence input, use SequenceFeatures instead of DenseFeatures. Given "
                f"(type {type(inner)}): {inner}"
            )
        if not isinstance(column, DenseColumn):
            raise ValueError(
                "Items of feature_columns must be a _DenseColumn. You can wrap a categorical "
                f"column with an embedding_column or indicator_column. Given: {column}"
            )
    outputs = []
    with est_variables.variable_scope(None, default_name=scope):
        for column in columns:
            frame = est_variables.current_frame()
            before = set(frame.used) if frame is not None else set()
            with est_variables.variable_scope(column._var_scope_name):
                tensor = column._dense_tensor(features, trainable=trainable)
            output = jnp.reshape(tensor, (tensor.shape[0], math.prod(column.variable_shape)))
            outputs.append(output)
            if cols_to_vars is not None:
                names = sorted(frame.used - before) if frame is not None else []
                store = {**frame.non_trainable, **frame.trainable} if frame is not None else {}
                cols_to_vars[column] = [store[name] for name in names]
            if cols_to_output_tensors is not None:
                cols_to_output_tensors[column] = output
    check_batch_sizes(outputs, columns)
    return jnp.concatenate(outputs, axis=1)
