"""``tf.nn.dynamic_rnn`` and ``tf.nn.bidirectional_dynamic_rnn`` (TF 1.15) over the cells of
``tf.nn.rnn_cell``: each layer is one ``jax.lax.scan`` (``canned.rnn.scan``).

As TF's: with ``sequence_length``, the outputs past a sequence's length are zeros and its
state is the one of its last step; variables live under ``scope`` (default ``rnn``, and
``bidirectional_rnn/fw`` / ``bw``) then the cell's name (``rnn/lstm_cell/kernel``);
``time_major`` inputs are ``[T, batch, in]``. The backward direction reads each sequence
reversed within its length (``tf.reverse_sequence``) and its outputs are reversed back.
"""

from __future__ import annotations

import contextlib
from typing import Any

import jax.numpy as jnp

from canned.rnn import scan
from estimator.compat.v1.rnn_cell import MultiRNNCell, RNNCell
from estimator.model import variables as _variables

__all__ = ["bidirectional_dynamic_rnn", "dynamic_rnn"]


def _check_cell(cell: Any, what: str) -> None:
    if not isinstance(cell, RNNCell):
        raise TypeError(
            f"{what} must be an instance of RNNCell (tf.nn.rnn_cell.*); got {cell!r}. Keras "
            "cells run with canned.rnn.rnn."
        )


def _mask(sequence_length: Any, batch: int, steps: int) -> jnp.ndarray:
    if sequence_length is None:
        return jnp.ones((batch, steps), bool)
    lengths = jnp.asarray(sequence_length, jnp.int32).reshape(-1)
    if lengths.shape[0] != batch:
        raise ValueError(
            f"sequence_length has {lengths.shape[0]} entries for a batch of {batch}; give one "
            "length per sequence (shape [batch_size])."
        )
    return jnp.arange(steps)[None, :] < lengths[:, None]


def _run(cell: RNNCell, inputs, mask, initial_state, zero_outputs: bool):
    """``(outputs [B, T, out], state)`` of ``cell`` over ``inputs [B, T, in]``, its
    variables under the current scope."""
    if not isinstance(cell, MultiRNNCell):
        with _variables.variable_scope(cell.scope_name()):
            params = cell.build(inputs.shape[-1])
        return scan(cell, params, inputs, mask, initial_state, zero_outputs)
    states = []
    outputs = inputs
    initial = initial_state if initial_state is not None else (None,) * len(cell.cells)
    with _variables.variable_scope(cell.scope_name()):
        for i, (layer, layer_state) in enumerate(zip(cell.cells, initial, strict=True)):
            with _variables.variable_scope(f"cell_{i}"):
                outputs, state = _run(layer, outputs, mask, layer_state, zero_outputs)
            states.append(state)
    return outputs, tuple(states)


def dynamic_rnn(
    cell,
    inputs,
    sequence_length=None,
    initial_state=None,
    dtype=None,
    parallel_iterations=None,
    swap_memory=False,
    time_major=False,
    scope=None,
):
    """``tf.nn.dynamic_rnn``: ``(outputs, state)`` of ``cell`` over ``inputs``.

    Args:
      cell: a ``tf.nn.rnn_cell`` cell.
      inputs: ``float32 [batch, T, in]`` (``[T, batch, in]`` when ``time_major``).
      sequence_length: int ``[batch]``, or None to run every step.
      initial_state: the cell's state (``cell.zero_state(batch, dtype)`` when None).
      dtype: required when ``initial_state`` is None (TF's rule).
      parallel_iterations, swap_memory: accepted.
      time_major: inputs and outputs are ``[T, batch, ...]``.
      scope: the variable scope (default ``rnn``).

    Returns:
      ``outputs [batch, T, output_size]`` (zeros past each length) and the final state
      (``LSTMStateTuple(c, h)`` of an LSTM, a tuple per cell of a ``MultiRNNCell``).

    Raises:
      TypeError: ``cell`` is not a ``tf.nn.rnn_cell`` cell.
      ValueError: no ``initial_state`` and no ``dtype``; inputs not 3-D; a
        ``sequence_length`` of another batch size.
    """
    del parallel_iterations, swap_memory
    _check_cell(cell, "cell")
    if initial_state is None and dtype is None:
        raise ValueError("If there is no initial_state, you must give a dtype.")
    x = jnp.asarray(inputs, jnp.float32)
    if x.ndim != 3:
        raise ValueError(
            f"dynamic_rnn inputs must be [batch, time, depth] (or [time, batch, depth] with "
            f"time_major=True); got shape {tuple(x.shape)}."
        )
    if time_major:
        x = jnp.swapaxes(x, 0, 1)
    mask = _mask(sequence_length, x.shape[0], x.shape[1])
    scope_cm = _scope(scope, "rnn")
    with scope_cm:
        outputs, state = _run(cell, x, mask, initial_state, sequence_length is not None)
    return (jnp.swapaxes(outputs, 0, 1) if time_major else outputs), state


def _scope(scope: Any, default: str) -> contextlib.AbstractContextManager:
    name = getattr(scope, "name", scope)
    return _variables.variable_scope(name or default)


def _reverse(x: jnp.ndarray, sequence_length: Any) -> jnp.ndarray:
    """``tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)``: each row's first
    ``length`` steps reversed (all steps when ``sequence_length`` is None)."""
    steps = x.shape[1]
    if sequence_length is None:
        return x[:, ::-1]
    lengths = jnp.asarray(sequence_length, jnp.int32).reshape(-1, 1)
    t = jnp.arange(steps)[None, :]
    index = jnp.where(t < lengths, lengths - 1 - t, t)
    return jnp.take_along_axis(x, index[..., None], axis=1)


def bidirectional_dynamic_rnn(
    cell_fw,
    cell_bw,
    inputs,
    sequence_length=None,
    initial_state_fw=None,
    initial_state_bw=None,
    dtype=None,
    parallel_iterations=None,
    swap_memory=False,
    time_major=False,
    scope=None,
):
    """``tf.nn.bidirectional_dynamic_rnn``: ``((output_fw, output_bw), (state_fw,
    state_bw))``; variables under ``bidirectional_rnn/fw`` and ``bidirectional_rnn/bw``.

    ``output_bw`` is in the inputs' time order (its step ``t`` has read the sequence from
    its end back to ``t``); see :func:`dynamic_rnn` for the arguments.

    Raises:
      TypeError, ValueError: as :func:`dynamic_rnn`.
    """
    _check_cell(cell_fw, "cell_fw")
    _check_cell(cell_bw, "cell_bw")
    x = jnp.asarray(inputs, jnp.float32)
    if time_major and x.ndim == 3:
        x = jnp.swapaxes(x, 0, 1)
    with _scope(scope, "bidirectional_rnn"):
        out_fw, state_fw = dynamic_rnn(
            cell_fw, x, sequence_length, initial_state_fw, dtype, scope="fw"
        )
        out_bw, state_bw = dynamic_rnn(
            cell_bw, _reverse(x, sequence_length), sequence_length, initial_state_bw, dtype,
            scope="bw",
        )  # fmt: skip
    out_bw = _reverse(out_bw, sequence_length)
    if time_major:
        out_fw, out_bw = jnp.swapaxes(out_fw, 0, 1), jnp.swapaxes(out_bw, 0, 1)
    return (out_fw, out_bw), (state_fw, state_bw)
