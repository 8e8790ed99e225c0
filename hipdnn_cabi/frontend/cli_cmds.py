"""``hipdnn-cabi info | engines | demo`` (wired into :mod:`hipdnn_cabi.cli`)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import hipdnn_cabi

from .. import capi, device
from ..backend import env as _env  # the C environment (os.environ without the library)
from . import Handle, engines, loaded_plugin_paths, version_string


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


def engines_cmd(argv) -> int:
    p = argparse.ArgumentParser(prog="hipdnn-cabi engines", description="list the loaded engines")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    es = engines()
    if a.json:
        print(json.dumps([e.__dict__ for e in es], indent=2))
        return 0
    if not es:
        print("no engines loaded")
        return 0
    for e in es:
        print(f"{e.name:40s} id {e.id:>21d}  plugin {e.plugin_name} {e.version}")
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
