#!/bin/bash
# One device call for branch s20d (issue 20, fp16 forward on im2col tensor maps): build the
# backend, the new GPU tests first (short limit: a hung copy would show here), then the GPU
# tests of the changed paths (conv forward fp16/bf16/NCHW-through-NHWC, TMA-store, fp8 /
# TF32 convs), then the fp16 forward benchmark group (six ResNet-50 layers, cuDNN side by side,
# variants).  CWD = the tree root, .whl/ present; results under $OUT.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HIPDNN_CABI_KERNEL_CACHE=/tmp/hdn_kc
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
timeout 120 python3 cdef/build_backend.py --out hipdnn_cabi/lib --tmp build/cffi 2>&1 | tail -2
python3 tools/install_default_plugins.py --out hipdnn_cabi/lib/hipdnn_plugins/engines
echo "== pytest (new)"
timeout ${T1:-120} python3 -m pytest -q -m '' tests/gpu/test_conv_im2col.py -p no:cacheprovider -rs --tb=short \
   --durations=5 > "$OUT/pytest_im2col.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_im2col.log" | tail -30
echo "== pytest (changed paths)"
timeout ${T2:-150} python3 -m pytest -q -m '' tests/gpu/test_gpu_ops.py tests/gpu/test_gemm_tma_store.py \
   tests/gpu/test_fp8.py tests/gpu/test_tf32_layout.py tests/gpu/test_gemm_split_wgrad.py -p no:cacheprovider -rs \
   -k "${K2:-(conv or matmul) and not bwd}" --tb=short --durations=5 > "$OUT/pytest_paths.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_paths.log" | tail -30
echo "== bench"
timeout ${T3:-200} python3 bench/gpu_bench.py --out "$OUT/gpu_issue20_s5.json" --only ${BENCH_ONLY:-convfwd16,convnchw}
echo "== done"
} > "$OUT/run.log" 2>&1
tail -c 11000 "$OUT/run.log"
