"""Shared helpers for the schema tests (no tests here).

* ``build_sample_graph()``: a realistic Graph built with our generated builders
  (conv fwd + pointwise + a few more nodes, scalar/virtual/ragged/runtime tensors).
* ``build_sample_engine_details()``: EngineDetails with knobs (all KnobValue and
  KnobConstraint members) and a candidate page (required strings, nested vectors).
* ``build_sample_container(graph, plan)``: an "HDGP" SerializedGraphAndPlan.
* ``build_sample_plan()``: a SerializedExecutionPlan.
"""
from __future__ import annotations

import flatbuffers
import numpy as np

from hipdnn_cabi.schemas import tensor_value as tv
from hipdnn_cabi.schemas._generated import (
    ConvolutionFwdAttributes as CF, EngineCandidate as EC, EngineCandidatePage as ECP,
    EngineApiVersion as EAV, EngineDetails as ED, FloatConstraint as FC, FloatValue as FV,
    Graph as G, IntConstraint as IC, IntValue as IV, Knob as K, KnobSetting as KS,
    MatmulAttributes as MM, Node as N, PointwiseAttributes as PW, SerializedExecutionPlan as SEP,
    SerializedGraphAndPlan as SGP, StringConstraint as SC, StringValue as SV,
    TensorAttributes as TA, Uuid as U, CustomOpAttributes as CO,
)
from hipdnn_cabi.schemas._generated.ConvMode import ConvMode
from hipdnn_cabi.schemas._generated.DataType import DataType
from hipdnn_cabi.schemas._generated.KnobConstraint import KnobConstraint
from hipdnn_cabi.schemas._generated.KnobValue import KnobValue
from hipdnn_cabi.schemas._generated.NodeAttributes import NodeAttributes
from hipdnn_cabi.schemas._generated.PointwiseMode import PointwiseMode
from hipdnn_cabi.schemas._generated.TensorValue import TensorValue

UUID = bytes(range(0xA0, 0xB0))

# (uid, name, dtype, dims, virtual, value (type, v) or None, runtime_pbv, ragged uid, alignment, multiplier)
SAMPLE_TENSORS = [
    (1, "x", DataType.HALF, [1, 3, 8, 8], False, None, False, None, 16, 1),
    (2, "w", DataType.HALF, [4, 3, 3, 3], False, None, False, None, 16, 1),
    (3, "conv_y", DataType.FLOAT, [1, 4, 8, 8], True, None, False, None, 16, 1),
    (4, "bias", DataType.FLOAT, [1], False, (TensorValue.Float32Value, 0.5), False, None, 16, 1),
    (5, "z", DataType.HALF, [1, 4, 8, 8], False, None, False, None, 16, 1),
    (6, "alpha", DataType.DOUBLE, [1], False, (TensorValue.Float64Value, -2.25), True, None, 16, 1),
    (7, "runtime_scale", DataType.FLOAT, [1], False, None, True, None, 16, 1),
    (8, "ragged_q", DataType.HALF, [2, 16, 64], False, None, False, 9, 32, 2),
    (9, "ragged_offsets", DataType.INT32, [3], False, (TensorValue.Int32Value, 7), False, None, 16, 1),
    (10, "flag", DataType.UINT8, [1], False, (TensorValue.BoolValue, True), False, None, 16, 1),
    (11, "i64", DataType.INT64, [1], False, (TensorValue.Int64Value, -(2 ** 40)), False, None, 16, 1),
    (12, "fp8", DataType.FP8_E4M3, [1], False, (TensorValue.Float8Value, 0x7E), False, None, 16, 1),
    (13, "mm_out", DataType.FLOAT, [2, 16, 16], False, None, False, None, 16, 1),
]


def strides_for(dims):
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc *= d
    return list(reversed(out))


def _i64_vec(b, values):
    return b.CreateNumpyVector(np.asarray(values, dtype="<i8"))


def build_sample_graph() -> bytes:
    b = flatbuffers.Builder(1024)
    # ---- tensors
    t_offs = []
    for uid, name, dt, dims, virt, value, pbv, ragged, align, mult in SAMPLE_TENSORS:
        n_off = b.CreateString(name)
        d_off = _i64_vec(b, dims)
        s_off = _i64_vec(b, strides_for(dims))
        v_off = tv.create_tensor_value(b, value[0], value[1]) if value else None
        TA.Start(b)
        TA.AddUid(b, uid)
        TA.AddName(b, n_off)
        TA.AddDataType(b, dt)
        TA.AddStrides(b, s_off)
        TA.AddDims(b, d_off)
        TA.AddVirtual(b, virt)
        if value:
            tv.add_tensor_value(b, value[0], v_off)
        TA.AddIsRuntimePassByValue(b, pbv)
        if ragged is not None:
            TA.AddRaggedOffsetTensorUid(b, ragged)
        TA.AddAlignment(b, align)
        TA.AddRaggedOffsetMultiplier(b, mult)
        t_offs.append(TA.End(b))
    # ---- node attributes
    pre, post, st, dil = (_i64_vec(b, v) for v in ([1, 1], [1, 1], [1, 1], [1, 1]))
    flops = b.CreateString("2*N*K*C*R*S*H*W")
    CF.Start(b)
    CF.AddXTensorUid(b, 1)
    CF.AddWTensorUid(b, 2)
    CF.AddYTensorUid(b, 3)
    CF.AddPrePadding(b, pre)
    CF.AddPostPadding(b, post)
    CF.AddStride(b, st)
    CF.AddDilation(b, dil)
    CF.AddConvMode(b, ConvMode.CROSS_CORRELATION)
    CF.AddUmdFlops(b, flops)
    conv = CF.End(b)

    PW.Start(b)
    PW.AddOperation(b, PointwiseMode.ADD)
    PW.AddReluLowerClip(b, 0.0)       # optional scalar present with value 0
    PW.AddAxisTensorUid(b, 0)
    PW.AddIn0TensorUid(b, 3)
    PW.AddIn1TensorUid(b, 4)
    PW.AddOut0TensorUid(b, 5)
    PW.AddSwishBeta(b, 1.5)
    pw = PW.End(b)

    MM.Start(b)
    MM.AddATensorUid(b, 8)
    MM.AddBTensorUid(b, 8)
    MM.AddCTensorUid(b, 13)
    mm = MM.End(b)

    co_id = b.CreateString("my.custom.op")
    co_in = _i64_vec(b, [5, 6, 7])
    co_out = _i64_vec(b, [13])
    co_data = b.CreateByteVector(b"\x00\x01opaque\xff")
    CO.Start(b)
    CO.AddCustomOpId(b, co_id)
    CO.AddInputTensorUids(b, co_in)
    CO.AddOutputTensorUids(b, co_out)
    CO.AddData(b, co_data)
    co = CO.End(b)

    node_specs = [("conv_fwd", DataType.FLOAT, NodeAttributes.ConvolutionFwdAttributes, conv),
                  ("add_bias", DataType.FLOAT, NodeAttributes.PointwiseAttributes, pw),
                  ("mm", DataType.UNSET, NodeAttributes.MatmulAttributes, mm),
                  ("custom", DataType.UNSET, NodeAttributes.CustomOpAttributes, co)]
    n_offs = []
    for name, cdt, utype, attr in node_specs:
        nn = b.CreateString(name)
        N.Start(b)
        N.AddName(b, nn)
        N.AddComputeDataType(b, cdt)
        N.AddAttributesType(b, utype)
        N.AddAttributes(b, attr)
        n_offs.append(N.End(b))
    # ---- graph
    G.StartTensorsVector(b, len(t_offs))
    for o in reversed(t_offs):
        b.PrependUOffsetTRelative(o)
    tensors = b.EndVector()
    G.StartNodesVector(b, len(n_offs))
    for o in reversed(n_offs):
        b.PrependUOffsetTRelative(o)
    nodes = b.EndVector()
    gname = b.CreateString("sample_graph")
    G.Start(b)
    G.AddName(b, gname)
    G.AddComputeDataType(b, DataType.FLOAT)
    G.AddIntermediateDataType(b, DataType.FLOAT)
    G.AddIoDataType(b, DataType.HALF)
    G.AddTensors(b, tensors)
    G.AddNodes(b, nodes)
    G.AddPreferredEngineId(b, 0)      # optional scalar present with value 0
    G.AddIsOverrideShapeEnabled(b, True)
    G.AddMinRequiredEngineApiVersion(b, EAV.CreateEngineApiVersion(b, 1, 3, 0))
    G.AddId(b, U.CreateUuid(b, list(UUID)))
    b.Finish(G.End(b))
    return bytes(b.Output())


def _knob_value(b, kind, v):
    if kind == KnobValue.IntValue:
        IV.Start(b)
        IV.AddValue(b, v)
        return IV.End(b)
    if kind == KnobValue.FloatValue:
        FV.Start(b)
        FV.AddValue(b, v)
        return FV.End(b)
    s = b.CreateString(v)
    SV.Start(b)
    SV.AddValue(b, s)
    return SV.End(b)


def _knob_setting(b, knob_id, kind, v):
    kid = b.CreateString(knob_id)
    val = _knob_value(b, kind, v)
    KS.Start(b)
    KS.AddKnobId(b, kid)
    KS.AddValueType(b, kind)
    KS.AddValue(b, val)
    return KS.End(b)


def _offsets_vector(b, offs):
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def build_sample_engine_details() -> bytes:
    b = flatbuffers.Builder(1024)
    knobs = []
    specs = [
        ("tile_m", "tile size M", KnobValue.IntValue, 64, KnobConstraint.IntConstraint),
        ("ratio", "split ratio", KnobValue.FloatValue, 0.25, KnobConstraint.FloatConstraint),
        ("algo", "algorithm", KnobValue.StringValue, "winograd", KnobConstraint.StringConstraint),
        ("legacy", None, KnobValue.IntValue, 1, KnobConstraint.NONE),
    ]
    for kid, desc, vk, v, ck in specs:
        kid_o = b.CreateString(kid)
        desc_o = b.CreateString(desc) if desc else None
        val = _knob_value(b, vk, v)
        con = None
        if ck == KnobConstraint.IntConstraint:
            vv = _i64_vec(b, [16, 32, 64, 128])
            IC.Start(b)
            IC.AddMinValue(b, 16)
            IC.AddMaxValue(b, 128)
            IC.AddStep(b, 16)
            IC.AddValidValues(b, vv)
            con = IC.End(b)
        elif ck == KnobConstraint.FloatConstraint:
            FC.Start(b)
            FC.AddMinValue(b, 0.0)
            FC.AddMaxValue(b, 1.0)
            con = FC.End(b)
        elif ck == KnobConstraint.StringConstraint:
            strs = [b.CreateString(s) for s in ("direct", "winograd", "fft")]
            vv = _offsets_vector(b, strs)
            SC.Start(b)
            SC.AddMaxLength(b, 16)
            SC.AddValidValues(b, vv)
            con = SC.End(b)
        K.Start(b)
        K.AddKnobId(b, kid_o)
        if desc_o:
            K.AddDescription(b, desc_o)
        K.AddDefaultValueType(b, vk)
        K.AddDefaultValue(b, val)
        if con is not None:
            K.AddConstraintType(b, ck)
            K.AddConstraint(b, con)
        K.AddDeprecated(b, kid == "legacy")
        knobs.append(K.End(b))
    knobs_v = _offsets_vector(b, knobs)
    notes = b.CreateNumpyVector(np.asarray([0, 2, 4], dtype="<i4"))
    cands = []
    for i in range(3):
        cid = b.CreateString("cand-%d" % i)
        settings = _offsets_vector(b, [_knob_setting(b, "tile_m", KnobValue.IntValue, 32 * (i + 1)),
                                       _knob_setting(b, "algo", KnobValue.StringValue, "direct")])
        kf = b.CreateString("kf%d" % i)
        EC.Start(b)
        EC.AddId(b, cid)
        EC.AddKnobSettings(b, settings)
        EC.AddKernelFeatures(b, kf)
        cands.append(EC.End(b))
    cands_v = _offsets_vector(b, cands)
    strs = {k: b.CreateString(v) for k, v in dict(graph_id="g-1", device_id="0", device_arch="gfx942",
                                                   problem_features="pf", device_features="df",
                                                   engine_name="eng", engine_descriptor_id="ed").items()}
    ECP.Start(b)
    ECP.AddGraphId(b, strs["graph_id"])
    ECP.AddDeviceId(b, strs["device_id"])
    ECP.AddDeviceArch(b, strs["device_arch"])
    ECP.AddProblemFeatures(b, strs["problem_features"])
    ECP.AddDeviceFeatures(b, strs["device_features"])
    ECP.AddTotalCount(b, 3)
    ECP.AddOffset(b, 0)
    ECP.AddCandidates(b, cands_v)
    ECP.AddEngineName(b, strs["engine_name"])
    ECP.AddEngineDescriptorId(b, strs["engine_descriptor_id"])
    page = ECP.End(b)
    name = b.CreateString("sample_engine")
    ED.Start(b)
    ED.AddEngineId(b, 42)
    ED.AddKnobs(b, knobs_v)
    ED.AddBehaviorNotes(b, notes)
    ED.AddName(b, name)
    ED.AddCandidatePage(b, page)
    b.Finish(ED.End(b))
    return bytes(b.Output())


def build_sample_plan() -> bytes:
    b = flatbuffers.Builder(256)
    uids = _i64_vec(b, [1, 2, 5])
    payload = b.CreateByteVector(b"plugin-bytes" * 3)
    SEP.Start(b)
    SEP.AddVersion(b, 1)
    SEP.AddEngineId(b, 42)
    SEP.AddWorkspaceSize(b, 4096)
    SEP.AddTensorUids(b, uids)
    SEP.AddPluginPayload(b, payload)
    SEP.AddIsOverrideShapeEnabled(b, True)
    b.Finish(SEP.End(b))
    return bytes(b.Output())


def build_sample_container(graph: bytes, plan: bytes = None) -> bytes:
    b = flatbuffers.Builder(len(graph) + (len(plan) if plan else 0) + 64)
    # both embedded blobs 8-byte aligned (as the backend writes them)
    def blob(data):
        b.StartVector(1, len(data), 8)
        for byte in reversed(data):
            b.PrependUint8(byte)
        return b.EndVector()

    p_off = blob(plan) if plan else None
    g_off = blob(graph)
    SGP.Start(b)
    SGP.AddGraphBlob(b, g_off)
    if p_off is not None:
        SGP.AddPlanBlob(b, p_off)
    b.Finish(SGP.End(b), file_identifier=b"HDGP")
    return bytes(b.Output())
