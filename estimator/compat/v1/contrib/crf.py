"""``tf.contrib.crf`` (TF 1.15): a linear-chain conditional random field, as
``jax.lax.scan`` s over time.

For unary scores ``inputs [batch, T, num_tags]``, tags ``[batch, T]`` and a transition
matrix ``transition_params [num_tags, num_tags]`` (``[from, to]``), over the first
``sequence_lengths[b]`` steps of each sequence:

* ``crf_sequence_score``: ``Σ_t inputs[t, tag_t] + Σ_{t≥1} transitions[tag_{t-1}, tag_t]``;
* ``crf_log_norm``: the log of the sum over all tag sequences of ``exp(score)`` (the forward
  algorithm; 0 for a sequence of length 0, as TF's);
* ``crf_log_likelihood``: their difference, and the transitions (created as
  ``get_variable("transitions", [num_tags, num_tags])`` when not given, as TF's);
* ``crf_decode``: the highest scoring tags (Viterbi) and their score, in the graph;
  ``viterbi_decode``: the same for one sequence in NumPy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from estimator.compat._unsupported import module_getattr
from estimator.model import variables as _variables

__all__ = [
    "crf_binary_score",
    "crf_decode",
    "crf_log_likelihood",
    "crf_log_norm",
    "crf_sequence_score",
    "crf_unary_score",
    "viterbi_decode",
]

__getattr__ = module_getattr("tf.contrib.crf", __name__)


def _mask(sequence_lengths, steps: int) -> jax.Array:
    return jnp.arange(steps)[None, :] < jnp.asarray(sequence_lengths, jnp.int32)[:, None]


def crf_unary_score(tag_indices, sequence_lengths, inputs) -> jax.Array:
    """``Σ_{t < length} inputs[b, t, tag_indices[b, t]]``: ``[batch]``."""
    inputs = jnp.asarray(inputs, jnp.float32)
    tags = jnp.asarray(tag_indices, jnp.int32)
    picked = jnp.take_along_axis(inputs, tags[..., None], axis=-1)[..., 0]
    return jnp.sum(jnp.where(_mask(sequence_lengths, inputs.shape[1]), picked, 0.0), axis=1)


def crf_binary_score(tag_indices, sequence_lengths, transition_params) -> jax.Array:
    """``Σ_{1 ≤ t < length} transition_params[tag_{t-1}, tag_t]``: ``[batch]``."""
    tags = jnp.asarray(tag_indices, jnp.int32)
    trans = jnp.asarray(transition_params, jnp.float32)
    pairs = trans[tags[:, :-1], tags[:, 1:]]
    mask = _mask(sequence_lengths, tags.shape[1])[:, 1:]
    return jnp.sum(jnp.where(mask, pairs, 0.0), axis=1)


def crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params) -> jax.Array:
    """``tf.contrib.crf.crf_sequence_score``: the score of the given tags, ``[batch]``."""
    return crf_unary_score(tag_indices, sequence_lengths, inputs) + crf_binary_score(
        tag_indices, sequence_lengths, transition_params
    )


def crf_log_norm(inputs, sequence_lengths, transition_params) -> jax.Array:
    """``tf.contrib.crf.crf_log_norm``: the log partition function, ``[batch]`` (0 where
    the length is 0)."""
    inputs = jnp.asarray(inputs, jnp.float32)
    trans = jnp.asarray(transition_params, jnp.float32)
    lengths = jnp.asarray(sequence_lengths, jnp.int32)
    mask = _mask(lengths, inputs.shape[1])

    def step(alphas, x):
        scores_t, keep = x
        new = jax.nn.logsumexp(alphas[:, :, None] + trans[None], axis=1) + scores_t
        return jnp.where(keep[:, None], new, alphas), None

    rest = (jnp.swapaxes(inputs[:, 1:], 0, 1), jnp.swapaxes(mask[:, 1:], 0, 1))
    alphas, _ = lax.scan(step, inputs[:, 0], rest)
    return jnp.where(lengths <= 0, 0.0, jax.nn.logsumexp(alphas, axis=1))


def crf_log_likelihood(inputs, tag_indices, sequence_lengths, transition_params=None):
    """``tf.contrib.crf.crf_log_likelihood``: ``(log_likelihood [batch],
    transition_params)``; the transitions are the variable ``transitions`` of the current
    scope when not given (inside ``model_fn``).
    """
    inputs = jnp.asarray(inputs, jnp.float32)
    if transition_params is None:
        n = inputs.shape[2]
        transition_params = _variables.get_variable("transitions", (n, n), jnp.float32)
    score = crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params)
    return score - crf_log_norm(inputs, sequence_lengths, transition_params), transition_params


def crf_decode(potentials, transition_params, sequence_length):
    """``tf.contrib.crf.crf_decode``: ``(decode_tags int32 [batch, T], best_score
    [batch])``, the Viterbi path of each sequence within its length (tags past the length
    are 0)."""
    potentials = jnp.asarray(potentials, jnp.float32)
    trans = jnp.asarray(transition_params, jnp.float32)
    lengths = jnp.asarray(sequence_length, jnp.int32)
    steps = potentials.shape[1]
    mask = _mask(lengths, steps)

    def forward(state, x):
        scores_t, keep = x
        candidates = state[:, :, None] + trans[None]
        new = scores_t + jnp.max(candidates, axis=1)
        pointers = jnp.argmax(candidates, axis=1).astype(jnp.int32)
        return jnp.where(keep[:, None], new, state), pointers

    rest = (jnp.swapaxes(potentials[:, 1:], 0, 1), jnp.swapaxes(mask[:, 1:], 0, 1))
    final, pointers = lax.scan(forward, potentials[:, 0], rest)  # pointers [T-1, B, N]
    last = jnp.argmax(final, axis=1).astype(jnp.int32)

    def backward(tag, x):
        pointers_t, t = x  # the pointers into step t - 1 from step t
        previous = jnp.take_along_axis(pointers_t, tag[:, None], axis=1)[:, 0]
        inside = t < lengths  # step t is within the sequence: follow its pointer
        new = jnp.where(inside, previous, tag)
        return new, new

    ts = jnp.arange(steps - 1, 0, -1)
    _, earlier = lax.scan(backward, last, (pointers[::-1], ts))
    tags = jnp.concatenate([earlier[::-1], last[None]], axis=0).T  # [B, T]
    return jnp.where(mask, tags, 0), jnp.max(final, axis=1)


def viterbi_decode(score, transition_params) -> tuple[list[int], float]:
    """``tf.contrib.crf.viterbi_decode``: the best tags of one sequence (``score [T,
    num_tags]``, NumPy) and their score."""
    score = np.asarray(score, np.float64)
    trans = np.asarray(transition_params, np.float64)
    trellis = np.zeros_like(score)
    backpointers = np.zeros_like(score, dtype=np.int32)
    trellis[0] = score[0]
    for t in range(1, score.shape[0]):
        v = trellis[t - 1][:, None] + trans
        trellis[t] = score[t] + np.max(v, axis=0)
        backpointers[t] = np.argmax(v, axis=0)
    viterbi = [int(np.argmax(trellis[-1]))]
    for bp in reversed(backpointers[1:]):
        viterbi.append(int(bp[viterbi[-1]]))
    viterbi.reverse()
    return viterbi, float(np.max(trellis[-1]))
