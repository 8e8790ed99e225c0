#!/bin/bash
# One device call: build the backend, run the GPU tests and the benchmark; results under $OUT.
# Expects the repo root as CWD, .whl/ carried (cffi, pycparser for cp312).
# ONLY=tests|bench|all (default all); PYTEST_K: a -k expression for the GPU tests; PYTEST_N: run the
# GPU tests in that many pytest-xdist workers on the one GPU (compilation dominates; the kernel cache is
# safe to share).
# ONLY=multigpu (a machine with >= 2 GPUs): the device-binding GPU tests and
# bench/multi_gpu_bench.py (-> $OUT/multi_gpu.json).
# ONLY=cpubench: the C sample plugin and the CPU thread benchmarks on this machine's cores:
# bench/run.py --only api,execute --threads 16 --out-suffix _h200_16cores (-> $OUT/api_h200_16cores.json,
# $OUT/execute_h200_16cores.json; copy them to bench/results/).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/run.log"
ONLY=${ONLY:-all}
export PYTHONUNBUFFERED=1 HIPDNN_CABI_KERNEL_CACHE=/tmp/hdn_kc
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
echo "== python"; which python3; python3 -c "import sys; print(sys.version)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -c "import cuda.bindings, torch; print('cuda-bindings', cuda.bindings.__version__, 'torch', torch.__version__)"
echo "== build backend"
timeout 120 python3 cdef/build_backend.py --out hipdnn_cabi/lib --tmp build/cffi 2>&1 | tail -5; ls -la hipdnn_cabi/lib
python3 -c "import hipdnn_cabi.frontend._fastexec" 2>/dev/null && echo "frontend C execute path (_fastexec): built" \
  || echo "frontend C execute path (_fastexec): NOT built (g.execute takes the Python lookup)"
# the default engine-plugin directory beside the library (make plugins does this at home)
python3 tools/install_default_plugins.py --out hipdnn_cabi/lib/hipdnn_plugins/engines
CEXE=""
if [ -f hipdnn_cabi/lib/libhipdnn_backend.so ]; then
  gcc -std=c11 -O1 -Wall -Iinclude -I/usr/local/cuda/include tests/gpu/c_device_ptrs.c -o /tmp/c_device_ptrs \
     -Lhipdnn_cabi/lib -lhipdnn_backend -Wl,-rpath,$PWD/hipdnn_cabi/lib -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,/usr/local/cuda/lib64 2>/dev/null && CEXE=/tmp/c_device_ptrs
fi
if [ "$ONLY" = multigpu ]; then
  nvidia-smi -L
  echo "== pytest (devices)"
  timeout ${PYTEST_TIMEOUT:-280} python3 -m pytest -q -m '' tests/gpu/test_devices_gpu.py tests/gpu/test_multi_device.py \
     tests/gpu/test_multi_device_capi.py -p no:cacheprovider -rs --tb=short > "$OUT/pytest_devices.log" 2>&1
  grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/pytest_devices.log" | tail -40
  echo "== multi-GPU bench"
  timeout ${BENCH_TIMEOUT:-240} python3 bench/multi_gpu_bench.py --out "$OUT/multi_gpu.json"
  echo "== done"; ONLY=none
fi
if [ "$ONLY" = cpubench ]; then
  nproc; lscpu 2>/dev/null | grep -E "^(Model name|Thread|Core|Socket|NUMA node\(s\))"
  echo "== CPU thread benchmarks (api, execute)"
  timeout ${BENCH_TIMEOUT:-400} python3 bench/run.py --only api,execute --threads ${THREADS:-16} \
     --out-suffix ${SUFFIX:-_h200_16cores} --results-dir "$OUT"
  python3 - "$OUT/execute${SUFFIX:-_h200_16cores}.json" <<'PYEOF'
import json, sys
thr = json.load(open(sys.argv[1]))["so_plugin"]["threads"]
for t, row in thr.items():
    if isinstance(row, dict):
        print(t, {k: v for k, v in row.items() if k.endswith("speedup")})
PYEOF
  echo "== done"; ONLY=none
fi
if [ "$ONLY" != bench ] && [ "$ONLY" != none ]; then
  echo "== pytest"
  timeout ${PYTEST_TIMEOUT:-280} python3 -m pytest -q -m '' tests/gpu -p no:cacheprovider -rs --durations=8 \
     --ignore=tests/gpu/test_host_emulation.py ${PYTEST_K:+-k "$PYTEST_K"} ${PYTEST_N:+-n $PYTEST_N} --tb=short > "$OUT/pytest.log" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.log" | tail -60
fi
if [ "$ONLY" != tests ] && [ "$ONLY" != none ]; then
  echo "== bench"
  timeout ${BENCH_TIMEOUT:-240} python3 bench/gpu_bench.py --out "$OUT/gpu.json" ${BENCH_ONLY:+--only $BENCH_ONLY} ${CEXE:+--c-exe $CEXE}
fi
[ "$ONLY" != none ] && echo "== done"
} > "$LOG" 2>&1
tail -c 11000 "$LOG"
