"""The id registry behind every hipdnnHandle_t and hipdnnBackendDescriptor_t given to C.

A pointer handed to C is an opaque id (never a real address, never reused), so a NULL, destroyed,
foreign or garbage pointer coming back is a failed dict lookup, never a crash.  Several ids may
refer to the same implementation object (spec §1.1: getting a descriptor-valued attribute returns
a new wrapper around the same implementation); the object lives while any id or any other
descriptor references it.
"""
from __future__ import annotations

import itertools

# Ids look like (16-byte aligned) pointers and start far from 0.
_BASE = 0x5EED00000000
_counter = itertools.count(1)
objects: dict[int, object] = {}


def register(obj) -> int:
    i = _BASE + (next(_counter) << 4)
    objects[i] = obj
    return i


def release(i: int):
    """Forget id ``i``; returns the object or None if the id is unknown."""
    return objects.pop(i, None)


def get(i: int):
    return objects.get(i)


def live_count() -> int:
    return len(objects)
