"""Python plugins registered under the ``hipdnn_cabi.engine_plugins`` entry-point group are found
by the host (ADDITIVE mode, like the default plugin directory): a tiny installed distribution
(a .dist-info with entry_points.txt on PYTHONPATH) whose entry point names the py_sample plugin."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY_SAMPLE = os.path.join(ROOT, "engine_plugins", "py_sample")

PROBE = textwrap.dedent("""
    import json, os, sys
    from hipdnn_cabi import capi
    ffi, lib = capi.load()
    if os.environ.get("ABSOLUTE"):
        keep = ffi.new("char[]", os.environ["HIPDNN_PLUGIN_DIR"].encode())
        lib.hipdnnSetEnginePluginPaths_ext(1, ffi.new("char*[1]", [keep]),
                                           lib.HIPDNN_PLUGIN_LOADING_ABSOLUTE)
    h = ffi.new("hipdnnHandle_t*")
    st = lib.hipdnnCreate(h)
    n = ffi.new("size_t*")
    lib.hipdnnGetEngineCount_ext(h[0], n)
    eid = ffi.new("int64_t*")
    ln = ffi.new("size_t*", 256)
    name = ffi.new("char[256]")
    names = []
    for i in range(n[0]):
        lib.hipdnnGetEngineInfo_ext(h[0], i, eid, ffi.NULL, ln, ffi.NULL, ffi.new("size_t*"),
                                    ffi.NULL, ffi.new("size_t*"), ffi.NULL, ffi.new("size_t*"))
        lib.hipdnnGetEngineNameById_ext(h[0], eid[0], name, ln)
        names.append(ffi.string(name).decode())
    cnt, ml = ffi.new("size_t*"), ffi.new("size_t*")
    lib.hipdnnGetLoadedEnginePluginPaths_ext(h[0], cnt, ffi.NULL, ml)
    paths = []
    if cnt[0]:
        bufs = [ffi.new("char[]", ml[0]) for _ in range(cnt[0])]
        arr = ffi.new("char*[]", bufs)
        lib.hipdnnGetLoadedEnginePluginPaths_ext(h[0], cnt, arr, ml)
        paths = [ffi.string(b).decode() for b in bufs]
    from hipdnn_cabi.plugin_sdk import loader
    eps = loader.entry_point_plugins()
    ep = dict(eps).get("ep_sample")
    resolved = loader.resolve(ep).name if ep is not None else None
    print(json.dumps(dict(create=st, names=names, paths=paths, eps=sorted(n for n, _ in eps),
                          resolved=resolved, destroy=lib.hipdnnDestroy(h[0]))))
""")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    d = tmp_path_factory.mktemp("epsite")
    os.symlink(PY_SAMPLE, d / "ep_py_sample")
    di = d / "hipdnn_cabi_ep_test-0.1.dist-info"
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: hipdnn-cabi-ep-test\nVersion: 0.1\n")
    (di / "entry_points.txt").write_text(
        "[hipdnn_cabi.engine_plugins]\n"
        "ep_sample = ep_py_sample\n"
        "missing = no_such_module_for_hipdnn_cabi_tests:plugin\n")
    empty = d / "empty_plugin_dir"
    empty.mkdir()
    return d


def _probe(site, **env):
    e = dict(os.environ, HIPDNN_PLUGIN_DIR=str(site / "empty_plugin_dir"),
             PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    e.pop("HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS", None)
    e.update(env)
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120,
                       env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_entry_point_plugin_is_loaded_by_the_host(site):
    r = _probe(site)
    assert r["eps"] == ["ep_sample", "missing"]
    assert r["resolved"] == "hipdnn_cabi_py_sample"
    # the broken entry point is skipped with a warning; hipdnnCreate still succeeds
    assert r["create"] == 0 and r["destroy"] == 0
    assert r["names"] == ["HIPDNN_CABI_PY_SAMPLE_ENGINE"]
    assert r["paths"] == [os.path.realpath(PY_SAMPLE)]


def test_entry_point_plugins_can_be_switched_off(site):
    r = _probe(site, HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS="1")
    assert r["create"] == 0 and r["names"] == [] and r["paths"] == []
    assert r["eps"] == ["ep_sample", "missing"]  # still discoverable, just not loaded


def test_absolute_plugin_paths_ignore_entry_points(site):
    r = _probe(site, ABSOLUTE="1")
    assert r["create"] == 0 and r["names"] == [] and r["paths"] == []
