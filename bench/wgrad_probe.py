"""Offline probe (no GPU): the plans the GEMM core builds for the ResNet-50 backward layers,
and their sm_90a compile (registers / spills / SASS instruction mix)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "gpu"), os.path.join(ROOT, "tests")]

from engine_plugins.hip_kernels import codegen  # noqa: E402
from engine_plugins.hip_kernels.program import build_program  # noqa: E402
from hipdnn_cabi.plugin_sdk import parse_graph  # noqa: E402
from gpu_testlib import T, conv_bwd_data, conv_bwd_filter, conv_fwd, graph_bytes  # noqa: E402

RESNET = [("conv2_3x3", 64, 64, 56, 3, 1, 1), ("conv2_1x1_expand", 64, 256, 56, 1, 1, 0),
          ("conv3_3x3", 128, 128, 28, 3, 1, 1), ("conv4_3x3", 256, 256, 14, 3, 1, 1),
          ("conv5_3x3", 512, 512, 7, 3, 1, 1), ("conv4_1x1_s2", 512, 1024, 28, 1, 2, 0)]


def nhwc(n, c, h, w):
    return [h * w * c, 1, w * c, c]


def graphs(dt="HALF", N=32):
    for name, C, K, H, R, st, pad in RESNET:
        P = (H + 2 * pad - R) // st + 1
        tx = T(1, [N, C, H, H], dt, strides=nhwc(N, C, H, H))
        tw = T(2, [K, C, R, R], dt, strides=nhwc(K, C, R, R))
        ty = T(3, [N, K, P, P], dt, strides=nhwc(N, K, P, P))
        yield name + "_fwd", graph_bytes([tx, tw, ty], [conv_fwd(1, 2, 3, [pad, pad], [st, st], [1, 1])])
        yield name + "_dgrad", graph_bytes([ty, tw, tx], [conv_bwd_data(3, 2, 1, [pad, pad], [st, st], [1, 1])])
        yield name + "_wgrad", graph_bytes([tx, ty, tw], [conv_bwd_filter(1, 3, 2, [pad, pad], [st, st], [1, 1])])


def main():
    compile_ = "--compile" in sys.argv
    if compile_:
        from hipdnn_cabi.device import compiler
        c = compiler("cuda")
        hdr = codegen.headers()
    only = [a for a in sys.argv[1:] if not a.startswith("--")]
    for name, g in graphs():
        if only and not any(o in name for o in only):
            continue
        prog = build_program(parse_graph(g), use_mma=True, arch="sm_90")
        print(f"{name}: ws {prog.ws_size / 2**20:.1f} MiB; " + "; ".join(prog.notes))
        for st in prog.steps:
            if st[0] != "launch":
                print("   ", st[0], st[1:])
                continue
            print("   ", st[2], st[3], [a[:2] if a[0] == "tmap" else a for a in st[5]][:4])
            if compile_ and st[2] == "hdn_gemm_wgmma":
                img = c.compile(st[1], f"{name}.hip", ("--ptxas-options=-v",), st[6]["arch"], hdr)
                print("    ptxas:", " | ".join(l.strip() for l in c.last_log.splitlines() if "registers" in l or "spill" in l))
                if "--sass" in sys.argv:
                    p = f"/tmp/{name}.cubin"
                    open(p, "wb").write(img)
                    r = subprocess.run(["cuobjdump", "-sass", p], capture_output=True, text=True)
                    s = r.stdout
                    print("    SASS: HGMMA", s.count("HGMMA"), "UTMALDG", s.count("UTMALDG"), "LDGSTS", s.count("LDGSTS"))


if __name__ == "__main__":
    main()
