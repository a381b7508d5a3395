"""TensorFlow's error classes and canonical codes (``tf.errors``).

Every runtime failure raised by a step is an :class:`OpError` subclass carrying the
canonical code, the message and, where one is at fault, the node (``node_def``) and
its :class:`~flowrt.graph.Operation` (``op``). Graph-construction mistakes raise
``TypeError``/``ValueError`` at build time, as TensorFlow does.
"""
from __future__ import annotations

from typing import Any

__all__ = [
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "UNAUTHENTICATED", "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
    "UNAVAILABLE", "DATA_LOSS",
    "OpError", "CancelledError", "UnknownError", "InvalidArgumentError",
    "DeadlineExceededError", "NotFoundError", "AlreadyExistsError", "PermissionDeniedError",
    "UnauthenticatedError", "ResourceExhaustedError", "FailedPreconditionError",
    "AbortedError", "OutOfRangeError", "UnimplementedError", "InternalError",
    "UnavailableError", "DataLossError", "exception_type_from_error_code",
    "error_code_from_exception_type",
]

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
    """A failure while running a step (``tf.errors.OpError``).

    :param node_def: the failing node's NodeDef, or None
    :param op: the failing :class:`~flowrt.graph.Operation`, or None
    :param message: what went wrong, naming the node, op, device or address at fault
    :param error_code: the canonical code (``flowrt.errors.INVALID_ARGUMENT`` ...)
    """

    error_code_default = UNKNOWN

    def __init__(self, node_def: Any, op: Any, message: str, error_code: int | None = None):
        super().__init__(message)
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = self.error_code_default if error_code is None else error_code

    @property
    def message(self) -> str:
        return self._message

    @property
    def op(self) -> Any:
        return self._op

    @property
    def node_def(self) -> Any:
        if self._node_def is None and self._op is not None:
            try:
                self._node_def = self._op.node_def
            except Exception:  # pragma: no cover - best effort
                pass
        return self._node_def

    @property
    def error_code(self) -> int:
        return self._error_code

    def __str__(self) -> str:
        return self._message

    def __reduce__(self):  # keeps exceptions copyable across threads/futures
        if type(self) is OpError:
            return (OpError, (self._node_def, self._op, self._message, self._error_code))
        return (type(self), (self._node_def, self._op, self._message))


def _subclass(name: str, code: int, doc: str) -> type[OpError]:
    def __init__(self, node_def: Any, op: Any, message: str, *args: Any, **kwargs: Any) -> None:
        OpError.__init__(self, node_def, op, message, code)

    cls = type(name, (OpError,), {"__init__": __init__, "__doc__": doc,
                                  "error_code_default": code, "__module__": __name__})
    return cls


CancelledError = _subclass("CancelledError", CANCELLED, "The step or operation was cancelled.")
UnknownError = _subclass("UnknownError", UNKNOWN, "An error of an unknown kind.")
InvalidArgumentError = _subclass("InvalidArgumentError", INVALID_ARGUMENT,
                                 "An operation received an invalid argument.")
DeadlineExceededError = _subclass("DeadlineExceededError", DEADLINE_EXCEEDED,
                                  "A deadline expired before the operation completed.")
NotFoundError = _subclass("NotFoundError", NOT_FOUND, "A requested entity was not found.")
AlreadyExistsError = _subclass("AlreadyExistsError", ALREADY_EXISTS, "An entity already exists.")
PermissionDeniedError = _subclass("PermissionDeniedError", PERMISSION_DENIED,
                                  "The caller may not run the operation.")
UnauthenticatedError = _subclass("UnauthenticatedError", UNAUTHENTICATED,
                                 "The request has no valid credentials.")
ResourceExhaustedError = _subclass("ResourceExhaustedError", RESOURCE_EXHAUSTED,
                                   "Some resource (memory, queue capacity) is exhausted.")
FailedPreconditionError = _subclass("FailedPreconditionError", FAILED_PRECONDITION,
                                    "The system is not in a state to run the operation "
                                    "(e.g. an uninitialised variable).")
AbortedError = _subclass("AbortedError", ABORTED, "The operation was aborted.")
OutOfRangeError = _subclass("OutOfRangeError", OUT_OF_RANGE,
                            "Iteration past the valid range (e.g. a closed, empty queue).")
UnimplementedError = _subclass("UnimplementedError", UNIMPLEMENTED,
                               "The operation is not implemented or supported.")
InternalError = _subclass("InternalError", INTERNAL, "An internal invariant was broken.")
UnavailableError = _subclass("UnavailableError", UNAVAILABLE,
                             "The runtime (a task, a server) is currently unavailable.")
DataLossError = _subclass("DataLossError", DATA_LOSS, "Unrecoverable data loss or corruption.")

_CODE_TO_CLASS: dict[int, type[OpError]] = {
    cls.error_code_default: cls for cls in (
        CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
        NotFoundError, AlreadyExistsError, PermissionDeniedError, UnauthenticatedError,
        ResourceExhaustedError, FailedPreconditionError, AbortedError, OutOfRangeError,
        UnimplementedError, InternalError, UnavailableError, DataLossError)
}


def exception_type_from_error_code(error_code: int) -> type[OpError]:
    """The :class:`OpError` subclass for a canonical code (UnknownError if unknown)."""
    return _CODE_TO_CLASS.get(error_code, UnknownError)


def error_code_from_exception_type(cls: type[BaseException]) -> int:
    """The canonical code of an :class:`OpError` subclass (UNKNOWN otherwise)."""
    return getattr(cls, "error_code_default", UNKNOWN)
