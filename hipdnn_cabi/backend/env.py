"""The process environment as C sees it: every ``HIPDNN_*`` variable is read through here at the
moment the spec says it is consulted."""
from __future__ import annotations

import os


def get(name: str, default=None):
    return os.environ.get(name, default)
