"""Shared pieces of the model examples (llama_block.py, resnet50_train.py): buffers and graphs.

A model built on hipDNN graphs needs three things besides the graphs themselves:

* **buffers** for weights, activations saved for the backward pass, and gradients, allocated like
  the arrays the caller gave (numpy arrays on the host, which the CPU reference engine reads;
  torch tensors on their device, which a GPU engine reads) - :class:`Arrays`;
* **views**: hipDNN tensors carry dims and strides but no offset, so one buffer can feed several
  graph tensors (Q, K and V inside the packed QKV projection, the gate and up halves of the
  SwiGLU projection) through strided views of it - :meth:`Arrays.view`;
* **graphs built once** and executed every step: :class:`Graphs` makes them on one handle with
  the model's data types and keeps them until :meth:`Graphs.close`.
"""
from __future__ import annotations

import numpy as np

from hipdnn_cabi import frontend as hf

DT = hf.DataType
FLOAT = DT.HIPDNN_DATA_FLOAT
INT32 = DT.HIPDNN_DATA_INT32

# name -> (hipDNN type, numpy dtype or None, torch dtype attribute)
_TYPES = {
    "float32": (DT.HIPDNN_DATA_FLOAT, np.float32, "float32"),
    "float16": (DT.HIPDNN_DATA_HALF, np.float16, "float16"),
    "bfloat16": (DT.HIPDNN_DATA_BFLOAT16, None, "bfloat16"),
    "float64": (DT.HIPDNN_DATA_DOUBLE, np.float64, "float64"),
    "int32": (DT.HIPDNN_DATA_INT32, np.int32, "int32"),
}
_ALIASES = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16",
            "fp64": "float64"}


def type_name(dtype) -> str:
    """'float32' / 'float16' / 'bfloat16' / 'float64' for a name, numpy dtype or torch dtype."""
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
    else:
        name = str(dtype).replace("torch.", "")
        if name not in _TYPES:
            name = np.dtype(dtype).name
    if name not in _TYPES:
        raise ValueError(f"unsupported model data type {dtype!r}: one of {sorted(_TYPES)}")
    return name


def param_type_name(dtype) -> str:
    """The type of normalisation parameters and statistics beside data of ``dtype``: float32
    (hipDNN's mixed-precision norms), float64 for float64 models."""
    return "float64" if type_name(dtype) == "float64" else "float32"


def hip_type(dtype):
    return _TYPES[type_name(dtype)][0]


def nhwc_strides(dims):
    """Channels-last strides of an [N, C, spatial...] tensor (C innermost)."""
    n, c, *sp = dims
    strides = [0] * len(dims)
    acc = c
    strides[1] = 1
    for i in range(len(sp) - 1, -1, -1):
        strides[2 + i] = acc
        acc *= sp[i]
    strides[0] = acc
    return strides


def packed_strides(dims):
    s, acc = [], 1
    for d in reversed(dims):
        s.append(acc)
        acc *= d
    return s[::-1]


class Arrays:
    """Allocates buffers like ``like``: numpy arrays, or torch tensors on ``like``'s device.

    ``empty(shape, dtype)`` / ``zeros`` take a model type name ('float32', 'bfloat16', ...);
    ``view(buf, dims, strides, offset)`` is a strided view (element units) into ``buf``'s memory
    that the frontend accepts for a graph tensor with those dims and strides."""

    def __init__(self, like):
        self.torch = None
        mod = type(like).__module__
        if mod.startswith("torch"):
            import torch
            self.torch, self.device = torch, like.device
        elif not isinstance(like, np.ndarray):
            raise TypeError(f"buffers must be numpy arrays or torch tensors, not {type(like).__name__}")

    def dtype(self, name):
        name = type_name(name)
        if self.torch is not None:
            return getattr(self.torch, _TYPES[name][2])
        npd = _TYPES[name][1]
        if npd is None:             # numpy has no bfloat16: ml_dtypes', else raw 16-bit words
            try:
                import ml_dtypes
                npd = ml_dtypes.bfloat16
            except ImportError:
                npd = np.uint16
        return np.dtype(npd)

    def empty(self, shape, dtype):
        if self.torch is not None:
            return self.torch.empty(tuple(shape), dtype=self.dtype(dtype), device=self.device)
        return np.empty(tuple(shape), self.dtype(dtype))

    def zeros(self, shape, dtype):
        if self.torch is not None:
            return self.torch.zeros(tuple(shape), dtype=self.dtype(dtype), device=self.device)
        return np.zeros(tuple(shape), self.dtype(dtype))

    def full(self, shape, value, dtype):
        if self.torch is not None:
            return self.torch.full(tuple(shape), value, dtype=self.dtype(dtype), device=self.device)
        return np.full(tuple(shape), value, self.dtype(dtype))

    def view(self, buf, dims, strides, offset=0):
        """The elements of ``buf`` (packed) at ``offset + sum(i_k * strides[k])``."""
        if self.torch is not None:
            return buf.as_strided(tuple(dims), tuple(strides), buf.storage_offset() + offset)
        flat = buf.reshape(-1)
        item = flat.itemsize
        return np.lib.stride_tricks.as_strided(flat[offset:], tuple(dims),
                                               tuple(s * item for s in strides))

    def to_numpy(self, buf):
        """A float64 numpy copy (for checks)."""
        if self.torch is not None:
            return buf.detach().double().cpu().numpy()
        return np.asarray(buf, dtype=np.float64)


class Graphs:
    """hipDNN graphs of one model, built once on one handle with the model's data types.

    ``new(name)`` starts a graph (io and intermediate type: the model's; compute: FLOAT, DOUBLE for
    float64 models);
    ``t(g, name, dims, strides=None, dtype=None)`` declares an input tensor (strides default to
    packed row-major); ``done(g, *outputs)`` marks outputs and builds it (``plans=False``:
    lowers it only, no engine chosen).  ``param`` /
    ``ptype``: the hipDNN type / type name of normalisation parameters and statistics.  ``graphs`` keeps every
    built graph in build order (``len`` = the number of graphs of the model)."""

    def __init__(self, dtype, handle=None, name="model", plans=True):
        self.plans = plans
        self.dtype = type_name(dtype)
        self.io = hip_type(self.dtype)
        self.ptype = param_type_name(self.dtype)
        self.param = hip_type(self.ptype)     # norm scales / biases / statistics
        self.own_handle = handle is None
        self.handle = handle if handle is not None else hf.Handle()
        self.name = name
        self.graphs = []

    def new(self, name):
        return hf.Graph(handle=self.handle, io_data_type=self.io, intermediate_data_type=self.io,
                        compute_data_type=self.param, name=f"{self.name}.{name}")

    def scalar(self, v):
        """A constant (epsilon, momentum) in the parameters' type: a number becomes a FLOAT
        scalar, a numpy float64 a DOUBLE one."""
        return np.float64(v) if self.ptype == "float64" else float(v)

    @staticmethod
    def t(g, name, dims, strides=None, dtype=None):
        return g.tensor(name=name, dim=list(dims),
                        stride=list(strides) if strides is not None else packed_strides(dims),
                        data_type=dtype)

    def done(self, g, *outputs):
        for o in outputs:
            o.set_output(True)
        if self.plans:
            g.build()
        else:                       # lowered only: to inspect or serialise, not to execute
            g.build_operation_graph()
        self.graphs.append(g)
        return g

    @staticmethod
    def run(g, pack):
        """``g.execute(pack)``; an error names the graph."""
        try:
            g.execute(pack)
        except Exception as e:
            if hasattr(e, "add_note"):
                e.add_note(f"while executing graph {g.name!r}")
            raise

    def engines(self):
        """{engine name: number of graphs whose active plan it runs}."""
        out = {}
        for g in self.graphs:
            out[g.engine_name] = out.get(g.engine_name, 0) + 1
        return out

    def close(self):
        for g in self.graphs:
            g.close()
        self.graphs = []
        if self.own_handle:
            self.handle.close()


def directional_check(name, arr, grad, v, loss, h, width=10) -> float:
    """Gradient along direction ``v`` of parameter array ``arr`` (changed in place and restored):
    <grad, v> against the central difference (loss(arr + h v) - loss(arr - h v)) / 2h; prints the
    pair and returns their relative difference."""
    analytic = float(np.sum(np.asarray(grad) * v))
    arr += h * v
    lp = loss()
    arr -= 2 * h * v
    lm = loss()
    arr += h * v
    numeric = (lp - lm) / (2 * h)
    err = abs(analytic - numeric) / max(abs(numeric), 1e-12)
    print(f"  d/d {name:{width}s} analytic {analytic:+.8e} finite difference {numeric:+.8e} "
          f"(rel. diff {err:.1e})")
    return err
