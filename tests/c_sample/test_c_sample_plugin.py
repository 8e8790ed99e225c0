"""Tests for engine_plugins/c_sample: the C11 sample hipDNN engine plugin.

The plugin is built with its own Makefile into a temporary directory. Graph and EngineConfig
FlatBuffers are built here with the `flatbuffers` package from raw slot numbers (facts in
shared/abi/hipdnn_schemas.json), expected results are computed here with plain strided loops, and
tests/c_sample/drive_c_sample.c dlopens the library and drives it in the order a hipDNN backend
does (see that file).
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import flatbuffers
import pytest
from flatbuffers import encode, number_types, packer, table

REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIR = REPO / "engine_plugins" / "c_sample"
DRIVER_SRC = Path(__file__).resolve().parent / "drive_c_sample.c"
LIB_NAME = "libhipdnn_c_sample_plugin.so"
ENGINE_NAME = "HIPDNN_CABI_C_SAMPLE_ENGINE"

# Schema facts (hipdnn_schemas.json).
DT_UNSET, DT_FLOAT, DT_HALF = 0, 1, 2
NODE_POINTWISE, NODE_MATMUL = 2, 9
PW_ADD, PW_MUL, PW_RELU_FWD, PW_SUB = 2, 30, 34, 42
SUPPORTS_EXECUTION_PLAN_SERIALIZATION = 4

EXPECTED_EXPORTS = {
    "hipdnnPluginGetName",
    "hipdnnPluginGetVersion",
    "hipdnnPluginGetApiVersion",
    "hipdnnPluginGetType",
    "hipdnnPluginGetLastErrorString",
    "hipdnnPluginSetLoggingCallback",
    "hipdnnPluginSetLogLevel",
    "hipdnnEnginePluginGetAllEngineIds",
    "hipdnnEnginePluginCreate",
    "hipdnnEnginePluginDestroy",
    "hipdnnEnginePluginSetStream",
    "hipdnnEnginePluginGetApplicableEngineIds",
    "hipdnnEnginePluginGetEngineDetails",
    "hipdnnEnginePluginDestroyEngineDetails",
    "hipdnnEnginePluginGetWorkspaceSize",
    "hipdnnEnginePluginCreateExecutionContext",
    "hipdnnEnginePluginDestroyExecutionContext",
    "hipdnnEnginePluginSerializeExecutionContextWithEngineId",
    "hipdnnEnginePluginSerializeExecutionContext",
    "hipdnnEnginePluginDestroySerializedExecutionContext",
    "hipdnnEnginePluginCreateExecutionContextFromSerialized",
    "hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext",
    "hipdnnEnginePluginExecuteOpGraph",
    "hipdnnEnginePluginExecuteOpGraphWithOverrides",
    "hipdnnEnginePluginGetEngineName",
}


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


ENGINE_ID = signed64(fnv1a64(ENGINE_NAME.encode()))


# ---------------------------------------------------------------------------------------------
# Graph model and FlatBuffer writers (raw slots)
# ---------------------------------------------------------------------------------------------


@dataclass
class T:
    uid: int
    dims: list
    strides: Optional[list] = None  # None = packed (written for non-virtual tensors)
    virtual: bool = False
    dtype: Optional[int] = DT_FLOAT
    const: Optional[float] = None  # by-value Float32Value
    pbv: bool = False
    alignment: Optional[int] = None
    write_strides: bool = True


@dataclass
class N:
    mode: int
    in0: int
    out: int
    in1: Optional[int] = None
    in2: Optional[int] = None
    attr_type: int = NODE_POINTWISE
    lower_clip: Optional[float] = None
    upper_clip: Optional[float] = None
    slope: Optional[float] = None


@dataclass
class G:
    tensors: list
    nodes: list
    io_dt: Optional[int] = None
    inter_dt: Optional[int] = None
    override: bool = False
    version: Optional[tuple] = None
    uuid: Optional[bytes] = None


def packed(dims):
    s, out = 1, []
    for d in reversed(dims):
        out.append(s)
        s *= d
    return list(reversed(out))


def _i64_vector(b, values):
    b.StartVector(8, len(values), 8)
    for v in reversed(values):
        b.PrependInt64(v)
    return b.EndVector()


def _offset_vector(b, offsets):
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def build_graph(g: G) -> bytes:
    b = flatbuffers.Builder(1024)
    t_offs = []
    for t in g.tensors:
        name = b.CreateString(f"tensor_{t.uid}")
        dims = _i64_vector(b, t.dims)
        strides = None
        if t.write_strides:
            strides = _i64_vector(b, t.strides if t.strides is not None else packed(t.dims))
        value = None
        if t.const is not None:  # struct member of the TensorValue union: reached through a uoffset
            b.Prep(4, 0)
            b.PrependFloat32(t.const)
            value = b.Offset()
        b.StartObject(12)
        b.PrependInt64Slot(0, t.uid, 0)
        b.PrependUOffsetTRelativeSlot(1, name, 0)
        if t.dtype is not None:
            b.PrependInt8Slot(2, t.dtype, 0)
        if strides is not None:
            b.PrependUOffsetTRelativeSlot(3, strides, 0)
        b.PrependUOffsetTRelativeSlot(4, dims, 0)
        b.PrependBoolSlot(5, t.virtual, False)
        if value is not None:
            b.PrependUint8Slot(6, 1, 0)  # Float32Value
            b.PrependUOffsetTRelativeSlot(7, value, 0)
        b.PrependBoolSlot(8, t.pbv, False)
        if t.alignment is not None:
            b.PrependInt64Slot(10, t.alignment, 16)
        t_offs.append(b.EndObject())
    n_offs = []
    for i, n in enumerate(g.nodes):
        name = b.CreateString(f"node_{i}")
        b.StartObject(12)
        if n.attr_type == NODE_POINTWISE:
            b.PrependInt8Slot(0, n.mode, 0)
            if n.lower_clip is not None:
                b.PrependFloat32Slot(1, n.lower_clip, None)
            if n.upper_clip is not None:
                b.PrependFloat32Slot(2, n.upper_clip, None)
            if n.slope is not None:
                b.PrependFloat32Slot(3, n.slope, None)
            b.PrependInt64Slot(5, n.in0, 0)
            if n.in1 is not None:
                b.PrependInt64Slot(6, n.in1, None)  # optional scalar: always written
            if n.in2 is not None:
                b.PrependInt64Slot(7, n.in2, None)
            b.PrependInt64Slot(8, n.out, 0)
        attrs = b.EndObject()
        b.StartObject(4)
        b.PrependUOffsetTRelativeSlot(0, name, 0)
        b.PrependUint8Slot(2, n.attr_type, 0)
        b.PrependUOffsetTRelativeSlot(3, attrs, 0)
        n_offs.append(b.EndObject())
    tv = _offset_vector(b, t_offs)
    nv = _offset_vector(b, n_offs)
    gname = b.CreateString("c_sample_test_graph")
    b.StartObject(10)
    b.PrependUOffsetTRelativeSlot(0, gname, 0)
    if g.inter_dt is not None:
        b.PrependInt8Slot(2, g.inter_dt, 0)
    if g.io_dt is not None:
        b.PrependInt8Slot(3, g.io_dt, 0)
    b.PrependUOffsetTRelativeSlot(4, tv, 0)
    b.PrependUOffsetTRelativeSlot(5, nv, 0)
    b.PrependBoolSlot(7, g.override, False)
    if g.version is not None:  # struct EngineApiVersion {uint major, minor, patch}, inline
        b.Prep(4, 12)
        b.PrependUint32(g.version[2])
        b.PrependUint32(g.version[1])
        b.PrependUint32(g.version[0])
        b.PrependStructSlot(8, b.Offset(), 0)
    if g.uuid is not None:  # struct Uuid {ubyte[16]}, inline
        b.Prep(1, 16)
        for byte in reversed(g.uuid):
            b.PrependUint8(byte)
        b.PrependStructSlot(9, b.Offset(), 0)
    root = b.EndObject()
    b.Finish(root)
    return bytes(b.Output())


def build_engine_config(engine_id: int, knob: Optional[str] = None) -> bytes:
    b = flatbuffers.Builder(128)
    knobs = None
    if knob is not None:
        k = b.CreateString(knob)
        b.StartObject(3)
        b.PrependUOffsetTRelativeSlot(0, k, 0)
        setting = b.EndObject()
        knobs = _offset_vector(b, [setting])
    b.StartObject(3)
    b.PrependInt64Slot(0, engine_id, 0)
    if knobs is not None:
        b.PrependUOffsetTRelativeSlot(1, knobs, 0)
    root = b.EndObject()
    b.Finish(root)
    return bytes(b.Output())


# ---------------------------------------------------------------------------------------------
# Reference execution on strided float32 buffers
# ---------------------------------------------------------------------------------------------


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def span(dims, strides):
    return 1 + sum((d - 1) * s for d, s in zip(dims, strides))


def reference(tensors: dict, nodes: list, mem: dict) -> None:
    """tensors: uid -> (dims, strides, virtual, const); mem: uid -> list of floats (mutated)."""
    for n in nodes:
        ydims, ystr, _, _ = tensors[n.out]
        if n.out not in mem:
            mem[n.out] = [0.0] * span(ydims, ystr)
        ins = [n.in0] + ([n.in1] if n.in1 is not None else [])
        for idx in itertools.product(*[range(d) for d in ydims]):
            vals = []
            for u in ins:
                dims, strides, _, const = tensors[u]
                if const is not None:
                    vals.append(const)
                    continue
                if all(d == 1 for d in dims):
                    off = 0
                else:
                    off = sum((i if d != 1 else 0) * s for i, d, s in zip(idx, dims, strides))
                vals.append(mem[u][off])
            if n.mode == PW_ADD:
                r = f32(vals[0] + vals[1])
            elif n.mode == PW_MUL:
                r = f32(vals[0] * vals[1])
            else:
                lo = n.lower_clip if n.lower_clip is not None else 0.0
                r = vals[0] if vals[0] > lo else f32(lo)
                if n.upper_clip is not None and r > n.upper_clip:
                    r = f32(n.upper_clip)
            mem[n.out][sum(i * s for i, s in zip(idx, ystr))] = r


@dataclass
class Case:
    name: str
    graph: G
    applicable: bool
    # Shapes used for execution (uid -> (dims, strides)) when overrides are given.
    overrides: dict = field(default_factory=dict)


SENTINEL = -777.0


def case_bytes(case: Case, rng: random.Random) -> bytes:
    g = case.graph
    graph = build_graph(g)
    out = bytearray(b"CSCASE01")
    name = case.name.encode()
    out += struct.pack("<I", len(name)) + name
    out += struct.pack("<I", len(graph)) + graph
    out += struct.pack("<I", 1 if case.applicable else 0)
    bufs = []
    if case.applicable:
        shapes = {}
        for t in g.tensors:
            dims, strides = t.dims, (t.strides if t.strides is not None else packed(t.dims))
            if t.uid in case.overrides:
                dims, strides = case.overrides[t.uid]
            if t.virtual:
                strides = packed(dims)
            shapes[t.uid] = (dims, strides, t.virtual, f32(t.const) if t.const is not None else None)
        # Virtual shapes follow their inputs under overrides (as the plugin infers them).
        if case.overrides:
            for n in g.nodes:
                t = next(t for t in g.tensors if t.uid == n.out)
                if t.virtual and n.out not in case.overrides:
                    ref = shapes[n.in0][0]
                    dims = list(ref)
                    if n.in1 is not None and len(shapes[n.in1][0]) == len(dims):
                        dims = [max(a, b) for a, b in zip(dims, shapes[n.in1][0])]
                    shapes[n.out] = (dims, packed(dims), True, None)
        produced = {n.out for n in g.nodes}
        used = produced | {n.in0 for n in g.nodes} | {n.in1 for n in g.nodes if n.in1 is not None}
        mem, init = {}, {}
        for t in g.tensors:
            dims, strides, virtual, const = shapes[t.uid]
            if virtual or const is not None or t.uid not in used:
                continue
            size = span(dims, strides) + 3  # 3 guard elements past the end
            if t.uid in produced:
                data = [SENTINEL] * size
            else:
                data = [f32(rng.randint(-16, 16) / 8.0) for _ in range(size)]
            init[t.uid] = list(data)
            mem[t.uid] = data
        reference(shapes, g.nodes, mem)
        for uid in init:
            bufs.append((uid, init[uid], mem[uid]))
    out += struct.pack("<I", len(bufs))
    for uid, initial, expected in bufs:
        out += struct.pack("<qI", uid, len(initial))
        out += struct.pack(f"<{len(initial)}f", *initial)
        out += struct.pack(f"<{len(expected)}f", *expected)
    out += struct.pack("<I", len(case.overrides))
    for uid, (dims, strides) in case.overrides.items():
        out += struct.pack("<qI", uid, len(dims))
        out += struct.pack(f"<{len(dims)}q", *dims)
        out += struct.pack(f"<{len(strides)}q", *strides)
    return bytes(out)


def make_cases() -> list:
    d = [2, 3, 4]
    cases = [
        Case("add_packed", G([T(1, d), T(2, d), T(3, d)], [N(PW_ADD, 1, 3, in1=2)]), True),
        Case(
            "mul_strided",
            G(
                [
                    T(10, d, [1, 2, 6]),  # column-major
                    T(11, d, [12, 1, 3]),  # permuted
                    T(12, d, [20, 5, 1]),  # padded rows: gaps must stay untouched
                ],
                [N(PW_MUL, 10, 12, in1=11)],
            ),
            True,
        ),
        Case("relu", G([T(5, [3, 5]), T(6, [3, 5], [1, 3])], [N(PW_RELU_FWD, 5, 6)]), True),
        Case(
            "relu_clipped",
            G([T(5, [17]), T(6, [17])], [N(PW_RELU_FWD, 5, 6, lower_clip=-0.5, upper_clip=1.25)]),
            True,
        ),
        Case(
            "add_broadcast",
            G([T(1, [2, 3, 4]), T(2, [1, 3, 1]), T(3, [2, 3, 4])], [N(PW_ADD, 1, 3, in1=2)]),
            True,
        ),
        Case(
            "chain_virtual",
            G(
                [
                    T(1, d),
                    T(2, d, [1, 2, 6]),
                    T(3, [1, 3, 1]),
                    T(100, d, virtual=True),
                    T(101, d, virtual=True, dtype=DT_UNSET),
                    T(4, d),
                ],
                [N(PW_MUL, 1, 100, in1=2), N(PW_ADD, 100, 101, in1=3), N(PW_RELU_FWD, 101, 4)],
                inter_dt=DT_FLOAT,
            ),
            True,
        ),
        Case(
            "scalar_by_value",
            G([T(1, [4, 5]), T(2, [1], const=2.5), T(3, [4, 5])], [N(PW_MUL, 1, 3, in1=2)]),
            True,
        ),
        Case(
            "io_dtype_default",
            G([T(1, d, dtype=None), T(2, d, dtype=None), T(3, d, dtype=None)], [N(PW_ADD, 2, 3, in1=1)], io_dt=DT_FLOAT,
              version=(1, 0, 0), uuid=bytes(range(16))),
            True,
        ),
        Case(
            "overrides",
            G(
                [T(1, d), T(2, d), T(100, d, virtual=True), T(3, d)],
                [N(PW_ADD, 1, 100, in1=2), N(PW_RELU_FWD, 100, 3)],
                override=True,
                version=(1, 1, 0),
            ),
            True,
            overrides={1: ([4, 3, 2], [6, 2, 1]), 2: ([4, 3, 2], [1, 4, 12]), 3: ([4, 3, 2], [8, 2, 1])},
        ),
        # Not applicable: num_engines == 0, SUCCESS.
        Case("half", G([T(1, d, dtype=DT_HALF), T(2, d, dtype=DT_HALF), T(3, d, dtype=DT_HALF)],
                       [N(PW_ADD, 1, 3, in1=2)]), False),
        Case("unset_dtype_no_default", G([T(1, d, dtype=None), T(2, d), T(3, d)], [N(PW_ADD, 1, 3, in1=2)]), False),
        Case("sub_mode", G([T(1, d), T(2, d), T(3, d)], [N(PW_SUB, 1, 3, in1=2)]), False),
        Case("shape_mismatch", G([T(1, d), T(2, [2, 3, 5]), T(3, d)], [N(PW_ADD, 1, 3, in1=2)]), False),
        Case("rank_mismatch", G([T(1, d), T(2, [3, 4]), T(3, d)], [N(PW_ADD, 1, 3, in1=2)]), False),
        Case("matmul_node", G([T(1, d), T(2, d), T(3, d)], [N(0, 1, 3, attr_type=NODE_MATMUL)]), False),
        Case("no_nodes", G([T(1, d)], []), False),
        Case("binary_missing_in1", G([T(1, d), T(3, d)], [N(PW_ADD, 1, 3)]), False),
        Case("three_inputs", G([T(1, d), T(2, d), T(3, d)], [N(PW_ADD, 1, 3, in1=2, in2=2)]), False),
        Case("leaky_relu", G([T(1, d), T(3, d)], [N(PW_RELU_FWD, 1, 3, slope=0.1)]), False),
        Case("unknown_uid", G([T(1, d), T(3, d)], [N(PW_ADD, 1, 3, in1=77)]), False),
        Case("pass_by_value", G([T(1, d), T(2, [1], pbv=True), T(3, d)], [N(PW_MUL, 1, 3, in1=2)]), False),
        Case("alignment_32", G([T(1, d, alignment=32), T(2, d), T(3, d)], [N(PW_ADD, 1, 3, in1=2)]), False),
        Case("needs_api_1_2", G([T(1, d), T(2, d), T(3, d)], [N(PW_ADD, 1, 3, in1=2)], version=(1, 2, 0)), False),
        Case(
            "virtual_read_before_write",
            G([T(1, d), T(100, d, virtual=True), T(3, d), T(4, d)],
              [N(PW_ADD, 1, 3, in1=100), N(PW_RELU_FWD, 1, 100)]),
            False,
        ),
        Case("in_place", G([T(1, d), T(2, d)], [N(PW_ADD, 1, 1, in1=2)]), False),
        Case("written_twice", G([T(1, d), T(2, d), T(3, d)], [N(PW_ADD, 1, 3, in1=2), N(PW_RELU_FWD, 1, 3)]), False),
        Case("duplicate_uid", G([T(1, d), T(1, d), T(3, d)], [N(PW_RELU_FWD, 1, 3)]), False),
        Case("no_strides", G([T(1, d, write_strides=False), T(3, d)], [N(PW_RELU_FWD, 1, 3)]), False),
        Case("nine_dims", G([T(1, [1] * 9), T(3, [1] * 9)], [N(PW_RELU_FWD, 1, 3)]), False),
        Case("zero_dim", G([T(1, [2, 0]), T(3, [2, 0])], [N(PW_RELU_FWD, 1, 3)]), False),
        # element offsets that overflow int64 / spans no address space holds
        Case("offset_overflows_int64", G([T(1, [4, 8], [2**62, 1]), T(3, [4, 8])], [N(PW_RELU_FWD, 1, 3)]), False),
        Case("span_beyond_address_space", G([T(1, [4, 8], [2**47, 1]), T(3, [4, 8])], [N(PW_RELU_FWD, 1, 3)]),
             False),
    ]
    return cases


# ---------------------------------------------------------------------------------------------
# Build helpers and fixtures
# ---------------------------------------------------------------------------------------------


def _cc() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    return cc


def build_plugin(out_dir: Path, extra_cflags: str = "", extra_ldflags: str = "") -> Path:
    cmd = ["make", "-s", "-C", str(PLUGIN_DIR), f"OUT={out_dir}"]
    if extra_cflags:
        cmd.append(f"EXTRA_CFLAGS={extra_cflags}")
    if extra_ldflags:
        cmd.append(f"EXTRA_LDFLAGS={extra_ldflags}")
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"plugin build failed:\n{r.stdout}\n{r.stderr}"
    lib = out_dir / LIB_NAME
    assert lib.is_file()
    return lib


def build_driver(out: Path, extra: list) -> Path:
    cmd = [_cc(), "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-g", "-pthread",
           "-DHIPDNN_CABI_NO_HIP_HEADERS", f"-I{REPO / 'include'}", *extra, str(DRIVER_SRC), "-o", str(out), "-ldl", "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"driver build failed:\n{r.stderr}"
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    wd = tmp_path_factory.mktemp("c_sample")
    (wd / "out").mkdir()
    (wd / "engine_config.bin").write_bytes(build_engine_config(ENGINE_ID))
    (wd / "engine_config_wrong_id.bin").write_bytes(build_engine_config(ENGINE_ID ^ 0x10))
    (wd / "engine_config_knob.bin").write_bytes(build_engine_config(ENGINE_ID, knob="tile_size"))
    (wd / "engine_config_junk.bin").write_bytes(b"\xff" * 24)
    rng = random.Random(20240601)
    paths = []
    for case in make_cases():
        p = wd / f"{case.name}.case"
        p.write_bytes(case_bytes(case, rng))
        paths.append(p)
    (wd / "cases.txt").write_text("\n".join(str(p) for p in paths))
    return wd


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    return build_plugin(tmp_path_factory.mktemp("c_sample_build"))


def run_driver(driver: Path, lib: Path, wd: Path, env=None) -> subprocess.CompletedProcess:
    cases = (wd / "cases.txt").read_text().split("\n")
    return subprocess.run([str(driver), str(lib), str(wd), *cases], capture_output=True, text=True, env=env,
                          timeout=600)


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


def test_engine_id_is_fnv1a64_of_name():
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C  # standard FNV-1a-64 test vector
    assert ENGINE_ID == signed64(fnv1a64(b"HIPDNN_CABI_C_SAMPLE_ENGINE"))


def test_exports_exactly_the_plugin_api(plugin):
    r = subprocess.run(["nm", "-D", "--defined-only", str(plugin)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("nm unavailable")
    exported = {line.split()[-1] for line in r.stdout.splitlines() if line.split()[1:2] == ["T"]}
    assert exported == EXPECTED_EXPORTS


def test_default_output_dir_and_clean(tmp_path):
    # OUT= relative to the Makefile's folder works too; use a scratch copy to leave the tree alone.
    src = tmp_path / "engine_plugins" / "c_sample"
    shutil.copytree(PLUGIN_DIR, src, ignore=shutil.ignore_patterns("build"))
    shutil.copytree(REPO / "include", tmp_path / "include")
    r = subprocess.run(["make", "-s", "-C", str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (src / "build" / LIB_NAME).is_file()
    r = subprocess.run(["make", "-s", "-C", str(src), "clean"], capture_output=True, text=True)
    assert r.returncode == 0 and not (src / "build" / LIB_NAME).exists()


def _check_driver_output(r: subprocess.CompletedProcess, wd: Path):
    out = r.stdout
    assert r.returncode == 0 and "ALL OK" in out, f"driver failed ({r.returncode}):\n{out[-6000:]}\n{r.stderr[-6000:]}"
    assert f"ENGINE id={ENGINE_ID} " in out
    assert f"ENGINE name={ENGINE_NAME}" in out
    assert "api=1.1.0" in out
    for case in make_cases():
        assert f"CASE {case.name} applicable={1 if case.applicable else 0}" in out
        if case.applicable:
            for label in ("execute", "execute-again", "execute-other-handle", "deserialized", "newer-minor-payload"):
                assert f"EXECUTED {case.name} {label}" in out
    assert "THREADS chain_virtual ok" in out


def test_driver_backend_sequence(plugin, workdir):
    driver = build_driver(workdir / "drive", [])
    r = run_driver(driver, plugin, workdir)
    _check_driver_output(r, workdir)

    # Engine details written by the driver: EngineDetails FlatBuffer (no file identifier).
    graphs = {c.name: build_graph(c.graph) for c in make_cases()}
    for case in make_cases():
        if not case.applicable:
            continue
        det = (workdir / "out" / f"details_{case.name}.bin").read_bytes()
        check_engine_details(det)
        pay = (workdir / "out" / f"payload_{case.name}.bin").read_bytes()
        assert pay[:4] == b"HCSP"
        major, minor, kind = struct.unpack_from("<HHI", pay, 4)
        assert (major, minor, kind) == (1, 0, 1)
        engine_id, checksum, gsize, reserved = struct.unpack_from("<qQII", pay, 12)
        assert engine_id == ENGINE_ID and reserved == 0
        assert pay[36:] == graphs[case.name] and gsize == len(graphs[case.name])
        assert checksum == fnv1a64(graphs[case.name])


def check_engine_details(buf: bytes):
    """Decode with the flatbuffers runtime by slot, and check what a Verifier checks for alignment."""
    root = encode.Get(packer.uoffset, buf, 0)
    assert root % 4 == 0
    tab = table.Table(bytearray(buf), root)
    vt = root - encode.Get(packer.soffset, buf, root)
    assert vt % 2 == 0
    o = tab.Offset(4)  # slot 0: engine_id
    assert o and (root + o) % 8 == 0
    assert tab.Get(number_types.Int64Flags, root + o) == ENGINE_ID
    assert tab.Offset(6) == 0  # slot 1: knobs (none)
    o = tab.Offset(8)  # slot 2: behavior_notes [int]
    assert o
    start, n = tab.Vector(o), tab.VectorLen(o)
    assert (start - 4) % 4 == 0
    notes = [encode.Get(packer.int32, buf, start + 4 * i) for i in range(n)]
    assert SUPPORTS_EXECUTION_PLAN_SERIALIZATION in notes
    o = tab.Offset(10)  # slot 3: name
    assert o
    assert tab.String(root + o).decode() == ENGINE_NAME
    s = root + o + encode.Get(packer.uoffset, buf, root + o)
    assert s % 4 == 0 and buf[s + 4 + len(ENGINE_NAME)] == 0
    assert tab.Offset(12) == 0  # slot 4: candidate_page (none)


def test_driver_under_sanitizers(tmp_path, workdir):
    cc = _cc()
    probe = subprocess.run([cc, "-fsanitize=address,undefined", "-x", "c", "-", "-o", str(tmp_path / "probe")],
                           input="int main(void){return 0;}", capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("no ASan/UBSan toolchain")
    flags = "-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -g"
    lib = build_plugin(tmp_path / "asan", extra_cflags=flags, extra_ldflags="-fsanitize=address,undefined")
    driver = build_driver(tmp_path / "drive_asan", flags.split())
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = "detect_leaks=1:allocator_may_return_null=1:abort_on_error=0"
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    r = run_driver(driver, lib, workdir, env=env)
    if "LeakSanitizer does not work under ptrace" in r.stderr:
        pytest.skip("LeakSanitizer unavailable here")
    assert "ERROR: AddressSanitizer" not in r.stderr, r.stderr[-8000:]
    assert "runtime error" not in r.stderr, r.stderr[-8000:]
    _check_driver_output(r, workdir)
