"""Support code for the contract tests: plugin directories, the ctplugin.c builder, and the
fresh-process runner."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
INCLUDE = os.path.join(ROOT, "include")
PY = os.path.join(ROOT, ".venv", "bin", "python")
if not os.path.exists(PY):
    PY = sys.executable

# statuses (hipdnnStatus_t)
SUCCESS, NOTINIT, BAD, NULLPTR, SIZE = 0, 1, 2, 3, 6
NOTSUP, INTERNAL, PLUGIN = 8, 9, 14


def plugin_dir(base, name, members) -> str:
    d = os.path.join(str(base), name)
    os.makedirs(d, exist_ok=True)
    for m in members:
        link = os.path.join(d, os.path.basename(m))
        if not os.path.lexists(link):
            os.symlink(m, link)
    return d


def engine_id_of(name: str) -> int:
    from hipdnn_cabi.backend.plugins.loader import fnv1a64
    return fnv1a64(name)


def details_bytes(engine_name: str, notes=None) -> bytes:
    """EngineDetails for ``engine_name``; ``notes=None`` gives the old shape (no behavior_notes
    field at all: engine_id + knobs only)."""
    import flatbuffers
    from hipdnn_cabi.schemas._generated import EngineDetails as ED
    b = flatbuffers.Builder(64)
    nv = None
    if notes is not None:
        ED.StartBehaviorNotesVector(b, len(notes))
        for n in reversed(notes):
            b.PrependInt32(n)
        nv = b.EndVector()
    ED.Start(b)
    ED.AddEngineId(b, engine_id_of(engine_name))
    if nv is not None:
        ED.AddBehaviorNotes(b, nv)
    b.Finish(ED.End(b))
    return bytes(b.Output())


def build_ctplug(base, tag, defines, details=None) -> str:
    d = os.path.join(str(base), "ctplug_" + tag)
    os.makedirs(d, exist_ok=True)
    so = os.path.join(d, f"libctplug_{tag}.so")
    cmd = ["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
           "-DHIPDNN_CABI_NO_HIP_HEADERS", f"-I{INCLUDE}", f'-DTAG="{tag}"',
           *[f"-D{x}" for x in defines]]
    if details is not None:
        hdr = os.path.join(str(base), f"details_{tag}.h")
        with open(hdr, "w") as f:
            f.write("static const unsigned char k_details[%d] = {%s};\n"
                    % (len(details), ",".join(str(x) for x in details)))
        cmd.append(f'-DDETAILS_H="{hdr}"')
    cmd += [os.path.join(HERE, "ctplugin.c"), "-o", so]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return d


def py(script: str, plugin_dir: str | None = None, env: dict | None = None, timeout=300):
    """Run ``script`` in a fresh interpreter with ``from ctlib import *`` done and the engine
    plugin directory set; the script prints one JSON document on its last stdout line."""
    e = dict(os.environ)
    e.pop("HIPDNN_PLUGIN_DIR", None)
    e["HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS"] = "1"
    if plugin_dir is not None:
        e["HIPDNN_PLUGIN_DIR"] = plugin_dir
    e["PYTHONPATH"] = os.pathsep.join([ROOT, HERE, e.get("PYTHONPATH", "")])
    if env:
        e.update(env)
    src = "from ctlib import *\nimport json\n" + textwrap.dedent(script)
    r = subprocess.run([PY, "-c", src], capture_output=True, text=True, env=e, timeout=timeout)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])
