"""TF's dtypes as the NumPy dtypes jax uses (``tf.float32`` is ``jnp.float32``).

``int64``/``float64`` exist under their names; arrays of them are 32-bit unless
``jax_enable_x64`` is set (ops cast silently, as jax's array creation does). ``string`` is
NumPy's ``object``: strings stay on the host (input pipelines, feature columns).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1._base import dtype as _canonical

__all__ = [
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "half",
    "double",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "complex64",
    "complex128",
    "string",
    "as_dtype",
    "DType",
]

__getattr__ = module_getattr("tf.dtypes", __name__)

float16 = half = jnp.float16
bfloat16 = jnp.bfloat16
float32 = jnp.float32
float64 = double = jnp.float64
int8 = jnp.int8
int16 = jnp.int16
int32 = jnp.int32
int64 = jnp.int64
uint8 = jnp.uint8
uint16 = jnp.uint16
uint32 = jnp.uint32
uint64 = jnp.uint64
bool = jnp.bool_  # noqa: A001 (TF's name)
complex64 = jnp.complex64
complex128 = jnp.complex128
string = np.object_
DType = np.dtype


def as_dtype(type_value):
    """``tf.as_dtype``: the NumPy dtype jax uses for ``type_value``."""
    return _canonical(type_value)
