"""conv -> bias -> relu from the Python frontend (hipdnn_cabi.frontend), checked against numpy.

The same graph as examples/conv_bias_relu.c, built with the frontend, which drives the backend
only through its C API.  The default engine (the heuristics' first choice) runs it: with numpy
buffers when it is a host engine, with device buffers (hipdnn_cabi.device) when it is a GPU engine
(numpy arrays would make the frontend pick an engine that reaches host memory instead).
Exit status: 0 = match, 1 = mismatch, 2 = no engine supports the graph.
"""
from __future__ import annotations

import sys

import numpy as np

from hipdnn_cabi import frontend as hf

N, C, H, W, K, R, S, PAD = 2, 3, 8, 8, 4, 3, 3, 1
F32 = hf.DataType.HIPDNN_DATA_FLOAT


def reference(x, w, b):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (PAD, PAD), (PAD, PAD)))
    oh, ow = xp.shape[2] - R + 1, xp.shape[3] - S + 1
    y = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for r in range(R):
        for s in range(S):
            y += np.einsum("nchw,kc->nkhw", xp[:, :, r:r + oh, s:s + ow], w[:, :, r, s].astype(np.float64))
    return np.maximum(y + b.astype(np.float64), 0.0)


def inputs():
    """The inputs of conv_bias_relu.c (same generator), so the two checksums agree."""
    state, vals = 12345, []
    for _ in range(N * C * H * W + K * C * R * S + K):
        state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
        vals.append(((state >> 8) & 0xFFFF) / 32768.0 - 1.0)
    v = np.array(vals, dtype=np.float32)
    nx, nw = N * C * H * W, K * C * R * S
    return (v[:nx].reshape(N, C, H, W), v[nx:nx + nw].reshape(K, C, R, S),
            v[nx + nw:].reshape(1, K, 1, 1))


def run_on_device(graph, inputs, y, ya):
    """Copy the inputs to device memory, execute with device pointers, copy y back."""
    from hipdnn_cabi import device
    rt = device.get_runtime()
    ptrs = {}
    try:
        for t, a in list(inputs.items()) + [(y, ya)]:
            ptrs[t] = rt.malloc(a.nbytes)
            if t is not y:
                rt.memcpy_htod(ptrs[t], a.ctypes.data, a.nbytes)
        graph.execute(ptrs)                     # raw device addresses: the plan's engine runs
        rt.synchronize()
        rt.memcpy_dtoh(ya.ctypes.data, ptrs[y], ya.nbytes)
    finally:
        for p in ptrs.values():
            rt.free(p)


def main() -> int:
    xa, wa, ba = inputs()

    with hf.Handle() as handle:
        graph = hf.Graph(handle=handle, io_data_type=F32, intermediate_data_type=F32,
                         compute_data_type=F32, name="conv_bias_relu")
        x = graph.tensor(name="x", dim=xa.shape)          # packed NCHW strides by default
        w = graph.tensor(name="w", dim=wa.shape)
        b = graph.tensor(name="bias", dim=ba.shape)
        conv = graph.conv_fprop(x, w, padding=PAD, stride=1, dilation=1, name="conv")
        y = graph.relu(graph.add(conv, b, name="bias"), name="relu").set_output(True).set_name("y")
        try:
            graph.build()
        except hf.GraphNotSupportedError as e:
            print(f"conv_bias_relu.py: {e} (no loaded engine supports conv -> bias -> relu on host "
                  f"memory; is the CPU reference engine installed?)", file=sys.stderr)
            return 2
        ya = np.full(y.get_dim(), np.nan, dtype=np.float32)
        if graph.engine_memory_kind() == "device":
            run_on_device(graph, {x: xa, w: wa, b: ba}, y, ya)
        else:
            graph.execute({x: xa, w: wa, b: ba, y: ya})
        ref = reference(xa, wa, ba)
        err = np.abs(ya.astype(np.float64) - ref)
        bad = int(np.count_nonzero(~(err <= 1e-4 + 1e-4 * np.abs(ref))))
        print(f"engine: {graph.engine_name} (id {graph.engine_id})")
        print(f"output: y{list(ya.shape)} float32, workspace {graph.get_workspace_size()} bytes")
        print(f"checksum: {float(ya.astype(np.float64).sum()):.6f}")
        print(f"check vs numpy: max abs error {float(np.max(err)):.3g}, "
              f"{bad} mismatches -> {'PASS' if bad == 0 else 'FAIL'}")
        graph.close()
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
