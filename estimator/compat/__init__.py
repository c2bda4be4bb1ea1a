"""TF 1's API on JAX, for Estimator programs: ``estimator.compat`` and ``estimator.compat.v1``.

* ``import estimator.compat.v1 as tf`` replaces ``import tensorflow.compat.v1 as tf``;
* ``import estimator.compat as tf`` replaces ``import tensorflow as tf`` in TF 1.x code:
  the same namespace, plus ``tf.compat.v1``;
* ``python -m estimator.compat.check program.py`` lists the TF symbols a program uses and
  which of them are covered.

See ``estimator.compat.v1`` for what the namespace is and how it differs from TF.
"""

from __future__ import annotations

import types

from estimator.compat import v1 as v1
from estimator.compat._unsupported import UnsupportedSymbolError as UnsupportedSymbolError
from estimator.compat._unsupported import unsupported as _unsupported


class _CompatNamespace(types.ModuleType):
    """``tf.compat``: ``v1`` only."""

    def __init__(self) -> None:
        super().__init__("estimator.compat.compat", "tf.compat: the TF 1 API as tf.compat.v1.")
        self.v1 = v1

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        raise _unsupported(f"tf.compat.{name}")


compat = _CompatNamespace()

#: The TF 1 API level followed (``tf.__version__``): ``estimator.compat.v1.__version__``.
__version__ = v1.__version__

__all__ = sorted({*v1.__all__, "compat", "UnsupportedSymbolError"})


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(v1, name)


def __dir__() -> list[str]:
    return list(__all__)
