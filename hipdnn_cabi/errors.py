"""The exception tree shared by the backend core and the frontend.

One table, :data:`STATUS_TO_ERROR`, maps every ``hipdnnStatus_t`` to exactly one exception class;
raising ``X(msg)`` inside the backend returns ``X.status`` to C and stores ``msg`` as the calling
thread's last error.
"""
from __future__ import annotations

from ._generated.enums import Status


class HipdnnError(Exception):
    """Base class; ``status`` is the hipdnnStatus_t returned to the C caller."""

    status = Status.HIPDNN_STATUS_INTERNAL_ERROR

    def __init__(self, message: str = "", status: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = Status(status) if status in Status._value2member_map_ else status

    def __str__(self):  # pragma: no cover - trivial
        name = getattr(self.status, "name", str(self.status))
        return f"{name}: {self.message}" if self.message else name


class NotInitializedError(HipdnnError):
    status = Status.HIPDNN_STATUS_NOT_INITIALIZED


class BadParamError(HipdnnError):
    status = Status.HIPDNN_STATUS_BAD_PARAM


class NullPointerError(BadParamError):
    status = Status.HIPDNN_STATUS_BAD_PARAM_NULL_POINTER


class NotFinalizedError(BadParamError):
    status = Status.HIPDNN_STATUS_BAD_PARAM_NOT_FINALIZED


class OutOfBoundError(BadParamError):
    status = Status.HIPDNN_STATUS_BAD_PARAM_OUT_OF_BOUND


class SizeInsufficientError(BadParamError):
    status = Status.HIPDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT


class StreamMismatchError(BadParamError):
    status = Status.HIPDNN_STATUS_BAD_PARAM_STREAM_MISMATCH


class NotSupportedError(HipdnnError):
    status = Status.HIPDNN_STATUS_NOT_SUPPORTED


class InternalError(HipdnnError):
    status = Status.HIPDNN_STATUS_INTERNAL_ERROR


class AllocFailedError(HipdnnError):
    status = Status.HIPDNN_STATUS_ALLOC_FAILED


class HostAllocationFailedError(InternalError):
    status = Status.HIPDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED


class DeviceAllocationFailedError(InternalError):
    status = Status.HIPDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED


class ExecutionFailedError(HipdnnError):
    status = Status.HIPDNN_STATUS_EXECUTION_FAILED


class PluginError(HipdnnError):
    status = Status.HIPDNN_STATUS_PLUGIN_ERROR


STATUS_TO_ERROR: dict[int, type[HipdnnError]] = {
    Status.HIPDNN_STATUS_NOT_INITIALIZED: NotInitializedError,
    Status.HIPDNN_STATUS_BAD_PARAM: BadParamError,
    Status.HIPDNN_STATUS_BAD_PARAM_NULL_POINTER: NullPointerError,
    Status.HIPDNN_STATUS_BAD_PARAM_NOT_FINALIZED: NotFinalizedError,
    Status.HIPDNN_STATUS_BAD_PARAM_OUT_OF_BOUND: OutOfBoundError,
    Status.HIPDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT: SizeInsufficientError,
    Status.HIPDNN_STATUS_BAD_PARAM_STREAM_MISMATCH: StreamMismatchError,
    Status.HIPDNN_STATUS_NOT_SUPPORTED: NotSupportedError,
    Status.HIPDNN_STATUS_INTERNAL_ERROR: InternalError,
    Status.HIPDNN_STATUS_ALLOC_FAILED: AllocFailedError,
    Status.HIPDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED: HostAllocationFailedError,
    Status.HIPDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED: DeviceAllocationFailedError,
    Status.HIPDNN_STATUS_EXECUTION_FAILED: ExecutionFailedError,
    Status.HIPDNN_STATUS_PLUGIN_ERROR: PluginError,
}


def error_for_status(status: int, message: str = "") -> HipdnnError:
    """The exception instance for a non-success status (unknown values → HipdnnError)."""
    cls = STATUS_TO_ERROR.get(status, HipdnnError)
    return cls(message, status=status)
