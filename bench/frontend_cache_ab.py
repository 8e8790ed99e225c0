"""A/B on a GPU machine: g.execute of a tiny relu graph with torch CUDA tensors, the by-value execute
cache (frontend/graph/execution.py _fcache, default) against the identity cache alone (_vkey off); the same
tensors and new output tensors every call.  Output: bench/results/frontend_new_tensors_ab_s5.log."""
import statistics, time, torch
from hipdnn_cabi import frontend as hf
from hipdnn_cabi.frontend.graph import execution
F32 = hf.DataType.HIPDNN_DATA_FLOAT
stream = torch.cuda.current_stream().cuda_stream
def per_call(fn, n=5000):
    for _ in range(200): fn()
    torch.cuda.synchronize(); out = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n): fn()
        t1 = time.perf_counter(); torch.cuda.synchronize(); out.append((t1 - t0) / n * 1e6)
    return statistics.median(out)
real_vkey = execution._vkey
for rnd in range(3):
    for mode in ("value", "identity"):
        execution._vkey = real_vkey if mode == "value" else (lambda *a, **k: None)
        h = hf.Handle(stream=stream)
        g = hf.Graph(handle=h, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
        x = g.tensor(name="x", dim=[4, 8]); y = g.relu(x).set_output(True); g.build()
        xt = torch.randn(4, 8, device="cuda"); yt = torch.empty_like(xt); vp = {x: xt, y: yt}
        g.execute(vp)
        t_g = per_call(lambda: g.execute(vp)); t_r = per_call(lambda: torch.nn.functional.relu(xt))
        t_new = per_call(lambda: g.execute({x: xt, y: torch.empty_like(xt)}), n=1000)
        print(rnd, mode, "g.execute %.2f us  relu %.2f us  ratio %.2f  new tensors %.2f us" % (t_g, t_r, t_g / t_r, t_new), flush=True)
        g.close(); h.close()
