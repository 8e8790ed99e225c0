"""Build hook: `pip install .` compiles libhipdnn_backend.so into the package (hipdnn_cabi/lib/)
and ships the public headers and the generated cffi declarations with it."""
import os
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py as _build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


class build_py(_build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        pkg = os.path.join(self.build_lib, "hipdnn_cabi")
        sys.path.insert(0, os.path.join(ROOT, "cdef"))
        sys.path.insert(0, ROOT)
        from build_backend import build  # cdef/build_backend.py
        build(os.path.join(pkg, "lib"), os.path.join(ROOT, "build", "cffi-wheel"))
        from tools.install_default_plugins import install as install_default_plugins
        install_default_plugins(os.path.join(pkg, "lib", "hipdnn_plugins", "engines"))
        shutil.copyfile(os.path.join(ROOT, "cdef", "generated.py"),
                        os.path.join(pkg, "_cdef_generated.py"))
        inc = os.path.join(pkg, "include")
        if os.path.isdir(inc):
            shutil.rmtree(inc)
        shutil.copytree(os.path.join(ROOT, "include"), inc)


setup(cmdclass={"build_py": build_py})
