"""Plugin status codes and the exception plugin code raises to return one."""
from __future__ import annotations

from .._generated.enums import PluginStatus

SUCCESS = int(PluginStatus.HIPDNN_PLUGIN_STATUS_SUCCESS)
BAD_PARAM = int(PluginStatus.HIPDNN_PLUGIN_STATUS_BAD_PARAM)
INVALID_VALUE = int(PluginStatus.HIPDNN_PLUGIN_STATUS_INVALID_VALUE)
INTERNAL_ERROR = int(PluginStatus.HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR)
ALLOC_FAILED = int(PluginStatus.HIPDNN_PLUGIN_STATUS_ALLOC_FAILED)
NOT_APPLICABLE = int(PluginStatus.HIPDNN_PLUGIN_STATUS_NOT_APPLICABLE)
NOT_INITIALIZED = int(PluginStatus.HIPDNN_PLUGIN_STATUS_NOT_INITIALIZED)


class PluginError(Exception):
    """Raise from plugin code to return ``status`` with ``message`` as the plugin's last error.
    Any other exception becomes HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR ("<Type>: <text>")."""

    def __init__(self, status, message: str = ""):
        super().__init__(message)
        self.status = int(status)
        self.message = message

    def __str__(self):
        return self.message


def bad_param(msg: str) -> PluginError:
    return PluginError(BAD_PARAM, msg)


def not_applicable(msg: str) -> PluginError:
    return PluginError(NOT_APPLICABLE, msg)
