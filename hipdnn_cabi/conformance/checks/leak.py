"""Resource leaks over many create/destroy cycles (RSS growth bound)."""
from __future__ import annotations

from ..core import Fail, check


@check("conform.leak.create_destroy_cycles", slow=True)
def create_destroy_cycles(s):
    """N cycles of Create, [GetEngineDetails/Destroy, CreateExecutionContext/Destroy], Destroy keep RSS bounded."""
    _, _, case = s.first_case(required=False)
    n = s.scale.leak_cycles
    run = s.finished(s.child("leak", case, n, timeout=s.scale.long_timeout))
    r = run.one("leak")
    growth = r["rss_after_kib"] - r["rss_before_kib"]
    what = "handle+details+context" if r["with_context"] else "handle"
    if r["failures"]:
        raise Fail(f"{r['failures']} of {n} {what} cycles had a failing call")
    if growth > s.scale.leak_bound_kib:
        raise Fail(f"RSS grew by {growth} KiB over {n} {what} create/destroy cycles "
                   f"({growth * 1024 // max(n, 1)} bytes per cycle; bound {s.scale.leak_bound_kib} KiB)")
    return f"{n} {what} cycles, RSS growth {growth} KiB"
