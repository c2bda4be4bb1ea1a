"""TF 1's recurrent cells (``tf.nn.rnn_cell``, ``tf.contrib.rnn``) with
``tf.nn.dynamic_rnn`` / ``bidirectional_dynamic_rnn``, and ``tf.contrib.crf``.

Expected values come from NumPy re-implementations of TF 1's cell formulas
(``rnn_cell_impl.py``) and from enumerating every tag sequence for the CRF; variable names
and shapes are TF 2.15.1's (``tf.compat.v1`` in graph mode, listed by
``tf.global_variables()``). The cells also matched TF 2.15.1's ``dynamic_rnn`` outputs from
the same weights to 1.2e-7 when written.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import estimator.compat.v1 as tf
from estimator.model import variables as V

RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 3, 4)).astype(np.float32)  # [batch, time, depth]
LENGTHS = np.array([3, 2], np.int32)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _lstm(w, x, c, h, forget_bias=1.0):  # rnn_cell_impl.BasicLSTMCell.call
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ w["kernel"] + w["bias"], 4, axis=1)
    c = c * _sigmoid(f + forget_bias) + _sigmoid(i) * np.tanh(j)
    return np.tanh(c) * _sigmoid(o), c


def _gru(w, x, h):  # rnn_cell_impl.GRUCell.call
    gates = _sigmoid(np.concatenate([x, h], 1) @ w["gates/kernel"] + w["gates/bias"])
    r, u = np.split(gates, 2, axis=1)
    c = np.tanh(np.concatenate([x, r * h], 1) @ w["candidate/kernel"] + w["candidate/bias"])
    return u * h + (1 - u) * c


def _reference(step, weights, x, lengths, size, lstm):
    """TF 1's dynamic_rnn: zero outputs past each length, the state of the last step."""
    batch, steps, _ = x.shape
    h, c = np.zeros((batch, size)), np.zeros((batch, size))
    outputs = np.zeros((batch, steps, size))
    for t in range(steps):
        new = step(weights, x[:, t], c, h) if lstm else (step(weights, x[:, t], h), c)
        live = (t < lengths)[:, None]
        h, c = np.where(live, new[0], h), np.where(live, new[1], c)
        outputs[:, t] = np.where(live, h, 0.0)
    return outputs, (c, h)


def _run(fn, weights):
    """``fn()`` reading ``weights`` as its variables, compiled (one program, not op by op)."""

    def apply(values):
        with V.transform_context(V.Frame(V.APPLY, jax.random.key(0), 0, trainable=values)):
            return fn()

    return jax.jit(apply)({k: jnp.asarray(v) for k, v in weights.items()})


def _init(fn):
    """``(fn()'s result, the variables it created)``, compiled."""

    def init():
        frame = V.Frame(V.INIT, jax.random.key(0), 0)
        with V.transform_context(frame):
            return fn(), frame.trainable

    return jax.jit(init)()


def _names(fn) -> dict:
    _, variables = jax.eval_shape(lambda: _init_shapes(fn))
    return {name: tuple(v.shape) for name, v in variables.items()}


def _init_shapes(fn):
    frame = V.Frame(V.INIT, jax.random.key(0), 0)
    with V.transform_context(frame):
        return fn(), frame.trainable


def test_lstm_and_gru_cells_follow_tfs_formulas_names_and_lengths():
    lstm = lambda: tf.nn.dynamic_rnn(  # noqa: E731
        tf.nn.rnn_cell.BasicLSTMCell(5), X, sequence_length=LENGTHS, dtype=tf.float32
    )
    # TF 2.15.1: rnn/basic_lstm_cell/kernel [9, 20] (input 4 + units 5), bias [20].
    assert _names(lstm) == {
        "rnn/basic_lstm_cell/kernel": (9, 20),
        "rnn/basic_lstm_cell/bias": (20,),
    }
    w = {"kernel": RNG.uniform(-0.5, 0.5, (9, 20)), "bias": RNG.uniform(-0.5, 0.5, 20)}
    outputs, state = _run(
        lstm, {f"rnn/basic_lstm_cell/{k}": v.astype(np.float32) for k, v in w.items()}
    )
    expected, (c, h) = _reference(_lstm, w, X, LENGTHS, 5, lstm=True)
    np.testing.assert_allclose(outputs, expected, atol=2e-6)
    assert isinstance(state, tf.nn.rnn_cell.LSTMStateTuple)
    np.testing.assert_allclose(state.c, c, atol=2e-6)
    np.testing.assert_allclose(state.h, h, atol=2e-6)
    assert np.all(np.asarray(outputs)[1, 2] == 0)  # past the second sequence's length

    gru = lambda: tf.nn.dynamic_rnn(  # noqa: E731
        tf.contrib.rnn.GRUCell(5), X, sequence_length=LENGTHS, dtype=tf.float32, scope="enc"
    )
    assert _names(gru) == {
        "enc/gru_cell/gates/kernel": (9, 10),
        "enc/gru_cell/gates/bias": (10,),
        "enc/gru_cell/candidate/kernel": (9, 5),
        "enc/gru_cell/candidate/bias": (5,),
    }
    shapes = {
        "gates/kernel": (9, 10),
        "gates/bias": (10,),
        "candidate/kernel": (9, 5),
        "candidate/bias": (5,),
    }
    wg = {k: RNG.uniform(-0.5, 0.5, s).astype(np.float32) for k, s in shapes.items()}
    outputs, state = _run(gru, {f"enc/gru_cell/{k}": v for k, v in wg.items()})
    expected, (_, h) = _reference(lambda w_, x, h_: _gru(w_, x, h_), wg, X, LENGTHS, 5, lstm=False)
    np.testing.assert_allclose(outputs, expected, atol=2e-6)
    np.testing.assert_allclose(state, h, atol=2e-6)


def test_gru_gate_bias_starts_at_one_and_lstm_options_add_tfs_variables():
    def build():
        tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(3), X, dtype=tf.float32)
        cell = tf.nn.rnn_cell.LSTMCell(5, use_peepholes=True, num_proj=2)
        return tf.nn.dynamic_rnn(cell, X, dtype=tf.float32, scope="proj")

    (outputs, state), variables = _init(build)
    np.testing.assert_array_equal(variables["rnn/gru_cell/gates/bias"], np.ones(6))
    np.testing.assert_array_equal(variables["rnn/gru_cell/candidate/bias"], np.zeros(3))
    # TF 2.15.1's LSTMCell(num_proj=2): kernel [4 + 2, 20], projection/kernel [5, 2].
    assert variables["proj/lstm_cell/kernel"].shape == (6, 20)
    assert variables["proj/lstm_cell/projection/kernel"].shape == (5, 2)
    assert variables["proj/lstm_cell/w_f_diag"].shape == (5,)
    assert outputs.shape == (2, 3, 2) and state.c.shape == (2, 5) and state.h.shape == (2, 2)


def test_multi_rnn_cell_stacks_layers_with_tfs_names_and_tuple_state():
    cell = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.LSTMCell(5), tf.nn.rnn_cell.GRUCell(3)])
    names = _names(lambda: tf.nn.dynamic_rnn(cell, X, dtype=tf.float32))
    assert sorted(names) == [  # TF 2.15.1's names
        "rnn/multi_rnn_cell/cell_0/lstm_cell/bias",
        "rnn/multi_rnn_cell/cell_0/lstm_cell/kernel",
        "rnn/multi_rnn_cell/cell_1/gru_cell/candidate/bias",
        "rnn/multi_rnn_cell/cell_1/gru_cell/candidate/kernel",
        "rnn/multi_rnn_cell/cell_1/gru_cell/gates/bias",
        "rnn/multi_rnn_cell/cell_1/gru_cell/gates/kernel",
    ]
    assert names["rnn/multi_rnn_cell/cell_1/gru_cell/gates/kernel"] == (5 + 3, 6)
    weights = {n: RNG.uniform(-0.5, 0.5, s).astype(np.float32) for n, s in names.items()}

    def layered():  # the same cells run one dynamic_rnn after the other
        out, first = tf.nn.dynamic_rnn(tf.nn.rnn_cell.LSTMCell(5), X, LENGTHS, dtype=tf.float32)
        out, second = tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(3), out, LENGTHS, dtype=tf.float32)
        return out, (first, second)

    prefix = "rnn/multi_rnn_cell/"
    stacked = _run(lambda: tf.nn.dynamic_rnn(cell, X, LENGTHS, dtype=tf.float32), weights)
    renamed = {n.replace(prefix + "cell_0/", "rnn/").replace(prefix + "cell_1/", "rnn/"): v
               for n, v in weights.items()}  # fmt: skip
    separate = _run(layered, renamed)
    np.testing.assert_allclose(stacked[0], separate[0], atol=1e-6)
    assert isinstance(stacked[1], tuple) and len(stacked[1]) == 2
    np.testing.assert_allclose(stacked[1][1], separate[1][1], atol=1e-6)


def test_bidirectional_reads_each_sequence_backwards_within_its_length():
    def run():
        return tf.nn.bidirectional_dynamic_rnn(
            tf.nn.rnn_cell.GRUCell(4), tf.nn.rnn_cell.GRUCell(4), X, LENGTHS, dtype=tf.float32
        )

    names = _names(run)
    assert "bidirectional_rnn/fw/gru_cell/gates/kernel" in names  # TF 2.15.1's names
    assert "bidirectional_rnn/bw/gru_cell/candidate/bias" in names
    weights = {n: RNG.uniform(-0.5, 0.5, s).astype(np.float32) for n, s in names.items()}
    (fw, bw), (state_fw, state_bw) = _run(run, weights)
    backward = {
        n.replace("bidirectional_rnn/bw/", "rnn/"): v for n, v in weights.items() if "/bw/" in n
    }
    for b, length in enumerate(LENGTHS):  # the backward cell on the reversed sequence alone
        reversed_x = X[b : b + 1, :length][:, ::-1]
        out, state = _run(
            lambda x=reversed_x: tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(4), x, dtype=tf.float32),
            backward,
        )
        np.testing.assert_allclose(bw[b, :length], np.asarray(out)[0, ::-1], atol=1e-6)
        np.testing.assert_allclose(state_bw[b], np.asarray(state)[0], atol=1e-6)
    assert fw.shape == (2, 3, 4) and np.all(np.asarray(bw)[1, 2] == 0)


def test_cells_are_callable_per_step_and_dropout_wraps_them():
    def build():
        cell = tf.contrib.rnn.BasicLSTMCell(5)
        state = cell.zero_state(2, tf.float32)
        for t in range(3):  # one variable set, reused on every call
            output, state = cell(X[:, t], state)
        wrapped = tf.nn.rnn_cell.DropoutWrapper(tf.nn.rnn_cell.GRUCell(4), output_keep_prob=0.5)
        return output, state, tf.nn.dynamic_rnn(wrapped, X, dtype=tf.float32)[0]

    (output, state, outputs), variables = _init(build)
    assert sorted(variables) == [
        "basic_lstm_cell/bias",
        "basic_lstm_cell/kernel",
        "rnn/gru_cell/candidate/bias",
        "rnn/gru_cell/candidate/kernel",
        "rnn/gru_cell/gates/bias",
        "rnn/gru_cell/gates/kernel",
    ]
    assert output.shape == (2, 5) and isinstance(state, tf.nn.rnn_cell.LSTMStateTuple)
    values = np.asarray(outputs)
    assert np.any(values == 0) and np.all(np.abs(values) <= 2.0)  # dropped or doubled


def test_dynamic_rnn_errors_are_tfs():
    with V.transform_context(V.Frame(V.INIT, jax.random.key(0), 0)):
        with pytest.raises(ValueError, match="If there is no initial_state, you must give a dtype"):
            tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(3), X)
        with pytest.raises(TypeError, match="must be an instance of RNNCell"):
            tf.nn.dynamic_rnn(object(), X, dtype=tf.float32)
        with pytest.raises(ValueError, match="state_keep_prob"):
            tf.nn.rnn_cell.DropoutWrapper(tf.nn.rnn_cell.GRUCell(3), state_keep_prob=0.5)


def test_crf_log_likelihood_and_decode_match_enumeration():
    batch, steps, tags = 3, 4, 3
    scores = RNG.normal(size=(batch, steps, tags)).astype(np.float32)
    transitions = RNG.normal(size=(tags, tags)).astype(np.float32)
    lengths = np.array([4, 2, 1])
    gold = RNG.integers(0, tags, size=(batch, steps))
    log_likelihood, decoded, best = jax.jit(
        lambda s, g, n, a: (
            tf.contrib.crf.crf_log_likelihood(s, g, n, a)[0],
            *tf.contrib.crf.crf_decode(s, a, n),
        )
    )(scores, gold, lengths, transitions)
    for b, length in enumerate(lengths):
        every = {}
        for tags_ in itertools.product(range(tags), repeat=int(length)):
            unary = sum(scores[b, t, tags_[t]] for t in range(length))
            every[tags_] = unary + sum(
                transitions[tags_[t - 1], tags_[t]] for t in range(1, length)
            )
        log_z = np.log(np.sum(np.exp(list(every.values()))))
        np.testing.assert_allclose(
            log_likelihood[b], every[tuple(gold[b, :length])] - log_z, atol=1e-5
        )
        path = max(every, key=every.get)
        assert tuple(np.asarray(decoded)[b, :length]) == path
        np.testing.assert_allclose(best[b], every[path], atol=1e-5)
        assert tf.contrib.crf.viterbi_decode(scores[b, :length], transitions)[0] == list(path)
    assert np.all(np.asarray(decoded)[1, 2:] == 0)  # past the length
    created = _names(lambda: tf.contrib.crf.crf_log_likelihood(scores, gold, lengths))
    assert created == {"transitions": (3, 3)}  # the variable TF creates
