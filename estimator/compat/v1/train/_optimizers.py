"""TF 1's optimizers (``tf.compat.v1.train.*Optimizer``): their defaults, slot names and
update rules (the ``Apply*`` kernels of ``tensorflow/core/kernels/training_ops.cc``), as
optax transformations the Estimator applies.

``optimizer.minimize(loss, global_step=tf.train.get_global_step())`` returns a
:class:`~estimator.compat.v1.train._train_op.TrainOp`, an ``optax.GradientTransformation``
for ``EstimatorSpec(train_op=...)``; the Estimator differentiates the loss and advances the
global step itself (``global_step`` is accepted and not needed). ``compute_gradients`` /
``apply_gradients`` work the same way with symbolic gradients (see ``_symbolic``).

Per step, with gradient ``g``, learning rate ``lr`` (TF's kernels, in the variable's
dtype):

=================  ============================================================  ========
optimizer          rule                                                          slots
=================  ============================================================  ========
GradientDescent    ``w -= lr g``                                                 —
Momentum           ``a = m a + g``; ``w -= lr a`` (Nesterov: ``lr (g + m a)``)   Momentum
Adagrad            ``n += g²``; ``w -= lr g / sqrt(n)``; ``n₀ = 0.1``            Adagrad
Adam               ``m += (g - m)(1 - β₁)``; ``v += (g² - v)(1 - β₂)``;          Adam,
                   ``w -= lr √(1 - β₂ᵗ) / (1 - β₁ᵗ) · m / (√v + ε)``             Adam_1
                   (ε "hat": added to the uncorrected ``√v``; ε = 1e-8)
RMSProp            ``ms += (g² - ms)(1 - ρ)``; ``mom = μ mom + lr g / √(ms + ε)``;  RMSProp,
                   ``w -= mom``; ``ms₀ = 1``; ρ=0.9, μ=0, ε=1e-10; centered:      RMSProp_1
                   ``mg += (g - mg)(1 - ρ)``, ``√(ms - mg² + ε)``                (_2)
Adadelta           TF's ``ApplyAdadelta``; ρ=0.95, ε=1e-8                        Adadelta,
                                                                                 Adadelta_1
Ftrl               ``canned.ftrl``'s rule (TF's ``ApplyFtrl``/``V2``), n₀ = 0.1   Ftrl,
                                                                                 Ftrl_1
=================  ============================================================  ========

Hyperparameters may be numbers, arrays computed in ``model_fn`` (``tf.train.exponential_decay``
of the global step) or zero-argument callables, as TF 1 accepts. Differences from TF: a
variable the loss does not depend on gets a zero gradient (TF skips it: Adam/Momentum/RMSProp
still move it by their momentum); gradients are dense (TF applies sparse updates to
embedding rows; the same numbers for Adagrad/Ftrl/SGD, which leave rows with zero gradient
unchanged).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from canned._ftrl import FtrlState, ftrl
from estimator.compat.v1._graph import frame_state
from estimator.compat.v1._symbolic import SymbolicGradient
from estimator.compat.v1.train._train_op import (
    Application,
    TrainOp,
    make_train_op,
    record_objective,
)
from estimator.model import variables as _variables

__all__ = [
    "Optimizer",
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "RMSPropOptimizer",
    "AdadeltaOptimizer",
    "FtrlOptimizer",
    "gradients",
]


def _value(x: Any) -> Any:
    return x() if callable(x) else x


def _names_of(var_list, what: str) -> tuple[str, ...]:
    frame = _variables.require_frame(what)
    names = []
    for var in var_list:
        if isinstance(var, str):
            name = var
        else:
            name = frame.by_id.get(id(var))
        if name is None or name not in frame.trainable:
            raise ValueError(
                f"{what}: var_list holds {type(var).__name__} {getattr(var, 'shape', '')}, "
                "which is not a trainable variable of this model. Pass the values "
                "tf.get_variable / tf.trainable_variables() returned, or variable names."
            )
        names.append(name)
    return tuple(dict.fromkeys(names))


def _loss_key(loss) -> int:
    state = frame_state()
    if state is not None:
        state.setdefault("gradient_losses", {})[id(loss)] = loss
    return id(loss)


class Optimizer:
    """Base class of TF 1 optimizers (``tf.compat.v1.train.Optimizer``).

    Subclasses declare their slots (``_slot_names``), scalars kept per optimizer
    (``_non_slot_names``) and the per-variable rule (``_apply_dense``).

    Args:
      use_locking: ignored (updates are functional).
      name: the optimizer's name; slot variables are named ``<variable>/<name>``,
        ``<variable>/<name>_1``, ...

    Raises:
      ValueError: an empty name (TF's message).
    """

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    #: Whether a row's update depends on that row alone (its gradient, value and slots), so
    #: a table read through lookups may be updated in the looked-up rows only, as TF's
    #: sparse kernels do (``est.sparse_updates``): gradient descent, Adagrad, FTRL.
    row_wise = False

    def __init__(self, use_locking: bool, name: str) -> None:
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = use_locking
        self._name = name

    # ----- what subclasses define ---------------------------------------------------------
    def _slot_names(self) -> list[tuple[str, str]]:
        """``[(slot key, TF base name)]`` in TF's creation order."""
        return []

    def _non_slot_names(self) -> list[str]:
        return []

    def _init_slot(self, key: str, var: jax.Array) -> jax.Array:
        return jnp.zeros_like(var)

    def _init_non_slot(self, key: str) -> jax.Array:
        raise NotImplementedError(key)

    def _prepare(self) -> dict[str, Any]:
        return {"lr": _value(self._learning_rate)}

    def _apply_dense(self, grad, var, slots, non_slots, hyper):
        """``(update to add to var, new slots)`` for one variable."""
        raise NotImplementedError

    def _finish(self, non_slots: dict, hyper: dict) -> dict:
        return non_slots

    # ----- TF's public API ----------------------------------------------------------------
    def get_name(self) -> str:
        return self._name

    def get_slot_names(self) -> list[str]:
        """The slot keys, sorted (``["m", "v"]`` for Adam)."""
        return sorted(key for key, _ in self._slot_names())

    def minimize(
        self,
        loss,
        global_step=None,
        var_list=None,
        gate_gradients=GATE_OP,
        aggregation_method=None,
        colocate_gradients_with_ops=False,
        name=None,
        grad_loss=None,
    ) -> TrainOp:
        """A ``train_op`` minimizing ``loss`` over ``var_list`` (default: every trainable
        variable). The Estimator advances the global step: ``global_step`` is accepted.

        Raises:
          ValueError: "No variables to optimize." (TF's message) when the model has none;
            a ``var_list`` entry that is not a trainable variable.
        """
        del global_step, gate_gradients, aggregation_method, colocate_gradients_with_ops
        del name
        if grad_loss is not None:
            raise ValueError("minimize(grad_loss=...) is not supported: scale the loss instead.")
        names = self._var_names(var_list, "minimize")
        op = make_train_op([Application(self, names)])
        record_objective(op, loss)
        return op

    def compute_gradients(
        self,
        loss,
        var_list=None,
        gate_gradients=GATE_OP,
        aggregation_method=None,
        colocate_gradients_with_ops=False,
        grad_loss=None,
    ) -> list[tuple[SymbolicGradient, Any]]:
        """``[(gradient, variable)]`` for ``var_list`` (default: every trainable variable).
        The gradients are symbolic (the Estimator computes them in the step): clip or scale
        them and pass the pairs to :meth:`apply_gradients`.

        Raises:
          ValueError: "No variables to optimize." when the model has none.
        """
        del gate_gradients, aggregation_method, colocate_gradients_with_ops, grad_loss
        names = self._var_names(var_list, "compute_gradients") or tuple(
            sorted(_variables.require_frame("compute_gradients").trainable)
        )
        key = _loss_key(loss)
        frame = _variables.require_frame("compute_gradients")
        return [(SymbolicGradient(name, loss_key=key), frame.trainable[name]) for name in names]

    def apply_gradients(self, grads_and_vars, global_step=None, name=None) -> TrainOp:
        """A ``train_op`` applying gradients from :meth:`compute_gradients` (pairs whose
        gradient is None are skipped, as TF).

        Raises:
          ValueError: "No gradients provided for any variable" (TF's message).
          TypeError: a gradient that is an array rather than a symbolic gradient.
        """
        del global_step, name
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError("No gradients provided for any variable.")
        for grad, _ in pairs:
            if not isinstance(grad, SymbolicGradient):
                raise TypeError(
                    "apply_gradients takes the gradients of compute_gradients / tf.gradients "
                    f"(edited with tf.clip_by_* or scaled); got {type(grad).__name__}. The "
                    "Estimator differentiates the loss itself, so gradients cannot be arrays "
                    "computed inside model_fn."
                )
        names = _names_of([v for _, v in pairs], "apply_gradients")
        op = make_train_op([Application(self, names, tuple(g for g, _ in pairs))])
        state = frame_state()
        keys = {g.loss_key for g, _ in pairs}
        if state is not None and len(keys) == 1:
            loss = state.get("gradient_losses", {}).get(next(iter(keys)))
            if loss is not None:
                record_objective(op, loss)
        return op

    def _var_names(self, var_list, what: str) -> tuple[str, ...] | None:
        frame = _variables.require_frame(f"{type(self).__name__}.{what}")
        if var_list is None:
            if not frame.trainable:
                raise ValueError("No variables to optimize.")
            return None
        names = _names_of(list(var_list), f"{type(self).__name__}.{what}")
        if not names:
            raise ValueError("No variables to optimize.")
        return names


class GradientDescentOptimizer(Optimizer):
    """``tf.compat.v1.train.GradientDescentOptimizer``: ``w -= lr g``."""

    row_wise = True

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate

    def _apply_dense(self, grad, var, slots, non_slots, hyper):
        return -(jnp.asarray(hyper["lr"], var.dtype) * grad), slots


class MomentumOptimizer(Optimizer):
    """``tf.compat.v1.train.MomentumOptimizer``: ``a = momentum a + g``; ``w -= lr a``
    (``use_nesterov``: ``w -= lr (g + momentum a)``). Slot ``<var>/Momentum``."""

    def __init__(
        self, learning_rate, momentum, use_locking=False, name="Momentum", use_nesterov=False
    ) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov

    def _slot_names(self):
        return [("momentum", self._name)]

    def _prepare(self):
        return {"lr": _value(self._learning_rate), "momentum": _value(self._momentum)}

    def _apply_dense(self, grad, var, slots, non_slots, hyper):
        lr = jnp.asarray(hyper["lr"], var.dtype)
        momentum = jnp.asarray(hyper["momentum"], var.dtype)
        accum = slots["momentum"] * momentum + grad
        if self._use_nesterov:
            delta = -(grad * lr + accum * momentum * lr)
        else:
            delta = -(accum * lr)
        return delta, {"momentum": accum}


class AdagradOptimizer(Optimizer):
    """``tf.compat.v1.train.AdagradOptimizer``: ``n += g²``; ``w -= lr g / sqrt(n)`` with
    ``n`` starting at ``initial_accumulator_value`` (0.1). Slot ``<var>/Adagrad``.

    Raises:
      ValueError: ``initial_accumulator_value <= 0`` (TF's message).
    """

    row_wise = True

    def __init__(
        self, learning_rate, initial_accumulator_value=0.1, use_locking=False, name="Adagrad"
    ) -> None:
        if initial_accumulator_value <= 0.0:
            raise ValueError(
                f"initial_accumulator_value must be positive: {initial_accumulator_value}"
            )
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value

    def _slot_names(self):
        return [("accumulator", self._name)]

    def _init_slot(self, key, var):
        return jnp.full_like(var, self._initial_accumulator_value)

    def _apply_dense(self, grad, var, slots, non_slots, hyper):
        accum = slots["accumulator"] + grad * grad
        delta = -(jnp.asarray(hyper["lr"], var.dtype) * grad * jax.lax.rsqrt(accum))
        return delta, {"accumulator": accum}


class AdamOptimizer(Optimizer):
    """``tf.compat.v1.train.AdamOptimizer`` (Kingma & Ba, 2015, the form before section
    2.1: ε is added to the uncorrected ``sqrt(v)``). Slots ``<var>/Adam`` (m),
    ``<var>/Adam_1`` (v); ``beta1_power``/``beta2_power`` start at β₁/β₂ and are multiplied
    by them after each step."""

    def __init__(
        self,
        learning_rate=0.001,
        beta1=0.9,
        beta2=0.999,
        epsilon=1e-08,
        use_locking=False,
        name="Adam",
    ) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon

    def _slot_names(self):
        return [("m", self._name), ("v", self._name)]

    def _non_slot_names(self):
        return ["beta1_power", "beta2_power"]

    def _init_non_slot(self, key):
        return jnp.asarray(
            _value(self._beta1 if key == "beta1_power" else self._beta2), jnp.float32
        )

    def _prepare(self):
        return {
            "lr": _value(self._learning_rate),
            "beta1": _value(self._beta1),
            "beta2": _value(self._beta2),
            "epsilon": _value(self._epsilon),
        }

    def _apply_dense(self, grad, var, slots, non_slots, hyper):
        dt = var.dtype
        beta1, beta2 = jnp.asarray(hyper["beta1"], dt), jnp.asarray(hyper["beta2"], dt)
        beta1_power = jnp.asarray(non_slots["beta1_power"], dt)
        beta2_power = jnp.asarray(non_slots["beta2_power"], dt)
        lr = jnp.asarray(hyper["lr"], dt) * jnp.sqrt(1 - beta2_power) / (1 - beta1_power)
        m = slots["m"] + (grad - slots["m"]) * (1 - beta1)
        v = slots["v"] + (grad * grad - slots["v"]) * (1 - beta2)
        delta = -((m * lr) / (jnp.sqrt(v) + jnp.asarray(hyper["epsilon"], dt)))
        return delta, {"m": m, "v": v}

    def _finish(self, non_slots, hyper):
        return {
            "beta1_power": non_slots["beta1_power"] * jnp.asarray(hyper["beta1"], jnp.float32),
            "beta2_power": non_slots["beta2_power"] * jnp.asarray(hyper["beta2"], jnp.float32),
        }


class RMSPropOptimizer(Optimizer):
    """``tf.compat.v1.train.RMSPropOptimizer``: TF 1's rule with ε inside the square root
    and the mean square starting at 1 (see the module table). Slots ``<var>/RMSProp``
    (ms), ``<var>/RMSProp_1`` (mg if ``centered``, else momentum), ``<var>/RMSProp_2``
    (momentum when centered)."""

    def __init__(
        self,
        learning_rate,
        decay=0.9,
        momentum=0.0,
        epsilon=1e-10,
        use_locking=False,
        centered=False,
        name="RMSProp",
    ) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._decay = decay
        self._momentum = momentum
        self._epsilon = epsilon
        self._centered = centered

    def _slot_names(self):
        names = [("rms", self._name)]
        if self._centered:
            names.append(("mg", self._name))
        return names + [("momentum", self._name)]

    def _init_slot(self, key, var):
        return jnp.ones_like(var) if key == "rms" else jnp.zeros_like(var)

    def _prepare(self):
        return {
            "lr": _value(self._learning_rate),
            "decay": _value(self._decay),
            "momentum": _value(self._momentum),
            "epsilon": _value(self._epsilon),
        }

    def _apply_dense(self, grad, var, slots, non_slots, hyper):
        dt = var.dtype
        rho = jnp.asarray(hyper["decay"], dt)
        eps = jnp.asarray(hyper["epsilon"], dt)
        ms = slots["rms"] + (grad * grad - slots["rms"]) * (1 - rho)
        new = {"rms": ms}
        if self._centered:
            mg = slots["mg"] + (grad - slots["mg"]) * (1 - rho)
            new["mg"] = mg
            denom = ms - mg * mg + eps
        else:
            denom = ms + eps
        mom = slots["momentum"] * jnp.asarray(hyper["momentum"], dt) + (
            grad * jnp.asarray(hyper["lr"], dt)
        ) / jnp.sqrt(denom)
        new["momentum"] = mom
        return -mom, new


class AdadeltaOptimizer(Optimizer):
    """``tf.compat.v1.train.AdadeltaOptimizer`` (TF's ``ApplyAdadelta``). Slots
    ``<var>/Adadelta`` (accum), ``<var>/Adadelta_1`` (accum_update)."""

    def __init__(
        self, learning_rate=0.001, rho=0.95, epsilon=1e-8, use_locking=False, name="Adadelta"
    ) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._rho = rho
        self._epsilon = epsilon

    def _slot_names(self):
        return [("accum", self._name), ("accum_update", self._name)]

    def _prepare(self):
        return {
            "lr": _value(self._learning_rate),
            "rho": _value(self._rho),
            "epsilon": _value(self._epsilon),
        }

    def _apply_dense(self, grad, var, slots, non_slots, hyper):
        dt = var.dtype
        rho, eps = jnp.asarray(hyper["rho"], dt), jnp.asarray(hyper["epsilon"], dt)
        accum = slots["accum"] * rho + grad * grad * (1 - rho)
        update = jnp.sqrt(slots["accum_update"] + eps) * jax.lax.rsqrt(accum + eps) * grad
        accum_update = slots["accum_update"] * rho + update * update * (1 - rho)
        delta = -(update * jnp.asarray(hyper["lr"], dt))
        return delta, {"accum": accum, "accum_update": accum_update}


class FtrlOptimizer(Optimizer):
    """``tf.compat.v1.train.FtrlOptimizer``: FTRL-Proximal with TF's defaults
    (``learning_rate_power=-0.5``, ``initial_accumulator_value=0.1``). The rule is
    ``canned.ftrl`` (TF's ``ApplyFtrl`` kernel). Slots ``<var>/Ftrl`` (accumulator) and
    ``<var>/Ftrl_1`` (linear), or ``accum_name`` / ``linear_name``.

    Raises:
      ValueError: arguments out of range (messages as ``canned.ftrl``'s).
    """

    row_wise = True

    def __init__(
        self,
        learning_rate,
        learning_rate_power=-0.5,
        initial_accumulator_value=0.1,
        l1_regularization_strength=0.0,
        l2_regularization_strength=0.0,
        use_locking=False,
        name="Ftrl",
        accum_name=None,
        linear_name=None,
        l2_shrinkage_regularization_strength=0.0,
        beta=None,
    ) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._accum_name = accum_name
        self._linear_name = linear_name
        self._initial_accumulator_value = initial_accumulator_value
        self._options = {
            "learning_rate_power": learning_rate_power,
            "initial_accumulator_value": initial_accumulator_value,
            "l1_regularization_strength": l1_regularization_strength,
            "l2_regularization_strength": l2_regularization_strength,
            "l2_shrinkage_regularization_strength": l2_shrinkage_regularization_strength,
            "beta": 0.0 if beta is None else beta,
        }
        self._ftrl(0.1)  # argument checks now, as TF's constructor

    def _ftrl(self, lr):
        return ftrl(lambda count: lr, **self._options)

    def _slot_names(self):
        return [
            ("accumulator", self._accum_name or self._name),
            ("linear", self._linear_name or self._name),
        ]

    def _init_slot(self, key, var):
        if key == "accumulator":
            return jnp.full_like(var, self._initial_accumulator_value)
        return jnp.zeros_like(var)

    def _apply_dense(self, grad, var, slots, non_slots, hyper):
        state = FtrlState(
            count=jnp.zeros([], jnp.int32),
            accumulator=slots["accumulator"],
            linear=slots["linear"],
        )
        delta, new = self._ftrl(hyper["lr"]).update(grad, state, var)
        return delta, {"accumulator": new.accumulator, "linear": new.linear}


def gradients(ys, xs, grad_ys=None, name="gradients", **kwargs) -> list[SymbolicGradient]:
    """``tf.gradients(ys, xs)``: symbolic gradients of ``ys`` (summed if a list) with
    respect to the variables ``xs``, for ``apply_gradients`` (see ``_symbolic``).

    Raises:
      ValueError: ``grad_ys`` (not supported); an ``xs`` entry that is not a variable.
    """
    del name, kwargs
    if grad_ys is not None:
        raise ValueError("tf.gradients(grad_ys=...) is not supported: scale the loss instead.")
    single = not isinstance(xs, (list, tuple))
    xs = [xs] if single else list(xs)
    if isinstance(ys, (list, tuple)):
        ys = sum(jnp.asarray(y) for y in ys)
    key = _loss_key(ys)
    out = [SymbolicGradient(name, loss_key=key) for name in _names_of(xs, "tf.gradients")]
    return out
