"""``hipdnn-cabi info | engines | demo`` (wired into :mod:`hipdnn_cabi.cli`)."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

import hipdnn_cabi

from .. import capi, device
from ..backend import env as _env  # the C environment (os.environ without the library)
from . import Handle, engines, loaded_plugin_paths, version_string
from .._generated.enums import DataType, Severity
from .graph import Graph


def _gpu():
    try:
        if device.available():
            rt = device.get_runtime()
            return f"yes ({type(rt).__name__})"
        return f"no ({device.unavailable_reason()})"
    except Exception as e:  # never fail `info` on this
        return f"no ({type(e).__name__}: {e})"


def info(argv) -> int:
    p = argparse.ArgumentParser(prog="hipdnn-cabi info",
                                description="library, headers, plugin dirs, loaded plugins and engines, GPU runtime")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    a = p.parse_args(argv)
    lib = capi.backend_library_path()
    out = {
        "version": hipdnn_cabi.__version__,
        "library": os.path.abspath(lib),
        "library_selected_by": "HIPDNN_CABI_BACKEND_LIB" if os.environ.get("HIPDNN_CABI_BACKEND_LIB")
        else "embedded",
        "backend_version": "",
        "include_dir": hipdnn_cabi.include_dir(),
        "library_dir": hipdnn_cabi.library_dir(),
        "default_engine_plugin_dir": os.path.join(hipdnn_cabi.library_dir(), "hipdnn_plugins", "engines"),
        "HIPDNN_PLUGIN_DIR": _env.get("HIPDNN_PLUGIN_DIR") or "",
        "loaded_engine_plugins": [],
        "engines": [],
        "gpu_runtime": _gpu(),
    }
    rc = 0
    try:
        out["backend_version"] = version_string()
        with Handle() as h:
            out["loaded_engine_plugins"] = loaded_plugin_paths(h)
            out["engines"] = [e.__dict__ for e in engines(h)]
    except Exception as e:
        out["error"] = str(e)
        rc = 1
    if a.json:
        print(json.dumps(out, indent=2))
        return rc
    w = max(len(k) for k in out)
    for k, v in out.items():
        if k == "engines":
            print(f"{k:<{w}}  {len(v)}")
            for e in v:
                print(f"{'':<{w}}    {e['name']}  (id {e['id']}, plugin {e['plugin_name']} {e['version']})")
        elif k == "loaded_engine_plugins":
            print(f"{k:<{w}}  {len(v)}")
            for x in v:
                print(f"{'':<{w}}    {x}")
        else:
            print(f"{k:<{w}}  {v}")
    return rc


DECLINED = re.compile(r"([A-Za-z0-9_:.\-]+) declined the graph: (.*?)"
                      r"(?=; [A-Za-z0-9_:.\-]+ declined the graph: |$)")


def probe_engines(h) -> tuple[set, dict]:
    """Which engines accept a one-node float32 ReLU graph on this machine: (accepted engine ids,
    {engine name: why it declined}).  The reasons come from the backend's own decline log lines
    (a user log callback at INFO while the heuristics run) and, when no engine accepts, from the
    last error of the heuristics."""
    a = h.api
    ffi, lib = a.ffi, a.lib
    lines: list[str] = []

    @ffi.callback("void(hipdnnUserLogCallbackHandle_t, hipdnnSeverity_t, const char*)")
    def _cb(user, sev, msg):
        if msg:
            lines.append(ffi.string(msg).decode("utf-8", "replace"))

    user = ffi.cast("hipdnnUserLogCallbackHandle_t", 1)
    old = ffi.new("hipdnnSeverity_t*")
    have_old = lib.hipdnnBackendGetGlobalLogLevel_ext(old) == 0
    registered = lib.hipdnnSetUserLogCallback_ext(_cb, int(Severity.HIPDNN_SEV_INFO), 0, user) == 0
    if registered:
        lib.hipdnnBackendSetGlobalLogLevel_ext(int(Severity.HIPDNN_SEV_INFO))
    accepted, why = set(), {}
    try:
        f32 = DataType.HIPDNN_DATA_FLOAT
        g = Graph(handle=h, io_data_type=f32, compute_data_type=f32, name="engines_probe")
        x = g.tensor(name="x", dim=[1, 1, 1, 8])
        g.relu(x).set_output(True).set_name("y")
        g.build_operation_graph(h)
        try:
            accepted = set(g.get_ranked_engine_ids())
        except Exception as e:  # noqa: BLE001 - no engine accepted: the reasons are in the text
            lines.append(str(e))
    finally:
        if registered:
            lib.hipdnnSetUserLogCallback_ext(_cb, int(Severity.HIPDNN_SEV_OFF), 0, user)
            if have_old:
                lib.hipdnnBackendSetGlobalLogLevel_ext(int(old[0]))
    for line in lines:
        for m in DECLINED.finditer(line):
            why.setdefault(m.group(1), m.group(2).strip())
    return accepted, why


def _no_engines_reason(h) -> str:
    """Why a handle has no engines: the plugin directory in effect and what loading it said."""
    default = os.path.join(hipdnn_cabi.library_dir(), "hipdnn_plugins", "engines")
    pdir = _env.get("HIPDNN_PLUGIN_DIR") or ""
    parts = []
    if pdir:
        parts.append(f"HIPDNN_PLUGIN_DIR={pdir} replaces the default plugin directory {default}")
        where = pdir
    else:
        where = default
    if not os.path.isdir(where):
        parts.append(f"{where} is not a directory")
    else:
        try:
            files = [n for n in os.listdir(where) if n.endswith((".so", ".py"))]
        except OSError as e:
            files = []
            parts.append(f"cannot list {where}: {e}")
        if not files:
            parts.append(f"{where} holds no plugin files (*.so, Python plugins)")
        elif not loaded_plugin_paths(h):
            parts.append(f"no plugin in {where} loaded")
    err = h.api.last_error()
    if err:
        parts.append(f"last error: {err}")
    return "; ".join(parts) or "no plugin paths are set"


def engines_cmd(argv) -> int:
    p = argparse.ArgumentParser(prog="hipdnn-cabi engines",
                                description="list the loaded engines and whether each can run "
                                            "graphs on this machine (a float32 ReLU probe)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    with Handle() as h:
        es = engines(h)
        if not es:
            reason = _no_engines_reason(h)
            if a.json:
                print(json.dumps({"engines": [], "why_none": reason}, indent=2))
            else:
                print(f"no engines loaded: {reason}", file=sys.stderr)
            return 1
        accepted, why = probe_engines(h)
    rows = []
    for e in es:
        ok = e.id in accepted
        reason = "" if ok else why.get(e.name, "declines a float32 ReLU graph (no reason given)")
        rows.append(dict(e.__dict__, available=ok, why=reason))
    if a.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        state = "available" if r["available"] else f"unavailable: {r['why']}"
        print(f"{r['name']:40s} id {r['id']:>21d}  plugin {r['plugin_name']} {r['version']}  {state}")
    return 0


def demo(argv) -> int:
    """Run the demo (`make demo`): examples/demo.py, shipped in the wheel as hipdnn_cabi/examples/."""
    p = argparse.ArgumentParser(prog="hipdnn-cabi demo",
                                description="build and run the examples (a C program and the Python "
                                            "frontend, same graph) on the default engine")
    p.parse_args(argv)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidates = [os.path.join(pkg, "examples", "demo.py"),
                  os.path.join(os.path.dirname(pkg), "examples", "demo.py")]
    for script in candidates:
        if os.path.exists(script):
            return subprocess.call([sys.executable, script])
    print("hipdnn-cabi demo: examples/demo.py not found (looked in: " + ", ".join(candidates) + ")",
          file=sys.stderr)
    return 2
