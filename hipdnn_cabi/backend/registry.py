"""The id registry behind every hipdnnHandle_t and hipdnnBackendDescriptor_t given to C.

A pointer handed to C is an opaque id (never a real address, never reused), so a NULL, destroyed,
foreign or garbage pointer coming back is a failed dict lookup, never a crash.  Several ids may
refer to the same implementation object (spec §1.1: getting a descriptor-valued attribute returns
a new wrapper around the same implementation); the object lives while any id or any other
descriptor references it.

Variant packs live in C (cdef/vpack.c) and are not in :data:`objects`; :func:`resolve` finds
them too (a snapshot view, hipdnn_cabi.backend.descriptors.variant_pack.CVariantPackView).  Code
that looks up an id a C caller passed as a descriptor uses :func:`resolve`, so a C-resident pack
given where another kind is expected is a "type mismatch", not "invalid or destroyed".
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


# id -> view of a live C-resident variant pack, or None (set by descriptors.variant_pack)
c_lookup = None


def resolve(i: int, _get=objects.get):
    """The object behind id ``i``: a Python-registered one, a C-resident variant pack's view, or
    None (unknown, destroyed, foreign)."""
    o = _get(i)
    if o is None and c_lookup is not None and i:
        o = c_lookup(i)
    return o


def live_count() -> int:
    return len(objects)
