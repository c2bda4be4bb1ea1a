"""The host phase of a list of columns (``input_transform``) and their parsing spec."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from canned.feature_column._base import CategoricalColumn, FeatureColumn
from canned.feature_column._dense import EmbeddingColumn, IndicatorColumn
from canned.feature_column._numeric import NumericColumn
from canned.feature_column._sequence import LENGTH_SUFFIX, SEQUENCE_COLUMNS
from estimator import preprocessing


def input_transform(feature_columns: Iterable[FeatureColumn]) -> preprocessing.InputTransform:
    """The host phase of ``feature_columns``: an ``estimator.preprocessing.InputTransform``.

    Its ``apply(features, labels)`` turns a batch of raw features into the dict that
    ``linear_model`` and ``input_layer`` read (``labels`` pass through):

    * ``numeric_column(key)``: ``features'[key]``, ``float32 [batch_size, *shape]``;
    * each categorical column ``c`` — used directly, inside ``indicator_column`` /
      ``embedding_column``, or a ``bucketized_column`` —
      ``features'[c.name + "/ids"]``, ``int32 [batch_size, k]`` (-1: no id);
    * ``weighted_categorical_column`` ``c`` also ``features'[c.name + "/weights"]``,
      ``float32 [batch_size, k]``;
    * ``sequence_numeric_column(key)``: ``features'[key]``, ``float32 [batch_size, T,
      *shape]``; a sequence column (numeric or categorical) ``c`` also
      ``features'[c.name + "/sequence_length"]``, ``int32 [batch_size]``.

    Columns only used inside others (the numeric source of a bucketized column, the keys
    of a cross) produce no output of their own.

    Args:
      feature_columns: an iterable of columns (a single column is accepted).

    Returns:
      The transform; ``to_config()`` describes it in JSON for exported models.

    Raises:
      ValueError: if an item is not a feature column, or two different columns share a
        name.
    """
    if isinstance(feature_columns, FeatureColumn):
        feature_columns = [feature_columns]
    entries: dict[str, tuple[FeatureColumn, preprocessing.Op]] = {}

    def add(column: FeatureColumn) -> None:
        if isinstance(column, IndicatorColumn | EmbeddingColumn):
            add(column.categorical_column)
            return
        if isinstance(column, SEQUENCE_COLUMNS):
            put(column.name + LENGTH_SUFFIX, column, column.length_op)
        if isinstance(column, NumericColumn | CategoricalColumn | SEQUENCE_COLUMNS):
            op = column.host_op
        else:
            raise ValueError(
                f"Items of feature_columns must be a FeatureColumn. Given (type {type(column)}): "
                f"{column}."
            )
        put(column.name, column, op)

    def put(name: str, column: FeatureColumn, op: preprocessing.Op) -> None:
        previous = entries.setdefault(name, (column, op))
        if previous[1] != op:
            raise ValueError(
                f"Two different feature columns are named {column.name!r}: {previous[0]} and "
                f"{column}. Their host-phase outputs would collide; use one definition per "
                "name."
            )

    for column in feature_columns:
        add(column)
    return preprocessing.InputTransform(tuple((name, op) for name, (_, op) in entries.items()))


def make_parse_example_spec(feature_columns: Iterable[FeatureColumn]) -> dict[str, Any]:
    """The raw features the columns read (``tf.feature_column.make_parse_example_spec``).

    Returns:
      ``{key: FixedLenFeature | VarLenFeature}`` (``estimator.preprocessing``): numeric
      columns give ``FixedLenFeature(shape, dtype, default_value)``, categorical ones
      ``VarLenFeature(dtype)`` (strings as ``np.dtype(object)``), raw keys of a cross
      ``VarLenFeature(str)``, a weighted column's weights ``VarLenFeature(dtype)``. Serving
      input receivers take this dict.

    Raises:
      ValueError: for an item that is not a feature column, or two columns reading one key
        with different specs (TF's messages).
    """
    result: dict[str, Any] = {}
    for column in feature_columns:
        if not isinstance(column, FeatureColumn):
            raise ValueError(
                f"All feature_columns must be FeatureColumn instances. Given: {column}"
            )
        for key, value in column.parse_example_spec.items():
            if key in result and value != result[key]:
                raise ValueError(
                    f"feature_columns contain different parse_spec for key {key}. Given "
                    f"{value} and {result[key]}"
                )
        result.update(column.parse_example_spec)
    return result
