"""Generate engine_plugins/hip_kernels/kernels/hdn_wgmma.h: the Hopper ``wgmma.mma_async``
wrappers (m64nNk16, fp32 accumulation, f16 / bf16 operands from shared-memory descriptors,
m64nNk8 tf32, m64nNk32 fp8 e4m3 / e5m2, and m64nNk32 s8 x s8 with s32 accumulation) that the GEMM
core (gemm_wgmma.hip) issues, and the register-A f16 / bf16 / fp8 forms flash attention
(attention_fwd_wgmma.hip, attention_fwd_fp8_wgmma.hip) feeds P through.  One inline-asm statement per shape
needs N/2 accumulator operands, which is why this file is generated.

    python tools/gen_wgmma.py          # rewrite the header
    python tools/gen_wgmma.py --check  # exit 1 when the committed header is stale
"""
from __future__ import annotations

import argparse
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine_plugins",
                   "hip_kernels", "kernels", "hdn_wgmma.h")
SHAPES = (64, 128, 256)
TYPES = (("f16", "f16", 16), ("bf16", "bf16", 16), ("tf32", "tf32", 8), ("e4m3", "e4m3", 32),
         ("e5m2", "e5m2", 32))
NO_TRANSPOSE = ("tf32", "e4m3", "e5m2")   # K-major operands only
RS_FP8_SHAPES = (64, 128)                 # register-A fp8 forms (the fp8 attention's P V)


def wrapper(n, name, ptx, k):
    nreg = n // 2
    regs = ", ".join(f"%{i}" for i in range(nreg))
    da, db, sd = nreg, nreg + 1, nreg + 2
    # tf32 / fp8 have no transpose operands (both K-major)
    tr = "" if ptx in NO_TRANSPOSE else ", %{}, %{}".format(nreg + 3, nreg + 4)
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(nreg))
    ins = '"l"(da), "l"(db), "r"(scale_d)' + ("" if ptx in NO_TRANSPOSE else ', "n"(TRA), "n"(TRB)')
    lines = [f"template <int TRA, int TRB>",
             f"__device__ __forceinline__ void hdn_wgmma_m64n{n}k{k}_{name}(float* d, unsigned long long da, "
             f"unsigned long long db, int scale_d) {{",
             f'    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{sd}, 0;\\n"',
             f'                 "wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx}.{ptx} "',
             f'                 "{{{regs}}}, "',
             f'                 "%{da}, %{db}, p, 1, 1{tr};\\n}}"',
             f"                 : {outs}",
             f"                 : {ins});",
             "}"]
    return "\n".join(lines)


def wrapper_s8(n):
    """s8 x s8 -> s32: D int32 accumulators, both operands K-major descriptors (integer wgmma
    has no transpose or negation operands; no .satfinite: the sums wrap modulo 2^32)."""
    nreg = n // 2
    regs = ", ".join(f"%{i}" for i in range(nreg))
    da, db, sd = nreg, nreg + 1, nreg + 2
    outs = ", ".join(f'"+r"(d[{i}])' for i in range(nreg))
    lines = [f"__device__ __forceinline__ void hdn_wgmma_m64n{n}k32_s8(int* d, unsigned long long da, "
             f"unsigned long long db, int scale_d) {{",
             f'    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{sd}, 0;\\n"',
             f'                 "wgmma.mma_async.sync.aligned.m64n{n}k32.s32.s8.s8 "',
             f'                 "{{{regs}}}, "',
             f'                 "%{da}, %{db}, p;\\n}}"',
             f"                 : {outs}",
             f'                 : "l"(da), "l"(db), "r"(scale_d));',
             "}"]
    return "\n".join(lines)


def wrapper_rs(n, name, ptx):
    """A from registers (4 x b32 per thread: the m16n8k16 A fragment of the thread's warp's 16
    rows), B from a shared-memory descriptor; TRB as above."""
    nreg = n // 2
    regs = ", ".join(f"%{i}" for i in range(nreg))
    a = ", ".join(f"%{nreg + i}" for i in range(4))
    db, sd = nreg + 4, nreg + 5
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(nreg))
    lines = [f"template <int TRB>",
             f"__device__ __forceinline__ void hdn_wgmma_rs_m64n{n}k16_{name}(float* d, const unsigned* a, "
             f"unsigned long long db, int scale_d) {{",
             f'    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{sd}, 0;\\n"',
             f'                 "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx}.{ptx} "',
             f'                 "{{{regs}}}, "',
             f'                 "{{{a}}}, %{db}, p, 1, 1, %{sd + 1};\\n}}"',
             f"                 : {outs}",
             f'                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TRB));',
             "}"]
    return "\n".join(lines)


def wrapper_rs_fp8(n, name, ptx):
    """A from registers (4 x b32 per thread, four 8-bit values each: the m16n8k32 A fragment of
    the thread's warp's 16 rows), B (K-major) from a shared-memory descriptor; no transpose."""
    nreg = n // 2
    regs = ", ".join(f"%{i}" for i in range(nreg))
    a = ", ".join(f"%{nreg + i}" for i in range(4))
    db, sd = nreg + 4, nreg + 5
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(nreg))
    lines = [f"__device__ __forceinline__ void hdn_wgmma_rs_m64n{n}k32_{name}(float* d, const unsigned* a, "
             f"unsigned long long db, int scale_d) {{",
             f'    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{sd}, 0;\\n"',
             f'                 "wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{ptx}.{ptx} "',
             f'                 "{{{regs}}}, "',
             f'                 "{{{a}}}, %{db}, p, 1, 1;\\n}}"',
             f"                 : {outs}",
             f'                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));',
             "}"]
    return "\n".join(lines)


def render() -> str:
    out = ["// generated by tools/gen_wgmma.py - do not edit (drift-checked by tests/gpu/test_kernel_sources.py)",
           "// wgmma.mma_async wrappers: D(64 x N, fp32, registers) = A(desc) * B(desc) + (scale_d ? D : 0).",
           "// TRA / TRB: 0 = the operand is K-major in shared memory, 1 = M/N-major (16-bit types only;",
           "// tf32 / e4m3 / e5m2 ignore them: K-major only).",
           "// hdn_wgmma_*_s8: s8 x s8 with int32 accumulators (K-major operands, sums wrap modulo 2^32).",
           "// hdn_wgmma_rs_*: A (64 x 16, fp8: 64 x 32) from registers instead (flash attention's P).",
           "#pragma once",
           "#if HDN_CUDA && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)",
           "#define HDN_HAVE_WGMMA_WRAPPERS 1",
           "__device__ __forceinline__ void hdn_wgmma_fence() { asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\"); }",
           "__device__ __forceinline__ void hdn_wgmma_commit() { asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\"); }",
           "template <int N> __device__ __forceinline__ void hdn_wgmma_wait() { asm volatile(\"wgmma.wait_group.sync.aligned %0;\" :: \"n\"(N) : \"memory\"); }"]
    for name, ptx, k in TYPES:
        for n in SHAPES:
            out.append(wrapper(n, name, ptx, k))
    for n in SHAPES:
        out.append(wrapper_s8(n))
    for name, ptx, k in TYPES:
        if ptx not in NO_TRANSPOSE:
            for n in SHAPES:
                out.append(wrapper_rs(n, name, ptx))
    for name in ("e4m3", "e5m2"):
        for n in RS_FP8_SHAPES:
            out.append(wrapper_rs_fp8(n, name, name))
    out.append("#endif")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    text = render()
    if a.check:
        with open(OUT, encoding="utf-8") as f:
            ok = f.read() == text
        print("hdn_wgmma.h up to date" if ok else "hdn_wgmma.h is stale: run tools/gen_wgmma.py")
        return 0 if ok else 1
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
