"""Optimizer resolution for canned estimators: TF 2.15's names → optax transformations.

A canned estimator's ``optimizer`` argument may be a name, an ``optax.GradientTransformation``
or a zero-argument callable returning one, as in TF 2.15's
``tensorflow_estimator/python/estimator/canned/optimizers.py`` (``get_optimizer_instance_v2``,
used by the TF 2 canned estimators ``tf.estimator.LinearClassifier`` etc.):

    >>> from canned.optimizers import get_optimizer_instance
    >>> opt = get_optimizer_instance("Ftrl", learning_rate=0.2)    # FTRL as TF's kernel
    >>> opt = get_optimizer_instance("Adagrad", learning_rate=0.05)  # Keras's Adagrad numbers
    >>> import optax
    >>> opt = get_optimizer_instance(optax.adamw(1e-3))            # passed through
    >>> opt = get_optimizer_instance(lambda: optax.sgd(0.1))       # called
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from optax import GradientTransformation, ScalarOrSchedule

from canned._ftrl import ftrl
from estimator.model.train_op import ELEMENTWISE, mark_row_wise

__all__ = ["get_optimizer_instance"]

# Keras 2.15's `tf.keras.optimizers.legacy` defaults: the learning rate used when a name comes
# without one (as `get_optimizer_instance_v2` does by instantiating the class bare).
_DEFAULT_LEARNING_RATE = {
    "Adagrad": 0.001,
    "Adam": 0.001,
    "Ftrl": 0.001,
    "RMSProp": 0.001,
    "SGD": 0.01,
}
_SUPPORTED_NAMES = tuple(sorted(_DEFAULT_LEARNING_RATE))
_EPSILON = 1e-7  # Keras's `backend.epsilon()`, the default of Adagrad, Adam and RMSprop.


def _scale_by_keras_adagrad(
    initial_accumulator_value: float = 0.1, epsilon: float = _EPSILON
) -> GradientTransformation:
    """``g / (sqrt(n) + eps)`` with ``n = n₀ + Σg²``: TF's ``ApplyAdagradV2`` kernel.

    optax's ``scale_by_rss`` puts ``eps`` inside the square root; Keras adds it outside.
    """

    def init_fn(params):
        return optax.ScaleByRssState(
            sum_of_squares=optax.tree.full_like(params, initial_accumulator_value)
        )

    def update_fn(updates, state, params=None):
        del params
        sum_of_squares = jax.tree.map(lambda g, n: n + g * g, updates, state.sum_of_squares)
        updates = jax.tree.map(lambda g, n: g / (jnp.sqrt(n) + epsilon), updates, sum_of_squares)
        return updates, optax.ScaleByRssState(sum_of_squares=sum_of_squares)

    return GradientTransformation(init_fn, update_fn)


def _scale_by_keras_adam(
    beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = _EPSILON
) -> GradientTransformation:
    """``sqrt(1 - β₂ᵗ) / (1 - β₁ᵗ) · m / (sqrt(v) + eps)``: TF's ``ApplyAdam`` kernel.

    This is the form "just before Section 2.1" of Kingma & Ba, with ``eps`` ("epsilon hat")
    added to the uncorrected ``sqrt(v)``. optax's ``scale_by_adam`` adds ``eps`` to the
    bias-corrected ``sqrt(v̂)`` (Algorithm 1), i.e. a step-dependent ``eps`` in Keras terms.
    """

    def init_fn(params):
        return optax.ScaleByAdamState(
            count=jnp.zeros([], jnp.int32),
            mu=optax.tree.zeros_like(params),
            nu=optax.tree.zeros_like(params),
        )

    # As Keras, hyperparameters are cast to the variable's dtype before any arithmetic, so
    # 1 - β is the same number in the moments and in the bias correction.
    def cast(x, like):
        return jnp.asarray(x, like.dtype)

    def update_fn(updates, state, params=None):
        del params
        count = optax.safe_increment(state.count)
        mu = jax.tree.map(lambda g, m: m + (g - m) * (1 - cast(beta_1, g)), updates, state.mu)
        nu = jax.tree.map(lambda g, v: v + (g * g - v) * (1 - cast(beta_2, g)), updates, state.nu)

        def scale(m, v):
            t = count.astype(m.dtype)
            alpha = jnp.sqrt(1 - cast(beta_2, m) ** t) / (1 - cast(beta_1, m) ** t)
            return (m * alpha) / (jnp.sqrt(v) + cast(epsilon, m))

        updates = jax.tree.map(scale, mu, nu)
        return updates, optax.ScaleByAdamState(count=count, mu=mu, nu=nu)

    return GradientTransformation(init_fn, update_fn)


def _adagrad(learning_rate: ScalarOrSchedule) -> GradientTransformation:
    # Row-wise (a row without gradient is unchanged): tables get TF's sparse updates.
    return mark_row_wise(
        optax.chain(
            _scale_by_keras_adagrad(initial_accumulator_value=0.1, epsilon=_EPSILON),
            optax.scale_by_learning_rate(learning_rate),
        ),
        rule=ELEMENTWISE,
    )


def _adam(learning_rate: ScalarOrSchedule) -> GradientTransformation:
    return optax.chain(
        _scale_by_keras_adam(beta_1=0.9, beta_2=0.999, epsilon=_EPSILON),
        optax.scale_by_learning_rate(learning_rate),
    )


def _rmsprop(learning_rate: ScalarOrSchedule) -> GradientTransformation:
    # Keras: rms ← ρ·rms + (1-ρ)·g² from rms = 0; w ← w - lr·g / (sqrt(rms) + eps); no momentum.
    return optax.rmsprop(
        learning_rate, decay=0.9, eps=_EPSILON, initial_scale=0.0, eps_in_sqrt=False
    )


def _sgd(learning_rate: ScalarOrSchedule) -> GradientTransformation:
    return mark_row_wise(optax.sgd(learning_rate), rule=ELEMENTWISE)


def _ftrl(learning_rate: ScalarOrSchedule) -> GradientTransformation:
    return ftrl(learning_rate)


_FACTORIES: dict[str, Callable[[ScalarOrSchedule], GradientTransformation]] = {
    "Adagrad": _adagrad,
    "Adam": _adam,
    "Ftrl": _ftrl,
    "RMSProp": _rmsprop,
    "SGD": _sgd,
}

_ACCEPTED = (
    f"a name in {_SUPPORTED_NAMES} (with learning_rate), an optax.GradientTransformation "
    "(e.g. optax.adam(1e-3)), or a callable taking no arguments that returns one "
    "(e.g. lambda: optax.adam(1e-3))"
)


def _is_tf_optimizer(obj: Any) -> bool:
    """An optimizer (instance or class) from TF or Keras, recognised without importing TF."""
    root = (obj if isinstance(obj, type) else type(obj)).__module__.split(".")[0]
    return root in ("keras", "tf_keras", "tensorflow") or (
        hasattr(obj, "apply_gradients") and hasattr(obj, "minimize")
    )


def _tf_optimizer_error(obj: Any) -> TypeError:
    cls = obj if isinstance(obj, type) else type(obj)
    key = cls.__name__.lower().replace("gradientdescent", "sgd").replace("optimizer", "")
    name = {n.lower(): n for n in _SUPPORTED_NAMES}.get(key)
    learning_rate = _DEFAULT_LEARNING_RATE.get(name or "", 0.001)
    try:  # Keras optimizers report their learning rate in get_config(); best effort only.
        configured = obj.get_config()["learning_rate"]
        if isinstance(configured, int | float):
            learning_rate = configured
    except Exception:  # A foreign object (or a class): any failure just skips the hint.
        pass
    suggestion = (
        f"get_optimizer_instance({name!r}, learning_rate={learning_rate})"
        if name
        else f"an optax transformation such as optax.adam({learning_rate})"
    )
    return TypeError(
        f"Got a TensorFlow/Keras optimizer ({cls.__module__}.{cls.__qualname__}), which cannot "
        f"train JAX parameters. Pass {_ACCEPTED}; here: {suggestion}."
    )


def get_optimizer_instance(
    opt: str | GradientTransformation | Callable[[], GradientTransformation],
    learning_rate: ScalarOrSchedule | None = None,
) -> GradientTransformation:
    """Returns the optax transformation a canned estimator's ``optimizer`` argument names.

    Follows TF 2.15's ``get_optimizer_instance_v2`` (what the TF 2 canned estimators call):

    * A name, case-sensitive, with TF 2.15 Keras legacy defaults
      (``tf.keras.optimizers.legacy.*``):

      - ``'Adagrad'``: ``initial_accumulator_value=0.1``, ``epsilon=1e-7``;
        ``w -= lr·g / (sqrt(n) + eps)`` exactly as Keras (optax's ``adagrad`` puts ``eps``
        inside the square root, so a Keras-exact transformation is used).
      - ``'Adam'``: ``beta_1=0.9``, ``beta_2=0.999``, ``epsilon=1e-7``, in TF's form
        ``w -= lr·sqrt(1-β₂ᵗ)/(1-β₁ᵗ) · m / (sqrt(v) + eps)`` (optax's ``adam`` adds ``eps``
        to the bias-corrected root instead, so a Keras-exact transformation is used).
      - ``'Ftrl'``: :func:`canned.ftrl` with Keras's defaults
        (``learning_rate_power=-0.5``, ``initial_accumulator_value=0.1``, no regularisation).
      - ``'RMSProp'``: ``rho=0.9``, ``momentum=0``, ``epsilon=1e-7``, accumulator from 0,
        ``eps`` outside the square root: ``optax.rmsprop(..., eps_in_sqrt=False)``, which
        is Keras's formula exactly.
      - ``'SGD'``: ``optax.sgd`` (plain gradient descent, as Keras's ``SGD`` without momentum).

      When ``learning_rate`` is None, the Keras class's default learning rate is used (0.001;
      0.01 for ``'SGD'``), as ``get_optimizer_instance_v2`` does. (TF 1's
      ``get_optimizer_instance`` instead raised ``'learning_rate must be specified when opt
      is string.'``; and TF 2 also replaces a learning rate of 0 by the default, which we do
      not: 0 is kept.)
    * An ``optax.GradientTransformation``: returned as is (``learning_rate`` is ignored).
    * A callable: called with no arguments; it must return an
      ``optax.GradientTransformation`` (``learning_rate`` is ignored).

    Args:
      opt: the name, transformation or callable described above.
      learning_rate: a float or an optax schedule (a callable of the step count); only used
        when ``opt`` is a name.

    Returns:
      An :class:`optax.GradientTransformation`.

    Raises:
      ValueError: ``opt`` is an unsupported name (TF's message, listing the names).
      TypeError: ``opt`` is anything else, a callable that needs arguments or returns
        something else, or a TensorFlow/Keras optimizer object (the message names the
        equivalent call here). TF raises ``ValueError`` for these.
    """
    if isinstance(opt, str):
        return _by_name(opt, learning_rate)
    if isinstance(opt, GradientTransformation):
        return opt
    if _is_tf_optimizer(opt):
        raise _tf_optimizer_error(opt)
    if callable(opt):
        return _from_callable(opt)
    raise TypeError(
        f"The given object is not an optax.GradientTransformation instance. Given: {opt!r} "
        f"(type {type(opt).__name__}). Pass {_ACCEPTED}."
    )


def _by_name(opt: str, learning_rate: ScalarOrSchedule | None) -> GradientTransformation:
    """The transformation named ``opt``, at the Keras class's default learning rate when
    ``learning_rate`` is None; TF's error for another name (with a hint on its case)."""
    if opt in _FACTORIES:
        if learning_rate is None:
            learning_rate = _DEFAULT_LEARNING_RATE[opt]
        return _FACTORIES[opt](learning_rate)
    message = f"Unsupported optimizer name: {opt}. Supported names are: {_SUPPORTED_NAMES}"
    matches = [n for n in _SUPPORTED_NAMES if n.lower() == opt.lower()]
    if matches:
        message += f". Names are case-sensitive: did you mean {matches[0]!r}?"
    raise ValueError(message)


def _from_callable(opt: Callable) -> GradientTransformation:
    """``opt()``, checked to take no arguments and to return a transformation."""
    try:
        inspect.signature(opt).bind()
    except TypeError:
        raise TypeError(
            f"The optimizer callable {opt!r} cannot be called without arguments, and "
            f"canned estimators call it with none. Pass {_ACCEPTED}; e.g. "
            "functools.partial(optax.adam, learning_rate=1e-3) instead of optax.adam."
        ) from None
    except ValueError:  # No signature available (some builtins): just try the call.
        pass
    result = opt()
    if isinstance(result, GradientTransformation):
        return result
    if _is_tf_optimizer(result):
        raise _tf_optimizer_error(result)
    raise TypeError(
        f"The optimizer callable {opt!r} returned {result!r} (type "
        f"{type(result).__name__}); expected an optax.GradientTransformation."
    )
