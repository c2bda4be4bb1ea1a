"""``DNNClassifier`` and ``DNNRegressor`` (``tf.estimator``, TF 2.15's V2 classes).

Built as TF builds them (``canned/dnn.py``, ``_DNNModelV2``): the dense input of the
feature columns (``input_layer``, columns in name order), then per hidden layer a dense
layer with ``activation_fn`` (Glorot-uniform kernel, zero bias), dropout in training only,
and batch normalization (momentum 0.999, epsilon 0.001) when ``batch_norm``; then a linear
``logits`` layer. Variables carry TF's names (``dnn/hiddenlayer_0/kernel``,
``dnn/hiddenlayer_0/batchnorm_0/gamma``, ``dnn/logits/bias``,
``dnn/input_from_feature_columns/input_layer/<column>/embedding_weights``), so a TF
checkpoint's names map one to one. The default optimizer is Adagrad at 0.001: TF 2.15's V2
``_dnn_model_fn_v2`` resolves ``optimizer='Adagrad'`` without a learning rate, so Keras's
default applies (the module's ``_LEARNING_RATE = 0.05`` serves only the V1 classes), with
Keras's accumulator 0.1 and epsilon 1e-7.

Random initial values follow JAX's PRNG, not TF's, so two frameworks start from different
weights with the same seed; from the same weights (``warm_start_from``) training follows
TF's arithmetic (``tests/canned/test_dnn.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import jax
import jax.numpy as jnp

import estimator as est
from canned import feature_column as fc
from canned._base import (
    check_columns,
    classifier_head,
    host_transform,
    masks_padding,
    model_features,
    regressor_head,
)
from canned.head.keys import Reduction
from canned.optimizers import get_optimizer_instance

__all__ = ["DNNClassifier", "DNNEstimator", "DNNRegressor", "dnn_logits"]


def layer_summary(value: jax.Array, tag: str) -> None:
    """TF's ``_add_hiddenlayer_summary``: fraction of zeros and an activation histogram
    of ``value`` ``[batch_size, units]``, over the real examples of a padded batch."""
    mask = est.row_mask()
    if mask is None:
        fraction = jnp.mean(value == 0)
    else:
        fraction = jnp.sum((value == 0) * mask[:, None]) / (jnp.sum(mask) * value.shape[1])
    est.summary.scalar(f"{tag}/fraction_of_zero_values", fraction)
    est.summary.histogram(f"{tag}/activation", value, per_example=True)


def dnn_logits(
    features,
    feature_columns: Sequence,
    hidden_units: Sequence[int],
    units: int,
    mode: str,
    activation_fn: Callable = jax.nn.relu,
    dropout: float | None = None,
    batch_norm: bool = False,
) -> jax.Array:
    """The DNN's logits, ``float32 [batch_size, units]``, under variable scope ``dnn``
    (TF's ``_DNNModelV2.call``). Call inside ``model_fn``; ``features`` come from the host
    phase of ``feature_columns``."""
    training = mode == est.ModeKeys.TRAIN
    with est.variable_scope("dnn"):
        with est.variable_scope("input_from_feature_columns"):
            net = fc.input_layer(features, feature_columns)
        for i, n in enumerate(hidden_units):
            name = f"hiddenlayer_{i}"
            net = est.layers.dense(net, n, activation=activation_fn, name=name)
            if dropout is not None and training:
                net = est.layers.dropout(net, rate=dropout, training=True)
            if batch_norm:
                net = est.layers.batch_normalization(
                    net,
                    momentum=0.999,
                    epsilon=0.001,
                    training=training,
                    name=f"{name}/batchnorm_{i}",
                )
            layer_summary(net, name)
        # Under a mixed dtype policy (RunConfig(dtype_policy=...)) the tower computes in
        # bfloat16/float16; the head's loss and metrics take float32 logits.
        logits = est.layers.dense(net, units, name="logits").astype(jnp.float32)
        est.identity(logits, "logits/BiasAdd")  # TF's graph name (for hooks)
        layer_summary(logits, "logits")
    return logits


def check_hidden_units(hidden_units) -> tuple[int, ...]:
    units = tuple(hidden_units or ())
    if not all(isinstance(n, int) and n > 0 for n in units):
        raise ValueError(f"hidden_units must be positive integers; got {hidden_units!r}.")
    return units


class _DNN(est.Estimator):
    def __init__(
        self,
        head,
        hidden_units,
        feature_columns,
        model_dir,
        weight_column,
        optimizer,
        activation_fn,
        dropout,
        config,
        warm_start_from,
        batch_norm,
    ) -> None:
        columns = check_columns(feature_columns)
        hidden = check_hidden_units(hidden_units)

        def model_fn(features, labels, mode, config):
            del config
            features = model_features(features, weight_column)
            logits = dnn_logits(
                features,
                columns,
                hidden,
                head.logits_dimension,
                mode,
                activation_fn,
                dropout,
                batch_norm,
            )
            train_op = None
            if mode == est.ModeKeys.TRAIN:
                train_op = get_optimizer_instance(optimizer)  # Keras's default rate, as TF
            return head.create_estimator_spec(
                features=features, mode=mode, logits=logits, labels=labels, optimizer=train_op
            )

        # Batch normalization's statistics would see the padding.
        if not batch_norm and masks_padding(head, columns, weight_column, activation_fn):
            model_fn = est.masks_padding(model_fn)
        self._head = head
        self._feature_columns = columns
        super().__init__(
            model_fn=model_fn,
            model_dir=model_dir,
            config=config,
            warm_start_from=warm_start_from,
            input_transform=host_transform(columns, weight_column, head),
            fast_compile=True,  # TF 2.15 is the reference (Estimator's docstring)
        )

    @property
    def head(self):
        """The head (loss, predictions, metrics, export outputs)."""
        return self._head


class DNNClassifier(_DNN):
    """A feed-forward network classifier (``tf.estimator.DNNClassifier``, TF 2.15).

    Args:
      hidden_units: units per hidden layer, e.g. ``[64, 32]``.
      feature_columns: dense columns (numeric, bucketized, ``indicator_column``,
        ``embedding_column``) from ``canned.feature_column``.
      model_dir: where checkpoints go.
      n_classes: number of label classes (>= 2).
      weight_column: a feature key or ``numeric_column`` of per-example loss weights.
      label_vocabulary: the class names, when labels are strings.
      optimizer: ``'Adagrad'`` (default; a name gets Keras's default learning rate,
        0.001 for Adagrad, as in TF 2.15), an optax transformation or a callable returning
        one.
      activation_fn: applied after each hidden layer (default ``jax.nn.relu``).
      dropout: the fraction of hidden activations dropped in training, or None.
      config: a ``RunConfig``.
      warm_start_from: a checkpoint/model directory or export to start from.
      loss_reduction: ``"sum_over_batch_size"`` (default) or ``"sum"``.
      batch_norm: batch normalization after each hidden layer.

    Raises:
      ValueError: TF's messages for ``n_classes``, the label vocabulary, empty
        ``feature_columns``; non-positive ``hidden_units``.
    """

    def __init__(
        self,
        hidden_units: Sequence[int],
        feature_columns: Iterable,
        model_dir=None,
        n_classes: int = 2,
        weight_column=None,
        label_vocabulary=None,
        optimizer="Adagrad",
        activation_fn: Callable = jax.nn.relu,
        dropout: float | None = None,
        config=None,
        warm_start_from=None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
        batch_norm: bool = False,
    ) -> None:
        head = classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(
            head,
            hidden_units,
            feature_columns,
            model_dir,
            weight_column,
            optimizer,
            activation_fn,
            dropout,
            config,
            warm_start_from,
            batch_norm,
        )


class DNNRegressor(_DNN):
    """A feed-forward network regressor (``tf.estimator.DNNRegressor``, TF 2.15): squared
    error on the network's output.

    Args:
      hidden_units, feature_columns, model_dir: as :class:`DNNClassifier`.
      label_dimension: labels per example (``[batch_size, label_dimension]``).
      weight_column, optimizer, activation_fn, dropout: as :class:`DNNClassifier`.
      config, warm_start_from, loss_reduction, batch_norm: as :class:`DNNClassifier`.
    """

    def __init__(
        self,
        hidden_units: Sequence[int],
        feature_columns: Iterable,
        model_dir=None,
        label_dimension: int = 1,
        weight_column=None,
        optimizer="Adagrad",
        activation_fn: Callable = jax.nn.relu,
        dropout: float | None = None,
        config=None,
        warm_start_from=None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
        batch_norm: bool = False,
    ) -> None:
        head = regressor_head(label_dimension, weight_column, loss_reduction)
        super().__init__(
            head,
            hidden_units,
            feature_columns,
            model_dir,
            weight_column,
            optimizer,
            activation_fn,
            dropout,
            config,
            warm_start_from,
            batch_norm,
        )


class DNNEstimator(_DNN):
    """A feed-forward network with any head (``tf.estimator.DNNEstimator``, TF 2.15).

    Args:
      head: a ``canned.head`` head (its ``weight_column`` feature is read too).
      hidden_units, feature_columns, model_dir, optimizer: as :class:`DNNClassifier`.
      activation_fn, dropout, config, warm_start_from, batch_norm: as
        :class:`DNNClassifier`.
    """

    def __init__(
        self,
        head,
        hidden_units: Sequence[int],
        feature_columns: Iterable,
        model_dir=None,
        optimizer="Adagrad",
        activation_fn: Callable = jax.nn.relu,
        dropout: float | None = None,
        config=None,
        warm_start_from=None,
        batch_norm: bool = False,
    ) -> None:
        super().__init__(
            head,
            hidden_units,
            feature_columns,
            model_dir,
            head.weight_column,
            optimizer,
            activation_fn,
            dropout,
            config,
            warm_start_from,
            batch_norm,
        )
