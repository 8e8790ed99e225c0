"""Tests for hipdnn_cabi.schemas.verifier (pure-Python FlatBuffers verifier).

The property that matters: for any byte string, ``verify`` either raises
VerificationError (and nothing else) or returns, and then every field of the
buffer can be read through the flatc-generated reader classes without an
exception.  Checked on hand-made corrupt buffers and on >= 10,000 seeded
random mutations of a realistic Graph (plus EngineDetails and the HDGP
container).
"""
from __future__ import annotations

import random
import struct
import sys
import time
from pathlib import Path

import flatbuffers
import pytest

from hipdnn_cabi.schemas import dump, verifier
from hipdnn_cabi.schemas.tensor_value import read_tensor_value
from hipdnn_cabi.schemas.verifier import VerificationError, verify, verify_file_root
from hipdnn_cabi.schemas._generated import Graph as G, Knob as K, TensorAttributes as TA
from hipdnn_cabi.schemas._generated.Graph import Graph

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_schemas_support as S

GRAPH = S.build_sample_graph()
DETAILS = S.build_sample_engine_details()
PLAN = S.build_sample_plan()
CONTAINER = S.build_sample_container(GRAPH, PLAN)


def _err(buf, root, **kw):
    with pytest.raises(VerificationError) as ei:
        verify(buf, root, **kw)
    return str(ei.value)


# ---------------------------------------------------------------------------------------------
# valid buffers

@pytest.mark.parametrize("buf,root,ident", [
    (GRAPH, "Graph", None), (DETAILS, "EngineDetails", None),
    (PLAN, "SerializedExecutionPlan", None), (CONTAINER, "SerializedGraphAndPlan", b"HDGP"),
])
def test_valid_buffers_verify(buf, root, ident):
    verify(buf, root, ident)
    verify(bytearray(buf), root, ident)
    verify(memoryview(buf), root, ident)
    dump.to_dict(buf, root)


def test_verify_file_root_and_identifier():
    verify_file_root(CONTAINER, "serialized_graph_and_plan.fbs")
    verify_file_root(GRAPH, "graph.fbs")
    assert verifier.has_identifier(CONTAINER, b"HDGP")
    assert verifier.has_identifier(CONTAINER, "HDGP")
    assert not verifier.has_identifier(GRAPH, b"HDGP")
    assert not verifier.has_identifier(b"\0\0\0\0HDG", b"HDGP")
    assert "file identifier" in _err(GRAPH, "Graph", file_identifier=b"HDGP")
    # the embedded graph and plan are complete buffers on their own
    c = dump.to_dict(CONTAINER, "SerializedGraphAndPlan")
    assert bytes(c["graph_blob"]) == GRAPH and bytes(c["plan_blob"]) == PLAN


def test_minimal_and_empty_tables():
    b = flatbuffers.Builder(0)
    G.Start(b)
    b.Finish(G.End(b))
    buf = bytes(b.Output())
    verify(buf, "Graph")
    assert dump.to_dict(buf, "Graph")["tensors"] is None


def test_api_errors():
    with pytest.raises(KeyError):
        verify(GRAPH, "NoSuchTable")
    with pytest.raises(TypeError):
        verify("not bytes", "Graph")


# ---------------------------------------------------------------------------------------------
# hand-made corruptions with precise messages

def test_size_limits():
    assert "too small" in _err(b"", "Graph")
    assert "too small" in _err(GRAPH[:7], "Graph")


def test_truncation_detected():
    # the sample ends with the last-written string ("x"), its NUL, then alignment padding
    end_of_x = GRAPH.rindex(b"\x01\0\0\0x") + 5
    verify(GRAPH[:end_of_x + 1], "Graph")
    for cut in (8, 12, len(GRAPH) // 2, end_of_x):
        _err(GRAPH[:cut], "Graph")


def test_root_offset_out_of_bounds():
    buf = bytearray(GRAPH)
    struct.pack_into("<I", buf, 0, len(buf) + 100)
    assert "offset out of bounds" in _err(bytes(buf), "Graph")
    struct.pack_into("<I", buf, 0, 0)
    assert "null offset" in _err(bytes(buf), "Graph")


def _field_pos(buf, table_pos, slot):
    vt = table_pos - struct.unpack_from("<i", buf, table_pos)[0]
    vsize = struct.unpack_from("<H", buf, vt)[0]
    if 4 + 2 * slot >= vsize:
        return None
    fo = struct.unpack_from("<H", buf, vt + 4 + 2 * slot)[0]
    return table_pos + fo if fo else None


def _deref(buf, p):
    return p + struct.unpack_from("<I", buf, p)[0]


def test_error_path_names_the_field():
    buf = bytearray(GRAPH)
    root = struct.unpack_from("<I", buf, 0)[0]
    nodes_f = _field_pos(buf, root, 5)
    nodes_v = _deref(buf, nodes_f)
    node0 = _deref(buf, nodes_v + 4)
    attr_f = _field_pos(buf, node0, 3)
    conv = _deref(buf, attr_f)
    stride_f = _field_pos(buf, conv, 5)  # ConvolutionFwdAttributes.stride
    stride_v = _deref(buf, stride_f)
    struct.pack_into("<I", buf, stride_v, 0x10000000)  # absurd element count
    msg = _err(bytes(buf), "Graph")
    assert msg == "Graph.nodes[0].attributes<ConvolutionFwdAttributes>.stride: vector length out of bounds", msg


def test_string_without_nul():
    buf = bytearray(GRAPH)
    root = struct.unpack_from("<I", buf, 0)[0]
    s = _deref(buf, _field_pos(buf, root, 0))
    n = struct.unpack_from("<I", buf, s)[0]
    buf[s + 4 + n] = ord("!")
    assert _err(bytes(buf), "Graph") == "Graph.name: string not NUL-terminated"


def test_bad_vtable():
    buf = bytearray(GRAPH)
    root = struct.unpack_from("<I", buf, 0)[0]
    vt = root - struct.unpack_from("<i", buf, root)[0]
    for vsize, frag in ((3, "vtable"), (2, "invalid vtable size"), (0xFFFE, "vtable out of bounds")):
        b2 = bytearray(buf)
        struct.pack_into("<H", b2, vt, vsize)
        assert frag in _err(bytes(b2), "Graph")
    b2 = bytearray(buf)
    struct.pack_into("<i", b2, root, -(len(buf)))
    assert "vtable out of bounds" in _err(bytes(b2), "Graph")
    b2 = bytearray(buf)
    struct.pack_into("<H", b2, vt + 2, 0xFFF0)  # table inline size
    assert "table size out of bounds" in _err(bytes(b2), "Graph")


def test_misaligned_table_and_alignment_switch():
    buf = bytearray(GRAPH)
    root = struct.unpack_from("<I", buf, 0)[0]
    struct.pack_into("<I", buf, 0, root + 1)
    assert "misaligned" in _err(bytes(buf), "Graph")


def test_required_field_missing():
    b = flatbuffers.Builder(0)
    kid = b.CreateString("k")
    K.Start(b)
    K.AddKnobId(b, kid)
    b.Finish(K.End(b))
    assert _err(bytes(b.Output()), "Knob") == "Knob.default_value: required field missing"


def test_unknown_union_member_is_accepted_not_followed():
    # node with attributes_type 200 (unknown to this schema) and a bogus offset
    buf = bytearray(GRAPH)
    root = struct.unpack_from("<I", buf, 0)[0]
    node0 = _deref(buf, _deref(buf, _field_pos(buf, root, 5)) + 4)
    buf[_field_pos(buf, node0, 2)] = 200
    verify(bytes(buf), "Graph")
    d = dump.to_dict(bytes(buf), "Graph")
    assert d["nodes"][0]["attributes"] == {"type": 200, "value": None}


def test_depth_and_table_limits():
    verify(GRAPH, "Graph", max_depth=3)
    assert "nesting too deep" in _err(GRAPH, "Graph", max_depth=2)
    n_tables = 1 + len(S.SAMPLE_TENSORS) + 2 * 4
    verify(GRAPH, "Graph", max_tables=n_tables)
    assert "too many tables" in _err(GRAPH, "Graph", max_tables=n_tables - 1)


def test_shared_subtables_bounded_by_table_limit():
    """A vector whose 200,000 elements all point at the same table (a 'DAG bomb')."""
    b = flatbuffers.Builder(0)
    TA.Start(b)
    TA.AddUid(b, 1)
    t = TA.End(b)
    count = 200_000
    G.StartTensorsVector(b, count)
    for _ in range(count):
        b.PrependUOffsetTRelative(t)
    vec = b.EndVector()
    G.Start(b)
    G.AddTensors(b, vec)
    b.Finish(G.End(b))
    buf = bytes(b.Output())
    t0 = time.perf_counter()
    assert "too many tables" in _err(buf, "Graph", max_tables=100_000)
    assert time.perf_counter() - t0 < 5
    # a huge declared count fails before any element is visited
    big = bytearray(buf)
    root = struct.unpack_from("<I", big, 0)[0]
    v = _deref(big, _field_pos(big, root, 4))
    struct.pack_into("<I", big, v, (len(big) - v - 4) // 4)
    t0 = time.perf_counter()
    _err(bytes(big), "Graph", max_tables=1000)
    assert time.perf_counter() - t0 < 0.5


def test_check_utf8_option():
    buf = bytearray(GRAPH)
    root = struct.unpack_from("<I", buf, 0)[0]
    s = _deref(buf, _field_pos(buf, root, 0))
    buf[s + 4] = 0xFF
    verify(bytes(buf), "Graph")
    assert "UTF-8" in _err(bytes(buf), "Graph", check_utf8=True)


# ---------------------------------------------------------------------------------------------
# fuzzing

def _mutate(rng: random.Random, base: bytes) -> bytes:
    buf = bytearray(base)
    n = len(buf)
    op = rng.randrange(9)
    if op == 0:  # flip 1-4 bits
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(n)
            buf[i] ^= 1 << rng.randrange(8)
    elif op == 1:  # random bytes
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(n)] = rng.randrange(256)
    elif op == 2:  # truncate
        return bytes(buf[:rng.randrange(n)])
    elif op == 3:  # bogus 32-bit value at an aligned position (offsets, lengths, soffsets)
        p = rng.randrange(n // 4) * 4
        v = rng.choice([0, 1, 2, 3, 4, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, n, n - 4, n + 4,
                        rng.randrange(-n, n) & 0xFFFFFFFF, rng.randrange(1 << 32)])
        struct.pack_into("<I", buf, p, v)
    elif op == 4:  # bogus 16-bit value at an even position (vtable entries)
        p = rng.randrange(n // 2) * 2
        struct.pack_into("<H", buf, p, rng.choice([0, 1, 2, 3, 4, 5, 0xFFFF, rng.randrange(1 << 16),
                                                   rng.randrange(64)]))
    elif op == 5:  # small delta to an aligned 32-bit word
        p = rng.randrange(n // 4) * 4
        v = (struct.unpack_from("<I", buf, p)[0] + rng.choice([-8, -4, -2, -1, 1, 2, 4, 8])) & 0xFFFFFFFF
        struct.pack_into("<I", buf, p, v)
    elif op == 6:  # insert or delete a few bytes
        p = rng.randrange(n)
        k = rng.randint(1, 8)
        if rng.random() < 0.5:
            del buf[p:p + k]
        else:
            buf[p:p] = bytes(rng.randrange(256) for _ in range(k))
    elif op == 7:  # copy a chunk over another place
        a, c = rng.randrange(n), rng.randrange(n)
        k = rng.randint(2, 32)
        chunk = buf[a:a + k]
        buf[c:c + len(chunk)] = chunk
        del buf[n:]
    else:  # zero a range
        a = rng.randrange(n)
        buf[a:a + rng.randint(1, 16)] = bytes(min(16, n - a))
        del buf[n:]
    return bytes(buf)


def _traverse(buf: bytes, root: str):
    """Read every field through the generated classes (dump walks all accessors)."""
    d = dump.to_dict(buf, root)
    if root == "Graph":
        g = Graph.GetRootAs(buf, 0)
        for i in range(g.TensorsLength()):
            read_tensor_value(g.Tensors(i))
    elif root == "SerializedGraphAndPlan":
        # the embedded blobs are complete buffers: verify them in turn, and read what passes
        for blob, sub in ((d["graph_blob"], "Graph"), (d["plan_blob"], "SerializedExecutionPlan")):
            if blob is None:
                continue
            try:
                verify(bytes(blob), sub)
            except VerificationError:
                continue
            _traverse(bytes(blob), sub)
    return d


def _fuzz(base: bytes, root: str, count: int, seed: int):
    rng = random.Random(seed)
    accepted = 0
    worst = 0.0
    for i in range(count):
        m = _mutate(rng, base)
        t0 = time.perf_counter()
        try:
            verify(m, root)
        except VerificationError:
            pass
        except Exception as e:  # pragma: no cover - the failure we look for
            raise AssertionError("case %d: verify raised %r" % (i, e)) from e
        else:
            accepted += 1
            try:
                _traverse(m, root)
            except Exception as e:  # pragma: no cover
                raise AssertionError("case %d: accepted buffer broke the reader: %r" % (i, e)) from e
        worst = max(worst, time.perf_counter() - t0)
    assert worst < 1.0, "a single case took %.2fs" % worst
    return accepted


def test_fuzz_graph_10000():
    accepted = _fuzz(GRAPH, "Graph", 10_000, seed=0x5EED)
    # both outcomes must be well represented, or the mutator is not testing anything
    assert 500 < accepted < 9_500, accepted


def test_fuzz_engine_details():
    accepted = _fuzz(DETAILS, "EngineDetails", 2_000, seed=1234)
    assert 100 < accepted < 1_900, accepted


def test_fuzz_container():
    accepted = _fuzz(CONTAINER, "SerializedGraphAndPlan", 1_000, seed=99)
    assert accepted > 10
