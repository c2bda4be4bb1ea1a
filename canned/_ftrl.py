"""FTRL-Proximal as an optax ``GradientTransformation``, following TF 2.15's kernel.

TF 2.15's canned linear models train with ``tf.keras.optimizers.legacy.Ftrl``, which runs the
``ResourceApplyFtrl`` / ``ResourceApplyFtrlV2`` kernels of
``tensorflow/core/kernels/training_ops.cc``. optax has no FTRL; :func:`ftrl` reproduces that
kernel step by step so that a canned estimator trained here follows the same trajectory as in TF.

    >>> import jax.numpy as jnp, optax
    >>> from canned import ftrl
    >>> opt = ftrl(0.5)
    >>> params = jnp.zeros(2)
    >>> state = opt.init(params)
    >>> updates, state = opt.update(jnp.array([1.0, 0.0]), state, params)
    >>> optax.apply_updates(params, updates)
    Array([-0.47673...,  0...], dtype=float32)
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from optax import GradientTransformation, ScalarOrSchedule

from estimator.model.train_op import ELEMENTWISE, mark_row_wise

__all__ = ["FtrlState", "ftrl"]


class FtrlState(NamedTuple):
    """State of :func:`ftrl`: TF's ``accumulator`` and ``linear`` slots and a step count."""

    count: jax.Array  # shape=(), dtype=jnp.int32. Steps applied so far (the schedule's input).
    accumulator: optax.Updates  # shape=like params, dtype=like params. n: sum of g², from n₀.
    linear: optax.Updates  # shape=like params, dtype=like params. z: the FTRL linear term, from 0.


def _check_non_negative(name: str, value: float) -> None:
    # Message text of TF 2.15's `tf.keras.optimizers.legacy.Ftrl.__init__`.
    if value < 0.0:
        raise ValueError(f"`{name}` needs to be positive or zero. Received: {name}={value}.")


def _check_learning_rate(learning_rate: ScalarOrSchedule) -> None:
    # Ours: TF accepts a learning rate <= 0 and yields NaN/inf weights (a schedule is not
    # checked).
    if not callable(learning_rate) and isinstance(learning_rate, int | float):
        if not learning_rate > 0.0:
            raise ValueError(
                f"`learning_rate` needs to be positive. Received: learning_rate={learning_rate}. "
                "FTRL divides by the learning rate; pass a value > 0 (TF 2.15's "
                "LinearClassifier uses 0.2)."
            )


def _check_learning_rate_power(learning_rate_power: float) -> None:
    # Message text of TF 2.15's `tf.keras.optimizers.legacy.Ftrl.__init__`.
    if learning_rate_power > 0.0:
        raise ValueError(
            "`learning_rate_power` needs to be negative or zero. "
            f"Received: learning_rate_power={learning_rate_power}."
        )


def _power(n: jax.Array, learning_rate_power: float) -> jax.Array:
    """:math:`n^{-p}`; with ``sqrt`` for :math:`p = -0.5`, as TF's kernel special-cases it."""
    if learning_rate_power == -0.5:
        return jnp.sqrt(n)
    return jnp.power(n, -learning_rate_power)


def ftrl(
    learning_rate: ScalarOrSchedule,
    *,
    learning_rate_power: float = -0.5,
    initial_accumulator_value: float = 0.1,
    l1_regularization_strength: float = 0.0,
    l2_regularization_strength: float = 0.0,
    l2_shrinkage_regularization_strength: float = 0.0,
    beta: float = 0.0,
) -> GradientTransformation:
    r"""FTRL-Proximal ("Follow The Regularized Leader"), as TF 2.15 runs it.

    Each weight :math:`w` keeps an accumulator :math:`n` (starts at
    ``initial_accumulator_value``) and a linear term :math:`z` (starts at 0). With the
    learning rate :math:`\alpha_t` of this step, :math:`p` = ``learning_rate_power``,
    :math:`\lambda_1` = ``l1_regularization_strength``, :math:`s` =
    ``l2_shrinkage_regularization_strength`` and
    :math:`\lambda_2 = ` ``l2_regularization_strength`` :math:`+ \beta / (2\alpha_t)`, one step
    with gradient :math:`g` is

    .. math::

      \begin{align*}
        \tilde g &\leftarrow g + 2 s w \\
        n' &\leftarrow n + g^2 \qquad \text{(the plain gradient, not } \tilde g) \\
        z' &\leftarrow z + \tilde g - \frac{(n')^{-p} - n^{-p}}{\alpha_t} w \\
        w' &\leftarrow \begin{cases}
            \dfrac{\operatorname{sign}(z')\lambda_1 - z'}{(n')^{-p}/\alpha_t + 2\lambda_2}
              & \text{if } |z'| > \lambda_1 \\
            0 & \text{otherwise}
          \end{cases}
      \end{align*}

    and the returned update is :math:`w' - w` (optax adds updates to the parameters), so
    ``optax.apply_updates(params, updates)`` gives :math:`w'` up to the rounding of
    :math:`w + (w' - w)`; weights that L1 sets to zero come out exactly zero. With
    :math:`p = -0.5` the powers are computed with ``sqrt``, as in TF's kernel. Arithmetic runs
    in each parameter's dtype (the learning rate cast to it), as TF's kernels do.

    Behaviour and defaults come from TF 2.15's ``tf.keras.optimizers.legacy.Ftrl`` (the
    optimizer behind ``'Ftrl'`` in the TF 2 canned estimators) and the ``ApplyFtrl`` /
    ``ApplyFtrlV2`` kernels it calls (``beta`` folded into :math:`\lambda_2` as Keras does).
    Argument checks and their messages are Keras's; the ``beta >= 0`` and
    ``learning_rate > 0`` checks are ours (TF accepts those values and yields NaN/inf weights).

    **Dense versus sparse gradients.** TF updates the weight tables of categorical columns
    with sparse gradients: rows absent from the batch are left untouched (weights and slots).
    JAX gradients are dense, so those rows get :math:`g = 0`. By the formula above, a zero
    gradient leaves :math:`n` unchanged and :math:`z' = z + 2sw`, so it is an exact no-op
    when ``l2_shrinkage_regularization_strength == 0``, the learning rate does not change
    between steps (or is a schedule that stays put) and :math:`w` already is the FTRL solution
    for :math:`(z, n)` — which holds after any FTRL step and for weights initialised to zero,
    as canned linear models are. Results then match TF's sparse updates. They differ when

    * ``l2_shrinkage_regularization_strength > 0``: absent rows are shrunk every step (TF
      shrinks a row only in steps where it appears);
    * the learning rate follows a schedule: absent rows are recomputed with the new rate;
    * a weight starts non-zero (random init, warm start) with :math:`z = 0`: the first step
      without a gradient sets it to 0 (TF's dense kernel does the same; its sparse path keeps
      it until the row first appears, and then mostly discards it too, since
      :math:`z' = g - \sigma w_0`).

    Args:
      learning_rate: :math:`\alpha`, a positive float, or an optax schedule (a callable of the
        number of steps applied so far: 0 for the first step, as Keras's ``iterations``).
        Keras's default is 0.001; TF 2.15's ``LinearClassifier`` uses 0.2.
      learning_rate_power: :math:`p`, <= 0. Controls how the per-weight learning rate
        decays with :math:`n`; 0 gives a fixed learning rate. A static Python float.
      initial_accumulator_value: starting value of :math:`n`, >= 0.
      l1_regularization_strength: :math:`\lambda_1`, >= 0. Produces exact zeros.
      l2_regularization_strength: >= 0. The stabilising L2 penalty of the paper.
      l2_shrinkage_regularization_strength: :math:`s`, >= 0. A magnitude penalty: adds
        :math:`2sw` to the gradient used for :math:`z` (not to the one used for :math:`n`).
      beta: :math:`\beta` of the paper, >= 0; adds :math:`\beta / (2\alpha_t)` to the L2
        strength.

    Returns:
      A :class:`optax.GradientTransformation` whose state is :class:`FtrlState`. Its
      ``update(grads, state, params)`` requires ``params``. It is marked row-wise
      (``est.sparse_updates``): tables read through lookups are updated only in the rows a
      batch looks up, as TF's ``SparseApplyFtrl`` does, which also avoids the dense
      differences listed above.

    Raises:
      ValueError: if an argument is out of range (messages as Keras's ``Ftrl``), or when
        ``update`` is called without ``params``.

    Examples:
      >>> import jax, jax.numpy as jnp, optax
      >>> from canned import ftrl
      >>> def f(w): return jnp.sum((w - jnp.array([1.0, -2.0])) ** 2)
      >>> solver = ftrl(learning_rate=1.0, l1_regularization_strength=0.1)
      >>> params = jnp.zeros(2)
      >>> print('Objective function: ', f(params))
      Objective function:  5.0
      >>> state = solver.init(params)
      >>> for _ in range(5):
      ...   grads = jax.grad(f)(params)
      ...   updates, state = solver.update(grads, state, params)
      ...   params = optax.apply_updates(params, updates)
      ...   print('Objective function: {:.2E}'.format(f(params)))
      Objective function: 1.06E+00
      Objective function: 3.27E-01
      Objective function: 1.06E-01
      Objective function: 3.51E-02
      Objective function: 1.16E-02

    References:
      McMahan et al., `Ad Click Prediction: a View from the Trenches
      <https://research.google.com/pubs/archive/41159.pdf>`_, KDD 2013 (Algorithm 1).
    """
    _check_learning_rate(learning_rate)
    _check_non_negative("initial_accumulator_value", initial_accumulator_value)
    _check_learning_rate_power(learning_rate_power)
    _check_non_negative("l1_regularization_strength", l1_regularization_strength)
    _check_non_negative("l2_regularization_strength", l2_regularization_strength)
    _check_non_negative(
        "l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength
    )
    _check_non_negative("beta", beta)

    def init_fn(params):
        return FtrlState(
            count=jnp.zeros([], jnp.int32),
            accumulator=optax.tree.full_like(params, initial_accumulator_value),
            linear=optax.tree.zeros_like(params),
        )

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError(
                "ftrl needs the current parameters: call `update(grads, state, params)`. "
                "Received params=None. FTRL computes the new weights from its accumulators "
                "and returns `new_params - params`."
            )
        lr = learning_rate(state.count) if callable(learning_rate) else learning_rate

        def new_linear(g, w, n, new_n, z):
            alpha = jnp.asarray(lr, w.dtype)
            if l2_shrinkage_regularization_strength > 0.0:  # ApplyFtrlV2; else ApplyFtrl.
                g = g + 2.0 * l2_shrinkage_regularization_strength * w
            sigma = (_power(new_n, learning_rate_power) - _power(n, learning_rate_power)) / alpha
            return z + g - sigma * w

        def new_weight(w, new_n, new_z):
            alpha = jnp.asarray(lr, w.dtype)
            l2 = l2_regularization_strength + beta / (2.0 * alpha)  # Keras folds beta in here.
            numerator = l1_regularization_strength * jnp.sign(new_z) - new_z
            denominator = _power(new_n, learning_rate_power) / alpha + 2.0 * l2
            return jnp.where(
                jnp.abs(new_z) > l1_regularization_strength,
                numerator / denominator,
                jnp.zeros_like(w),
            )

        accumulator = jax.tree.map(lambda g, n: n + g * g, updates, state.accumulator)
        linear = jax.tree.map(
            new_linear, updates, params, state.accumulator, accumulator, state.linear
        )
        new_params = jax.tree.map(new_weight, params, accumulator, linear)
        updates = jax.tree.map(lambda new_w, w: new_w - w, new_params, params)
        count = optax.safe_increment(state.count)
        return updates, FtrlState(count=count, accumulator=accumulator, linear=linear)

    # Row-wise: a row's new weight depends on its own gradient and slots only, so the
    # Estimator may update only the looked-up rows of a table, as TF's SparseApplyFtrl.
    return mark_row_wise(GradientTransformation(init_fn, update_fn), rule=ELEMENTWISE)
