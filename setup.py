"""Build hook: `pip install .` compiles libhipdnn_backend.so into the package (hipdnn_cabi/lib/)
and ships what the installed tools need inside ``hipdnn_cabi``:

* the default engines: the repository's top-level ``engine_plugins/`` folder is installed as the
  package ``hipdnn_cabi.engines`` (a ``package_dir`` mapping; no generic top-level package lands
  in site-packages); in a source checkout ``hipdnn_cabi/_engines_alias.py`` gives the same name;
* ``hipdnn_cabi/lib/hipdnn_plugins/engines/``: the default plugin directory with one loader file
  per default engine (tools/install_default_plugins.py);
* ``hipdnn_cabi/include/``: the public headers; ``hipdnn_cabi/cdef/bootstrap.c`` and
  ``hipdnn_cabi/_cdef_generated.py``: what ``hipdnn-cabi export-plugin`` compiles;
* ``hipdnn_cabi/lib/pkgconfig/hipdnn_backend.pc`` and ``hipdnn_cabi/lib/cmake/`` (config + version
  file), relocatable (paths relative to the files).  See docs/packaging.md.
"""
import os
import shutil
import sys

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py as _build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))
ENGINES_PKG = "hipdnn_cabi.engines"
ENGINES_DIR = "engine_plugins"


# Folders that hold only data files (no __init__.py): declared as packages of their own, so
# setuptools ships them without warning that an importable folder is missing from `packages`.
DATA_PACKAGES = {f"{ENGINES_PKG}.hip_kernels.kernels": ["*.hip", "*.h"],
                 "hipdnn_cabi.schemas.fbs": ["*.fbs"]}


def packages():
    pkgs = find_packages(ROOT, include=["hipdnn_cabi", "hipdnn_cabi.*"])
    pkgs.append(ENGINES_PKG)
    pkgs += [f"{ENGINES_PKG}.{p}" for p in find_packages(os.path.join(ROOT, ENGINES_DIR))]
    return pkgs + sorted(DATA_PACKAGES)


class build_py(_build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        pkg = os.path.join(self.build_lib, "hipdnn_cabi")
        sys.path.insert(0, os.path.join(ROOT, "cdef"))
        sys.path.insert(0, ROOT)
        from build_backend import build  # cdef/build_backend.py
        lib = os.path.join(pkg, "lib")
        build(lib, os.path.join(ROOT, "build", "cffi-wheel"))
        # The loader files import hipdnn_cabi.engines.<engine>: check against the built tree.
        sys.path.insert(0, self.build_lib)
        from tools.install_default_plugins import install as install_default_plugins
        install_default_plugins(os.path.join(lib, "hipdnn_plugins", "engines"))
        shutil.copyfile(os.path.join(ROOT, "cdef", "generated.py"),
                        os.path.join(pkg, "_cdef_generated.py"))
        os.makedirs(os.path.join(pkg, "cdef"), exist_ok=True)
        shutil.copyfile(os.path.join(ROOT, "cdef", "bootstrap.c"),
                        os.path.join(pkg, "cdef", "bootstrap.c"))
        inc = os.path.join(pkg, "include")
        if os.path.isdir(inc):
            shutil.rmtree(inc)
        shutil.copytree(os.path.join(ROOT, "include"), inc)
        ex = os.path.join(pkg, "examples")  # `hipdnn-cabi demo` runs these from the wheel
        os.makedirs(ex, exist_ok=True)
        for f in ("demo.py", "conv_bias_relu.py", "conv_bias_relu.c", "hello_backend.c"):
            shutil.copyfile(os.path.join(ROOT, "examples", f), os.path.join(ex, f))
        from tools.gen_pkgconfig import write as write_pkgconfig
        write_pkgconfig(lib, pkg, lib, inc, "1.0.0")


class BinaryDistribution(Distribution):
    """libhipdnn_backend.so links this interpreter's libpython: the wheel is cpXY-linux, not pure."""

    def has_ext_modules(self):
        return True


setup(
    distclass=BinaryDistribution,
    packages=packages(),
    package_dir={ENGINES_PKG: ENGINES_DIR},
    package_data={"hipdnn_cabi.conformance": ["*.c", "*.h"], **DATA_PACKAGES},
    cmdclass={"build_py": build_py},
)
