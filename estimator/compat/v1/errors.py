"""``tf.errors`` (TF 1.15): TF's exception classes and error codes, and the bridge that
raises them for the package's own errors.

Programs catch these (``except tf.errors.OutOfRangeError``, ``except
tf.errors.DataLossError``) around input and file access. The classes have TF's names,
hierarchy (each an :class:`OpError`, itself an ``Exception``), constructor ``(node_def, op,
message)`` and ``error_code``.

The native API (``estimator.io``, ``estimator.checkpoint``, ``os``) raises its own
exceptions: ``CorruptRecordError``, ``FileNotFoundError``, ``ValueError`` for bad data, ...
Where TF raises one of its classes for the same reason, the compat namespaces raise
:func:`tf_error` of the native exception instead: an instance of a class that derives from
*both* TF's class and the native one (``DataLossError`` and ``CorruptRecordError``), named as
TF's, with TF's message first and the native one's attributes (``path``, ``offset``,
``filename``). A program catching either class works. Which call raises which class is
listed, with TF 2.15's class for each path, in ``tests/compat/test_compat_errors.py``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

from estimator.checkpoint.reader import DataLossError as _CheckpointDataLoss
from estimator.compat._unsupported import module_getattr
from estimator.io.fs import ProtocolUnavailableError as _ProtocolUnavailable
from estimator.io.tfrecord import CorruptRecordError as _CorruptRecord
from estimator.model.input_checks import IdRangeError as _IdRangeError

__getattr__ = module_getattr("tf.errors", __name__)

# TF's error codes (``tensorflow/core/protobuf/error_codes.proto``).
OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """``tf.errors.OpError``: the base class of TF's runtime errors.

    Args:
      node_def: the op's ``NodeDef`` (None here: there is no graph).
      op: the failing op (None here).
      message: the error message.
      error_code: one of the codes of this module.
    """

    def __init__(self, node_def, op, message: str, error_code: int = UNKNOWN, *args) -> None:
        Exception.__init__(self, message)  # not super(): a bridged class's native __init__
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = error_code

    @property
    def message(self) -> str:
        return self._message

    @property
    def op(self):
        return self._op

    @property
    def node_def(self):
        return self._node_def

    @property
    def error_code(self) -> int:
        return self._error_code

    def __str__(self) -> str:
        return self._message

    def __reduce__(self):
        return type(self), (self._node_def, self._op, self._message)


def _error(name: str, code: int, doc: str) -> type[OpError]:
    def __init__(self, node_def, op, message: str, *args) -> None:
        OpError.__init__(self, node_def, op, message, code)

    namespace = {"__init__": __init__, "__doc__": doc, "__module__": __name__, "code": code}
    return type(name, (OpError,), namespace)


CancelledError = _error("CancelledError", CANCELLED, "An operation was cancelled.")
UnknownError = _error("UnknownError", UNKNOWN, "An unknown error.")
InvalidArgumentError = _error("InvalidArgumentError", INVALID_ARGUMENT, "A bad argument.")
DeadlineExceededError = _error("DeadlineExceededError", DEADLINE_EXCEEDED, "A timeout.")
NotFoundError = _error("NotFoundError", NOT_FOUND, "A file or entity was not found.")
AlreadyExistsError = _error("AlreadyExistsError", ALREADY_EXISTS, "It already exists.")
PermissionDeniedError = _error("PermissionDeniedError", PERMISSION_DENIED, "Not permitted.")
UnauthenticatedError = _error("UnauthenticatedError", UNAUTHENTICATED, "No credentials.")
ResourceExhaustedError = _error("ResourceExhaustedError", RESOURCE_EXHAUSTED, "Out of a resource.")
FailedPreconditionError = _error(
    "FailedPreconditionError", FAILED_PRECONDITION, "The system is not in a state to run it."
)
AbortedError = _error("AbortedError", ABORTED, "An operation was aborted.")
OutOfRangeError = _error("OutOfRangeError", OUT_OF_RANGE, "Past the end (of an input).")
UnimplementedError = _error("UnimplementedError", UNIMPLEMENTED, "Not implemented.")
InternalError = _error("InternalError", INTERNAL, "An internal error.")
UnavailableError = _error("UnavailableError", UNAVAILABLE, "A service is unavailable.")
DataLossError = _error("DataLossError", DATA_LOSS, "Data were lost or corrupted.")

__all__ = [
    "OpError",
    "NATIVE_CLASSES",
    "bridge",
    "raising_tf_errors",
    "tf_error",
    "with_tf_errors",
    "CancelledError",
    "UnknownError",
    "InvalidArgumentError",
    "DeadlineExceededError",
    "NotFoundError",
    "AlreadyExistsError",
    "PermissionDeniedError",
    "UnauthenticatedError",
    "ResourceExhaustedError",
    "FailedPreconditionError",
    "AbortedError",
    "OutOfRangeError",
    "UnimplementedError",
    "InternalError",
    "UnavailableError",
    "DataLossError",
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "UNAUTHENTICATED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
]


# ----- the bridge from the package's own errors ---------------------------------------------
#: The TF class that stands for each native exception class (the first match wins).
NATIVE_CLASSES: tuple[tuple[type[BaseException], type[OpError]], ...] = (
    (_CorruptRecord, DataLossError),
    (_CheckpointDataLoss, DataLossError),
    (_ProtocolUnavailable, UnimplementedError),
    (_IdRangeError, InvalidArgumentError),
    (FileNotFoundError, NotFoundError),
    (FileExistsError, AlreadyExistsError),
    (IsADirectoryError, FailedPreconditionError),
    (NotADirectoryError, FailedPreconditionError),
    (PermissionError, PermissionDeniedError),
    (StopIteration, OutOfRangeError),
)


def _rebuild(tf_class: type[OpError], native_class: type, message: str, attrs: dict):
    error = bridge(tf_class, native_class)(None, None, message)
    error.__dict__.update(attrs)
    return error


@functools.cache
def bridge(tf_class: type[OpError], native_class: type[BaseException]) -> type[OpError]:
    """The class deriving from ``tf_class`` and ``native_class``, named as ``tf_class``.

    Its instances are made as TF's, ``(node_def, op, message)``; ``str()`` is the message.
    """
    if issubclass(native_class, tf_class):
        return native_class

    def __init__(self, node_def, op, message: str, *args) -> None:
        OpError.__init__(self, node_def, op, message, tf_class.code)

    def __reduce__(self):
        attrs = dict(self.__dict__)
        message = attrs.pop("_message")
        for key in ("_node_def", "_op", "_error_code"):
            attrs.pop(key, None)
        return _rebuild, (tf_class, native_class, message, attrs)

    namespace = {
        "__init__": __init__,
        "__reduce__": __reduce__,
        "__str__": OpError.__str__,
        "__module__": __name__,
        "__qualname__": tf_class.__qualname__,
        "__doc__": f"{tf_class.__doc__} (and a {native_class.__name__})",
    }
    if issubclass(native_class, OSError):
        namespace["__new__"] = lambda cls, *args: OSError.__new__(cls)
    return type(tf_class.__name__, (tf_class, native_class), namespace)


def _message(error: BaseException, tf_class: type[OpError]) -> str:
    """TF's message for ``error``: ``path; reason`` for a system error (TF's file systems
    say it so), ``corrupted record at <offset>`` (or ``truncated``) for a damaged TFRecord
    (the native message follows), else the native message."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}; {error.strerror}"
    if isinstance(error, _CorruptRecord):  # TF's "corrupted record at 12", then where and why
        text = str(error)
        for phrase, tf_phrase in (
            ("truncated record", "truncated"),
            ("corrupt record", "corrupted"),
        ):
            if phrase in text:
                return f"{tf_phrase} record at {error.offset} ({text})"
    if isinstance(error, StopIteration):
        return "End of sequence"
    return str(error)


def tf_error(
    error: BaseException,
    data_error: type[OpError] | None = None,
    message: str | None = None,
    classes: dict[type[BaseException], type[OpError]] | None = None,
) -> BaseException:
    """The exception a TF program sees for the native ``error`` (see the module docstring).

    Args:
      error: an exception the native API raised.
      data_error: the TF class for a ``ValueError`` that no entry of
        :data:`NATIVE_CLASSES` covers (a bad value in the data: ``InvalidArgumentError``
        for parsing and decoding), or None to leave such errors as they are.
      message: TF's message, when it is not the native one; the native message follows it.
      classes: native class -> TF class, where the call site's TF class differs from
        :data:`NATIVE_CLASSES` (looked up first).

    Returns:
      ``error`` itself when it is already a TF error or no TF class stands for it; else a
      new exception of :func:`bridge` ``(tf_class, type(error))``, whose ``__cause__`` is
      ``error``.
    """
    if isinstance(error, OpError):
        return error
    table = (*(classes or {}).items(), *NATIVE_CLASSES)
    tf_class = next((t for n, t in table if isinstance(error, n)), None)
    if tf_class is None and data_error is not None and isinstance(error, ValueError):
        tf_class = data_error
    if tf_class is None:
        return error
    text = _message(error, tf_class)
    if message is not None:
        text = message if text in ("", message) else f"{message} ({text})"
    translated = bridge(tf_class, type(error))(None, None, text)
    translated.__dict__.update(error.__dict__)
    if isinstance(error, OSError):
        translated.errno, translated.strerror = error.errno, error.strerror
        translated.filename, translated.filename2 = error.filename, error.filename2
    translated.__cause__ = error
    translated.__suppress_context__ = True
    return translated


@contextlib.contextmanager
def raising_tf_errors(data_error: type[OpError] | None = None) -> Iterator[None]:
    """Within the block, native errors are raised as :func:`tf_error` makes them."""
    try:
        yield
    except Exception as error:
        translated = tf_error(error, data_error)
        if translated is error:
            raise
        raise translated.with_traceback(error.__traceback__) from error


def with_tf_errors(
    function: Callable,
    data_error: type[OpError] | None = None,
    messages: dict | None = None,
    classes: dict | None = None,
) -> Callable:
    """``function`` raising :func:`tf_error` s (``data_error``, ``classes``: as there);
    ``messages`` maps a TF class to TF's message for this function (``"{0}"`` is the first
    argument: ``"Could not find directory {0}"``)."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as error:
            translated = tf_error(error, data_error, classes=classes)
            if translated is error:
                raise
            template = (messages or {}).get(type(translated).__mro__[1])
            if template is not None:
                message = template.format(*args, **kwargs)
                translated = tf_error(error, data_error, message, classes)
            raise translated.with_traceback(error.__traceback__) from error

    return wrapper
