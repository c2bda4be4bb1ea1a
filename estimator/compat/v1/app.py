"""``tf.app`` (TF 1.15's ``tf.compat.v1.app``): ``run`` and ``flags``, on absl.

TF 1's ``tf.app.flags`` (and ``tf.flags``) is absl's flags module, and ``tf.app.run`` is
absl's ``app.run`` with a flags parser that tolerates undefined flags (they stay in the
``argv`` given to ``main``, so ``argparse`` programs keep working). Both are the same
here, on the ``absl-py`` package.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from absl import app as _absl_app
from absl import flags as flags

from estimator.compat._unsupported import module_getattr

__all__ = ["run", "flags"]

__getattr__ = module_getattr("tf.app", __name__)


def _parse_flags_tolerate_undef(argv: list[str]) -> list[str]:
    """absl's flags parsed from ``argv``; unknown flags are returned with the positional
    arguments (TF's parser; absl's own fails on them)."""
    return flags.FLAGS(sys.argv if argv is None else argv, known_only=True)


def run(main: Callable | None = None, argv: list[str] | None = None):
    """``tf.app.run``: parses the absl flags in ``argv`` (``sys.argv`` by default), then
    exits with ``main(remaining argv)``'s result.

    Raises:
      SystemExit: always, with ``main``'s return value (None: status 0).
    """
    main = main or sys.modules["__main__"].main
    _absl_app.run(main=main, argv=argv, flags_parser=_parse_flags_tolerate_undef)
