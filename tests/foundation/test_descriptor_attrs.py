"""Every descriptor-valued attribute of every descriptor answers a NULL,
destroyed, foreign or handle value, a wrong-kind descriptor and an unfinalized one with the
statuses docs/abi-choices.md ("Descriptor-valued attributes") promises - read from the docs."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "abi-choices.md")
COLS = ("invalid", "wrong", "unfinalized")


def documented():
    """{attribute name or 'OPERATION_TENSORS': (status names for the three columns)}."""
    text = open(DOC).read()
    sect = text.split("## Descriptor-valued attributes", 1)[1]
    rows = {}
    for line in sect.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0] or cells[0].startswith(("attribute", "---")):
            continue
        sts = tuple("HIPDNN_STATUS_" + re.search(r"`(\w+)`", c).group(1) for c in cells[1:])
        if "OPERATION_*" in cells[0]:
            rows["OPERATION_TENSORS"] = sts
        else:
            rows[re.search(r"`(HIPDNN_ATTR_\w+)`", cells[0]).group(1)] = sts
    return rows


PROBE = textwrap.dedent("""
    import json, sys
    sys.path[:0] = [{graph!r}]
    from hipdnn_cabi import capi
    from hipdnn_cabi._generated.enums import AttributeName as A, DescriptorType as D, Status
    from hipdnn_cabi.backend.descriptors import factory
    from gutil import C
    ffi, lib = capi.load()
    factory._load()
    c, L = C(ffi, lib), lib

    def new(t):
        d = ffi.new("hipdnnBackendDescriptor_t*")
        assert lib.hipdnnBackendCreateDescriptor(t, d) == 0
        return d[0]

    h = c.handle()
    dead = new(D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR)
    lib.hipdnnBackendDestroyDescriptor(dead)
    tensor = c.tensor(1, (1, 4))              # finalized
    out_t = c.tensor(2, (1, 4))
    relu = c.create(L.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
    c.ok(c.set_desc(relu, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, [tensor]))
    c.ok(c.set_desc(relu, L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, [out_t]))
    c.ok(c.set_enum(relu, L.HIPDNN_ATTR_POINTWISE_MODE, L.HIPDNN_TYPE_POINTWISE_MODE,
                    L.HIPDNN_POINTWISE_RELU_FWD))
    c.ok(L.hipdnnBackendFinalize(relu))      # a finalized descriptor that is not a tensor
    invalid = {{"null": ffi.NULL, "destroyed": dead, "garbage": ffi.cast("void*", 0xdeadbeef),
               "handle": ffi.cast("void*", h)}}
    TARGET = {{A.HIPDNN_ATTR_ENGINE_OPERATION_GRAPH: D.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
              A.HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: D.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
              A.HIPDNN_ATTR_ENGINECFG_ENGINE: D.HIPDNN_BACKEND_ENGINE_DESCRIPTOR,
              A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: D.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR,
              A.HIPDNN_ATTR_ENGINECFG_KNOB_CHOICES: D.HIPDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR,
              A.HIPDNN_ATTR_OPERATIONGRAPH_OPS: D.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
              A.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC: D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR}}

    def setv(dt, name, v):
        d = new(dt)
        arr = ffi.new("hipdnnBackendDescriptor_t[1]", [ffi.cast("hipdnnBackendDescriptor_t", v)])
        st = lib.hipdnnBackendSetAttribute(d, name, L.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, arr)
        msg = capi.last_error(lib, ffi)
        lib.hipdnnBackendDestroyDescriptor(d)
        return Status(st).name, msg

    from hipdnn_cabi.backend.descriptors import operations
    pairs = [(dt, name) for dt, cls in sorted(factory.CLASSES.items()) for name in cls._setters]
    pairs += [(int(sp.dtype), a.attr) for sp in operations.OPS for a in sp.attrs
              if a.kind in ("tensor", "tensors")]
    rows = {{}}
    for dt, name in pairs:
        if True:
            st, msg = setv(dt, name, ffi.NULL)
            if "attributeType mismatch" in msg:
                continue          # not descriptor-valued
            is_op = D(dt).name.startswith("HIPDNN_BACKEND_OPERATION_") and \\
                dt != D.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR
            if is_op:
                target, wrong = D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR, relu
            else:
                target = TARGET.get(name)
                wrong = relu if target == D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR else tensor
            r = {{"op": is_op, "invalid": sorted({{setv(dt, name, v)[0] for v in invalid.values()}}),
                 "wrong": setv(dt, name, wrong)[0]}}
            if target is not None:
                unfin = new(target)
                r["unfinalized"] = setv(dt, name, unfin)[0]
            rows[D(dt).name + "." + A(name).name] = r
    print(json.dumps(rows))
""")


def test_descriptor_valued_attributes_match_the_docs():
    import json
    doc = documented()
    assert "OPERATION_TENSORS" in doc and len(doc) >= 7, doc
    code = PROBE.format(graph=os.path.join(ROOT, "tests", "graph"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(rows) > 20                     # every op's tensors plus the six others
    bad = []
    seen = set()
    for key, got in rows.items():
        attr = key.split(".", 1)[1]
        want = doc["OPERATION_TENSORS"] if got["op"] else doc.get(attr)
        if want is None:
            bad.append(f"{key}: descriptor-valued but not in docs/abi-choices.md")
            continue
        seen.add("OPERATION_TENSORS" if got["op"] else attr)
        if got["invalid"] != [want[0]]:
            bad.append(f"{key}: NULL/destroyed/foreign/handle -> {got['invalid']}, docs {want[0]}")
        if got["wrong"] != want[1]:
            bad.append(f"{key}: wrong kind -> {got['wrong']}, docs {want[1]}")
        if "unfinalized" in got and got["unfinalized"] != want[2]:
            bad.append(f"{key}: unfinalized -> {got['unfinalized']}, docs {want[2]}")
    assert not bad, "\n".join(bad)
    assert seen == set(doc), set(doc) - seen  # no documented row without an attribute
