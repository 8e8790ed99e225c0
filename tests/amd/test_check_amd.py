"""make check-amd's pieces (tools/check_amd.py, tools/amd_toolchain.py, tests/amd/amd_record.py):
the corpus covers every family on both targets with the AMD kernels only, the tests/gpu
recording captures both targets' programs, metadata / ELF parsing, and (toolchain installed) a
sample of the sources that failed before compiles clean."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import amd_toolchain as tc
import check_amd

NOTES = """
amdhsa.kernels:
  - .agpr_count:     64
    .args:
      - .address_space:  global
        .offset:         0
    .group_segment_fixed_size: 18432
    .name:           hdn_gemm_mfma
    .private_segment_fixed_size: 0
    .sgpr_spill_count: 0
    .vgpr_count:     104
    .vgpr_spill_count: 0
  - .name:           k2
    .vgpr_spill_count: 3
amdhsa.target:   amdgcn-amd-amdhsa--gfx942
"""


def test_parse_metadata_and_elf_checks():
    md = tc.parse_metadata(NOTES)
    assert md["target"] == "amdgcn-amd-amdhsa--gfx942"
    k = md["kernels"]["hdn_gemm_mfma"]
    assert k["agpr_count"] == 64 and k["vgpr_count"] == 104 and k["group_segment_fixed_size"] == 18432
    assert md["kernels"]["k2"]["vgpr_spill_count"] == 3
    with pytest.raises(ValueError):
        tc.elf_symbols(b"not an elf")
    it = {"arch": "gfx942", "names": {"k2"}, "body": False, "source": ""}
    why = check_amd.evaluate(it, {"ok": True, "target": md["target"], "defined": ["k2"],
                                  "kernels": md["kernels"], "isa": {}}, set())
    assert any("spills" in w for w in why)
    it = {"arch": "gfx942", "names": {"hdn_gemm_mfma"}, "body": False, "source": ""}
    why = check_amd.evaluate(it, {"ok": True, "target": md["target"], "defined": [],
                                  "kernels": {}, "isa": {}}, set())
    assert any("not defined" in w for w in why) and any("no MFMA" in w for w in why)


@pytest.fixture(scope="module")
def corpus():
    c = check_amd.Corpus()
    old = check_amd.AMD_KNOBS, check_amd.NVIDIA_KNOBS
    check_amd.AMD_KNOBS, check_amd.NVIDIA_KNOBS = [{}, {"HIPDNN_CABI_HIP_MMA": "0"}], []
    try:
        check_amd.build_corpus(c, list(check_amd.TARGETS), lambda s: None)
    finally:
        check_amd.AMD_KNOBS, check_amd.NVIDIA_KNOBS = old
    return c


def test_corpus_covers_every_family_on_both_targets_with_amd_kernels(corpus):
    for arch in check_amd.TARGETS:
        assert not corpus.declined[arch], corpus.declined[arch][:3]
        names = set().union(*[i["names"] for i in corpus.items.values() if i["arch"] == arch])
        for k in ("hdn_attn_fwd_mfma", "hdn_attn_bwd_mfma", "hdn_attn_bwd_pre", "hdn_gemm_mfma",
                  "hdn_gemm_simt", "hdn_gemm_splitk", "hdn_moe_route_u0", "hdn_moe_gather_u0"):
            assert k in names, (arch, k)
        for prefix in ("hdn_bsq", "hdn_bsdq", "hdn_bn", "hdn_reduce", "hdn_pool", "hdn_ln", "hdn_rms"):
            assert any(n.startswith(prefix) for n in names), (arch, prefix)
        # no NVIDIA kernel is emitted for an AMD target
        assert not names & {"hdn_gemm_mma", "hdn_gemm_wgmma", "hdn_attn_fwd", "hdn_attn_bwd",
                            "hdn_attn_fwd_wg"}, names
        progs = [i for i in corpus.items.values() if i["arch"] == arch and not i["body"]]
        assert not any("__shfl_xor_sync" in i["source"] for i in progs)
        moe = [i for i in progs if "hdn_moe_tile_active" in i["source"]]
        assert moe and all("hdn_gemm_mfma" in i["names"] or "hdn_gemm_simt" in i["names"] for i in moe)
        assert any("hdn_gemm_mfma" in i["names"] for i in moe)


def test_recorder_captures_both_targets_of_a_gpu_test(tmp_path):
    out = tmp_path / "rec.jsonl"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, HIPDNN_CABI_AMD_RECORD=str(out),
               PYTHONPATH=os.pathsep.join([os.path.join(root, "tests", "amd"), root]))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "amd_record", "-m", "gpu",
                        "-p", "no:cacheprovider", "-o", "addopts=",
                        os.path.join(root, "tests", "gpu", "test_gpu_ops.py"), "-k",
                        "test_matmul and HALF"], cwd=root, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert " passed" in r.stdout
    es = [json.loads(x) for x in out.read_text().splitlines()]
    archs = {e["arch"] for e in es if e["name"] == "hdn_gemm_mfma"}
    assert archs == {"gfx942", "gfx90a"}, es[:2]
    assert all(e["test"].startswith("tests/gpu/test_gpu_ops.py::test_matmul") for e in es)


def test_formerly_failing_sources_compile_clean(corpus, tmp_path):
    """A sample of what did not compile for AMD before: the block-scale lane quantizer, MFMA
    attention forward with dropout and backward, the MoE grouped GEMM."""
    if tc.missing():
        pytest.skip("offline AMD toolchain missing (make check-amd installs it)")
    chain = tc.Toolchain(os.environ.get("CHECK_AMD_CACHE") or str(tmp_path))
    hdrs = check_amd.headers()
    picks = {}
    for it in corpus.items.values():
        if it["body"]:
            continue
        src = it["source"]
        key = ("bsq" if "hdn_lane_xor" in src else "fwd" if "hdn_attn_fwd_mfma" in it["names"] and "#define DROPOUT 1" in src
               else "bwd" if "hdn_attn_bwd_mfma" in it["names"] else "moe" if "hdn_moe_tile_active" in src and
               "hdn_gemm_mfma" in it["names"] else None)
        if key and (key, it["arch"]) not in picks:
            picks[(key, it["arch"])] = it
    assert len(picks) == 8, sorted(picks)
    for (key, arch), it in sorted(picks.items()):
        r = check_amd.compile_one(chain, it, hdrs, "t", str(tmp_path / "objs"))
        assert check_amd.evaluate(it, r, set()) == [], (key, arch, r.get("error", "")[-2000:])
        if key != "bsq":
            assert any(m.startswith("v_mfma") for ins in r["isa"].values() for m in ins), (key, arch)
