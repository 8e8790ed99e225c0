"""The package's import graph (tools/import_graph.py): no import cycle among module-level imports,
and the tool's cycle finder on a small package of its own."""
import subprocess
import sys

from cabi_testlib import ROOT

from tools import import_graph


def test_no_top_level_import_cycles(capsys):
    assert import_graph.main([f"{ROOT}/hipdnn_cabi", "--max-cycle-size", "1"]) == 0, \
        capsys.readouterr().out


def test_cycles_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("from .sub import c\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("def f():\n    from .. import a\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    r = subprocess.run([sys.executable, f"{ROOT}/tools/import_graph.py", str(pkg), "--members",
                        "--max-cycle-size", "1"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr   # the cycle closes inside a function only
    assert "top-level imports: 0 cycle(s)" in r.stdout
    assert "with in-function imports: 1 cycle(s), sizes [3]" in r.stdout
    assert "pkg.a, pkg.b, pkg.sub.c" in r.stdout
    (pkg / "sub" / "c.py").write_text("from .. import a\n")
    r = subprocess.run([sys.executable, f"{ROOT}/tools/import_graph.py", str(pkg),
                        "--max-cycle-size", "2"], capture_output=True, text=True)
    assert r.returncode == 1 and "top-level imports: 1 cycle(s), sizes [3]" in r.stdout
