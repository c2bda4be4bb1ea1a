"""``tf.math`` (TF 1.15): the math ops under their ``tf.math`` names."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1 import _math_ops

__all__ = list(_math_ops.__all__) + ["log_sigmoid", "xdivy", "multiply_no_nan"]

__getattr__ = module_getattr("tf.math", __name__)

for _name in _math_ops.__all__:
    globals()[_name] = getattr(_math_ops, _name)


def log_sigmoid(x, name=None):
    """``tf.math.log_sigmoid``."""
    import jax

    return jax.nn.log_sigmoid(x)


def xdivy(x, y, name=None):
    """``tf.math.xdivy``: 0 where ``x == 0``, else ``x / y``."""
    import jax.numpy as jnp

    return jnp.where(jnp.asarray(x) == 0, 0.0, jnp.asarray(x) / jnp.asarray(y))


def multiply_no_nan(x, y, name=None):
    """``tf.math.multiply_no_nan``: 0 where ``y == 0``, even if ``x`` is not finite."""
    import jax.numpy as jnp

    return jnp.where(jnp.asarray(y) == 0, 0.0, jnp.asarray(x) * jnp.asarray(y))
