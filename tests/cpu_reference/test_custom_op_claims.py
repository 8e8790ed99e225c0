"""CUSTOM_OP stays not applicable on the CPU reference engine; plugins claim custom ops by name
with hipdnn_cabi.plugin_sdk.custom_ops; `hipdnn-cabi custom-ops` documents how."""
from __future__ import annotations

import numpy as np

from engine_testutil import Tensor, applicable, graph_bytes, node
from hipdnn_cabi.plugin_sdk import custom_ops, parse_graph


def _graph(op_id="acme.rope.v1"):
    a, b = Tensor(1, [4]), Tensor(2, [4]).alloc()
    a.set(np.arange(4))
    return graph_bytes([a, b], [node("CustomOpAttributes", {
        "custom_op_id": op_id, "input_tensor_uids": [1], "output_tensor_uids": [2],
        "data": list(b"\x01\x02")})])


def test_cpu_reference_declines_custom_op():
    assert not applicable(_graph())


def test_claims_by_name():
    g = parse_graph(_graph())
    assert custom_ops.claims(g, {"acme.rope.v1"})
    assert not custom_ops.claims(g, {"other.op"})
    (n,) = custom_ops.nodes(g, "acme.rope.v1")
    assert custom_ops.io_uids(n) == ([1], [2])
    assert custom_ops.data(n) == b"\x01\x02"


def test_cli_guide(capsys):
    from hipdnn_cabi.cli import main
    assert main(["custom-ops"]) == 0
    out = capsys.readouterr().out
    assert "CUSTOM_OP_ID_EXT" in out and "custom_ops.claims" in out
    import pytest
    with pytest.raises(SystemExit):   # argparse prints the help and exits 0
        main(["--help"])
    assert "custom-ops" in capsys.readouterr().out
