"""TF 1's learning-rate decays (``tf.compat.v1.train.exponential_decay`` and friends).

Each takes the global step (``tf.train.get_global_step()`` inside ``model_fn``: a traced
int32) and returns the decayed rate as a float32 array, computed as TF 2.15's Keras
schedules that these TF 1 functions call (``learning_rate_schedule.py``), step by step in
float32. Pass the result to an optimizer or to ``tf.summary.scalar``; the optimizer reads it
in the same step, so the rate of step ``t`` uses ``t``, the global step before the update,
as in TF.

Raises (all): ``ValueError("global_step is required for <fn>.")`` when ``global_step`` is
None, as TF.
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from estimator.compat.v1._base import named

__all__ = [
    "exponential_decay",
    "natural_exp_decay",
    "inverse_time_decay",
    "piecewise_constant",
    "piecewise_constant_decay",
    "polynomial_decay",
    "cosine_decay",
    "cosine_decay_restarts",
    "linear_cosine_decay",
]


def _f32(x):
    return jnp.asarray(x, jnp.float32)


def _step(global_step, fn: str):
    if global_step is None:
        raise ValueError(f"global_step is required for {fn}.")
    return _f32(global_step)


def exponential_decay(
    learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None
):
    """``lr · decay_rate ^ (step / decay_steps)`` (the exponent floored with
    ``staircase``)."""
    p = _step(global_step, "exponential_decay") / _f32(decay_steps)
    if staircase:
        p = jnp.floor(p)
    return named(_f32(learning_rate) * jnp.power(_f32(decay_rate), p), name)


def natural_exp_decay(
    learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None
):
    """``lr · exp(-decay_rate) ^ (step / decay_steps)``."""
    p = _step(global_step, "natural_exp_decay") / _f32(decay_steps)
    if staircase:
        p = jnp.floor(p)
    rate = jnp.exp(-_f32(decay_rate))
    return named(_f32(learning_rate) * jnp.power(rate, p), name)


def inverse_time_decay(
    learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None
):
    """``lr / (1 + decay_rate · step / decay_steps)``."""
    p = _step(global_step, "inverse_time_decay") / _f32(decay_steps)
    if staircase:
        p = jnp.floor(p)
    return named(_f32(learning_rate) / (1.0 + _f32(decay_rate) * p), name)


def piecewise_constant(x, boundaries, values, name=None):
    """``values[0]`` while ``x <= boundaries[0]``, ``values[i]`` while
    ``boundaries[i-1] < x <= boundaries[i]``, ``values[-1]`` after the last boundary.

    Raises:
      ValueError: ``len(values) != len(boundaries) + 1`` (TF's message).
    """
    if len(boundaries) != len(values) - 1:
        raise ValueError("The length of boundaries should be 1 less than the length of values")
    x = jnp.asarray(x)
    out = jnp.asarray(values[0])
    dtype = jnp.result_type(*[jnp.asarray(v) for v in values])
    out = out.astype(dtype)
    for boundary, value in zip(boundaries, values[1:], strict=True):
        out = jnp.where(x > jnp.asarray(boundary, x.dtype), jnp.asarray(value, dtype), out)
    return named(out, name)


piecewise_constant_decay = piecewise_constant


def polynomial_decay(
    learning_rate,
    global_step,
    decay_steps,
    end_learning_rate=0.0001,
    power=1.0,
    cycle=False,
    name=None,
):
    """``(lr - end) · (1 - step / decay_steps) ^ power + end``; with ``cycle`` the period
    grows to the first multiple of ``decay_steps`` above the step, else the step stops at
    ``decay_steps``."""
    step = _step(global_step, "polynomial_decay")
    lr = _f32(learning_rate)
    end = _f32(end_learning_rate)
    steps = _f32(decay_steps)
    if cycle:
        multiplier = jnp.where(step == 0, 1.0, jnp.ceil(step / decay_steps))
        steps = steps * multiplier
    else:
        step = jnp.minimum(step, steps)
    p = step / steps
    return named((lr - end) * jnp.power(1 - p, _f32(power)) + end, name)


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0, name=None):
    """``lr · ((1 - alpha) · 0.5 (1 + cos(π min(step, decay_steps) / decay_steps)) +
    alpha)`` (Loshchilov & Hutter, 2017)."""
    steps = _f32(decay_steps)
    step = jnp.minimum(_step(global_step, "cosine_decay"), steps)
    cosine = 0.5 * (1.0 + jnp.cos(_f32(math.pi) * (step / steps)))
    return named(_f32(learning_rate) * ((1 - alpha) * cosine + alpha), name)


def cosine_decay_restarts(
    learning_rate, global_step, first_decay_steps, t_mul=2.0, m_mul=1.0, alpha=0.0, name=None
):
    """Cosine decay with warm restarts (SGDR): periods grow by ``t_mul``, peaks by
    ``m_mul``."""
    fraction = _step(global_step, "cosine_decay_restarts") / _f32(first_decay_steps)
    geometric = float(t_mul) != 1.0  # TF chooses with tf.cond; t_mul is a number here
    t_mul, m_mul, alpha = _f32(t_mul), _f32(m_mul), _f32(alpha)
    if not geometric:
        restart = jnp.floor(fraction)
        fraction = fraction - restart
    else:
        restart = jnp.floor(jnp.log(1.0 - fraction * (1.0 - t_mul)) / jnp.log(t_mul))
        total = (1.0 - t_mul**restart) / (1.0 - t_mul)
        fraction = (fraction - total) / t_mul**restart
    cosine = 0.5 * m_mul**restart * (1.0 + jnp.cos(_f32(math.pi) * fraction))
    return named(_f32(learning_rate) * ((1 - alpha) * cosine + alpha), name)


def linear_cosine_decay(
    learning_rate, global_step, decay_steps, num_periods=0.5, alpha=0.0, beta=0.001, name=None
):
    """``lr · ((alpha + linear) · cosine + beta)`` with ``linear = (decay_steps - step) /
    decay_steps`` and ``cosine = 0.5 (1 + cos(2π num_periods step / decay_steps))``."""
    steps = _f32(decay_steps)
    step = jnp.minimum(_step(global_step, "linear_cosine_decay"), steps)
    linear = (steps - step) / steps
    fraction = 2.0 * num_periods * (step / steps)
    cosine = 0.5 * (1.0 + jnp.cos(_f32(math.pi) * fraction))
    return named(_f32(learning_rate) * ((alpha + linear) * cosine + beta), name)
