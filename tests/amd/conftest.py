"""tests/amd: the AMD path without an AMD GPU - the offline toolchain of `make check-amd`, the
recording AMD device, the hiprtc runtime path against a stand-in of hip-python, and the wave64
host emulation of the MFMA kernels."""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for p in (HERE, os.path.join(ROOT, "tests", "gpu"), os.path.join(ROOT, "tools")):
    if p not in sys.path:
        sys.path.insert(0, p)
