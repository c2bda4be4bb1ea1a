"""SDCA's loss updaters: TF's ``DualLossUpdater``s (``tensorflow/core/kernels/
{logistic,squared,hinge,smooth-hinge,poisson}-loss.h``), in ``jnp`` on scalars.

Each loss gives the dual coordinate step of one example — the new dual value maximizing
the dual objective with the others fixed, with the CoCoA+ factor ``num_loss_partitions``
(Ma et al., https://arxiv.org/abs/1502.03508) — and the primal and dual losses recorded in
the example's state (for the duality gap). Labels of the classification losses are 0/1 and
are used as -1/+1. Arguments: ``p`` num_loss_partitions, ``y`` label, ``s`` example
weight, ``a`` current dual, ``wx`` the example's logit, ``q`` its squared norm divided by
the l2 regularization.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

_NEWTON_STEPS = 10  # TF: "Newton algorithm converges quadratically so 10 steps ..."


class DualLoss(NamedTuple):
    """One SDCA loss (TF's ``DualLossUpdater``)."""

    update_dual: object  # (p, y, s, a, wx, q) -> new dual
    primal_loss: object  # (wx, y, s) -> loss
    dual_loss: object  # (a, y, s) -> conjugate loss
    derivative: object  # (wx, y, s) -> d loss / d wx
    smoothness: float  # 1 / Lipschitz constant of the derivative
    binary: bool  # labels 0/1, used as -1/+1


def _logistic_update(p, y, s, a, wx, q):
    c = p * q * s

    def newton(x):
        tanhx = jnp.tanh(x)
        numerator = -2 * y * x - wx - c * (0.5 * (1 + tanhx) / y - a)
        denominator = -2 * y - c * (1 - tanhx * tanhx) * 0.5 / y
        return x - numerator / denominator

    x = jnp.zeros_like(wx)
    for _ in range(_NEWTON_STEPS):
        x = newton(x)
    return 0.5 * (1 + jnp.tanh(x)) / y


def _logistic_dual_loss(a, y, s):
    ay = a * y
    log_ay = jnp.where(ay > 0, jnp.log(jnp.where(ay > 0, ay, 1.0)), 0.0)
    one_minus = 1 - ay
    log_one_minus = jnp.where(one_minus > 0, jnp.log(jnp.where(one_minus > 0, one_minus, 1.0)), 0.0)
    return (ay * log_ay + one_minus * log_one_minus) * s


def _logistic_primal_loss(wx, y, s):
    y_wx = y * wx
    return jnp.where(y_wx > 0, jnp.log1p(jnp.exp(-y_wx)), jnp.log1p(jnp.exp(y_wx)) - y_wx) * s


def _logistic_derivative(wx, y, s):
    term = jnp.where(
        y * wx > 0, jnp.exp(-y * wx) / (1 + jnp.exp(-y * wx)), 1 / (1 + jnp.exp(y * wx))
    )
    return -term * y * s


def _squared_update(p, y, s, a, wx, q):
    return a + (y - a - wx) / (1 + p * q * s)


def _hinge_clip(y, candidate):
    return jnp.where(y * candidate < 0, 0.0, jnp.where(y * candidate > 1.0, y, candidate))


def _hinge_update(p, y, s, a, wx, q):
    return _hinge_clip(y, a + (y - wx) / (p * s * q))


def _hinge_dual_loss(a, y, s):
    ya = a * y
    return jnp.where((ya < 0) | (ya > 1.0), jnp.inf, -ya * s)


_GAMMA = 1.0  # TF's smooth hinge smoothness (not exposed in TF either)


def _smooth_hinge_update(p, y, s, a, wx, q):
    return _hinge_clip(y, a + (y - wx - _GAMMA * a) / (p * s * q + _GAMMA))


def _smooth_hinge_dual_loss(a, y, s):
    ya = a * y
    return jnp.where((ya < 0) | (ya > 1.0), jnp.inf, (-ya + 0.5 * _GAMMA * a * a) * s)


def _smooth_hinge_primal_loss(wx, y, s):
    y_wx = y * wx
    return jnp.where(
        y_wx >= 1,
        0.0,
        jnp.where(
            y_wx <= 1 - _GAMMA,
            (1 - y_wx - _GAMMA / 2) * s,
            (1 - y_wx) * (1 - y_wx) * s * 0.5 / _GAMMA,
        ),
    )


def _smooth_hinge_derivative(wx, y, s):
    del s  # TF's smooth hinge derivative ignores the weight
    return jnp.where(y * wx >= 1, 0.0, jnp.where(y * wx <= 1 - _GAMMA, -y, (wx - y) / _GAMMA))


def _poisson_update(p, y, s, a, wx, q):
    c = p * q * s
    y_minus_a = y - a
    x = jnp.where(y_minus_a > 0, jnp.log(jnp.where(y_minus_a > 0, y_minus_a, 1.0)), 0.0)
    for _ in range(_NEWTON_STEPS):
        expx = jnp.exp(x)
        x = x - (x - wx - c * (y - a - expx)) / (1 + c * expx)
    return y - jnp.exp(x)


def _poisson_dual_loss(a, y, s):
    y_minus_a = y - a
    safe = jnp.where(y_minus_a > 0, y_minus_a, 1.0)
    return jnp.where(
        y_minus_a == 0, 0.0, jnp.where(y_minus_a < 0, jnp.inf, y_minus_a * (jnp.log(safe) - 1) * s)
    )


LOSSES: dict[str, DualLoss] = {
    "logistic_loss": DualLoss(
        _logistic_update,
        _logistic_primal_loss,
        _logistic_dual_loss,
        _logistic_derivative,
        4.0,
        True,
    ),
    "squared_loss": DualLoss(
        _squared_update,
        lambda wx, y, s: (wx - y) * (wx - y) * s * 0.5,
        lambda a, y, s: a * (0.5 * a - y) * s,
        lambda wx, y, s: (wx - y) * s,
        1.0,
        False,
    ),
    "hinge_loss": DualLoss(
        _hinge_update,
        lambda wx, y, s: jnp.maximum(0.0, 1 - y * wx) * s,
        _hinge_dual_loss,
        lambda wx, y, s: jnp.where(y * wx < 1, -y * s, 0.0),
        0.0,
        True,
    ),
    "smooth_hinge_loss": DualLoss(
        _smooth_hinge_update,
        _smooth_hinge_primal_loss,
        _smooth_hinge_dual_loss,
        _smooth_hinge_derivative,
        _GAMMA,
        True,
    ),
    "poisson_loss": DualLoss(
        _poisson_update,
        lambda wx, y, s: (jnp.exp(wx) - wx * y) * s,
        _poisson_dual_loss,
        lambda wx, y, s: (jnp.exp(wx) - y) * s,
        1.0,
        False,
    ),
}


def get_loss(loss_type: str) -> DualLoss:
    """The updater of ``loss_type``.

    Raises:
      ValueError: for an unknown loss type (TF's message).
    """
    if loss_type not in LOSSES:
        raise ValueError("Unsupported loss_type: ", loss_type)
    return LOSSES[loss_type]


def convert_labels(loss: DualLoss, labels: jnp.ndarray) -> jnp.ndarray:
    """0/1 labels to -1/+1 for the binary losses (TF's ``ConvertLabel``); others as given."""
    return jnp.where(labels == 0.0, -1.0, labels) if loss.binary else labels
