"""The HIP engine's environment knobs (HIPDNN_CABI_HIP_*) set for one block of a benchmark."""
from __future__ import annotations

import contextlib
import os

PREFIX = "HIPDNN_CABI_HIP_"


@contextlib.contextmanager
def hip_knobs(knobs, prefix=PREFIX):
    """``prefix + name = value`` for each of ``knobs`` (name -> value) inside the block; the
    environment restored after (a variable that was unset is removed again)."""
    saved = {k: os.environ.get(prefix + k) for k in knobs}
    os.environ.update({prefix + k: v for k, v in knobs.items()})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(prefix + k, None)
            else:
                os.environ[prefix + k] = v
