"""cudnn-frontend pygraph's calling conventions beside this frontend's: a program written for
``import cudnn`` runs with ``from hipdnn_cabi import frontend as cudnn`` — module names
(``data_type``, ``create_handle``, ...), keyword names (``image``/``weight``, ``input``/``bias``/
``scale``, ``A``/``B``, ``input0``/``input1``, ``input``/``comparison``), the per-plan API
(``get_execution_plan_count``, ``build_plan_at_index``, ``get_workspace_size_plan_at_index``,
``execute_plan_at_index``, engine / knobs / behaviour notes / name per plan,
``create_execution_plan``), and output names as cudnn-frontend forms them."""
from __future__ import annotations

import numpy as np
import pytest

from fe_util import conv2d_ref
from hipdnn_cabi import frontend as cudnn
from hipdnn_cabi.errors import BadParamError
from hipdnn_cabi.frontend._ops import SPECS, _CUDNN_OUTPUT, output_label
from hipdnn_cabi.schemas import catalog
from test_frontend_engines import run_child

F32 = cudnn.data_type.FLOAT


@pytest.mark.needs_cpu_engine
def test_ported_conv_bias_relu_program():
    """Written as a cudnn-frontend Python sample is (keywords, heuristic modes, build policy,
    workspace from get_workspace_size, execute(pack, workspace, handle=handle)), with only the
    import changed; then every plan by index."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, 4, 1, 1)).astype(np.float32)
    ref = np.maximum(conv2d_ref(x, w, pad=(1, 1)) + b, 0)

    handle = cudnn.create_handle()
    graph = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT,
                          intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    X = graph.tensor(name="X", dim=[2, 3, 8, 8], stride=[192, 64, 8, 1],
                     data_type=cudnn.data_type.FLOAT)
    W = graph.tensor(name="W", dim=[4, 3, 3, 3], stride=[27, 9, 3, 1],
                     data_type=cudnn.data_type.FLOAT)
    B = graph.tensor(name="B", dim=[1, 4, 1, 1], stride=[4, 1, 1, 1],
                     data_type=cudnn.data_type.FLOAT)
    conv = graph.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1],
                            compute_data_type=cudnn.data_type.FLOAT, name="conv")
    biased = graph.bias(name="bias", input=conv, bias=B)
    Y = graph.relu(name="relu", input=biased)
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    assert (conv.get_name(), biased.get_name(), Y.get_name()) == ("conv::Y", "bias::OUT_0",
                                                                 "relu::OUT_0")
    graph.validate()
    assert graph.query_tensor_attributes_of_uid(Y.get_uid()) is Y
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    graph.check_support()
    graph.build_plans(cudnn.build_plan_policy.ALL)
    workspace = np.empty(graph.get_workspace_size(), np.uint8)
    out = np.zeros((2, 4, 8, 8), np.float32)
    graph.execute({X: x, W: w, B: b, Y: out}, workspace, handle=handle)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)

    n = graph.get_execution_plan_count()
    assert n >= 1 and graph.get_engine_count() >= n
    active = graph.engine_name
    for i in range(n):
        eid, knobs = graph.get_engine_and_knobs_at_index(i)
        assert eid == graph.get_engine_ids()[i] and isinstance(knobs, dict)
        assert graph.get_plan_name_at_index(i).startswith(graph._engine_name_of(eid))
        assert isinstance(graph.get_behavior_notes_for_plan_at_index(i), list)
        graph.build_plan_at_index(i)
        ws = np.empty(graph.get_workspace_size_plan_at_index(i), np.uint8)
        out[:] = 0
        graph.execute_plan_at_index({X: x, W: w, B: b, Y: out}, ws, i, handle=handle)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert graph.engine_name == active                     # the active plan did not move
    with pytest.raises(BadParamError, match="out of range"):
        graph.get_workspace_size_plan_at_index(n)
    graph.close()
    cudnn.destroy_handle(handle)


def test_keyword_names_and_positions():
    g = cudnn.pygraph("named", F32, F32, F32)
    assert g.name == "named" and g.handle is None
    a = g.tensor([2, 3], [3, 1], name="a")                 # cudnn's positional (dim, stride)
    assert (a.get_dim(), a.get_stride()) == ([2, 3], [3, 1])
    b = g.tensor(name="b", dim=[2, 3])

    def node(t):
        return t._producer

    cases = [
        (g.max(input0=a, input1=b), "MAX"), (g.min(a, b), "MIN"), (g.max(a=a, b=b), "MAX"),
        (g.cmp_gt(input=a, comparison=b), "CMP_GT"), (g.scale(input=a, scale=b), "MUL"),
        (g.bias(input=a, bias=b), "ADD"), (g.add(a=a, b=b), "ADD"), (g.sub(a, b), "SUB"),
        (g.binary_select(input0=a, input1=b, mask=b), "BINARY_SELECT"),
        (g.swish(input=a, swish_beta=1.5), "SWISH_FWD"),
        (g.swish_backward(loss=a, input=b, swish_beta=1.5), "SWISH_BWD"),
        (g.leaky_relu_backward(loss=a, input=b, negative_slope=0.1), "RELU_BWD"),
        (g.relu(a, 0.1, None, 6.0), "RELU_FWD"),
    ]
    for t, mode in cases:
        n = node(t)
        assert n.attrs["mode"].name == "HIPDNN_POINTWISE_" + mode
        assert n.inputs["in_0"] is a and n.inputs["in_1"] in (b, None)
    assert node(cases[9][0]).attrs["swish_beta"] == 1.5
    assert node(cases[-1][0]).attrs["relu_upper_clip"] == 6.0
    t = g.add(a, b, cudnn.data_type.HALF, "positional")    # (a, b, compute_data_type, name)
    assert node(t).name == "positional" and node(t).compute_data_type == cudnn.data_type.HALF
    assert t.get_name() == "positional::OUT_0"
    with pytest.raises(TypeError, match="same argument"):
        g.max(input0=a, a=b, input1=b)
    m = g.tensor(name="m", dim=[4, 5])
    k = g.tensor(name="k", dim=[5, 6])
    c = g.matmul(A=m, B=k, name="mm")
    assert c.get_name() == "mm::C" and node(c).inputs == {"a": m, "b": k}
    with pytest.raises(BadParamError, match="padding"):
        g.matmul(A=m, B=k, padding=1.0)
    r = g.reduction(input=m, mode=cudnn.reduction_mode.ADD, name="sum")
    assert r.get_name() == "sum::Y"
    x = g.tensor(name="x", dim=[2, 4])
    s = g.tensor(name="s", dim=[1, 4])
    dx, ds, db = g.rmsnorm_backward(grad=x, input=x, scale=s, inv_variance=s, has_dbias=True,
                                    name="rb")
    assert node(dx).inputs["inv_rms"] is s and (ds.get_name(), db.get_name()) == ("rb::Dscale",
                                                                                   "rb::Dbias")
    y, inv = g.rmsnorm(norm_forward_phase=cudnn.norm_forward_phase.TRAINING, input=x, scale=s,
                       bias=None, epsilon=1e-5, name="rms")
    assert inv.get_name() == "rms::INV_VARIANCE"
    q = g.tensor(name="q", dim=[2, 32], data_type=cudnn.data_type.FP8_E4M3)
    sc = g.tensor(name="sc", dim=[2, 1], data_type=cudnn.data_type.FP8_E8M0)
    deq = g.block_scale_dequantize(input=q, descale=sc, block_size=[32], name="dq")
    assert node(deq).inputs["scale"] is sc and deq.get_name() == "dq::Y"
    assert cudnn.Graph.moe_grouped_matmul_bwd is cudnn.Graph.moe_grouped_matmul_backward
    with pytest.raises(BadParamError, match="sm_count"):
        cudnn.pygraph(sm_count=80)
    assert cudnn.pygraph(sm_count=None, is_override_shape_enabled=True).override_shape_enabled


def test_module_names():
    DT = cudnn.DataType
    assert cudnn.data_type.HALF is DT.HIPDNN_DATA_HALF and cudnn.data_type.NOT_SET is None
    assert cudnn.data_type.FP6_E2M3 is DT.HIPDNN_DATA_FP6_E2M3_EXT
    assert cudnn.diagonal_alignment.BOTTOM_RIGHT.name == "HIPDNN_DIAGONAL_ALIGNMENT_BOTTOM_RIGHT_EXT"
    assert cudnn.reduction_mode.ADD.name == "HIPDNN_REDUCE_TENSOR_ADD"
    assert cudnn.behavior_note.RUNTIME_COMPILATION.name.endswith("RUNTIME_COMPILATION")
    assert cudnn.norm_forward_phase.TRAINING == cudnn.NormFwdPhase.TRAINING
    assert cudnn.scalar_type.RUNTIME_PARAM is cudnn.ScalarType.RUNTIME_PARAM
    assert issubclass(cudnn.cudnnGraphNotSupportedError, cudnn.NotSupportedError)
    assert cudnn.tensor is cudnn.Tensor
    h = cudnn.create_handle()
    cudnn.set_stream(h, 0)
    assert cudnn.get_stream(h) == 0
    cudnn.destroy_handle(h)


def test_output_labels_name_catalog_outputs():
    """Every cudnn output name the frontend keeps is an output role of that catalog operation,
    and every builder output is named "<node>::<label>"."""
    for (kind, role), label in _CUDNN_OUTPUT.items():
        assert role in catalog.by_name(kind).outputs, (kind, role)
    for kind, spec in SPECS.items():
        for role, _ in spec.outputs:
            label = output_label(kind, role)
            assert label and "::" not in label
    g = cudnn.Graph(io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=[2, 3, 4, 4])
    sc = g.tensor(name="sc", dim=[1, 3, 1, 1])
    outs = g.batchnorm(input=x, scale=sc, bias=sc, epsilon=1e-5, in_running_mean=sc,
                       in_running_var=sc, momentum=0.1, name="bn")
    assert [t.get_name() for t in outs] == ["bn::Y", "bn::MEAN", "bn::INV_VARIANCE",
                                            "bn::NEXT_RUNNING_MEAN", "bn::NEXT_RUNNING_VAR"]
    q = g.tensor(name="q", dim=[1, 2, 8, 16])
    o, stats = g.sdpa(q=q, k=q, v=q, attn_scale=0.25, is_inference=False, name="attn")
    assert (o.get_name(), stats.get_name()) == ("attn::O", "attn::Stats")


@pytest.mark.needs_cpu_engine
def test_create_execution_plan_appends_with_knobs():
    res = run_child('''
    h = hf.Handle()
    g, x, y = relu_graph(h)
    g.build_operation_graph()
    g.create_execution_plans()
    names = [g._engine_name_of(e) for e in g.get_engine_ids()]
    gpu = g.get_engine_ids()[names.index(GPU)]
    cpu = g.get_engine_ids()[names.index(CPU)]
    g.build_plans()
    n = g.get_execution_plan_count()
    g.create_execution_plan(gpu, {"FE_TEST_OFFSET": 1.5, "FE_TEST_ALGO": "tiled", "FE_TEST_TILE": 8})
    out["count"] = [n, g.get_execution_plan_count()]
    out["knobs"] = g.get_engine_and_knobs_at_index(n)
    out["knobs"] = [out["knobs"][0] == gpu, out["knobs"][1]]
    out["name"] = g.get_plan_name_at_index(n)
    out["first"] = g.get_engine_and_knobs_at_index(0)[1]
    xa = np.arange(-3, 3, dtype=np.float32)
    runs = []
    for i in range(g.get_execution_plan_count()):
        ya = np.zeros(6, np.float32)
        g.execute_plan_at_index({x: xa, y: ya}, None, i)
        runs.append((g._engine_name_of(g.get_engine_ids()[i]), ya.tolist()))
    out["runs"], out["active"] = runs, g.engine_name
    out["ws"] = [g.get_workspace_size_plan_at_index(i) for i in range(g.get_execution_plan_count())]
    g2, x2, y2 = relu_graph(h, "g2")
    g2.deselect_workspace_greater_than(-1)
    try:
        g2.build()
        out["ws_filter"] = g2.engine_name
    except hf.GraphNotSupportedError as e:
        out["ws_filter"] = str(e)
    ''')
    assert res["count"][1] == res["count"][0] + 1
    assert res["knobs"] == [True, {"FE_TEST_OFFSET": 1.5, "FE_TEST_ALGO": "tiled", "FE_TEST_TILE": 8}]
    assert res["name"] == ("HIPDNN_CABI_FE_TEST_GPU_ENGINE_FE_TEST_OFFSET=1.5_FE_TEST_ALGO=tiled"
                           "_FE_TEST_TILE=8")
    assert res["first"] == {}
    ref = [0, 0, 0, 0, 1, 2]
    assert res["runs"][-1] == ["HIPDNN_CABI_FE_TEST_GPU_ENGINE", [v + 1.5 for v in ref]]
    assert ["HIPDNN_CABI_CPU_REFERENCE_ENGINE", ref] in res["runs"]
    assert res["active"] == "HIPDNN_CABI_FE_TEST_GPU_ENGINE" and res["ws"] == [0] * len(res["runs"])
    assert "workspace 0 > -1 bytes" in res["ws_filter"]
