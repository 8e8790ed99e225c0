"""HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR (spec §1.10)."""
from __future__ import annotations

import struct

from ..._generated.enums import AttributeName as A, AttributeType as T, DescriptorType
from ...errors import BadParamError, NullPointerError
from .. import attrs, registry, runtime
from .base import Descriptor, getter, setter


class VariantPackDescriptor(Descriptor):
    DESCRIPTOR_TYPE = DescriptorType.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR
    NAME = "VariantPackDescriptor"
    REFINALIZE_ALLOWED = True

    def __init__(self):
        super().__init__()
        self.pointers: tuple = ()
        self.uids: tuple = ()
        self.workspace = 0
        self.override_uids = None
        self.override_shapes = None
        self.override_strides = None
        self.override_lengths = None
        self.packed = b""            # hipdnnPluginDeviceBuffer_t[] bytes, built at finalize
        self.buffers = None          # cached cdata array (built on first execute)
        self.workspace_c = None      # cached void* cdata of the workspace
        self.checked_alignments = None  # the plan alignment table this pack was checked against

    @setter(A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS)
    def _set_ptrs(self, ctx, atype, count, arr, nbytes):
        self.pointers = attrs.set_pointer_vector(ctx, atype, count, arr, nbytes, T.HIPDNN_TYPE_VOID_PTR)

    @setter(A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS)
    def _set_uids(self, ctx, atype, count, arr, nbytes):
        self.uids = attrs.set_int64_vector(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE)
    def _set_ws(self, ctx, atype, count, arr, nbytes):
        self.workspace = attrs.set_pointer(ctx, atype, count, arr, nbytes, T.HIPDNN_TYPE_VOID_PTR)

    @setter(A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_UNIQUE_IDS_EXT)
    def _set_ouids(self, ctx, atype, count, arr, nbytes):
        self.override_uids = attrs.set_int64_vector(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_SHAPES_EXT)
    def _set_oshapes(self, ctx, atype, count, arr, nbytes):
        self.override_shapes = attrs.set_int64_vector(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_STRIDES_EXT)
    def _set_ostrides(self, ctx, atype, count, arr, nbytes):
        self.override_strides = attrs.set_int64_vector(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_LENGTHS_EXT)
    def _set_olengths(self, ctx, atype, count, arr, nbytes):
        self.override_lengths = attrs.set_int64_vector(ctx, atype, count, arr, nbytes)

    def _finalize(self):
        n = len(self.uids)
        if len(self.pointers) != n:
            raise BadParamError(f"VariantPackDescriptor::finalize() failed: {len(self.pointers)} data "
                                f"pointers but {n} unique ids")
        if n == 0:
            raise BadParamError("VariantPackDescriptor::finalize() failed: empty variant pack")
        inter = [0] * (2 * n)
        inter[0::2] = self.uids
        inter[1::2] = self.pointers
        self.packed = struct.pack(f"<{2 * n}q", *[(p - (1 << 64)) if p >= 1 << 63 else p for p in inter])
        self.buffers = None
        self.workspace_c = None
        self.checked_alignments = None

    @property
    def has_overrides(self) -> bool:
        return any(x is not None for x in (self.override_uids, self.override_shapes,
                                            self.override_strides, self.override_lengths))

    def _need_arr(self, ctx, arr):
        if not arr:
            raise NullPointerError(f"{ctx}: arrayOfElements is nullptr")

    @getter(A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS)
    def _get_ptrs(self, ctx, atype, req, cnt, arr):
        attrs._type(ctx, atype, T.HIPDNN_TYPE_VOID_PTR)
        self._need_arr(ctx, arr)
        if not cnt:
            raise NullPointerError(f"{ctx}: elementCount is nullptr")
        if req < 0:
            raise BadParamError(f"{ctx}: requestedElementCount must not be negative")
        k = min(req, len(self.pointers))
        attrs._write(arr, struct.pack(f"<{k}Q", *self.pointers[:k]))
        cnt[0] = k

    def _vec(self, ctx, atype, req, cnt, arr, values):
        self._need_arr(ctx, arr)
        attrs.get_int64_vector(ctx, atype, req, cnt, arr, list(values or ()))

    @getter(A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS)
    def _get_uids(self, ctx, atype, req, cnt, arr):
        self._vec(ctx, atype, req, cnt, arr, self.uids)

    @getter(A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_UNIQUE_IDS_EXT)
    def _get_ouids(self, ctx, atype, req, cnt, arr):
        self._vec(ctx, atype, req, cnt, arr, self.override_uids)

    @getter(A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_SHAPES_EXT)
    def _get_oshapes(self, ctx, atype, req, cnt, arr):
        self._vec(ctx, atype, req, cnt, arr, self.override_shapes)

    @getter(A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_STRIDES_EXT)
    def _get_ostrides(self, ctx, atype, req, cnt, arr):
        self._vec(ctx, atype, req, cnt, arr, self.override_strides)

    @getter(A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_LENGTHS_EXT)
    def _get_olengths(self, ctx, atype, req, cnt, arr):
        self._vec(ctx, atype, req, cnt, arr, self.override_lengths)

    @getter(A.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE)
    def _get_ws(self, ctx, atype, req, cnt, arr):
        attrs.get_exact_one(ctx, atype, T.HIPDNN_TYPE_VOID_PTR, req, cnt, arr,
                            attrs.pack_u64(self.workspace))


# ------------------------------------------------------------------------ C-resident packs
# hipdnnBackendCreateDescriptor(VARIANT_PACK) makes the pack in C (cdef/vpack.c): its set, get,
# finalize, destroy and (once its plan and handle are registered) execute never enter Python.
# The class above stays the reference implementation (HIPDNN_CABI_PY_VARIANT_PACK=1 creates packs
# here again; tests/plugins/test_variant_pack_c.py compares both) and is the base of the
# read-only snapshot Python uses when it meets a C-resident pack's id.
_NVEC = 6  # uids, pointers, override uids, shapes, strides, lengths (vpack.c's VPV order)
_U64 = (1 << 64) - 1


class CVariantPackView(VariantPackDescriptor):
    """A snapshot of a live C-resident pack (registry.resolve): what the slow execute path and the
    kind checks of other descriptors read.  Never registered, never written back."""

    c_resident = True

    def __init__(self, ident: int, vals: list):
        super().__init__()
        self.ident = ident
        self.finalized = bool(vals[0])
        self.workspace = vals[1] & _U64
        lens = vals[2:2 + _NVEC]
        k = 2 + _NVEC
        vecs = []
        for n in lens:
            m = max(n, 0)
            vecs.append(tuple(vals[k:k + m]) if n >= 0 else None)
            k += m
        self.uids = vecs[0] or ()
        self.pointers = tuple(p & _U64 for p in vecs[1] or ())
        (self.override_uids, self.override_shapes, self.override_strides,
         self.override_lengths) = vecs[2:]
        if self.finalized:
            VariantPackDescriptor._finalize(self)

    def set_attribute(self, *a):  # pragma: no cover - the C side answers every set
        raise BadParamError("VariantPackDescriptor: a C-resident pack is read-only from Python")


def c_view(ident: int):
    """The view of C-resident pack ``ident``, or None when it is not one (or was destroyed)."""
    lib = runtime.lib
    if lib is None or not hasattr(lib, "hipdnn_cabi_vp_export"):
        return None
    ffi = runtime.ffi
    cap = 64
    while True:
        buf = ffi.new("int64_t[]", cap)
        need = lib.hipdnn_cabi_vp_export(ident, buf, cap)
        if need < 0:
            return None
        if need <= cap:
            return CVariantPackView(ident, ffi.unpack(buf, need))
        cap = need


registry.c_lookup = c_view
