"""hipdnnHandle_t: a stream plus the handle's engine-plugin handles."""
from __future__ import annotations


class Handle:
    __slots__ = ("stream", "plugins", "__weakref__")

    def __init__(self):
        self.stream = 0          # hipStream_t as an integer; 0 = the default (null) stream
        self.plugins = None      # set by the plugin host when it exists

    def set_stream(self, stream: int) -> None:
        self.stream = stream
        if self.plugins is not None:
            self.plugins.set_stream(stream)

    def close(self) -> None:
        if self.plugins is not None:
            self.plugins.close()
            self.plugins = None
