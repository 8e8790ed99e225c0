"""The descriptor base class: dispatch of set/get/finalize by attribute name (spec §1.2, §1.3).

A subclass declares its attributes with the :func:`setter` and :func:`getter` decorators; the
base class checks "already finalized" before anything else on set, "not finalized" on get, and
answers NOT_SUPPORTED for names the descriptor does not handle.
"""
from __future__ import annotations

from ..._generated.enums import AttributeType
from ...errors import BadParamError, NotInitializedError, NotSupportedError, NullPointerError
from ..attrs import attr_name


def handle_attribute(ctx, atype, count, arr, nbytes):
    """A HANDLE-typed attribute value → the live :class:`~hipdnn_cabi.backend.handle.Handle`
    (null, destroyed or not a handle → BAD_PARAM_NULL_POINTER)."""
    from .. import attrs, registry
    from ..handle import Handle
    h = attrs.set_pointer(ctx, atype, count, arr, nbytes, AttributeType.HIPDNN_TYPE_HANDLE)
    if not h:
        raise NullPointerError(f"{ctx}: handle is nullptr")
    obj = registry.objects.get(h)
    if not isinstance(obj, Handle):
        raise NullPointerError(f"{ctx}: invalid or destroyed hipdnnHandle_t")
    return obj


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
        self._finalize()
        self.finalized = True

    def _finalize(self):  # pragma: no cover - overridden
        pass

    def destroy(self):
        """Called when a wrapper id is destroyed (the implementation may live on)."""
