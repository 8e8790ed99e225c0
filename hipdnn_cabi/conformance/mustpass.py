"""The must-pass list: every registered check whose ``mustpass`` flag is set (the default).

``python -m hipdnn_cabi.conformance.mustpass`` prints it; docs/conformance.md carries a copy and
tests/conformance checks the two agree.
"""
from __future__ import annotations

from .core import load_checks


def mustpass(kind: str = "plugin") -> list:
    plugin, backend = load_checks()
    reg = plugin if kind == "plugin" else backend
    return [c.id for c in reg.values() if c.mustpass]


if __name__ == "__main__":
    for k in ("plugin", "backend"):
        for cid in mustpass(k):
            print(cid)
