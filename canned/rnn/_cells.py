"""Recurrent cells with Keras 2.15's arithmetic and variable names, and the masked recurrent
loop (``tf.keras.layers.RNN``) as one ``jax.lax.scan`` per layer.

A cell creates its variables with ``estimator.get_variable`` in the current variable scope
(``kernel``, ``recurrent_kernel``, ``bias``, Keras's initializers: ``glorot_uniform``,
``orthogonal``, zeros — an LSTM's forget-gate bias starts at 1) and computes one step::

    z = x @ kernel  (+ bias for GRU and SimpleRNN: precomputed for all steps at once)
    output, states = cell.step(params, z_t, states)

The cell protocol, for a custom cell given through ``rnn_cell_fn``: ``name`` (Keras's base
name, made unique per layer), ``state_size`` (a tuple of ints, the first one the output
size unless the cell has an ``output_size``), ``build(input_dim) -> params`` and
``project(params, x) -> z`` (``x`` ``[..., in]``; ``z`` any pytree of arrays with the same
leading axes), ``step(params, z_t, states) -> (output, states)``. :func:`scan` runs one
built cell over a sequence.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from estimator import initializers
from estimator.model import variables as est_variables

__all__ = ["GRUCell", "LSTMCell", "SimpleRNNCell", "StackedRNNCells", "rnn", "scan"]


def _kernel(name: str, shape: tuple[int, int]) -> jax.Array:
    return est_variables.get_variable(
        name, shape, jnp.float32, initializers.glorot_uniform_initializer()
    )


def _recurrent_kernel(shape: tuple[int, int]) -> jax.Array:
    return est_variables.get_variable(
        "recurrent_kernel", shape, jnp.float32, jax.nn.initializers.orthogonal()
    )


def _zero_bias(shape: tuple[int, ...]) -> jax.Array:
    return est_variables.get_variable("bias", shape, jnp.float32, initializers.zeros_initializer())


def _check_units(units: Any, cls: str) -> int:
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
        raise ValueError(
            f"Received an invalid value for argument `units`, expected a positive integer, "
            f"got {units} ({cls})."
        )
    return units


@dataclass(frozen=True)
class LSTMCell:
    """``tf.keras.layers.LSTMCell(units)``: gates ``i, f, c, o`` in that order,
    ``z = (x @ kernel + h @ recurrent_kernel) + bias``, sigmoid gates,
    ``c' = f·c + i·tanh(z_c)``, ``h' = o·tanh(c')``. Variables: ``kernel [in, 4u]``,
    ``recurrent_kernel [u, 4u]``, ``bias [4u]`` (forget gate's initialised to 1)."""

    units: int
    name = "lstm_cell"

    def __post_init__(self):
        _check_units(self.units, "LSTMCell")

    @property
    def state_size(self) -> tuple[int, int]:
        return (self.units, self.units)

    def build(self, input_dim: int) -> dict[str, jax.Array]:
        u = self.units

        def bias_init(key, shape, dtype):
            del key
            return jnp.concatenate([jnp.zeros(u), jnp.ones(u), jnp.zeros(2 * u)]).astype(dtype)

        return {
            "kernel": _kernel("kernel", (input_dim, 4 * u)),
            "recurrent_kernel": _recurrent_kernel((u, 4 * u)),
            "bias": est_variables.get_variable("bias", (4 * u,), jnp.float32, bias_init),
        }

    def project(self, params, x):
        return x @ params["kernel"]

    def step(self, params, z, states):
        h, c = states
        z = z + h @ params["recurrent_kernel"]
        z = z + params["bias"]
        z0, z1, z2, z3 = jnp.split(z, 4, axis=-1)
        i, f, o = jax.nn.sigmoid(z0), jax.nn.sigmoid(z1), jax.nn.sigmoid(z3)
        c = f * c + i * jnp.tanh(z2)
        h = o * jnp.tanh(c)
        return h, (h, c)


@dataclass(frozen=True)
class GRUCell:
    """``tf.keras.layers.GRUCell(units)`` (Keras 2's default ``reset_after=True``): gates
    ``z, r, h``; ``x_* = x @ kernel + input_bias``, ``r_* = h @ recurrent_kernel +
    recurrent_bias``, ``z = σ(x_z + r_z)``, ``r = σ(x_r + r_r)``,
    ``hh = tanh(x_h + r·r_h)``, ``h' = z·h + (1 - z)·hh``. Variables: ``kernel [in, 3u]``,
    ``recurrent_kernel [u, 3u]``, ``bias [2, 3u]`` (input and recurrent biases)."""

    units: int
    name = "gru_cell"

    def __post_init__(self):
        _check_units(self.units, "GRUCell")

    @property
    def state_size(self) -> tuple[int]:
        return (self.units,)

    def build(self, input_dim: int) -> dict[str, jax.Array]:
        u = self.units
        return {
            "kernel": _kernel("kernel", (input_dim, 3 * u)),
            "recurrent_kernel": _recurrent_kernel((u, 3 * u)),
            "bias": _zero_bias((2, 3 * u)),
        }

    def project(self, params, x):
        return x @ params["kernel"] + params["bias"][0]

    def step(self, params, z, states):
        (h,) = states
        x_z, x_r, x_h = jnp.split(z, 3, axis=-1)
        inner = h @ params["recurrent_kernel"] + params["bias"][1]
        r_z, r_r, r_h = jnp.split(inner, 3, axis=-1)
        gate_z = jax.nn.sigmoid(x_z + r_z)
        gate_r = jax.nn.sigmoid(x_r + r_r)
        hh = jnp.tanh(x_h + gate_r * r_h)
        h = gate_z * h + (1 - gate_z) * hh
        return h, (h,)


@dataclass(frozen=True)
class SimpleRNNCell:
    """``tf.keras.layers.SimpleRNNCell(units)``: ``h' = tanh((x @ kernel + bias) + h @
    recurrent_kernel)``. Variables: ``kernel [in, u]``, ``recurrent_kernel [u, u]``,
    ``bias [u]``."""

    units: int
    name = "simple_rnn_cell"

    def __post_init__(self):
        _check_units(self.units, "SimpleRNNCell")

    @property
    def state_size(self) -> tuple[int]:
        return (self.units,)

    def build(self, input_dim: int) -> dict[str, jax.Array]:
        u = self.units
        return {
            "kernel": _kernel("kernel", (input_dim, u)),
            "recurrent_kernel": _recurrent_kernel((u, u)),
            "bias": _zero_bias((u,)),
        }

    def project(self, params, x):
        return x @ params["kernel"] + params["bias"]

    def step(self, params, z, states):
        (h,) = states
        h = jnp.tanh(z + h @ params["recurrent_kernel"])
        return h, (h,)


@dataclass(frozen=True)
class StackedRNNCells:
    """``tf.keras.layers.StackedRNNCells(cells)``: each step runs the cells in order, the
    output of one being the input of the next. Variables live under
    ``stacked_rnn_cells/<cell name>`` (``lstm_cell``, ``lstm_cell_1``, ...)."""

    cells: tuple

    def __post_init__(self):
        object.__setattr__(self, "cells", tuple(self.cells))
        if not self.cells:
            raise ValueError("StackedRNNCells needs at least one cell.")
        for cell in self.cells:
            _check_cell(cell)


_PROTOCOL = ("name", "state_size", "build", "project", "step")


def _check_cell(cell: Any) -> None:
    missing = [a for a in _PROTOCOL if not hasattr(cell, a)]
    if missing:
        raise ValueError(
            f"RNN cell should have a `call` and `state_size` method. Here a cell is an object "
            f"with {', '.join(_PROTOCOL)} (see canned.rnn.LSTMCell); {cell!r} lacks "
            f"{', '.join(missing)}."
        )


def scan(
    cell: Any,
    params: Any,
    inputs: jax.Array,
    mask: jax.Array,
    initial_state: Any = None,
    zero_output_for_mask: bool = False,
) -> tuple[jax.Array, Any]:
    """One built cell over ``inputs [B, T, in]`` with ``mask [B, T]``: ``(outputs [B, T,
    out], final state)``, as one ``jax.lax.scan`` (``project`` runs once for all steps).

    At a masked step the state is kept and the output repeats the previous one (zeros before
    the first step: Keras's ``backend.rnn``), or is zeros with ``zero_output_for_mask``
    (TF 1's ``dynamic_rnn`` past ``sequence_length``). The state is a pytree whose leaves
    are ``[B, n]`` arrays: ``initial_state``, or zeros of ``cell.state_size`` (a tuple of
    ints, possibly nested). The output size is ``cell.output_size`` when the cell has one,
    else ``state_size[0]``. This is the hook ``estimator.compat``'s ``tf.nn.dynamic_rnn``
    runs TF 1's cells through.
    """
    z = cell.project(params, jnp.swapaxes(inputs, 0, 1))  # [T, B, k]: one matmul for all steps
    batch = inputs.shape[0]
    if initial_state is None:
        initial_state = jax.tree.map(lambda n: jnp.zeros((batch, n), inputs.dtype), cell.state_size)
    out_size = getattr(cell, "output_size", None) or cell.state_size[0]
    previous = jnp.zeros((batch, out_size), inputs.dtype)

    def body(carry, step_inputs):
        states, previous = carry
        z_t, m_t = step_inputs
        output, new_states = cell.step(params, z_t, states)
        keep = m_t[:, None]
        new_states = jax.tree.map(lambda n, s: jnp.where(keep, n, s), new_states, states)
        output = jnp.where(keep, output, 0.0 if zero_output_for_mask else previous)
        return (new_states, output), output

    carry = (initial_state, previous)
    (state, _), outputs = lax.scan(body, carry, (z, jnp.swapaxes(mask, 0, 1)))
    return jnp.swapaxes(outputs, 0, 1), state


def _scan_layer(cell, inputs: jax.Array, mask: jax.Array) -> jax.Array:
    """One cell over ``inputs [B, T, in]``: outputs ``[B, T, out]`` (Keras's masking)."""
    params = cell.build(inputs.shape[-1])
    return scan(cell, params, inputs, mask)[0]


def rnn(
    cell: Any,
    inputs: jax.typing.ArrayLike,
    mask: jax.typing.ArrayLike | None = None,
    return_sequences: bool = False,
    name: str | None = None,
) -> jax.Array:
    """``tf.keras.layers.RNN(cell, return_sequences)(inputs, mask=mask)`` inside
    ``model_fn``: the recurrent loop as ``jax.lax.scan`` (one per stacked cell).

    Variables are created in the variable scope ``name`` (default ``rnn``), then the
    cell's unique name: ``rnn/lstm_cell/kernel``; a :class:`StackedRNNCells` or a list of
    cells adds ``stacked_rnn_cells/``: ``rnn/stacked_rnn_cells/lstm_cell_1/kernel``.

    Args:
      cell: a cell, a list of cells or :class:`StackedRNNCells`.
      inputs: ``float32 [batch_size, T, input_dim]``.
      mask: ``bool [batch_size, T]``, True for the steps to run; None runs every step.
        A masked step keeps the states and repeats the previous output (Keras's
        ``zero_output_for_mask=False``).
      return_sequences: return every step's output instead of the last one.
      name: the layer's variable scope.

    Returns:
      ``[batch_size, units]`` (the last step's output), or ``[batch_size, T, units]``.

    Raises:
      ValueError: for an object that is not a cell, or inputs that are not 3-D.
    """
    inputs = jnp.asarray(inputs, jnp.float32)
    if inputs.ndim != 3:
        raise ValueError(
            f"RNN inputs must be [batch_size, T, features]; got shape {tuple(inputs.shape)}."
        )
    mask = (
        jnp.ones(inputs.shape[:2], bool)
        if mask is None
        else jnp.asarray(mask, bool).reshape(inputs.shape[:2])
    )
    stacked = isinstance(cell, StackedRNNCells | list | tuple)
    cells: Sequence[Any] = (
        cell.cells if isinstance(cell, StackedRNNCells) else cell if stacked else [cell]
    )
    for c in cells:
        _check_cell(c)
    with est_variables.variable_scope(name or "rnn"):
        stack_scope = (
            est_variables.variable_scope("stacked_rnn_cells")
            if stacked
            else contextlib.nullcontext()
        )
        with stack_scope:
            outputs = inputs
            for c in cells:
                with est_variables.variable_scope(est_variables.unique_name(c.name)):
                    outputs = _scan_layer(c, outputs, mask)
    return outputs if return_sequences else outputs[:, -1]
