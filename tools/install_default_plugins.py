#!/usr/bin/env python3
"""Populate the backend's default engine-plugin directory (hipdnn_plugins/engines/ next to
libhipdnn_backend.so) with our default engines.

Each default engine is a Python engine plugin living in an importable package; the directory gets
a one-line loader file per engine, so discovery follows hipDNN's rules exactly: the default
directory is scanned at hipdnnCreate, HIPDNN_PLUGIN_DIR replaces it, ABSOLUTE plugin paths drop it.
"""
import argparse
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (file name in the plugin directory, module that provides `hipdnn_plugin`)
DEFAULT_ENGINES = [
    ("cpu_reference.py", "hipdnn_cabi.engines.cpu_reference"),
    ("hip_kernels.py", "hipdnn_cabi.engines.hip_kernels"),
]

STUB = '''"""Default hipdnn-cabi engine plugin: {module} (written by tools/install_default_plugins.py)."""
from {module} import hipdnn_plugin  # noqa: F401
'''


def install(out_dir: str) -> list:
    sys.path.insert(0, ROOT)
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for fname, module in DEFAULT_ENGINES:
        path = os.path.join(out_dir, fname)
        if importlib.util.find_spec(module) is None:
            if os.path.exists(path):
                os.remove(path)
            continue
        with open(path, "w") as fh:
            fh.write(STUB.format(module=module))
        written.append(path)
    return written


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "hipdnn_cabi", "lib", "hipdnn_plugins", "engines"))
    a = ap.parse_args()
    for p in install(a.out):
        print(p)


if __name__ == "__main__":
    main()
