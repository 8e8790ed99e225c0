"""cudnn-frontend's module-level Python names, for programs ported from ``import cudnn``:
enum namespaces with cudnn's short member names (``data_type.HALF``, ``reduction_mode.ADD``, ...)
whose members are this frontend's enum members, and the handle functions
(``create_handle``, ``destroy_handle``, ``set_stream``, ``get_stream``).  docs/frontend.md
("Porting from cudnn-frontend") has the whole mapping."""
from __future__ import annotations

from .._generated.enums import (BehaviorNote, ConvolutionMode, DataType, DiagonalAlignment,
                                MoeGroupedMatmulMode, PointwiseMode, ReduceTensorOp, ResampleMode)
from .handle import Handle


class _Names:
    """A namespace of enum members under short names (``NAMES.X is Enum.PREFIX_X``)."""

    def __init__(self, title, enum, prefix, suffix="", extra=None):
        self._title, self._enum = title, enum
        for m in enum:
            short = m.name[len(prefix):] if m.name.startswith(prefix) else m.name
            if suffix and short.endswith(suffix):
                short = short[:-len(suffix)]
            setattr(self, short, m)
        for k, v in (extra or {}).items():
            setattr(self, k, v)

    def __iter__(self):
        return iter(self._enum)

    def __repr__(self):
        names = [k for k in vars(self) if not k.startswith("_")]
        return f"<{self._title}: {', '.join(names)}>"


#: ``data_type.FLOAT`` ... ``data_type.FP8_E4M3``; ``NOT_SET`` is None (the graph's default)
data_type = _Names("data_type", DataType, "HIPDNN_DATA_", "_EXT", {"NOT_SET": None})
reduction_mode = _Names("reduction_mode", ReduceTensorOp, "HIPDNN_REDUCE_TENSOR_")
behavior_note = _Names("behavior_note", BehaviorNote, "HIPDNN_BEHAVIOR_NOTE_")
pointwise_mode = _Names("pointwise_mode", PointwiseMode, "HIPDNN_POINTWISE_")
convolution_mode = _Names("convolution_mode", ConvolutionMode, "HIPDNN_")
diagonal_alignment = _Names("diagonal_alignment", DiagonalAlignment, "HIPDNN_DIAGONAL_ALIGNMENT_",
                            "_EXT")
moe_grouped_matmul_mode = _Names("moe_grouped_matmul_mode", MoeGroupedMatmulMode,
                                 "HIPDNN_MOE_GROUPED_MATMUL_MODE_")
resample_mode = _Names("resample_mode", ResampleMode, "HIPDNN_RESAMPLE_")


def create_handle(stream=None) -> Handle:
    """``cudnn.create_handle()``: a :class:`Handle` (close it, or ``destroy_handle`` it)."""
    return Handle(stream=stream)


def destroy_handle(handle: Handle) -> None:
    handle.close()


def set_stream(handle: Handle, stream) -> None:
    """``cudnn.set_stream(handle=, stream=)``: an int, a cffi pointer, or a stream object."""
    handle.set_stream(stream)


def get_stream(handle: Handle) -> int:
    return handle.get_stream()
