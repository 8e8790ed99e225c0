#!/bin/bash
# One device call for issue 20 (part 2): build, the GPU tests of the changed paths, the changed
# benchmark groups.  CWD = tree root, .whl/ reachable; results under $OUT.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HIPDNN_CABI_KERNEL_CACHE=/tmp/hdn_kc
T0=$(date +%s)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 90 python3 cdef/build_backend.py --out hipdnn_cabi/lib --tmp build/cffi 2>&1 | tail -2
python3 tools/install_default_plugins.py --out hipdnn_cabi/lib/hipdnn_plugins/engines
echo "== build done $(( $(date +%s) - T0 )) s"
timeout ${PYTEST_TIMEOUT:-100} python3 -m pytest -q -m gpu tests/gpu/test_tf32_layout.py tests/gpu/test_fp8.py \
   tests/gpu/test_gpu_ops.py -k "tf32 or fp8 or layout or conv or matmul" -p no:cacheprovider -rs --tb=short \
   --maxfail=8 > "$OUT/pytest.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.log" | tail -30
echo "== tests done $(( $(date +%s) - T0 )) s"
timeout ${BENCH_TIMEOUT:-105} python3 bench/gpu_bench.py --out "$OUT/gpu.json" --only ${BENCH_ONLY:-gemm,convnchw,conv,convbwd,gemm16}
echo "== bench done $(( $(date +%s) - T0 )) s"
} > "$OUT/run.log" 2>&1
tail -c 11000 "$OUT/run.log"
