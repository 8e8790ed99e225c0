import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gutil import C  # noqa: E402


@pytest.fixture(scope="session")
def c(capi):
    ffi, lib = capi
    return C(ffi, lib)


@pytest.fixture(scope="session")
def h(c):
    return c.handle()
