"""hipdnnPluginGetName / GetVersion / GetType."""
from __future__ import annotations

from ..core import Fail, Skip, check, fmt_call


def _valid_string(s, tag, fn):
    run = s.finished(s.probe)
    rec = run.one("string", tag)
    if rec is None:
        raise Skip(f"{fn} is not exported")
    if rec["st1"] != 0:
        raise Fail(fmt_call(run.one("call", tag + "_1")))
    v = rec["value"]
    if v is None:
        raise Fail(f"{fn}(&str) -> status 0 but *str is NULL")
    if not v or len(v) > 1024:
        raise Fail(f"{fn}(&str) -> {v!r}: must be a non-empty string shorter than 1024 characters")
    if any(ord(c) < 0x20 or ord(c) >= 0x7f for c in v):
        raise Fail(f"{fn}(&str) -> {v!r}: contains control or non-ASCII characters")
    return v


def identity_checks(register, type_value: int, kind: str):
    """Register the identity checks every plugin suite has, with ``register`` (the suite's check
    decorator, given the short id): name_valid, version_valid, strings_static and type_<kind>
    (hipdnnPluginGetType must answer HIPDNN_PLUGIN_TYPE_<KIND> = ``type_value``)."""
    @register("name_valid")
    def name_valid(s):
        """hipdnnPluginGetName succeeds with a non-empty printable string."""
        return repr(_valid_string(s, "name", "hipdnnPluginGetName"))

    @register("version_valid")
    def version_valid(s):
        """hipdnnPluginGetVersion succeeds with a non-empty printable string."""
        return repr(_valid_string(s, "version", "hipdnnPluginGetVersion"))

    @register("strings_static")
    def strings_static(s):
        """Name, version and API version strings are static: the same pointer and text on repeat calls."""
        run = s.finished(s.probe)
        bad = []
        for tag, fn in (("name", "hipdnnPluginGetName"), ("version", "hipdnnPluginGetVersion"),
                        ("api_version", "hipdnnPluginGetApiVersion")):
            rec = run.one("string", tag)
            if rec is None or rec["st1"] or rec["st2"]:
                continue
            if not rec["same_ptr"] or rec["value"] != rec["value2"]:
                bad.append(f"{fn}(&str) returned different pointers/text on two calls "
                           f"({rec['value']!r}, {rec['value2']!r})")
        if bad:
            raise Fail("; ".join(bad))
        return "same pointer on repeat"

    name = f"HIPDNN_PLUGIN_TYPE_{kind.upper()}"

    def type_check(s):
        run = s.finished(s.probe)
        rec = run.one("type")
        if rec is None:
            raise Fail("hipdnnPluginGetType is not exported")
        if rec["st"] != 0:
            raise Fail(fmt_call(run.one("call", "type")))
        if rec["value"] != type_value:
            raise Fail(f"hipdnnPluginGetType(&type) -> type {rec['value']}, expected {name} ({type_value})")
        return name
    type_check.__name__ = type_check.__qualname__ = f"type_{kind}"
    type_check.__doc__ = f"hipdnnPluginGetType reports {name} ({type_value})."
    register(f"type_{kind}")(type_check)


identity_checks(lambda cid: check("conform.plugin_info." + cid), 1, "engine")
