"""Contract-test plugin reporting API 1.0.0: same engines and engine ids as scalar_v12 (the
"downgraded provider"); the host must never ask it about runtime pass-by-value graphs."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _scalar_common import make_plugin  # noqa: E402

hipdnn_plugin = make_plugin("1.0.0")
