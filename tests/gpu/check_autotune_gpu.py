"""Device check (run by hand on the H200, see docs/plugins.md): PROFILING_CONTROL_EXT with CUDA
events on the handle's stream, through the frontend's autotune on torch CUDA tensors."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("HIPDNN_CACHE_DIR", tempfile.mkdtemp())
import torch  # noqa: E402

from hipdnn_cabi import frontend as hf  # noqa: E402
from hipdnn_cabi.backend.descriptors import profiling_control  # noqa: E402,F401

F32 = hf.DataType.HIPDNN_DATA_FLOAT
h = hf.Handle(stream=torch.cuda.current_stream().cuda_stream)
g = hf.Graph(handle=h, io_data_type=F32, compute_data_type=F32)
x = g.tensor(name="x", dim=[4096, 4096])
y = g.relu(x).set_output(True)
g.build()
xt = torch.randn(4096, 4096, device="cuda")
yt = torch.empty_like(xt)
res = g.autotune({x: xt, y: yt}, iterations=5, warmup=2)
torch.cuda.synchronize()
out = {"ranked": [[g._engine_name_of(e), ms] for e, ms in res], "active": g.engine_name,
       "outcome": g.autotune_outcome, "correct": bool(torch.equal(yt, torch.relu(xt)))}
print("RESULT " + json.dumps(out))
