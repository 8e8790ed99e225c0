#!/bin/bash
# A/B of the GPU benchmark on one device: the tree in .base/ (a copy of the baseline commit) and
# this tree, group by group, alternating which goes first; then bench/ab_compare.py.
# BENCH_GROUPS (default: every gpu_bench.py group) and PER_GROUP_TIMEOUT (s) may be set.
# This tree runs with --default-paths (the engine's defaults, no opt-in kernel paths).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
BENCH_GROUPS=${BENCH_GROUPS:-gemm,gemm16,conv,convnchw,convbwd,bn,pointwise,sdpa,norms,normpw,pool,mxq,moe,overhead,frontend}
export PYTHONUNBUFFERED=1 HIPDNN_CABI_KERNEL_CACHE=/tmp/hdn_kc
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
for tree in .base .; do
  (cd $tree && timeout 120 python3 cdef/build_backend.py --out hipdnn_cabi/lib --tmp build/cffi >/dev/null 2>&1 &&
   python3 tools/install_default_plugins.py --out hipdnn_cabi/lib/hipdnn_plugins/engines >/dev/null) || echo "build failed in $tree"
done
i=0
for g in ${BENCH_GROUPS//,/ }; do
  order=". .base"; [ $((i % 2)) = 0 ] && order=".base ."
  for tree in $order; do
    tag=new; extra=--default-paths; [ "$tree" = .base ] && tag=base && extra=
    (cd $tree && timeout ${PER_GROUP_TIMEOUT:-150} python3 bench/gpu_bench.py --only $g $extra --out /tmp/ab_${tag}_$g.json > /tmp/ab_${tag}_$g.log 2>&1) \
      || echo "$tag $g: exit $?"
  done
  i=$((i + 1))
done
python3 - "$OUT" <<'PY'
import glob, json, sys
for tag in ("base", "new"):
    res = {}
    for p in sorted(glob.glob(f"/tmp/ab_{tag}_*.json")):
        d = json.load(open(p))
        res.update({k: v for k, v in d.items() if k not in res})
    json.dump(res, open(f"{sys.argv[1]}/ab_{tag}.json", "w"), indent=1)
PY
cat /tmp/ab_*_*.log | grep -iE "error|Traceback" | head -20 > "$OUT/ab_errors.txt"
python3 bench/ab_compare.py "$OUT/ab_base.json" "$OUT/ab_new.json" --out "$OUT/ab_compare.json"
