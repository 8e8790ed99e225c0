"""Log helpers shared by the engine- and heuristic-plugin hosts (the backend's logger)."""
from __future__ import annotations

from ..._generated.enums import Severity
from .. import log


def err(msg):
    log.log(Severity.HIPDNN_SEV_ERROR, msg)


def warn(msg):
    if log.enabled(Severity.HIPDNN_SEV_WARN):
        log.log(Severity.HIPDNN_SEV_WARN, msg)


def info(msg):
    if log.enabled(Severity.HIPDNN_SEV_INFO):
        log.log(Severity.HIPDNN_SEV_INFO, msg)
