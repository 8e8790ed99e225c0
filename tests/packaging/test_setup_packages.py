"""`pip install .` / `make test` ship the data folders (kernel sources, schema files) as declared
packages: setuptools' build_py, run over the project's manifest, gives no "importable package ...
not in `packages`" warning.  Fast (egg_info + build_py's manifest analysis, no compile)."""
import os
import subprocess
import sys
import textwrap

from cabi_testlib import ROOT

PROBE = textwrap.dedent("""
    import os, sys, tempfile, warnings
    import setuptools
    root = sys.argv[1]
    os.chdir(root)
    kw = {}
    setuptools.setup = lambda **k: kw.update(k)
    sys.argv = ["setup.py"]
    exec(compile(open("setup.py").read(), "setup.py", "exec"),
         {"__name__": "__main__", "__file__": os.path.join(root, "setup.py")})
    from setuptools.dist import Distribution
    for k in ("distclass", "cmdclass"):
        kw.pop(k, None)
    kw.update(name="hipdnn-cabi", include_package_data=True)
    d = Distribution(kw)
    d.script_name = "setup.py"
    d.get_command_obj("egg_info").egg_base = tempfile.mkdtemp()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        d.run_command("egg_info")
        bp = d.get_command_obj("build_py")
        bp.ensure_finalized()
        bp.analyze_manifest()
    for x in w:
        if "importable package" in str(x.message):
            print("WARN", str(x.message).strip().splitlines()[0])
    for pkg, files in sorted(bp.manifest_files.items()):
        print("DATA", pkg, len(files))
""")


def test_data_folders_are_declared_packages():
    r = subprocess.run([sys.executable, "-c", PROBE, ROOT], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "WARN" not in r.stdout, r.stdout
    data = dict(line.split()[1:] for line in r.stdout.splitlines() if line.startswith("DATA "))
    assert "hipdnn_cabi.engines.hip_kernels.kernels" in data, r.stdout
    assert "hipdnn_cabi.schemas.fbs" in data, r.stdout
