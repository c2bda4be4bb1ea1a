"""``tf.logging`` (TF 1.15's ``tf.compat.v1.logging``) on Python's ``logging``.

Messages go to the ``"tensorflow"`` logger, as TF's; ``set_verbosity`` sets its level and
that of the Estimator's own ``"estimator"`` logger (what TF 1 programs do to see the loss
every 100 steps), each with a stderr handler that prints while the root logger has none
(so a record is printed once, whether or not the program or absl configures logging).
"""

from __future__ import annotations

import logging as _logging
import sys

from estimator.compat._unsupported import module_getattr

__all__ = [
    "DEBUG",
    "INFO",
    "WARN",
    "ERROR",
    "FATAL",
    "set_verbosity",
    "get_verbosity",
    "debug",
    "info",
    "warn",
    "warning",
    "error",
    "fatal",
    "log",
    "log_every_n",
    "log_first_n",
    "vlog",
]

__getattr__ = module_getattr("tf.logging", __name__)

DEBUG = _logging.DEBUG
INFO = _logging.INFO
WARN = _logging.WARN
ERROR = _logging.ERROR
FATAL = _logging.FATAL

_LOGGER = _logging.getLogger("tensorflow")
_ESTIMATOR = _logging.getLogger("estimator")
_counts: dict[tuple, int] = {}


class _UntilConfigured(_logging.StreamHandler):
    """A handler of the current ``sys.stderr`` (as Python's last-resort handler) that prints
    only while the root logger has no handler: once the program (``logging.basicConfig``)
    or absl (``tf.app.run``) gives the root one, records reach it by propagation and are not
    printed twice."""

    def __init__(self) -> None:
        _logging.Handler.__init__(self)

    @property
    def stream(self):
        return sys.stderr

    def emit(self, record: _logging.LogRecord) -> None:
        if not _logging.getLogger().handlers:
            super().emit(record)


def set_verbosity(v: int) -> None:
    """``tf.logging.set_verbosity``: the level of TF's and the Estimator's loggers, each
    given a stderr handler that prints while nothing else is configured."""
    for logger in (_LOGGER, _ESTIMATOR):
        logger.setLevel(v)
        if not any(isinstance(h, _UntilConfigured) for h in logger.handlers):
            handler = _UntilConfigured()
            handler.setFormatter(_logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
            logger.addHandler(handler)


def get_verbosity() -> int:
    """``tf.logging.get_verbosity``."""
    return _LOGGER.getEffectiveLevel()


def log(level: int, msg, *args, **kwargs) -> None:
    """``tf.logging.log``."""
    _LOGGER.log(level, msg, *args, **kwargs)


def debug(msg, *args, **kwargs) -> None:
    """``tf.logging.debug``."""
    _LOGGER.debug(msg, *args, **kwargs)


def info(msg, *args, **kwargs) -> None:
    """``tf.logging.info``."""
    _LOGGER.info(msg, *args, **kwargs)


def warning(msg, *args, **kwargs) -> None:
    """``tf.logging.warning``."""
    _LOGGER.warning(msg, *args, **kwargs)


warn = warning


def error(msg, *args, **kwargs) -> None:
    """``tf.logging.error``."""
    _LOGGER.error(msg, *args, **kwargs)


def fatal(msg, *args, **kwargs) -> None:
    """``tf.logging.fatal``: logs at FATAL (TF also aborts; Python code raises instead)."""
    _LOGGER.critical(msg, *args, **kwargs)


def vlog(level: int, msg, *args) -> None:
    """``tf.logging.vlog``: logs at DEBUG."""
    _LOGGER.debug(msg, *args)


def log_every_n(level: int, msg, n: int, *args) -> None:
    """``tf.logging.log_every_n``: the 1st, (n+1)-th, ... call from one place."""
    key = (msg, level)
    count = _counts.get(key, 0)
    _counts[key] = count + 1
    if count % n == 0:
        _LOGGER.log(level, msg, *args)


def log_first_n(level: int, msg, n: int, *args) -> None:
    """``tf.logging.log_first_n``: the first ``n`` calls from one place."""
    key = (msg, level, "first")
    count = _counts.get(key, 0)
    _counts[key] = count + 1
    if count < n:
        _LOGGER.log(level, msg, *args)
