"""TF 1's initializers as classes (``tf.zeros_initializer()``, ``tf.initializers.*``).

TF 1 code passes them instantiated (``initializer=tf.zeros_initializer()``) or as the class
(``initializer=tf.zeros_initializer``, which ``tf.get_variable`` instantiates); both work.
An instance is a jax initializer ``(key, shape, dtype) -> array`` built on
``estimator.initializers`` (TF's formulas; ``seed`` is ignored: keys come from
``RunConfig.tf_random_seed``). ``dtype`` is the default when the variable gives none.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from estimator import initializers as _init
from estimator.compat._unsupported import module_getattr

__all__ = [
    "Initializer",
    "zeros",
    "ones",
    "constant",
    "random_normal",
    "truncated_normal",
    "random_uniform",
    "variance_scaling",
    "glorot_uniform",
    "glorot_normal",
    "he_normal",
    "he_uniform",
    "lecun_normal",
    "zeros_initializer",
    "ones_initializer",
    "constant_initializer",
    "random_normal_initializer",
    "truncated_normal_initializer",
    "random_uniform_initializer",
    "variance_scaling_initializer",
    "glorot_uniform_initializer",
    "glorot_normal_initializer",
]

__getattr__ = module_getattr("tf.initializers", __name__)


class Initializer:
    """Base of the TF 1 initializer classes: calls ``self._fn(key, shape, dtype)``."""

    def __init__(self, fn, dtype: Any = jnp.float32) -> None:
        self._fn = fn
        self.dtype = dtype

    def __call__(self, key, shape, dtype=None):
        return self._fn(key, shape, dtype or self.dtype)


class zeros_initializer(Initializer):  # noqa: N801 (TF's names)
    """``tf.zeros_initializer``."""

    def __init__(self, dtype=jnp.float32) -> None:
        super().__init__(_init.zeros_initializer(), dtype)


class ones_initializer(Initializer):  # noqa: N801
    """``tf.ones_initializer``."""

    def __init__(self, dtype=jnp.float32) -> None:
        super().__init__(_init.ones_initializer(), dtype)


class constant_initializer(Initializer):  # noqa: N801
    """``tf.constant_initializer(value)``: a constant broadcast to the shape."""

    def __init__(self, value=0, dtype=jnp.float32, verify_shape=False) -> None:
        super().__init__(_init.constant_initializer(value), dtype)


class random_normal_initializer(Initializer):  # noqa: N801
    """``tf.random_normal_initializer(mean=0.0, stddev=1.0)``."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=jnp.float32) -> None:
        super().__init__(_init.random_normal_initializer(mean, stddev, seed), dtype)


class truncated_normal_initializer(Initializer):  # noqa: N801
    """``tf.truncated_normal_initializer(mean=0.0, stddev=1.0)`` (cut at two stddevs)."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=jnp.float32) -> None:
        super().__init__(_init.truncated_normal_initializer(mean, stddev, seed), dtype)


class random_uniform_initializer(Initializer):  # noqa: N801
    """``tf.random_uniform_initializer(minval=0, maxval=None)`` (maxval None: 1)."""

    def __init__(self, minval=0, maxval=None, seed=None, dtype=jnp.float32) -> None:
        super().__init__(_init.random_uniform_initializer(minval, maxval, seed), dtype)


class variance_scaling_initializer(Initializer):  # noqa: N801
    """``tf.variance_scaling_initializer(scale=1.0, mode="fan_in",
    distribution="truncated_normal")``."""

    def __init__(
        self,
        scale=1.0,
        mode="fan_in",
        distribution="truncated_normal",
        seed=None,
        dtype=jnp.float32,
    ) -> None:
        super().__init__(_init.variance_scaling_initializer(scale, mode, distribution, seed), dtype)


class glorot_uniform_initializer(Initializer):  # noqa: N801
    """``tf.glorot_uniform_initializer`` (Xavier uniform; TF 1's default for variables)."""

    def __init__(self, seed=None, dtype=jnp.float32) -> None:
        super().__init__(_init.glorot_uniform_initializer(seed), dtype)


class glorot_normal_initializer(Initializer):  # noqa: N801
    """``tf.glorot_normal_initializer`` (Xavier normal, truncated)."""

    def __init__(self, seed=None, dtype=jnp.float32) -> None:
        super().__init__(_init.glorot_normal_initializer(seed), dtype)


class he_normal(Initializer):  # noqa: N801
    """``tf.initializers.he_normal``."""

    def __init__(self, seed=None) -> None:
        super().__init__(_init.he_normal(seed))


class he_uniform(Initializer):  # noqa: N801
    """``tf.initializers.he_uniform``."""

    def __init__(self, seed=None) -> None:
        super().__init__(_init.he_uniform(seed))


class lecun_normal(Initializer):  # noqa: N801
    """``tf.initializers.lecun_normal``."""

    def __init__(self, seed=None) -> None:
        super().__init__(_init.lecun_normal(seed))


# ``tf.initializers.*`` spellings.
zeros = zeros_initializer
ones = ones_initializer
constant = constant_initializer
random_normal = random_normal_initializer
truncated_normal = truncated_normal_initializer
random_uniform = random_uniform_initializer
variance_scaling = variance_scaling_initializer
glorot_uniform = glorot_uniform_initializer
glorot_normal = glorot_normal_initializer


def resolve(initializer: Any) -> Any:
    """An initializer as ``estimator.get_variable`` takes it: a TF 1 initializer class is
    instantiated, as ``tf.get_variable`` does (internal)."""
    if isinstance(initializer, type) and issubclass(initializer, Initializer):
        return initializer()
    return initializer
