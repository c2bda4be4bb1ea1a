"""``tf.contrib.rnn`` (TF 1.15): the cells of ``tf.nn.rnn_cell`` under their contrib names,
and ``LSTMBlockCell`` (the fused LSTM kernel: ``LSTMCell``'s arithmetic and variable names,
``lstm_cell/kernel`` and ``lstm_cell/bias``; ``use_peephole`` is its peepholes flag)."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1.rnn_cell import BasicLSTMCell as BasicLSTMCell
from estimator.compat.v1.rnn_cell import BasicRNNCell as BasicRNNCell
from estimator.compat.v1.rnn_cell import DropoutWrapper as DropoutWrapper
from estimator.compat.v1.rnn_cell import GRUCell as GRUCell
from estimator.compat.v1.rnn_cell import LSTMCell as LSTMCell
from estimator.compat.v1.rnn_cell import LSTMStateTuple as LSTMStateTuple
from estimator.compat.v1.rnn_cell import MultiRNNCell as MultiRNNCell
from estimator.compat.v1.rnn_cell import RNNCell as RNNCell

__all__ = [
    "BasicLSTMCell",
    "BasicRNNCell",
    "DropoutWrapper",
    "GRUCell",
    "LSTMBlockCell",
    "LSTMCell",
    "LSTMStateTuple",
    "MultiRNNCell",
    "RNNCell",
]

__getattr__ = module_getattr("tf.contrib.rnn", __name__)


class LSTMBlockCell(LSTMCell):
    """``tf.contrib.rnn.LSTMBlockCell(num_units, forget_bias=1.0, cell_clip=None,
    use_peephole=False)``: ``LSTMCell`` with the fused kernel's argument names."""

    def __init__(
        self,
        num_units: int,
        forget_bias: float = 1.0,
        cell_clip: float | None = None,
        use_peephole: bool = False,
        dtype=None,
        reuse=None,
        name: str = "lstm_cell",
    ):
        super().__init__(
            num_units,
            use_peepholes=use_peephole,
            cell_clip=cell_clip if cell_clip is not None and cell_clip > 0 else None,
            forget_bias=forget_bias,
            name=None if name == "lstm_cell" else name,
        )
