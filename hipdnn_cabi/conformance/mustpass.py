"""The must-pass list: every registered check whose ``mustpass`` flag is set (the default).

``python -m hipdnn_cabi.conformance.mustpass`` prints it; docs/conformance.md carries a copy and
tests/conformance checks the two agree.
"""
from __future__ import annotations

from .checks import registry


def mustpass(kind: str = "plugin") -> list:
    """kind: "plugin" (engine plugins), "heuristic" or "backend"."""
    return [c.id for c in registry(kind).values() if c.mustpass]


if __name__ == "__main__":
    for k in ("plugin", "heuristic", "backend"):
        for cid in mustpass(k):
            print(cid)
