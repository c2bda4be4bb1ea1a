"""``tf.app`` (TF 1.15's ``tf.compat.v1.app``): ``run``.

``tf.app.run(main)`` calls ``main(sys.argv)`` and exits with its result, as TF's (which
also parses ``tf.app.flags``; define flags with ``argparse`` or ``absl.flags`` instead:
``tf.app.flags`` is not provided).
"""

from __future__ import annotations

import sys

from estimator.compat._unsupported import module_getattr

__all__ = ["run"]

__getattr__ = module_getattr("tf.app", __name__)


def run(main=None, argv=None):
    """``tf.app.run``: ``sys.exit(main(argv or sys.argv))``.

    Raises:
      SystemExit: always, with ``main``'s return value (None: status 0).
    """
    if main is None:
        main = sys.modules["__main__"].main
    sys.exit(main(list(argv) if argv is not None else list(sys.argv)))
