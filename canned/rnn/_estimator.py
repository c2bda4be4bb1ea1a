"""``RNNEstimator`` and ``RNNClassifier`` (``tf.estimator.experimental``, TF 2.15's
``tensorflow_estimator/python/estimator/canned/rnn.py``).

Built as TF builds them: sequence feature columns (``SequenceFeatures``), optional context
columns appended to every step, a Keras-style recurrent layer under the sequence mask, a
``logits`` dense layer, and a head. Variable names are TF's Keras names::

    sequence_features/<column>_embedding/embedding_weights
    rnn_model/lstm/lstm_cell/{kernel,recurrent_kernel,bias}       units=16, cell_type='lstm'
    rnn_model/rnn/stacked_rnn_cells/gru_cell_1/kernel             units=[16, 8], 'gru'
    rnn_model/logits/{kernel,bias}

The recurrent loop is a ``jax.lax.scan`` compiled into the step. String optimizers get
TF's defaults: learning rate 0.05 and each gradient clipped to norm 5
(``clipnorm=5.0``); an optax transformation is used as given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import estimator as est
from canned import feature_column as fc
from canned._base import (
    HostTransform,
    check_columns,
    classifier_head,
    model_features,
    weight_key,
)
from canned.feature_column._sequence import LENGTH_SUFFIX, SEQUENCE_COLUMNS
from canned.head._base import Head
from canned.head._sequential import SequentialHeadWrapper
from canned.head.keys import Reduction
from canned.optimizers import get_optimizer_instance
from canned.rnn import _cells

__all__ = ["USE_DEFAULT", "RNNClassifier", "RNNEstimator"]

logger = logging.getLogger("canned")

_DEFAULT_LEARNING_RATE = 0.05
_DEFAULT_CLIP_NORM = 5.0

#: TF's sentinel for "no ``cell_type`` given" (``canned/rnn.py``'s ``USE_DEFAULT``).
USE_DEFAULT = object()

_CELL_TYPES = {
    "lstm": _cells.LSTMCell,
    "gru": _cells.GRUCell,
    "simple_rnn": _cells.SimpleRNNCell,
}


def clip_by_norm_per_variable(clip_norm: float) -> optax.GradientTransformation:
    """Each gradient scaled to an l2 norm of at most ``clip_norm``, independently (Keras's
    ``clipnorm``: ``tf.clip_by_norm(g, clip_norm)`` per variable, its arithmetic:
    ``g · clip_norm / max(‖g‖, clip_norm)``). optax's ``clip_by_global_norm`` clips all
    gradients together instead."""

    def clip(g):
        squares = jnp.sum(g * g)
        norm = jnp.where(squares > 0, jnp.sqrt(jnp.where(squares > 0, squares, 1.0)), squares)
        return g * clip_norm / jnp.maximum(norm, clip_norm)

    def update_fn(updates, state, params=None):
        del params
        return jax.tree.map(clip, updates), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)


def _verify_rnn_cell_input(rnn_cell_fn, units, cell_type) -> None:
    if rnn_cell_fn and (units or cell_type is not USE_DEFAULT):
        raise ValueError("units and cell_type must not be specified when using rnn_cell_fn")


def _single_cell(units: int, cell_type: Any):
    cls = _CELL_TYPES.get(cell_type, cell_type) if isinstance(cell_type, str) else cell_type
    if not callable(cls):
        raise ValueError(
            "`cell_type` should be a class producing a RNN cell, or a string specifying the "
            f"cell type. Supported strings are: {['simple_rnn', 'lstm', 'gru']}."
        )
    cell = cls(units=units)
    _cells._check_cell(cell)
    return cell


def make_rnn_layer(rnn_cell_fn, units, cell_type) -> tuple[Any, str]:
    """``(cell or cells, layer scope name)`` as TF's ``_make_rnn_layer``: a single int
    ``units`` with a ``cell_type`` string is Keras's ``LSTM``/``GRU``/``SimpleRNN`` layer
    (scope ``lstm``, ...); otherwise ``tf.keras.layers.RNN`` (scope ``rnn``) over the cells
    of ``units`` (``cell_type`` default ``'simple_rnn'``) or of ``rnn_cell_fn()``.

    Raises:
      ValueError: TF's messages for ``units``/``cell_type`` given with ``rnn_cell_fn`` and
        for an unknown ``cell_type``; ``units`` that are neither an int (with a
        ``cell_type`` string) nor a list of ints.
    """
    _verify_rnn_cell_input(rnn_cell_fn, units, cell_type)
    if isinstance(cell_type, str) and cell_type in _CELL_TYPES and isinstance(units, int):
        return _single_cell(units, cell_type), cell_type
    if rnn_cell_fn:
        cell = rnn_cell_fn()
        if isinstance(cell, list | tuple):
            cell = _cells.StackedRNNCells(tuple(cell))
        elif not isinstance(cell, _cells.StackedRNNCells):
            _cells._check_cell(cell)
        return cell, "rnn"
    if cell_type is USE_DEFAULT:
        cell_type = "simple_rnn"
    if isinstance(units, bool) or not isinstance(units, list | tuple) or not units:
        raise ValueError(
            f"units must be a non-empty list of ints (one per stacked layer), or one int with "
            f"cell_type 'lstm', 'gru' or 'simple_rnn'; got units={units!r}, "
            f"cell_type={cell_type!r}. TF 2.15 fails on this too."
        )
    cells = [_single_cell(n, cell_type) for n in units]
    return (cells[0] if len(cells) == 1 else _cells.StackedRNNCells(tuple(cells))), "rnn"


class _RNNHostTransform(HostTransform):
    """The host phase: the columns' ``InputTransform``; the sequence lengths of all the
    sequence columns checked equal (TF asserts it in the graph); labels through the head
    (per step, masked by the lengths, for a sequential head)."""

    def __init__(
        self,
        transform,
        head: Head,
        length_keys: tuple[str, ...],
        sequence_keys: tuple[str, ...],
        weight=None,
    ) -> None:
        super().__init__(transform, head, weight)
        self._length_keys = length_keys
        self._sequence_keys = sequence_keys

    def equal_dimensions(self) -> list[list[tuple[str, int]]]:
        """The steps axis of every sequence feature: one length (see ``apply``), so one
        symbol in exports."""
        return [[(key, 1) for key in self._sequence_keys]]

    def apply(self, features, labels=None):
        features = self.features(features)
        steps = max(features[k].shape[1] for k in self._sequence_keys)
        for key in self._sequence_keys:  # padded alike: ids with -1, values with NaN
            value = features[key]
            pad = [(0, 0), (0, steps - value.shape[1])] + [(0, 0)] * (value.ndim - 2)
            fill = -1 if value.dtype.kind in "iu" else np.nan
            features[key] = np.pad(value, pad, constant_values=fill)
        lengths = [(k, features[k]) for k in self._length_keys]
        for key, length in lengths[1:]:
            if not np.array_equal(length, lengths[0][1]):
                raise ValueError(
                    "assertion failed: [Condition x == y did not hold element-wise:] The "
                    "sequence feature columns must have the same sequence length per example: "
                    f"{lengths[0][0]} = {lengths[0][1].tolist()}, {key} = {length.tolist()}."
                )
        if labels is not None:
            if isinstance(self.head, SequentialHeadWrapper):
                labels = self._sequence_labels(labels, lengths[0][1])
            else:
                labels = self.head.prepare_labels(labels)
        return features, labels

    def _sequence_labels(self, labels, length: np.ndarray) -> np.ndarray:
        if isinstance(labels, list | tuple) or (
            isinstance(labels, np.ndarray) and labels.dtype == object and labels.ndim == 1
        ):  # ragged: one list of labels per example
            rows = [np.asarray(r).ravel() for r in labels]
            width = max((len(r) for r in rows), default=0)
            fill = "" if any(r.dtype.kind in "OUS" for r in rows) else 0
            padded = np.full((len(rows), width), fill, dtype=object if fill == "" else None)
            for i, r in enumerate(rows):
                padded[i, : len(r)] = r
            labels = padded if fill == "" else padded.astype(np.result_type(*rows, np.int64))
        labels = np.asarray(labels)
        mask = np.arange(labels.shape[1])[None, :] < length[:, None]
        return self.head.prepare_labels(labels, mask)


def _check_sequence_columns(columns: tuple) -> None:
    for column in columns:
        inner = getattr(column, "categorical_column", None)
        if not isinstance(column, SEQUENCE_COLUMNS) and not isinstance(inner, SEQUENCE_COLUMNS):
            raise ValueError(
                "sequence_feature_columns must be sequence columns (sequence_numeric_column) "
                "or built on one (embedding_column / indicator_column of a "
                f"sequence_categorical_column_with_*). Given: {column}"
            )


def _length_key(column) -> str:
    inner = getattr(column, "categorical_column", column)
    return inner.name + LENGTH_SUFFIX


def _sequence_key(column) -> str:
    """The host phase's output holding a sequence column's steps."""
    inner = getattr(column, "categorical_column", None)
    return column.name if inner is None else inner.name + "/ids"


def _train_op(optimizer):
    """TF's ``_get_rnn_estimator_spec`` optimizer: a name gets learning rate 0.05 and
    ``clipnorm=5.0``; anything else is used as given."""
    if isinstance(optimizer, str):
        return optax.chain(
            clip_by_norm_per_variable(_DEFAULT_CLIP_NORM),
            get_optimizer_instance(optimizer, learning_rate=_DEFAULT_LEARNING_RATE),
        )
    return get_optimizer_instance(optimizer)


def rnn_logits(
    features: dict,
    *,
    sequence_feature_columns,
    context_feature_columns,
    cell,
    layer_name: str,
    units: int,
    return_sequences: bool,
    mask_key: str | None = None,
) -> jax.Array:
    """TF's ``RNNModel.call`` inside ``model_fn``: ``[batch_size, units]`` logits, or
    ``[batch_size, T, units]`` with ``return_sequences`` (the sequence mask is then put in
    ``features[mask_key]`` unless present)."""
    sequence_input, sequence_length = fc.sequence_input_layer(features, sequence_feature_columns)
    if context_feature_columns:
        context = _dense_features(features, context_feature_columns)
        sequence_input = fc.concatenate_context_input(context, sequence_input)
    mask = jnp.arange(sequence_input.shape[1])[None, :] < sequence_length[:, None]
    with est.variable_scope("rnn_model"):
        outputs = _cells.rnn(cell, sequence_input, mask, return_sequences, name=layer_name)
        logits = est.layers.dense(outputs, units, name="logits")
    if return_sequences and mask_key is not None and mask_key not in features:
        features[mask_key] = mask
    return logits


def _dense_features(features, columns) -> jax.Array:
    """``tf.compat.v1.keras.layers.DenseFeatures(columns)(features)``: ``input_layer`` with
    Keras's scope name ``dense_features``."""
    from canned.feature_column._input_layer import dense_inputs

    return dense_inputs(features, columns, scope="dense_features")


class RNNEstimator(est.Estimator):
    """A recurrent network with any head (``tf.estimator.experimental.RNNEstimator``,
    TF 2.15).

    ``logits = dense(RNN(sequence_input ⧺ context), head.logits_dimension)`` where the RNN
    runs over each example's steps (its sequence length; padding is masked: the state is
    carried over, as Keras's ``RNN(mask=...)``).

    Args:
      head: a ``canned.head`` head; a ``SequentialHeadWrapper`` when ``return_sequences``.
      sequence_feature_columns: ``sequence_numeric_column``s and ``embedding_column`` /
        ``indicator_column`` of ``sequence_categorical_column_with_*``.
      context_feature_columns: dense columns (``numeric_column``, ``embedding_column`` of a
        categorical column, ...) appended to every step.
      units: an int (one layer; needs a ``cell_type`` string) or a list of ints (stacked
        layers).
      cell_type: ``'simple_rnn'`` (the default for a list of units), ``'lstm'``, ``'gru'``,
        or a class ``cls(units=n)`` making a cell (see ``canned.rnn.LSTMCell``).
      rnn_cell_fn: ``() -> cell or list of cells``, instead of ``units``/``cell_type``.
      return_sequences: logits for every step (``[B, T, n]``) instead of the last one.
      model_dir: where checkpoints go.
      optimizer: ``'Adagrad'`` (default), ``'Adam'``, ``'Ftrl'``, ``'RMSProp'``, ``'SGD'``
        — at learning rate 0.05 with each gradient clipped to norm 5, as TF — or an
        ``optax.GradientTransformation`` (or a callable returning one), used as given.
      config: a ``RunConfig``.

    Raises:
      ValueError: TF's messages: a non-sequential head with ``return_sequences``,
        ``units``/``cell_type`` with ``rnn_cell_fn``, an unknown ``cell_type``; and (at
        construction here, at the first ``train`` in TF) bad ``units``, non-sequence
        columns among ``sequence_feature_columns``.
    """

    def __init__(
        self,
        head: Head,
        sequence_feature_columns: Iterable,
        context_feature_columns: Iterable | None = None,
        units=None,
        cell_type=USE_DEFAULT,
        rnn_cell_fn: Callable | None = None,
        return_sequences: bool = False,
        model_dir=None,
        optimizer="Adagrad",
        config=None,
    ) -> None:
        if return_sequences and not isinstance(head, SequentialHeadWrapper):
            raise ValueError(
                "Provided head must be a `_SequentialHead` object when `return_sequences` is "
                "set to True."
            )
        cell, layer_name = make_rnn_layer(rnn_cell_fn, units, cell_type)
        sequence_columns = check_columns(sequence_feature_columns)
        _check_sequence_columns(sequence_columns)
        context_columns = tuple(context_feature_columns or ())
        weight_column = head.weight_column
        key, _ = weight_key(weight_column)
        extra = (fc.numeric_column(key),) if key is not None and not return_sequences else ()
        if key is not None and return_sequences:
            extra = (fc.sequence_numeric_column(key),)
        transform = fc.input_transform(sequence_columns + context_columns)
        weight = fc.input_transform(extra) if extra else None
        length_keys = tuple(dict.fromkeys(_length_key(c) for c in sequence_columns))
        sequence_keys = tuple(dict.fromkeys(_sequence_key(c) for c in sequence_columns))
        mask_key = head.input_sequence_mask_key if return_sequences else None
        self._head = head

        def model_fn(features, labels, mode, config):
            del config
            if return_sequences:
                features = model_features(features, None)
                if key is not None and key in features:  # per-step [B, T]; NaN: padding
                    weights = features[key].reshape(features[key].shape[:2])
                    features = {**features, key: jnp.where(jnp.isnan(weights), 0.0, weights)}
            else:
                features = model_features(features, weight_column)
            logits = rnn_logits(
                features,
                sequence_feature_columns=sequence_columns,
                context_feature_columns=context_columns,
                cell=cell,
                layer_name=layer_name,
                units=head.logits_dimension,
                return_sequences=return_sequences,
                mask_key=mask_key,
            )
            train_op = _train_op(optimizer) if mode == est.ModeKeys.TRAIN else None
            return head.create_estimator_spec(
                features=features, mode=mode, labels=labels, optimizer=train_op, logits=logits
            )

        super().__init__(
            model_fn=model_fn,
            model_dir=model_dir,
            config=config,
            input_transform=_RNNHostTransform(transform, head, length_keys, sequence_keys, weight),
            fast_compile=True,  # TF 2.15 is the reference (Estimator's docstring)
        )

    @property
    def head(self) -> Head:
        """The head (loss, predictions, metrics, export outputs)."""
        return self._head


class RNNClassifier(RNNEstimator):
    """A recurrent classifier (``tf.estimator.experimental.RNNClassifier``, TF 2.15).

    The binary head (``n_classes=2``: sigmoid cross-entropy) or the multi-class one, on
    :class:`RNNEstimator`'s logits. With ``return_sequences=True`` the head is wrapped in
    ``SequentialHeadWrapper``: one label per step (``[batch_size, T]``), loss and metrics
    over the steps within each sequence length (or ``features[sequence_mask]`` when
    given), and the mask added to the predictions.

    Args:
      sequence_feature_columns, context_feature_columns, units: as :class:`RNNEstimator`.
      cell_type, rnn_cell_fn, return_sequences: as :class:`RNNEstimator`.
      model_dir, optimizer, config: as :class:`RNNEstimator`.
      n_classes: number of classes (>= 2).
      weight_column: a feature key or ``numeric_column`` of per-example weights (per-step
        ``[B, T]`` weights with ``return_sequences``; a key then).
      label_vocabulary: the class names, when labels are strings.
      loss_reduction: ``"sum_over_batch_size"`` (default) or ``"sum"``.
      sequence_mask: key of the sequence mask feature with ``return_sequences``.

    Raises:
      ValueError: as :class:`RNNEstimator`, and the heads' checks of ``n_classes`` and
        ``label_vocabulary``.
    """

    def __init__(
        self,
        sequence_feature_columns: Iterable,
        context_feature_columns: Iterable | None = None,
        units=None,
        cell_type=USE_DEFAULT,
        rnn_cell_fn: Callable | None = None,
        return_sequences: bool = False,
        model_dir=None,
        n_classes: int = 2,
        weight_column=None,
        label_vocabulary=None,
        optimizer="Adagrad",
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
        sequence_mask: str = "sequence_mask",
        config=None,
    ) -> None:
        head = classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        if return_sequences:
            logger.info(
                "Converting head to sequential head with `SequentialHeadWrapper` to allow "
                "sequential predictions."
            )
            key, _ = weight_key(weight_column)
            head = SequentialHeadWrapper(
                head, sequence_length_mask=sequence_mask, feature_columns=key
            )
        super().__init__(
            head=head,
            sequence_feature_columns=sequence_feature_columns,
            context_feature_columns=context_feature_columns,
            units=units,
            cell_type=cell_type,
            rnn_cell_fn=rnn_cell_fn,
            return_sequences=return_sequences,
            model_dir=model_dir,
            optimizer=optimizer,
            config=config,
        )
