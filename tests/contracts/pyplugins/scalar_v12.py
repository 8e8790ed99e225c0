"""Contract-test plugin reporting API 1.2.0 (honours runtime pass-by-value)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _scalar_common import make_plugin  # noqa: E402

hipdnn_plugin = make_plugin("1.2.0")
