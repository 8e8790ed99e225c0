"""hipdnnPlugin*/hipdnnEnginePlugin* symbol exports (spec §3.5)."""
from __future__ import annotations

from ...backend.plugins.loader import BASE_OPTIONAL, BASE_REQUIRED, ENGINE_OPTIONAL, ENGINE_REQUIRED
from ..core import Fail, Skip, check
from .elf import dynamic_symbols

REQUIRED = BASE_REQUIRED + ENGINE_REQUIRED
OPTIONAL = BASE_OPTIONAL + ENGINE_OPTIONAL + ("hipdnnEnginePluginSerializeExecutionContextWithEngineId",)


@check("conform.symbols.required_exported")
def required_exported(s):
    """Every required plugin symbol resolves with dlsym (RTLD_LOCAL) in a host process."""
    syms = s.finished(s.probe) and s.symbols()
    missing = [n for n in REQUIRED if not syms.get(n)]
    if missing:
        raise Fail("dlsym(plugin, name) returned NULL for required symbol(s): " + ", ".join(missing))
    return f"{len(REQUIRED)} required symbols resolve"


@check("conform.symbols.default_visibility")
def default_visibility(s):
    """Exported plugin API symbols are defined GLOBAL/WEAK FUNC symbols with default visibility."""
    table = dynamic_symbols(s.plugin)
    if table is None:
        raise Skip("not an ELF64 little-endian shared object")
    bad = []
    for n in REQUIRED + OPTIONAL:
        if n not in table:
            continue
        typ, bind, vis, defined = table[n]
        if not defined:
            continue  # undefined reference (e.g. imported): not an export, reported by dlsym check
        if typ not in ("FUNC", "GNU_IFUNC") or bind not in ("GLOBAL", "WEAK") or vis not in ("DEFAULT", "PROTECTED"):
            bad.append(f"{n}: {typ} {bind} {vis}")
    if bad:
        raise Fail("plugin API symbols with the wrong kind/visibility in .dynsym: " + "; ".join(bad))
    return "plugin API symbols are default-visibility functions"
