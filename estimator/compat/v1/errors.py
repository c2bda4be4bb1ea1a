"""``tf.errors`` (TF 1.15): TF's exception classes and error codes.

Programs catch these (``except tf.errors.OutOfRangeError``) around input and file access.
The classes have TF's names, hierarchy (each an :class:`OpError`, itself an
``Exception``), constructor ``(node_def, op, message)`` and ``error_code``. Where this
package raises for the same reason TF raises one of them it raises a Python error
instead (``ValueError`` for bad arguments, ``FileNotFoundError`` for missing files); the
classes exist so that TF code naming them runs.
"""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr

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
        super().__init__(message)
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

    def __reduce__(self):
        return type(self), (self._node_def, self._op, self._message)


def _error(name: str, code: int, doc: str) -> type[OpError]:
    def __init__(self, node_def, op, message: str, *args) -> None:
        OpError.__init__(self, node_def, op, message, code)

    return type(name, (OpError,), {"__init__": __init__, "__doc__": doc, "__module__": __name__})


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
