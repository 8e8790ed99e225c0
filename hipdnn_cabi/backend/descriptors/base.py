"""The descriptor base class: dispatch of set/get/finalize by attribute name (spec §1.2, §1.3).

A subclass declares its attributes with the :func:`setter` and :func:`getter` decorators; the
base class checks "already finalized" before anything else on set, "not finalized" on get, and
answers NOT_SUPPORTED for names the descriptor does not handle.
"""
from __future__ import annotations

from ...errors import BadParamError, NotInitializedError, NotSupportedError
from ..names import attr_name


# ------------------------------------------------------------------------ the C attribute store
# FAST_FIELDS of a descriptor created through hipdnnBackendCreateDescriptor live in C
# (cdef/astore.c) until finalize: the C shims answer their hot Set/Get without entering Python.
# Such an object is of the class's `_c_class` (a subclass whose FAST_FIELDS attributes are data
# descriptors reading the C record `_cid` and writing through to it) while it is unfinalized;
# finalize pulls the record into plain instance attributes and switches the object back to the
# plain class (plain attribute speed from then on: a finalized descriptor never changes).
_store = {"lib": None, "ffi": None}   # bound by entry.install when the store is on
_MISSING = object()
_DEFAULTS = (0, (), False)            # C starts every field at these (kinds 0, 1, 2)


def _c_read(cid, slot, kind):
    lib, ffi = _store["lib"], _store["ffi"]
    if lib is None:
        return _MISSING
    cap = 16 if kind == 1 else 1
    while True:
        buf = ffi.new("int64_t[]", cap)
        n = lib.hipdnn_cabi_as_read(cid, slot, buf, cap)
        if n < 0:
            return _MISSING
        if n <= cap:
            break
        cap = n
    if kind == 1:
        return tuple(ffi.unpack(buf, n)) if n else ()
    return bool(buf[0]) if kind == 2 else int(buf[0])


def _c_write(cid, slot, kind, v):
    lib, ffi = _store["lib"], _store["ffi"]
    if lib is None:
        return
    vals = list(v) if kind == 1 else [int(bool(v)) if kind == 2 else int(v)]
    lib.hipdnn_cabi_as_write(cid, slot, ffi.new("int64_t[]", vals or [0]), len(vals))


class CField:
    """A FAST_FIELDS attribute of a store-backed (unfinalized) descriptor."""
    __slots__ = ("slot", "kind", "key")

    def __init__(self, slot, kind, field):
        self.slot, self.kind, self.key = slot, kind, field

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        d = obj.__dict__
        cid = d.get("_cid")
        if cid is not None:
            v = _c_read(cid, self.slot, self.kind)
            if v is not _MISSING:
                return v
        return d.get(self.key, _DEFAULTS[self.kind])

    def __set__(self, obj, v):
        d = obj.__dict__
        d[self.key] = v
        cid = d.get("_cid")
        if cid is not None:
            _c_write(cid, self.slot, self.kind, v)


def setter(*names):
    def mark(fn):
        fn._hipdnn_set = names
        return fn
    return mark


def getter(*names):
    def mark(fn):
        fn._hipdnn_get = names
        return fn
    return mark


class Descriptor:
    DESCRIPTOR_TYPE: int = -1
    NAME = "BackendDescriptor"
    # Exception raised by a get before finalize (None: getters work before finalize).
    GET_BEFORE_FINALIZE = NotInitializedError
    REFINALIZE_ALLOWED = False
    _setters: dict = {}
    _getters: dict = {}
    _fast_set = True
    _fast_get = True
    # {attribute name: (attribute type, kind, field)} for plain fields the C entry may read and
    # write directly (kinds in hipdnn_cabi.backend.entry: 0 int64, 1 int64 vector, 2 bool).  Their
    # @setter/@getter stay the reference behaviour (errors always take that path).
    FAST_FIELDS: dict = {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        setters, getters = {}, {}
        for klass in reversed(cls.__mro__):
            for fn in vars(klass).values():
                for n in getattr(fn, "_hipdnn_set", ()):
                    setters[int(n)] = fn
                for n in getattr(fn, "_hipdnn_get", ()):
                    getters[int(n)] = fn
        # The C entry may dispatch straight to _setters/_getters only for classes that keep the
        # base set_attribute/get_attribute (subclasses with their own dispatch opt out).
        cls._fast_set = cls.set_attribute is Descriptor.set_attribute
        cls._fast_get = cls.get_attribute is Descriptor.get_attribute
        # Store (function, context string) so the hot path never formats a message.
        cls._setters = {n: (fn, f"{cls.NAME}::setAttribute({attr_name(n)})") for n, fn in setters.items()}
        if "FAST_FIELDS" in vars(cls) and cls.FAST_FIELDS:
            ns = {field: CField(slot, kind, field)
                  for slot, (_t, kind, field) in enumerate(cls.FAST_FIELDS.values())}
            ns.update(_c_base=cls, __module__=cls.__module__, __qualname__=cls.__qualname__)
            cls._c_class = type(cls.__name__, (cls,), ns)
        cls._getters = {n: (fn, f"{cls.NAME}::getAttribute({attr_name(n)})") for n, fn in getters.items()}

    def __init__(self):
        self.finalized = False

    # -- entry points used by hipdnn_cabi.backend.entry ------------------------------------
    def set_attribute(self, name, atype, count, arr, nbytes):
        if self.finalized:
            raise NotInitializedError(f"{self.NAME}::setAttribute() failed: Already finalized.")
        try:
            fn, ctx = self._setters[name]
        except KeyError:
            raise NotSupportedError(f"{self.NAME}::setAttribute() failed: {attr_name(name)} "
                                    f"is not supported.") from None
        fn(self, ctx, atype, count, arr, nbytes)

    def get_attribute(self, name, atype, req, count_ptr, arr):
        if not self.finalized and self.GET_BEFORE_FINALIZE is not None:
            raise self.GET_BEFORE_FINALIZE(f"{self.NAME}::getAttribute() failed: Not finalized.")
        try:
            fn, ctx = self._getters[name]
        except KeyError:
            raise NotSupportedError(f"{self.NAME}::getAttribute() failed: {attr_name(name)} "
                                    f"is not supported.") from None
        fn(self, ctx, atype, req, count_ptr, arr)

    def finalize(self):
        if self.finalized and not self.REFINALIZE_ALLOWED:
            raise BadParamError(f"{self.NAME}::finalize() failed: Already finalized.")
        cls = type(self)
        cid = self.__dict__.get("_cid")
        stored = cid is not None
        if stored:
            self._c_pull()
        try:
            self._finalize()
        except BaseException:
            if stored:
                self.__class__ = cls  # still unfinalized: the C record stays the one store
            raise
        self.finalized = True
        if stored and _store["lib"] is not None:
            _store["lib"].hipdnn_cabi_as_mark_finalized(cid, 1)

    def _c_pull(self):
        """The C record's fields → the object (one call); back to the plain class."""
        d = self.__dict__
        cid, lib = d.get("_cid"), _store["lib"]
        if cid is not None and lib is not None:
            ffi = _store["ffi"]
            cap = 64
            while True:
                buf = ffi.new("int64_t[]", cap)
                need = lib.hipdnn_cabi_as_export(cid, buf, cap)
                if need <= cap:
                    break
                cap = need
            if need >= 0:
                self._c_load(ffi.unpack(buf, need))
        base = vars(type(self)).get("_c_base")
        if base is not None:
            self.__class__ = base

    def _c_load(self, vals):
        """Take the exported record ``vals`` ([n_i ..., elements ...]) — FAST_FIELDS classes."""
        d = self.__dict__
        k = len(self.FAST_FIELDS)
        for i, (_t, kind, field) in enumerate(self.FAST_FIELDS.values()):
            n = vals[i]
            if kind == 1:
                d[field] = tuple(vals[k:k + n])
            else:
                d[field] = bool(vals[k]) if kind == 2 else vals[k]
            k += n

    def _c_detach(self, ident):
        """Id ``ident`` is destroyed; when it owns the C record, C drops the record.  Nothing
        reads the fields of an unfinalized descriptor once its only id is gone (operations and
        graphs take finalized descriptors only, and wrapper ids come from getters of finalized
        ones); a finalized one already has its own copy (pulled at finalize)."""
        d = self.__dict__
        if d.get("_cid") == ident:
            del d["_cid"]

    def _finalize(self):  # pragma: no cover - overridden
        pass

    def destroy(self):
        """Called when a wrapper id is destroyed (the implementation may live on)."""
