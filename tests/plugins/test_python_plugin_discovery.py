"""A plugin directory's Python files are imported only when they declare
themselves plugins (a top-level ``hipdnn_plugin`` / ``create_plugin`` binding, found by parsing,
not executing); helper scripts beside a plugin never run.  HIPDNN_PLUGIN_DIR replaces the default
directory (hipDNN's rule), and the backend log says so."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from hipdnn_cabi.plugin_sdk.loader import declares_plugin, find_python_plugins

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY_SAMPLE = os.path.join(ROOT, "engine_plugins", "py_sample")


def _count_engines(plugdir, env=None):
    code = textwrap.dedent(f"""
        import json
        from hipdnn_cabi import capi
        ffi, lib = capi.load()
        keep = ffi.new("char[]", {str(plugdir)!r}.encode())
        paths = ffi.new("char*[1]", [keep])
        lib.hipdnnSetEnginePluginPaths_ext(1, paths, lib.HIPDNN_PLUGIN_LOADING_ABSOLUTE)
        h = ffi.new("hipdnnHandle_t*")
        st = lib.hipdnnCreate(h)
        n = ffi.new("size_t*")
        lib.hipdnnGetEngineCount_ext(h[0], n)
        print(json.dumps(dict(create=st, count=n[0])))
    """)
    e = dict(os.environ, HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS="1", **(env or {}))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_helper_scripts_are_not_executed(tmp_path):
    plugdir = tmp_path / "plugins"
    plugdir.mkdir()
    os.symlink(PY_SAMPLE, plugdir / "py_sample")                      # a declared package
    marker = tmp_path / "ran"
    (plugdir / "helper.py").write_text(f"open({str(marker)!r}, 'a').write('x')\n")
    (plugdir / "notes.py").write_text("hipdnn_plugin_name = 'not the marker'\nprint('hi')\n")
    r = _count_engines(plugdir)
    assert r["create"] == 0 and r["count"] == 1, r
    assert not marker.exists(), "a helper script in the plugin directory was executed"


def test_declaration_forms(tmp_path):
    forms = {
        "assign.py": "hipdnn_plugin = object()\n",
        "annotated.py": "hipdnn_plugin: object = object()\n",
        "factory.py": "def create_plugin():\n    return None\n",
        "klass.py": "class hipdnn_plugin:\n    pass\n",
        "reexport.py": "from somewhere import hipdnn_plugin  # noqa\n",
        "alias.py": "from somewhere import Plugin as hipdnn_plugin\n",
        "tuple.py": "hipdnn_plugin, other = 1, 2\n",
    }
    not_plugins = {
        "helper.py": "import os\nprint(os.getcwd())\n",
        "nested.py": "def f():\n    hipdnn_plugin = 1\n",
        "attr.py": "x = 1\nx.hipdnn_plugin = 2\n",
        "broken.py": "def (:\n",
        "_private.py": "hipdnn_plugin = 1\n",
    }
    for name, src in {**forms, **not_plugins}.items():
        (tmp_path / name).write_text(src)
    pkg = tmp_path / "pkg_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .impl import hipdnn_plugin\n")
    other = tmp_path / "pkg_other"
    other.mkdir()
    (other / "__init__.py").write_text("VALUE = 1\n")
    found = {os.path.basename(p) for p in find_python_plugins(str(tmp_path))}
    assert found == set(forms) | {"pkg_plugin"}, found
    assert declares_plugin(os.path.join(ROOT, "hipdnn_cabi", "lib", "hipdnn_plugins", "engines",
                                        "cpu_reference.py"))


def test_plugin_dir_env_replaces_default_and_logs_it(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    code = textwrap.dedent("""
        import json
        from hipdnn_cabi import capi
        ffi, lib = capi.load()
        h = ffi.new("hipdnnHandle_t*")
        st = lib.hipdnnCreate(h)
        n = ffi.new("size_t*")
        lib.hipdnnGetEngineCount_ext(h[0], n)
        print(json.dumps(dict(create=st, count=n[0])))
    """)
    e = dict(os.environ, HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS="1", HIPDNN_PLUGIN_DIR=str(empty),
             HIPDNN_LOG_LEVEL="warn")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"create": 0, "count": 0}                 # hipDNN: the env dir replaces the default
    assert "replaces the default engine plugin directory" in r.stdout + r.stderr
