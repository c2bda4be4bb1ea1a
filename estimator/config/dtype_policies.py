"""The dtype policy object (Keras 3's ``keras.DTypePolicy``): a name and the two dtypes it
stands for. ``RunConfig(dtype_policy=...)`` holds one; ``estimator.model.dtype_policy``
applies it inside ``model_fn`` (autocasting, loss scaling) and documents what each policy
does.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

__all__ = ["DTypePolicy", "get"]


_NAMES = ("float32", "mixed_bfloat16", "mixed_float16")


class DTypePolicy:
    """A dtype policy (``keras.DTypePolicy``): the dtypes of variables and of computation.

    Args:
      name: ``"float32"`` (variables and computation in float32), ``"mixed_bfloat16"`` or
        ``"mixed_float16"`` (variables in float32, computation in bfloat16 / float16, and
        for float16 dynamic loss scaling).

    Attributes:
      name: the policy's name.
      compute_dtype: the dtype layers compute in (``jnp.dtype``).
      variable_dtype: the dtype variables are stored in (always float32 here).
      loss_scaling: whether the train step scales the loss (``mixed_float16``).

    Raises:
      TypeError: a name that is not a string (Keras' message).
      ValueError: any other name, naming the accepted ones.
    """

    def __init__(self, name: str = "float32") -> None:
        if not isinstance(name, str):
            raise TypeError(
                "'name' must be a string, such as 'mixed_float16'. "
                f"Received: name={name} (of type {type(name)})"
            )
        if name not in _NAMES:
            hint = ""
            if name in ("bfloat16", "float16", "float64", "half"):
                hint = (
                    f" A policy of {name!r} would keep the variables in that dtype; here "
                    "variables are always float32 (checkpoints and exports stay "
                    "float32): use 'mixed_bfloat16' or 'mixed_float16' to compute in a "
                    "lower precision."
                )
            raise ValueError(
                f"Cannot convert {name!r} to a dtype policy. Valid policies are "
                f"{', '.join(repr(n) for n in _NAMES)}.{hint}"
            )
        self.name = name
        self.variable_dtype = jnp.dtype(jnp.float32)
        self.compute_dtype = jnp.dtype(
            {"float32": jnp.float32, "mixed_bfloat16": jnp.bfloat16}.get(name, jnp.float16)
        )
        self.loss_scaling = name == "mixed_float16"

    @property
    def mixed(self) -> bool:
        """Whether computation runs in a lower precision than the variables."""
        return self.compute_dtype != self.variable_dtype

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DTypePolicy) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f'<DTypePolicy "{self.name}">'


def get(policy: Any) -> DTypePolicy:
    """The :class:`DTypePolicy` for ``policy``: a name, a ``DTypePolicy``, a Keras
    ``keras.DTypePolicy`` (by its name), or None (``"float32"``).

    Raises:
      TypeError, ValueError: as :class:`DTypePolicy`.
    """
    if policy is None:
        return DTypePolicy("float32")
    if isinstance(policy, DTypePolicy):
        return policy
    if not isinstance(policy, str) and isinstance(getattr(policy, "name", None), str):
        return DTypePolicy(policy.name)  # keras.DTypePolicy("mixed_bfloat16")
    return DTypePolicy(policy)
