"""Sequence feature columns (TF 2.15's ``tf.feature_column.sequence_*``) and the sequence
input layer (``tf.keras.experimental.SequenceFeatures``).

A sequence column reads one sequence per example. Its host phase
(``estimator.preprocessing.SequenceCategorical`` / ``SequenceNumeric`` /
``SequenceLength``) pads the batch and measures each example's length as TF does; the
device phase (:func:`sequence_input_layer`) turns it into ``[batch_size, T, D]`` and the
lengths, for a recurrent network::

    import canned.feature_column as fc

    tokens = fc.sequence_categorical_column_with_identity("tokens", num_buckets=1000)
    columns = [fc.embedding_column(tokens, 10), fc.sequence_numeric_column("price")]
    features, _ = fc.input_transform(columns).apply(raw_features)   # host (NumPy)

    def model_fn(features, labels, mode):                           # device (JAX)
        sequence_input, sequence_length = fc.sequence_input_layer(features, columns)
        mask = jnp.arange(sequence_input.shape[1]) < sequence_length[:, None]

Between the phases (``input_transform(columns).apply(...)[0]``):

* ``sequence_numeric_column(key)``: ``features[key]``, ``float32 [batch_size, T, *shape]``
  (``NaN`` for absent values and padding, replaced by ``default_value`` on the device);
* ``sequence_categorical_column_with_*`` ``c``: ``features[c.name + "/ids"]``, ``int32
  [batch_size, T]`` (-1: no id at that step);
* either: ``features[name + "/sequence_length"]``, ``int32 [batch_size]``.

Raw inputs may be padded dense arrays, ragged lists or sparse tensors (see
``estimator.preprocessing``'s sequence ops).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from canned.feature_column import _categorical as cat
from canned.feature_column._base import (
    CategoricalColumn,
    FeatureColumn,
    as_dtype,
    assert_key_is_string,
    fetch,
    is_floating,
    is_integer,
    normalize_feature_columns,
)
from canned.feature_column._dense import EmbeddingColumn, IndicatorColumn
from canned.feature_column._lookup import safe_embedding_lookup
from canned.feature_column._numeric import _check_shape
from estimator import preprocessing
from estimator.model import variables as est_variables

LENGTH_SUFFIX = "/sequence_length"


@dataclass(frozen=True)
class SequenceCategoricalColumn(CategoricalColumn):
    """See the ``sequence_categorical_column_with_*`` functions."""

    categorical_column: CategoricalColumn

    @property
    def name(self) -> str:
        return self.categorical_column.name

    @property
    def num_buckets(self) -> int:
        return self.categorical_column.num_buckets

    @property
    def parents(self) -> list[Any]:
        return [self.categorical_column]

    def _make_host_op(self) -> preprocessing.Op:
        return preprocessing.SequenceCategorical(self.categorical_column.host_op)

    @property
    def length_op(self) -> preprocessing.SequenceLength:
        """The host op measuring each example's sequence length."""
        op = self.categorical_column.host_op
        return preprocessing.SequenceLength(op.key, "categorical", 1, op.input_spec()[op.key].dtype)


@dataclass(frozen=True)
class SequenceNumericColumn(FeatureColumn):
    """See :func:`sequence_numeric_column`."""

    key: str
    shape: tuple[int, ...] = (1,)
    default_value: float = 0.0
    dtype: str = "float32"
    normalizer_fn: Callable[[jax.Array], jax.Array] | None = None

    @property
    def name(self) -> str:
        return self.key

    @property
    def parents(self) -> list[Any]:
        return [self.key]

    @property
    def variable_shape(self) -> tuple[int, ...]:
        return self.shape

    @property
    def host_op(self) -> preprocessing.SequenceNumeric:
        """The host op padding the values to ``[batch_size, T, *shape]``."""
        return preprocessing.SequenceNumeric(self.key, self.shape, self.dtype)

    @property
    def length_op(self) -> preprocessing.SequenceLength:
        """The host op measuring each example's sequence length."""
        return preprocessing.SequenceLength(self.key, "numeric", math.prod(self.shape), self.dtype)

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return {self.key: preprocessing.VarLenFeature(self.dtype)}


SEQUENCE_COLUMNS = SequenceCategoricalColumn | SequenceNumericColumn


# ---------------------------------------------------------------------------- constructors


def sequence_categorical_column_with_identity(
    key: str, num_buckets: int, default_value: int | None = None
) -> SequenceCategoricalColumn:
    """Sequences of integer ids (``tf.feature_column.sequence_categorical_column_with_identity``).

    As :func:`categorical_column_with_identity`, one id per step. Wrap it in
    ``embedding_column`` or ``indicator_column`` for :func:`sequence_input_layer`.

    Raises:
      ValueError: TF's messages, as :func:`categorical_column_with_identity`.
    """
    return SequenceCategoricalColumn(
        cat.categorical_column_with_identity(key, num_buckets, default_value)
    )


def sequence_categorical_column_with_hash_bucket(
    key: str, hash_bucket_size: int, dtype: Any = "string"
) -> SequenceCategoricalColumn:
    """Sequences of hashed values
    (``tf.feature_column.sequence_categorical_column_with_hash_bucket``).

    Raises:
      ValueError: TF's messages, as :func:`categorical_column_with_hash_bucket`.
    """
    return SequenceCategoricalColumn(
        cat.categorical_column_with_hash_bucket(key, hash_bucket_size, dtype)
    )


def sequence_categorical_column_with_vocabulary_file(
    key: str,
    vocabulary_file: str,
    vocabulary_size: int | None = None,
    num_oov_buckets: int = 0,
    default_value: int | None = None,
    dtype: Any = "string",
) -> SequenceCategoricalColumn:
    """Sequences of values looked up in a vocabulary file
    (``tf.feature_column.sequence_categorical_column_with_vocabulary_file``; TF's argument
    order, which differs from ``categorical_column_with_vocabulary_file``'s).

    Raises:
      ValueError: TF's messages, as :func:`categorical_column_with_vocabulary_file`.
    """
    return SequenceCategoricalColumn(
        cat.categorical_column_with_vocabulary_file(
            key,
            vocabulary_file,
            vocabulary_size=vocabulary_size,
            num_oov_buckets=num_oov_buckets,
            default_value=default_value,
            dtype=dtype,
        )
    )


def sequence_categorical_column_with_vocabulary_list(
    key: str,
    vocabulary_list: Iterable[str] | Iterable[int],
    dtype: Any = None,
    default_value: int = -1,
    num_oov_buckets: int = 0,
) -> SequenceCategoricalColumn:
    """Sequences of values looked up in an in-memory vocabulary
    (``tf.feature_column.sequence_categorical_column_with_vocabulary_list``).

    Raises:
      ValueError: TF's messages, as :func:`categorical_column_with_vocabulary_list`.
    """
    return SequenceCategoricalColumn(
        cat.categorical_column_with_vocabulary_list(
            key, vocabulary_list, dtype, default_value, num_oov_buckets
        )
    )


def sequence_numeric_column(
    key: str,
    shape: int | tuple[int, ...] = (1,),
    default_value: float = 0.0,
    dtype: Any = "float32",
    normalizer_fn: Callable[[jax.Array], jax.Array] | None = None,
) -> SequenceNumericColumn:
    """Sequences of numeric values (``tf.feature_column.sequence_numeric_column``).

    Each step holds ``prod(shape)`` values; an example with ``n`` values has
    ``ceil(n / prod(shape))`` steps. ``default_value`` pads absent values and steps. The
    ``normalizer_fn`` (written with ``jnp``, elementwise) runs on the device on the values
    present only; padding keeps ``default_value``, as in TF.

    Args:
      key: the feature's key; also the column's name.
      shape: an int or tuple of ints: the shape of one step.
      default_value: a number, the padding value.
      dtype: integer or floating dtype the feature is parsed as.
      normalizer_fn: ``jax.Array -> jax.Array``, elementwise.

    Returns:
      A ``SequenceNumericColumn``.

    Raises:
      TypeError: if a dimension is not an int, ``default_value`` is not a number, or
        ``normalizer_fn`` is not callable.
      ValueError: if a dimension is not positive or ``dtype`` is not numeric (TF's
        messages), or ``key`` is not a string.
    """
    shape = _check_shape(shape, key)
    name = as_dtype(dtype, f"sequence_numeric_column({key!r})")
    if not (is_integer(name) or is_floating(name)):
        raise ValueError(f"dtype must be convertible to float. dtype: {name}, key: {key}")
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError(f"normalizer_fn must be a callable. Given: {normalizer_fn}")
    if isinstance(default_value, bool) or not isinstance(default_value, int | float):
        raise TypeError(
            f"default_value must be a single number (the padding value). default_value: "
            f"{default_value}, key: {key}"
        )
    assert_key_is_string(key)
    return SequenceNumericColumn(key, shape, float(default_value), name, normalizer_fn)


# ---------------------------------------------------------------------------- device phase


def _sequence_dense_tensor(
    column: FeatureColumn, features: Mapping[str, Any], trainable: bool
) -> tuple[jax.Array, jax.Array]:
    """``(float32 [batch_size, T, prod(variable_shape)], int32 [batch_size])`` of a
    sequence dense column (TF's ``get_sequence_dense_tensor``)."""
    if isinstance(column, SequenceNumericColumn):
        length = jnp.asarray(fetch(features, column.key + LENGTH_SUFFIX, column), jnp.int32)
        x = jnp.asarray(fetch(features, column.key, column), jnp.float32)
        x = x.reshape(x.shape[0], -1, *column.shape)
        absent = jnp.isnan(x)  # the host phase marks absent values (and padding) with NaN
        if column.normalizer_fn is not None:
            x = jnp.asarray(column.normalizer_fn(jnp.where(absent, 0.0, x)), jnp.float32)
        x = jnp.where(absent, jnp.float32(column.default_value), x)
        return x.reshape(x.shape[0], x.shape[1], -1), length
    kind = "embedding_column" if isinstance(column, EmbeddingColumn) else "indicator_column"
    inner = column.categorical_column
    if not isinstance(inner, SequenceCategoricalColumn):
        raise ValueError(
            f"In {kind}: {column.name}. categorical_column must be of type "
            "SequenceCategoricalColumn to use SequenceFeatures. Suggested fix: Use one of "
            f"sequence_categorical_column_with_*. Given (type {type(inner)}): {inner}"
        )
    length = jnp.asarray(fetch(features, inner.name + LENGTH_SUFFIX, column), jnp.int32)
    ids, _ = inner._ids_and_weights(features)  # [batch_size, T]
    batch, steps = ids.shape
    if isinstance(column, IndicatorColumn):
        return jax.nn.one_hot(ids, inner.num_buckets, dtype=jnp.float32), length
    table = column._embedding_weights(trainable)
    rows = safe_embedding_lookup(
        table, ids.reshape(batch * steps, 1), None, column.combiner, max_norm=column.max_norm
    )
    return rows.reshape(batch, steps, column.dimension), length


def _is_sequence_dense(column: FeatureColumn) -> bool:
    return isinstance(column, SequenceNumericColumn | EmbeddingColumn | IndicatorColumn)


def sequence_input_layer(
    features: Mapping[str, Any],
    feature_columns: Iterable[FeatureColumn],
    trainable: bool = True,
) -> tuple[jax.Array, jax.Array]:
    """The input of a sequence model (``tf.keras.experimental.SequenceFeatures`` as a
    function; TF 1's ``sequence_input_layer``).

    Call it inside ``model_fn`` on the output of the host phase. Columns are taken in order
    of name; each gives ``[batch_size, T, prod(variable_shape)]`` — a
    ``sequence_numeric_column`` its (normalized) values, an ``embedding_column`` of a
    sequence categorical column one embedding per step (zeros for a step without id), an
    ``indicator_column`` a one-hot vector per step — concatenated on the last axis.
    Embeddings are created as ``sequence_features/<column.name>/embedding_weights`` (the
    scope made unique: ``sequence_features_1`` for a second call), TF's names.

    Args:
      features: ``{key: array}`` from the host phase.
      feature_columns: ``sequence_numeric_column``s and ``embedding_column`` /
        ``indicator_column`` of ``sequence_categorical_column_with_*``.
      trainable: whether created variables (embeddings) are trainable.

    Returns:
      ``(sequence_input float32 [batch_size, T, D], sequence_length int32 [batch_size])``
      with ``D`` the sum of the columns' ``prod(variable_shape)``. Columns padded to
      different ``T`` are padded with zeros to the longest. The length is the first
      column's; TF checks at run time that all agree, which a jitted step cannot — the
      canned RNN estimators check it on the host.

    Raises:
      ValueError: for a column that is not a sequence column (TF's messages), or a missing
        feature.
    """
    columns = _checked_sequence_columns(feature_columns)
    return _sequence_input(features, columns, trainable, None)


def _checked_sequence_columns(feature_columns: Iterable[FeatureColumn]) -> list[FeatureColumn]:
    columns = normalize_feature_columns(feature_columns)
    for column in columns:
        if not _is_sequence_dense(column):
            raise ValueError(
                "Items of feature_columns must be a <class 'SequenceDenseColumn'>. You can wrap "
                "a categorical column with an embedding_column or indicator_column. Given: "
                f"{column}"
            )
    return columns


def _sequence_input(
    features: Mapping[str, Any], columns: list[FeatureColumn], trainable: bool, scope: str | None
) -> tuple[jax.Array, jax.Array]:
    outputs, lengths = [], []
    with est_variables.variable_scope(scope, default_name="sequence_features"):
        for column in columns:
            with est_variables.variable_scope(column._var_scope_name):
                dense, length = _sequence_dense_tensor(column, features, trainable)
            outputs.append(dense.reshape(dense.shape[0], dense.shape[1], -1))
            lengths.append(length)
    steps = max(o.shape[1] for o in outputs)
    outputs = [jnp.pad(o, ((0, 0), (0, steps - o.shape[1]), (0, 0))) for o in outputs]
    return jnp.concatenate(outputs, axis=-1), lengths[0]


class SequenceFeatures:
    """``tf.keras.experimental.SequenceFeatures``: :func:`sequence_input_layer` as a
    callable object, for code written against the Keras layer.

    Args:
      feature_columns: as :func:`sequence_input_layer`.
      trainable: whether created variables are trainable.
      name: the variable scope (default ``sequence_features``).

    Raises:
      ValueError: for a column that is not a sequence column (TF's message, at
        construction as TF).
    """

    def __init__(
        self, feature_columns: Iterable[FeatureColumn], trainable: bool = True, name=None
    ) -> None:
        self._columns = _checked_sequence_columns(feature_columns)
        self._trainable = trainable
        self._name = name

    def __call__(self, features: Mapping[str, Any], training=None):
        """``(sequence_input [batch_size, T, D], sequence_length [batch_size])``."""
        del training
        if not isinstance(features, dict):
            raise ValueError("We expected a dictionary here. Instead we got: ", features)
        return _sequence_input(features, self._columns, self._trainable, self._name)


def concatenate_context_input(context_input: jax.Array, sequence_input: jax.Array) -> jax.Array:
    """Appends ``context_input`` to every step of ``sequence_input``
    (``tf.compat.v1.feature_column``'s ``concatenate_context_input``).

    Args:
      context_input: ``float32 [batch_size, d1]``.
      sequence_input: ``float32 [batch_size, T, d0]``.

    Returns:
      ``float32 [batch_size, T, d0 + d1]``.

    Raises:
      ValueError: for inputs of another rank or dtype (TF's messages).
    """
    if sequence_input.ndim != 3:
        raise ValueError(f"sequence_input must have rank 3; got shape {sequence_input.shape}.")
    if sequence_input.dtype != jnp.float32:
        raise ValueError(f"sequence_input must have dtype float32; got {sequence_input.dtype}.")
    if context_input.ndim != 2:
        raise ValueError(f"context_input must have rank 2; got shape {context_input.shape}.")
    if context_input.dtype != jnp.float32:
        raise ValueError(f"context_input must have dtype float32; got {context_input.dtype}.")
    steps = sequence_input.shape[1]
    tiled = jnp.broadcast_to(
        context_input[:, None, :], (context_input.shape[0], steps, context_input.shape[1])
    )
    return jnp.concatenate([sequence_input, tiled], axis=2)
