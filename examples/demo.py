"""`make demo`: build and run the examples, print a summary; exit non-zero on any failure.

1. compiles examples/conv_bias_relu.c with gcc against the public headers and the embedded
   libhipdnn_backend.so (hipdnn_cabi.include_dir() / hipdnn_cabi.library_dir()) and runs it;
2. runs examples/conv_bias_relu.py (the same graph through the Python frontend).
Both execute on the default engine (on a machine without a GPU: the CPU reference engine).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# In a source tree ROOT is the repository; in a wheel this file is hipdnn_cabi/examples/demo.py.
IN_SOURCE_TREE = os.path.isfile(os.path.join(ROOT, "Makefile"))
if IN_SOURCE_TREE and ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import hipdnn_cabi  # noqa: E402


def banner(text):
    print(f"\n=== {text} " + "=" * max(0, 70 - len(text)))


def engines_line():
    try:
        from hipdnn_cabi import frontend as hf
        es = hf.engines()
        return ", ".join(e.name for e in es) or "(none)"
    except Exception as e:  # the listing is informative only
        return f"(listing failed: {e})"


def compile_c(out_dir):
    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
    if cc is None:
        return None, "no C compiler (gcc) found"
    exe = os.path.join(out_dir, "conv_bias_relu")
    libdir = hipdnn_cabi.library_dir()
    cmd = [cc, "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I", hipdnn_cabi.include_dir(),
           os.path.join(HERE, "conv_bias_relu.c"), "-L", libdir, "-lhipdnn_backend",
           f"-Wl,-rpath,{libdir}", "-lm", "-ldl", "-o", exe]
    print("$ " + " ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"compile failed:\n{r.stderr}"
    return exe, ""


def run(cmd, timeout=600):
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)
    sys.stdout.write(r.stdout)
    if r.stderr.strip():
        sys.stdout.write(r.stderr)
    return r.returncode, r.stdout


def summarize(out):
    eng = re.search(r"^engine: (.*)$", out, re.M)
    cks = re.search(r"^checksum: (.*)$", out, re.M)
    return (eng.group(1) if eng else "-"), (cks.group(1) if cks else "-")


def main() -> int:
    print(f"hipdnn-cabi {hipdnn_cabi.__version__}: backend {hipdnn_cabi.library_path()}")
    print(f"engines: {engines_line()}")
    out_dir = os.path.join(ROOT, "build", "examples") if IN_SOURCE_TREE else None
    try:
        os.makedirs(out_dir, exist_ok=True)
    except (OSError, TypeError):
        out_dir = tempfile.mkdtemp(prefix="hipdnn-demo-")
    results = []

    banner("(a) C program over the backend C API: examples/conv_bias_relu.c")
    exe, why = compile_c(out_dir)
    if exe is None:
        print(why)
        results.append(("C  conv_bias_relu", 1, "-", "-", why.splitlines()[0]))
    else:
        rc, out = run([exe])
        results.append(("C  conv_bias_relu", rc, *summarize(out), ""))

    banner("(b) Python frontend: examples/conv_bias_relu.py")
    rc, out = run([sys.executable, os.path.join(HERE, "conv_bias_relu.py")])
    results.append(("Py conv_bias_relu", rc, *summarize(out), ""))

    banner("summary")
    status = {0: "PASS", 1: "FAIL", 2: "NO ENGINE"}
    for name, rc, eng, cks, note in results:
        print(f"{name:20s} {status.get(rc, f'ERROR (exit {rc})'):10s} engine={eng}  checksum={cks}"
              + (f"  {note}" if note else ""))
    failed = [r for r in results if r[1] != 0]
    if not failed and len({r[3] for r in results}) == 1:
        print(f"C and Python checksums agree ({results[0][3]})")
    elif not failed:
        print("C and Python checksums differ: " + ", ".join(r[3] for r in results))
        failed = results
    if any(r[1] == 2 for r in results):
        print("\nNo loaded engine supports the demo graph on host memory. The CPU reference engine "
              "(engine_plugins/cpu_reference) loads by default (hipdnn_plugins/engines/ beside "
              "the library, or the hipdnn_cabi.engine_plugins entry point) unless HIPDNN_PLUGIN_DIR "
              "or hipdnnSetEnginePluginPaths_ext replace it; check `hipdnn-cabi engines`.")
    print("\ndemo: " + ("FAILED" if failed else "all checks passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
