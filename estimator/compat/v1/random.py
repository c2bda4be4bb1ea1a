"""``tf.random`` (TF 1.15): ``normal``, ``uniform``, ``truncated_normal``, ``shuffle``,
``set_random_seed`` (see ``_framework`` for where the randomness comes from)."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1._framework import random_normal as normal
from estimator.compat.v1._framework import random_shuffle as shuffle
from estimator.compat.v1._framework import random_uniform as uniform
from estimator.compat.v1._framework import set_random_seed as set_random_seed
from estimator.compat.v1._framework import truncated_normal as truncated_normal

__all__ = ["normal", "uniform", "truncated_normal", "shuffle", "set_random_seed"]

__getattr__ = module_getattr("tf.random", __name__)
