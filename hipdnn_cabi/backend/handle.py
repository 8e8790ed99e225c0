"""hipdnnHandle_t: a stream, the device it is bound to, and its engine-plugin handles."""
from __future__ import annotations

from ..errors import NullPointerError
from . import registry
from .devices import check_stream


class Handle:
    __slots__ = ("stream", "plugins", "device", "__weakref__")

    def __init__(self, device: int = -1):
        self.stream = 0          # hipStream_t as an integer; 0 = the default (null) stream
        self.plugins = None      # set by the plugin host when it exists
        self.device = device     # the current device at hipdnnCreate; -1 = host-only (no GPU)

    def set_stream(self, stream: int) -> None:
        if self.device >= 0 and stream:
            check_stream(self, stream)
        self.stream = stream
        if self.plugins is not None:
            self.plugins.set_stream(stream)

    def close(self) -> None:
        if self.plugins is not None:
            self.plugins.close()
            self.plugins = None


def handle_of(h: int, fn: str) -> Handle:
    """The live :class:`Handle` behind id ``h``; a NULL, destroyed or foreign id is
    BAD_PARAM_NULL_POINTER naming ``fn``."""
    obj = registry.objects.get(h)
    if type(obj) is not Handle:
        raise NullPointerError(f"{fn}: invalid or destroyed hipdnnHandle_t")
    return obj
