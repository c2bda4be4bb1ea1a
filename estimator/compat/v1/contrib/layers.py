"""``tf.contrib.layers`` (TF 1.15): the layers, regularizers and ``optimize_loss`` Estimator
programs use, with TF 1.15's names, defaults and variable names.

From ``tensorflow/contrib/layers/python/layers/{layers,encoders,optimizers,regularizers}.py``
at r1.15:

* ``fully_connected(inputs, num_outputs)``: variables ``fully_connected/weights`` (Xavier
  uniform) and ``fully_connected/biases`` (zeros), scope made unique (``fully_connected_1``);
  **ReLU by default**; a ``normalizer_fn`` replaces the biases;
* ``flatten``: ``[batch, -1]``;
* ``layer_norm``: ``LayerNorm/beta`` and ``LayerNorm/gamma`` over
  ``inputs.shape[begin_params_axis:]``, moments over ``begin_norm_axis ...``, epsilon 1e-12;
* ``embed_sequence``: ``EmbedSequence/embeddings`` looked up per id;
* ``bow_encoder``: ``bow_encoder/embeddings``, the mean embedding of each row's ids (``-1``
  ids ignored; a row without ids gets embedding 0, as TF's sparse lookup with
  ``default_id=0``);
* ``optimize_loss``: TF's optimizer names (``"SGD"``, ``"Adam"``, ``"Adagrad"``, ``"Ftrl"``,
  ``"Momentum"`` at momentum 0.9, ``"RMSProp"``), a float learning rate kept as the
  non-trainable variable ``OptimizeLoss/learning_rate``, ``learning_rate_decay_fn``,
  ``clip_gradients`` (a float: by global norm), ``gradient_multipliers``, ``variables``,
  the ``OptimizeLoss/loss`` and ``OptimizeLoss/learning_rate`` summaries. It returns the
  ``train_op`` (TF returns the loss with the update as a dependency, which an
  ``EstimatorSpec`` takes as ``train_op`` too). ``gradient_noise_scale`` and the gradient
  summaries are refused: gradients are symbolic inside ``model_fn`` here;
* ``l1_regularizer`` / ``l2_regularizer`` (``scale * Σ|w|``, ``scale * Σ w² / 2``; TF's
  checks on ``scale``), ``xavier_initializer``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1 import _framework, nn, summary
from estimator.compat.v1 import initializers as _initializers
from estimator.compat.v1 import train as _train
from estimator.compat.v1._base import op
from estimator.compat.v1._math_ops import clip_by_global_norm
from estimator.compat.v1.train._train_op import TrainOp

__all__ = [
    "fully_connected",
    "flatten",
    "layer_norm",
    "embed_sequence",
    "bow_encoder",
    "optimize_loss",
    "l1_regularizer",
    "l2_regularizer",
    "xavier_initializer",
    "OPTIMIZER_CLS_NAMES",
    "OPTIMIZER_SUMMARIES",
]

__getattr__ = module_getattr("tf.contrib.layers", __name__)


def xavier_initializer(uniform: bool = True, seed=None, dtype=jnp.float32):
    """``tf.contrib.layers.xavier_initializer``: Glorot uniform (or normal)."""
    if uniform:
        return _initializers.glorot_uniform_initializer(seed=seed, dtype=dtype)
    return _initializers.glorot_normal_initializer(seed=seed, dtype=dtype)


_ZEROS = _initializers.zeros_initializer()


def fully_connected(
    inputs,
    num_outputs,
    activation_fn=nn.relu,
    normalizer_fn=None,
    normalizer_params=None,
    weights_initializer=None,
    weights_regularizer=None,
    biases_initializer=_ZEROS,
    biases_regularizer=None,
    reuse=None,
    variables_collections=None,
    outputs_collections=None,
    trainable=True,
    scope=None,
):
    """``tf.contrib.layers.fully_connected``: ``activation_fn(inputs @ weights + biases)``
    over the last axis (see the module docstring for names and defaults).

    Raises:
      ValueError: ``num_outputs`` that is not an int (TF's message).
    """
    del reuse, variables_collections, outputs_collections
    if not isinstance(num_outputs, numbers.Integral) or isinstance(num_outputs, bool):
        raise ValueError(f"num_outputs should be int or long, got {num_outputs}.")
    inputs = jnp.asarray(inputs)
    with _framework.variable_scope(scope, default_name="fully_connected"):
        weights = _framework.get_variable(
            "weights",
            [inputs.shape[-1], int(num_outputs)],
            initializer=weights_initializer or xavier_initializer(),
            regularizer=weights_regularizer,
            trainable=trainable,
        )
        outputs = jnp.tensordot(inputs, weights, axes=[[inputs.ndim - 1], [0]])
        if normalizer_fn is None and biases_initializer is not None:
            biases = _framework.get_variable(
                "biases",
                [int(num_outputs)],
                initializer=biases_initializer,
                regularizer=biases_regularizer,
                trainable=trainable,
            )
            outputs = outputs + biases
        if normalizer_fn is not None:
            outputs = normalizer_fn(outputs, **(normalizer_params or {}))
        if activation_fn is not None:
            outputs = activation_fn(outputs)
    return outputs


@op
def flatten(inputs, outputs_collections=None, scope=None):
    """``tf.contrib.layers.flatten``: ``[batch_size, k]``.

    Raises:
      ValueError: inputs of rank < 2 (TF's message).
    """
    inputs = jnp.asarray(inputs)
    if inputs.ndim < 2:
        raise ValueError(f"Inputs must have a least 2 dimensions; got shape {inputs.shape}.")
    return inputs.reshape(inputs.shape[0], -1)


def layer_norm(
    inputs,
    center=True,
    scale=True,
    activation_fn=None,
    reuse=None,
    variables_collections=None,
    outputs_collections=None,
    trainable=True,
    begin_norm_axis=1,
    begin_params_axis=-1,
    scope=None,
):
    """``tf.contrib.layers.layer_norm`` (Ba et al., 2016, https://arxiv.org/abs/1607.06450):
    normalizes over axes ``begin_norm_axis ... R - 1`` with epsilon 1e-12, then scales and
    centers with ``gamma``/``beta`` of shape ``inputs.shape[begin_params_axis:]``.

    Raises:
      ValueError: ``begin_params_axis`` or ``begin_norm_axis`` not below the rank (TF's
        message).
    """
    del reuse, variables_collections, outputs_collections
    inputs = jnp.asarray(inputs)
    rank = inputs.ndim
    if begin_norm_axis < 0:
        begin_norm_axis = rank + begin_norm_axis
    if begin_params_axis >= rank or begin_norm_axis >= rank:
        raise ValueError(
            f"begin_params_axis ({begin_params_axis}) and begin_norm_axis ({begin_norm_axis}) "
            f"must be < rank(inputs) ({rank})"
        )
    params_shape = list(inputs.shape[begin_params_axis:])
    with _framework.variable_scope(scope, default_name="LayerNorm"):
        beta = gamma = None
        if center:
            beta = _framework.get_variable(
                "beta",
                params_shape,
                dtype=inputs.dtype,
                initializer=_initializers.zeros_initializer(),
                trainable=trainable,
            )
        if scale:
            gamma = _framework.get_variable(
                "gamma",
                params_shape,
                dtype=inputs.dtype,
                initializer=_initializers.ones_initializer(),
                trainable=trainable,
            )
        mean, variance = nn.moments(inputs, list(range(begin_norm_axis, rank)), keep_dims=True)
        outputs = nn.batch_normalization(inputs, mean, variance, beta, gamma, 1e-12)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
    return outputs


def _embeddings(scope, default_name, vocab_size, embed_dim, initializer, regularizer, trainable):
    with _framework.variable_scope(scope, default_name=default_name):
        return _framework.get_variable(
            "embeddings",
            [int(vocab_size), int(embed_dim)],
            initializer=initializer,
            regularizer=regularizer,
            trainable=trainable,
        )


def embed_sequence(
    ids,
    vocab_size=None,
    embed_dim=None,
    unique=False,
    initializer=None,
    regularizer=None,
    trainable=True,
    scope=None,
    reuse=None,
):
    """``tf.contrib.layers.embed_sequence``: ``[batch, length] ids -> [batch, length,
    embed_dim]`` from ``EmbedSequence/embeddings``.

    Raises:
      ValueError: no ``vocab_size`` or ``embed_dim`` (TF's message).
    """
    del unique
    if not (reuse or (vocab_size and embed_dim)):
        raise ValueError(
            "Must specify vocab size and embedding dimension when not reusing. Got "
            f"vocab_size={vocab_size} and embed_dim={embed_dim}"
        )
    table = _embeddings(
        scope, "EmbedSequence", vocab_size, embed_dim, initializer, regularizer, trainable
    )
    return nn.embedding_lookup(table, jnp.asarray(ids))


def bow_encoder(
    ids,
    vocab_size,
    embed_dim,
    sparse_lookup=True,
    initializer=None,
    regularizer=None,
    trainable=True,
    scope=None,
    reuse=None,
):
    """``tf.contrib.layers.bow_encoder``: the mean embedding of each row of ``[batch,
    length]`` ids (see the module docstring for ``-1`` ids and empty rows).

    Raises:
      ValueError: no ``vocab_size`` or ``embed_dim`` (TF's message).
    """
    del reuse
    if not vocab_size or not embed_dim:
        raise ValueError("Must specify vocab size and embedding dimension")
    table = _embeddings(
        scope, "bow_encoder", vocab_size, embed_dim, initializer, regularizer, trainable
    )
    ids = jnp.asarray(ids)
    if not sparse_lookup:
        return jnp.mean(nn.embedding_lookup(table, ids), axis=1)
    present = ids >= 0
    rows = nn.embedding_lookup(table, jnp.where(present, ids, 0))
    total = jnp.sum(rows * present[..., None].astype(rows.dtype), axis=1)
    count = jnp.sum(present, axis=1, keepdims=True).astype(rows.dtype)
    mean = total / jnp.maximum(count, 1)
    return jnp.where(count > 0, mean, table[0])


def _regularizer(scale, kind: str) -> None:
    if isinstance(scale, numbers.Integral):
        raise ValueError(f"scale cannot be an integer: {scale}")
    if isinstance(scale, numbers.Real) and scale < 0.0:
        raise ValueError(f"Setting a scale less than 0 on a regularizer: {scale:g}")
    del kind


def l1_regularizer(scale, scope=None) -> Callable:
    """``tf.contrib.layers.l1_regularizer``: ``weights -> scale * Σ|weights|`` (None for
    ``scale == 0``, which TF's ``get_variable`` then skips).

    Raises:
      ValueError: an integer or negative ``scale`` (TF's messages).
    """
    _regularizer(scale, "l1")
    if scale == 0.0:
        return lambda _: None
    return lambda weights: scale * jnp.sum(jnp.abs(jnp.asarray(weights)))


def l2_regularizer(scale, scope=None) -> Callable:
    """``tf.contrib.layers.l2_regularizer``: ``weights -> scale * Σ weights² / 2``
    (``scale * tf.nn.l2_loss``; None for ``scale == 0``).

    Raises:
      ValueError: an integer or negative ``scale`` (TF's messages).
    """
    _regularizer(scale, "l2")
    if scale == 0.0:
        return lambda _: None
    return lambda weights: scale * nn.l2_loss(weights)


#: TF 1.15's optimizer names for ``optimize_loss`` (``Momentum`` at momentum 0.9).
OPTIMIZER_CLS_NAMES: dict[str, Callable] = {
    "Adagrad": _train.AdagradOptimizer,
    "Adam": _train.AdamOptimizer,
    "Ftrl": _train.FtrlOptimizer,
    "Momentum": lambda learning_rate: _train.MomentumOptimizer(learning_rate, momentum=0.9),
    "RMSProp": _train.RMSPropOptimizer,
    "SGD": _train.GradientDescentOptimizer,
}

OPTIMIZER_SUMMARIES = [
    "learning_rate",
    "loss",
    "gradients",
    "gradient_norm",
    "global_gradient_norm",
]
_SUPPORTED_SUMMARIES = ("learning_rate", "loss")


def _optimizer(optimizer: Any, lr: Any, learning_rate: Any):
    if isinstance(optimizer, str):
        if lr is None:
            raise ValueError(
                "Learning rate is None, but should be specified if optimizer is string "
                f"({optimizer})."
            )
        if optimizer not in OPTIMIZER_CLS_NAMES:
            raise ValueError(
                f"Optimizer name should be one of [{', '.join(OPTIMIZER_CLS_NAMES)}], you "
                f"provided {optimizer}."
            )
        return OPTIMIZER_CLS_NAMES[optimizer](learning_rate=lr)
    if isinstance(optimizer, type) and issubclass(optimizer, _train.Optimizer):
        if lr is None:
            raise ValueError(
                "Learning rate is None, but should be specified if optimizer is class "
                f"({optimizer})."
            )
        return optimizer(learning_rate=lr)
    if isinstance(optimizer, _train.Optimizer):
        return optimizer
    if callable(optimizer):
        opt = optimizer(lr) if learning_rate is not None else optimizer()
        if not isinstance(opt, _train.Optimizer):
            raise ValueError(
                f"Unrecognized optimizer: function should return subclass of Optimizer. Got {opt}."
            )
        return opt
    raise ValueError(
        "Unrecognized optimizer: should be string, subclass of Optimizer, instance of "
        f"subclass of Optimizer or function with one argument. Got {optimizer}."
    )


def optimize_loss(
    loss,
    global_step,
    learning_rate,
    optimizer,
    gradient_noise_scale=None,
    gradient_multipliers=None,
    clip_gradients=None,
    learning_rate_decay_fn=None,
    update_ops=None,
    variables=None,
    name=None,
    summaries=None,
    colocate_gradients_with_ops=False,
    increment_global_step=True,
) -> TrainOp:
    """``tf.contrib.layers.optimize_loss``: a ``train_op`` minimizing ``loss`` (see the
    module docstring).

    Args:
      loss: the scalar loss.
      global_step: accepted (the Estimator advances it); passed to
        ``learning_rate_decay_fn``.
      learning_rate: a float (kept as the variable ``OptimizeLoss/learning_rate``), a
        scalar array, or None when ``optimizer`` needs none.
      optimizer: a name of :data:`OPTIMIZER_CLS_NAMES`, a ``tf.train.Optimizer`` class or
        instance, or a function of the learning rate returning one.
      gradient_multipliers: ``{variable or name: factor}``.
      clip_gradients: a float (``tf.clip_by_global_norm``) or a function of the
        ``[(gradient, variable)]`` list.
      learning_rate_decay_fn: ``(learning_rate, global_step) -> learning_rate``.
      update_ops, colocate_gradients_with_ops, increment_global_step: accepted.
      variables: the variables to train (default: every trainable one).
      name: the variable scope (default ``OptimizeLoss``).
      summaries: a subset of ``["loss", "learning_rate"]`` (default: both).

    Returns:
      The ``train_op`` (an ``EstimatorSpec`` takes it).

    Raises:
      ValueError: TF's messages for a bad learning rate, optimizer, summaries or
        ``clip_gradients``; ``gradient_noise_scale`` or gradient summaries (not
        supported: gradients are symbolic inside ``model_fn``).
    """
    del update_ops, colocate_gradients_with_ops, increment_global_step
    if gradient_noise_scale is not None:
        raise ValueError(
            "optimize_loss(gradient_noise_scale=...) is not supported: gradients are computed "
            "by the Estimator after model_fn. Leave it None."
        )
    if global_step is None:
        global_step = _train.get_global_step()
    with _framework.variable_scope(name, default_name="OptimizeLoss") as scope:
        lr = None if learning_rate is None else _learning_rate(learning_rate)
        summaries = _summaries(summaries)
        if lr is not None and learning_rate_decay_fn is not None:
            lr = learning_rate_decay_fn(lr, global_step)
        if lr is not None and "learning_rate" in summaries:
            summary.scalar(f"{scope}/learning_rate", lr)
        opt = _optimizer(optimizer, lr, learning_rate)
        grads = _edited(
            opt.compute_gradients(loss, variables), gradient_multipliers, clip_gradients
        )
        if "loss" in summaries:
            summary.scalar(f"{scope}/loss", loss)
        return opt.apply_gradients(grads, global_step=global_step)


def _learning_rate(learning_rate: Any) -> Any:
    """A float as the variable ``learning_rate`` of the scope, a scalar array as it is
    (TF's errors for anything else)."""
    if isinstance(learning_rate, float):
        if learning_rate < 0.0:
            raise ValueError(f"Invalid learning_rate {learning_rate}.")
        return _framework.get_variable(
            "learning_rate",
            [],
            trainable=False,
            initializer=_initializers.constant_initializer(learning_rate),
        )
    if isinstance(learning_rate, jax.Array | np.ndarray) and np.ndim(learning_rate) == 0:
        return learning_rate
    raise ValueError(
        f"Learning rate should be 0d Tensor or float. Got {learning_rate} of type "
        f"{type(learning_rate)}"
    )


def _summaries(summaries: Any) -> list[str]:
    """The summaries asked for (TF's default and errors; gradient summaries refused)."""
    if summaries is None:
        summaries = ["loss", "learning_rate", "global_gradient_norm"]
    for item in summaries:
        if item not in OPTIMIZER_SUMMARIES:
            raise ValueError(
                f"Summaries should be one of [{', '.join(OPTIMIZER_SUMMARIES)}], you "
                f"provided {item}."
            )
    if any(item in ("gradients", "gradient_norm") for item in summaries):
        raise ValueError(
            "optimize_loss: gradient summaries are not supported (gradients are "
            "symbolic inside model_fn); use summaries=['loss', 'learning_rate']."
        )
    return list(summaries)


def _edited(grads: list, gradient_multipliers: Any, clip_gradients: Any) -> list:
    """The gradients scaled by ``gradient_multipliers`` then clipped (TF's order)."""
    if gradient_multipliers is not None:
        factors = {_name_of(k): v for k, v in gradient_multipliers.items()}
        grads = [(g * factors[g.source] if g.source in factors else g, v) for g, v in grads]
    if isinstance(clip_gradients, float):
        clipped, _ = clip_by_global_norm([g for g, _ in grads], clip_gradients)
        return list(zip(clipped, [v for _, v in grads], strict=True))
    if callable(clip_gradients):
        return clip_gradients(grads)
    if clip_gradients is not None:
        raise ValueError(f"Unknown type {type(clip_gradients)} for clip_gradients")
    return grads


def _name_of(variable: Any) -> str:
    if isinstance(variable, str):
        return variable.removesuffix(":0")
    from estimator.model import variables as _variables

    frame = _variables.require_frame("optimize_loss")
    name = frame.by_id.get(id(variable))
    if name is None:
        raise ValueError(
            "gradient_multipliers keys must be variables of this model or their names; got "
            f"{type(variable).__name__}."
        )
    return name
