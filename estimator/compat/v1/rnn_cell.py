"""``tf.nn.rnn_cell`` (TF 1.15): TF 1's recurrent cells, with TF's arithmetic, variable
names and initializers, as cells of ``canned.rnn`` (its cell protocol: ``build``,
``project``, ``step``), which ``tf.nn.dynamic_rnn`` runs as one ``jax.lax.scan`` per layer.

* ``BasicRNNCell(u)``: ``h' = tanh([x, h] @ kernel + bias)``; ``kernel [in + u, u]``.
* ``GRUCell(u)``: ``r, z = σ([x, h] @ gates/kernel + gates/bias)`` (the bias starts at 1),
  ``c = tanh([x, r·h] @ candidate/kernel + candidate/bias)``, ``h' = z·h + (1 - z)·c``.
* ``BasicLSTMCell(u)`` / ``LSTMCell(u)``: gates ``i, j, f, o`` of ``[x, h] @ kernel +
  bias`` (``kernel [in + h, 4u]``), ``c' = σ(f + forget_bias)·c + σ(i)·tanh(j)``,
  ``h' = σ(o)·tanh(c')``; the state is ``LSTMStateTuple(c, h)``. ``LSTMCell`` adds
  peepholes (``w_f_diag``, ``w_i_diag``, ``w_o_diag``), ``cell_clip`` and a projection
  (``num_proj``: ``projection/kernel``, ``proj_clip``).
* ``MultiRNNCell(cells)``: the cells stacked (``multi_rnn_cell/cell_<i>/...``), the state a
  tuple of theirs. ``dynamic_rnn`` runs it layer by layer (the same numbers as TF's
  step-by-step stacking, one scan per layer).
* ``DropoutWrapper(cell, input_keep_prob, output_keep_prob)``: TF's dropout of the inputs
  and outputs of each step (``variational_recurrent``: one mask for all steps);
  ``state_keep_prob`` other than 1 is refused.

A cell is also callable for one step, as TF's: ``output, state = cell(inputs, state)``
creates (or reuses) its variables under the cell's name in the current scope;
``zero_state(batch_size, dtype)`` gives the initial state. Kernels take the variable scope's
initializer, else ``glorot_uniform`` (TF 1's ``get_variable`` default); biases start at zero
(a GRU's gates at one). Weights are not TF's bit for bit: they are drawn from JAX's random
numbers.
"""

from __future__ import annotations

import collections
from typing import Any

import jax
import jax.numpy as jnp

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1 import initializers as _initializers
from estimator.model import variables as _variables

__all__ = [
    "BasicLSTMCell",
    "BasicRNNCell",
    "DropoutWrapper",
    "GRUCell",
    "LSTMCell",
    "LSTMStateTuple",
    "MultiRNNCell",
    "RNNCell",
]

__getattr__ = module_getattr("tf.nn.rnn_cell", __name__)

LSTMStateTuple = collections.namedtuple("LSTMStateTuple", ["c", "h"])
LSTMStateTuple.__doc__ = "``tf.nn.rnn_cell.LSTMStateTuple(c, h)``: an LSTM's state."


def _activation(activation: Any):
    if activation is None:
        return jnp.tanh
    if isinstance(activation, str):
        return getattr(jax.nn, activation) if activation != "tanh" else jnp.tanh
    return activation


def _variable(name: str, shape: tuple, initializer=None) -> jax.Array:
    return _variables.get_variable(
        name, shape, jnp.float32, _initializers.resolve(initializer), None, True
    )


class RNNCell:
    """``tf.nn.rnn_cell.RNNCell``: the base of TF 1's cells (see the module docstring).

    A subclass gives ``_base_name``, ``state_size``, ``output_size``, ``build(input_dim)``,
    ``project(params, x)`` and ``step(params, z, state)`` (``canned.rnn``'s protocol).
    """

    _base_name = "rnn_cell"

    def __init__(self, name: str | None = None) -> None:
        self._given_name = name
        self._scope: str | None = None

    @property
    def name(self) -> str:
        """The cell's variable scope (TF's layer name)."""
        return self._given_name or self._base_name

    def scope_name(self) -> str:
        """The cell's scope in the current scope, fixed on first use (``lstm_cell``, then
        ``lstm_cell_1`` for another cell), so every call of one cell shares its variables."""
        if self._scope is None:
            self._scope = (
                self._given_name if self._given_name else _variables.unique_name(self._base_name)
            )
        return self._scope

    def zero_state(self, batch_size: int, dtype: Any = jnp.float32) -> Any:
        """``cell.zero_state(batch_size, dtype)``: zeros of ``state_size``."""
        return jax.tree.map(lambda n: jnp.zeros((int(batch_size), n), dtype), self.state_size)

    def __call__(self, inputs, state, scope=None):
        """One step: ``(output, new_state)`` for ``inputs [batch, in]``."""
        inputs = jnp.asarray(inputs, jnp.float32)
        with _variables.variable_scope(scope or self.scope_name()):
            params = self.build(inputs.shape[-1])
        return self.step(params, self.project(params, inputs), state)


class BasicRNNCell(RNNCell):
    """``tf.nn.rnn_cell.BasicRNNCell(num_units, activation=tanh)``."""

    _base_name = "basic_rnn_cell"

    def __init__(self, num_units: int, activation=None, reuse=None, name=None, dtype=None):
        super().__init__(name)
        self._units = int(num_units)
        self._act = _activation(activation)

    @property
    def state_size(self) -> int:
        return self._units

    @property
    def output_size(self) -> int:
        return self._units

    def build(self, input_dim: int) -> dict:
        u = self._units
        return {
            "kernel": _variable("kernel", (input_dim + u, u)),
            "bias": _variable("bias", (u,), _initializers.zeros_initializer()),
        }

    def project(self, params, x):
        return x @ params["kernel"][: x.shape[-1]] + params["bias"]

    def step(self, params, z, h):
        h = self._act(z + h @ params["kernel"][-self._units :])
        return h, h


class GRUCell(RNNCell):
    """``tf.nn.rnn_cell.GRUCell(num_units, activation=tanh)`` (TF 1's, not Keras's)."""

    _base_name = "gru_cell"

    def __init__(
        self,
        num_units: int,
        activation=None,
        reuse=None,
        kernel_initializer=None,
        bias_initializer=None,
        name=None,
        dtype=None,
    ):
        super().__init__(name)
        self._units = int(num_units)
        self._act = _activation(activation)
        self._kernel_init = kernel_initializer
        self._bias_init = bias_initializer

    @property
    def state_size(self) -> int:
        return self._units

    @property
    def output_size(self) -> int:
        return self._units

    def build(self, input_dim: int) -> dict:
        u = self._units
        gate_bias = self._bias_init or _initializers.constant_initializer(1.0)
        params = {}
        with _variables.variable_scope("gates"):
            params["gates/kernel"] = _variable("kernel", (input_dim + u, 2 * u), self._kernel_init)
            params["gates/bias"] = _variable("bias", (2 * u,), gate_bias)
        with _variables.variable_scope("candidate"):
            params["candidate/kernel"] = _variable("kernel", (input_dim + u, u), self._kernel_init)
            params["candidate/bias"] = _variable(
                "bias", (u,), self._bias_init or _initializers.zeros_initializer()
            )
        return params

    def project(self, params, x):
        n = x.shape[-1]
        gates = x @ params["gates/kernel"][:n] + params["gates/bias"]
        candidate = x @ params["candidate/kernel"][:n] + params["candidate/bias"]
        return gates, candidate

    def step(self, params, z, h):
        gates_x, candidate_x = z
        u = self._units
        value = jax.nn.sigmoid(gates_x + h @ params["gates/kernel"][-u:])
        r, update = jnp.split(value, 2, axis=-1)
        c = self._act(candidate_x + (r * h) @ params["candidate/kernel"][-u:])
        h = update * h + (1 - update) * c
        return h, h


class LSTMCell(RNNCell):
    """``tf.nn.rnn_cell.LSTMCell(num_units, use_peepholes=False, cell_clip=None,
    initializer=None, num_proj=None, proj_clip=None, forget_bias=1.0)``.

    Raises:
      ValueError: ``state_is_tuple=False`` (TF 1 deprecated it; the state is
        ``LSTMStateTuple(c, h)``).
    """

    _base_name = "lstm_cell"

    def __init__(
        self,
        num_units: int,
        use_peepholes: bool = False,
        cell_clip: float | None = None,
        initializer=None,
        num_proj: int | None = None,
        proj_clip: float | None = None,
        num_unit_shards=None,
        num_proj_shards=None,
        forget_bias: float = 1.0,
        state_is_tuple: bool = True,
        activation=None,
        reuse=None,
        name=None,
        dtype=None,
    ):
        super().__init__(name)
        if not state_is_tuple:
            raise ValueError(
                "state_is_tuple=False is not supported: the state is LSTMStateTuple(c, h) "
                "(TF 1 deprecated the concatenated state). Drop the argument."
            )
        self._units = int(num_units)
        self._peepholes = bool(use_peepholes)
        self._cell_clip = cell_clip
        self._init = initializer
        self._proj = None if num_proj is None else int(num_proj)
        self._proj_clip = proj_clip
        self._forget_bias = float(forget_bias)
        self._act = _activation(activation)

    @property
    def state_size(self) -> LSTMStateTuple:
        return LSTMStateTuple(self._units, self.output_size)

    @property
    def output_size(self) -> int:
        return self._proj or self._units

    def build(self, input_dim: int) -> dict:
        u, h = self._units, self.output_size
        params = {
            "kernel": _variable("kernel", (input_dim + h, 4 * u), self._init),
            "bias": _variable("bias", (4 * u,), _initializers.zeros_initializer()),
        }
        if self._peepholes:
            for name in ("w_f_diag", "w_i_diag", "w_o_diag"):
                params[name] = _variable(name, (u,), self._init)
        if self._proj is not None:
            with _variables.variable_scope("projection"):
                params["projection/kernel"] = _variable("kernel", (u, self._proj), self._init)
        return params

    def project(self, params, x):
        return x @ params["kernel"][: x.shape[-1]] + params["bias"]

    def step(self, params, z, state):
        c_prev, h_prev = state
        i, j, f, o = jnp.split(z + h_prev @ params["kernel"][-self.output_size :], 4, axis=-1)
        if self._peepholes:
            f = f + params["w_f_diag"] * c_prev
            i = i + params["w_i_diag"] * c_prev
        c = jax.nn.sigmoid(f + self._forget_bias) * c_prev + jax.nn.sigmoid(i) * self._act(j)
        if self._cell_clip is not None:
            c = jnp.clip(c, -self._cell_clip, self._cell_clip)
        if self._peepholes:
            o = o + params["w_o_diag"] * c
        h = jax.nn.sigmoid(o) * self._act(c)
        if self._proj is not None:
            h = h @ params["projection/kernel"]
            if self._proj_clip is not None:
                h = jnp.clip(h, -self._proj_clip, self._proj_clip)
        return h, LSTMStateTuple(c, h)


class BasicLSTMCell(LSTMCell):
    """``tf.nn.rnn_cell.BasicLSTMCell(num_units, forget_bias=1.0, activation=tanh)``."""

    _base_name = "basic_lstm_cell"

    def __init__(
        self,
        num_units: int,
        forget_bias: float = 1.0,
        state_is_tuple: bool = True,
        activation=None,
        reuse=None,
        name=None,
        dtype=None,
    ):
        super().__init__(
            num_units,
            forget_bias=forget_bias,
            state_is_tuple=state_is_tuple,
            activation=activation,
            name=name,
        )


class MultiRNNCell(RNNCell):
    """``tf.nn.rnn_cell.MultiRNNCell(cells)``: the cells stacked; the state is the tuple of
    theirs. Variables: ``multi_rnn_cell/cell_<i>/<cell's name>/...``.

    Raises:
      ValueError: no cells, or ``state_is_tuple=False``.
    """

    _base_name = "multi_rnn_cell"

    def __init__(self, cells, state_is_tuple: bool = True) -> None:
        super().__init__(None)
        self.cells = list(cells)
        if not self.cells:
            raise ValueError("Must specify at least one cell for MultiRNNCell.")
        if not state_is_tuple:
            raise ValueError(
                "state_is_tuple=False is not supported: the state is a tuple of the cells' "
                "states. Drop the argument."
            )

    @property
    def state_size(self) -> tuple:
        return tuple(cell.state_size for cell in self.cells)

    @property
    def output_size(self) -> int:
        return self.cells[-1].output_size

    def __call__(self, inputs, state, scope=None):
        """One step through every cell in turn."""
        output = jnp.asarray(inputs, jnp.float32)
        states = []
        with _variables.variable_scope(scope or self.scope_name()):
            for i, (cell, cell_state) in enumerate(zip(self.cells, state, strict=True)):
                with _variables.variable_scope(f"cell_{i}"):
                    output, new_state = cell(output, cell_state)
                states.append(new_state)
        return output, tuple(states)


class DropoutWrapper(RNNCell):
    """``tf.nn.rnn_cell.DropoutWrapper(cell, input_keep_prob=1.0, output_keep_prob=1.0)``:
    dropout (``tf.nn.dropout``, always active as TF's: pass 1.0 outside training) of each
    step's inputs and outputs; ``variational_recurrent=True`` keeps one mask per sequence.
    The cell's variables keep its own names.

    Raises:
      ValueError: ``state_keep_prob`` other than 1 or a ``dropout_state_filter_visitor``
        (not provided here).
    """

    def __init__(
        self,
        cell,
        input_keep_prob=1.0,
        output_keep_prob=1.0,
        state_keep_prob=1.0,
        variational_recurrent=False,
        input_size=None,
        dtype=None,
        seed=None,
        dropout_state_filter_visitor=None,
    ):
        super().__init__(None)
        if state_keep_prob != 1.0 or dropout_state_filter_visitor is not None:
            raise ValueError(
                "DropoutWrapper(state_keep_prob=...) is not supported here; drop the state's "
                "dropout, or use input_keep_prob / output_keep_prob."
            )
        self.cell = cell
        self._input_keep = input_keep_prob
        self._output_keep = output_keep_prob
        self._variational = bool(variational_recurrent)

    @property
    def name(self) -> str:
        return self.cell.name

    def scope_name(self) -> str:
        return self.cell.scope_name()

    @property
    def state_size(self):
        return self.cell.state_size

    @property
    def output_size(self) -> int:
        return self.cell.output_size

    def build(self, input_dim: int):
        return self.cell.build(input_dim)

    def _mask(self, shape: tuple, keep_prob) -> jax.Array | None:
        """``tf.nn.dropout``'s scaled keep mask (``1 / keep_prob`` or 0) of ``shape``."""
        if isinstance(keep_prob, int | float) and keep_prob == 1.0:
            return None
        drawn = shape[1:] if self._variational and len(shape) == 3 else shape  # [T, B, n]
        keep = jax.random.bernoulli(_variables.next_rng_key(), keep_prob, drawn)
        return jnp.broadcast_to(jnp.where(keep, 1.0 / keep_prob, 0.0), shape)

    def project(self, params, x):
        in_mask = self._mask(x.shape, self._input_keep)
        out_mask = self._mask((*x.shape[:-1], self.output_size), self._output_keep)
        z = self.cell.project(params, x if in_mask is None else x * in_mask)
        return z, out_mask

    def step(self, params, z, state):
        inner, out_mask = z
        output, state = self.cell.step(params, inner, state)
        return (output if out_mask is None else output * out_mask), state
