"""Benchmark rows through the public C API: the Python frontend (``hipdnn_cabi.frontend``) drives
``libhipdnn_backend.so`` exactly as a C caller does (descriptors, ``hipdnnBackendFinalize``,
an explicit engine config with knobs, ``hipdnnBackendExecute`` of a variant pack per call).

``prepare(torch, build, bufs, engine=..., knobs=...)`` returns a ``run()`` that executes the
plan once on PyTorch's current stream; ``build(g, T)`` adds the ops to a frontend graph, with
``T(name)`` the frontend tensor of the named buffer (dims, strides and type of the torch tensor).
Works with any object with ``shape``, ``stride()``, ``dtype`` and ``data_ptr()`` (numpy arrays
through :class:`HostArray` in the tests).
"""
from __future__ import annotations

ENGINE = "HIPDNN_CABI_HIP_KERNELS_ENGINE"


def _dt(hf, dtype):
    name = str(dtype).split(".")[-1]
    D = hf.DataType
    return {"float32": D.HIPDNN_DATA_FLOAT, "float16": D.HIPDNN_DATA_HALF,
            "bfloat16": D.HIPDNN_DATA_BFLOAT16}[name]


class HostArray:
    """A numpy array seen like a torch tensor (shape, stride() in elements, dtype, data_ptr())."""

    def __init__(self, a):
        self.a = a
        self.shape = a.shape
        self.dtype = a.dtype

    def stride(self):
        return tuple(s // self.a.itemsize for s in self.a.strides)

    def data_ptr(self):
        return self.a.ctypes.data


class Prepared:
    def __init__(self, graph, handle, order, bufs, ws, wsp, outs):
        self.graph, self.handle, self.order, self.bufs, self.ws = graph, handle, order, bufs, ws
        self.wsp, self.outs = wsp, outs
        self.pack = {t: bufs[n].data_ptr() for n, t in order.items()}

    def __call__(self):
        self.graph.execute(self.pack, workspace=self.wsp)


def prepare(build, bufs, *, stream=None, engine=ENGINE, knobs=None, outputs=(), workspace=None,
            io=None):
    """A :class:`Prepared` ``run()`` of the graph ``build(g, T)`` makes over ``bufs``
    ({name: tensor}); ``outputs`` name the buffers the graph's outputs are bound to, in the
    order ``build`` returns them.  ``workspace(nbytes)`` allocates device memory (a tensor)."""
    from hipdnn_cabi import frontend as hf
    h = hf.Handle(stream=stream)
    F = hf.DataType.HIPDNN_DATA_FLOAT
    first = next(iter(bufs.values()))
    g = hf.Graph(handle=h, io_data_type=io or _dt(hf, first.dtype), intermediate_data_type=F,
                 compute_data_type=F, name="bench")
    tens = {}

    def T(name):
        if name not in tens:
            b = bufs[name]
            tens[name] = g.tensor(name=name, dim=list(b.shape), stride=list(b.stride()),
                                  data_type=_dt(hf, b.dtype))
        return tens[name]
    res = build(g, T)
    res = list(res) if isinstance(res, (list, tuple)) else [res]
    for name, t in zip(outputs, res):
        b = bufs[name]
        t.set_output(True).set_dim(list(b.shape)).set_stride(list(b.stride())).set_data_type(_dt(hf, b.dtype))
        tens[name] = t
    g.validate()
    g.build_operation_graph()
    eid = [e.id for e in hf.engines(h) if e.name == engine]
    if not eid:
        raise RuntimeError(f"engine {engine} not loaded: {[e.name for e in hf.engines(h)]}")
    g.create_execution_plan_ext(eid[0], knobs or {})
    g.build_plans()
    n = g.get_workspace_size()
    ws = workspace(n) if (n and workspace) else None
    wsp = (ws.data_ptr() if hasattr(ws, "data_ptr") else int(ws)) if ws is not None else None
    return Prepared(g, h, tens, bufs, ws, wsp, outputs)
