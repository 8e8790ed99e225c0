"""Op graph -> program: kernels (generated source, launch shape, argument sources) in order.

:func:`build_program` needs no GPU (CI compiles every generated source with NVRTC alone).  A
program is a list of steps; each step is ``("launch", source, kernel, grid, block, args)`` or
``("memset", where, nbytes)``; an arg (and ``where``) is ``("t", uid)`` (a bound pointer),
``("s", uid)`` (a runtime scalar, by value), ``("ws", off)`` (the caller's workspace + offset)
or ``("sc", off)`` (the plan's own scratch + offset: small buffers such as batchnorm statistics,
allocated once at plan build, so small plans need no workspace).

This module schedules and fuses; the operation families (``ops/<family>.py``) check the nodes
and emit their kernels.  Units:

* a connected run of pointwise nodes -> ONE elementwise kernel (ops/pointwise.py);
* any other node -> its family's kernels; a following pointwise run is fused into the node's
  kernel when the family offers an output for it (``fusable_output``: matmul / convolution
  forward / convolution backward data GEMM epilogues, layernorm / RMSnorm forward, batchnorm inference / training apply),
  that output is virtual and only that run reads it (conv -> bias -> relu, matmul -> bias ->
  activation, norm -> scale, batchnorm -> add -> relu; batchnorm, whose elementwise kernel can
  store y too: y may be a graph tensor or read by other units as well), and the run reads
  nothing else another unit makes (so the fused unit cannot depend on its own output);
* two pointwise nodes joined by a virtual tensor stay in separate runs where one run would
  otherwise read, through another unit, what it writes (:func:`pointwise_groups`).
Virtual tensors that cross units live in the workspace.
"""
from __future__ import annotations

from . import codegen as cg
from . import gemm, ops
from .ops import pointwise, reduction
from .ops._base import (NotApplicable, _need, dims, dt, io_uids, roles, neg_extent,  # noqa: F401
                        span_elems, strides)

# small per-plan scratch (statistics, partials of a few KB) lives in the execution context,
# allocated once at plan build: such plans need no workspace
SCRATCH_PIECE = 64 * 1024
SCRATCH_TOTAL = 256 * 1024
# AMD targets whose every kernel source compiles (make check-amd: tools/check_amd.py); any other
# gfx device is declined with a reason
AMD_TARGETS = ("gfx90a", "gfx942")


class Program:
    """``steps``; ``ws_size``: bytes of the caller's workspace (large scratch: virtual tensors
    between kernels, split-K partials); ``scratch_size``: bytes of the plan's own device scratch
    (small: statistics, reduction partials), args ``("sc", off)``."""

    def __init__(self):
        self.steps = []
        self.ws_size = 0
        self.scratch_size = 0
        self.external = []   # uids bound by the caller (checked at execute)
        self.notes = []
        self.arch, self.tf32 = None, False

    def ws_alloc(self, nbytes):
        off = self.ws_size
        self.ws_size += (int(nbytes) + 255) // 256 * 256
        return off

    def small_alloc(self, nbytes):
        """A location for a small buffer: the plan's scratch while it stays small, else the
        workspace.  Returns ("sc", off) or ("ws", off)."""
        n = (int(nbytes) + 255) // 256 * 256
        if n <= SCRATCH_PIECE and self.scratch_size + n <= SCRATCH_TOTAL:
            off = self.scratch_size
            self.scratch_size += n
            return ("sc", off)
        return ("ws", self.ws_alloc(n))


def check_node(node, graph):
    """role -> Tensor of a node its family implements; else NotApplicable with the reason."""
    fam = ops.FAMILY.get(node.kind)
    _need(fam is not None, f"{node.kind} is not supported by the HIP engine")
    r = roles(node, graph)
    _need(getattr(fam, "RAGGED_OK", False)
          or all(getattr(t, "ragged_offset_uid", None) is None for t in r.values()),
          f"{node.kind}: ragged tensors are not supported by the HIP engine")
    fam.check(node, graph, r)
    return r


class Condensed:
    """Items (nodes, units) joined into groups that each run as one kernel, over the items'
    data-flow successors ``succ``: a group's every output depends on its every input, so two
    groups may join only where no path leads from one to the other through a third
    (:meth:`detour`) - else the joined group would depend on its own output."""

    def __init__(self, succ):
        self.succ = succ
        self.parent = list(range(len(succ)))
        self.members = {i: [i] for i in range(len(succ))}

    def find(self, i):
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def detour(self, a, b):
        """Whether group ``b`` is reachable from group ``a`` through some other group."""
        seen, stack = set(), [a]
        while stack:
            g = stack.pop()
            for m in self.members[g]:
                for j in self.succ[m]:
                    r = self.find(j)
                    if r == b and g != a:
                        return True
                    if r not in (a, b) and r not in seen:
                        seen.add(r)
                        stack.append(r)
        return False

    def join(self, i, j) -> bool:
        """Join the groups of items i and j unless that makes a cycle; whether they are one."""
        a, b = self.find(i), self.find(j)
        if a == b:
            return True
        if self.detour(a, b) or self.detour(b, a):
            return False
        self.parent[b] = a
        self.members[a] = self.members[a] + self.members.pop(b)
        return True


def pointwise_groups(nodes, IOs, graph, consumers):
    """The pointwise nodes joined into runs (one kernel each): two pointwise nodes joined by a
    virtual tensor share a run unless joining them would make the run depend on its own output
    through another unit (pointwise -> {batchnorm backward, pointwise} -> pointwise: the run
    would both feed and read the batchnorm); such a pair stays two runs, the shared tensor
    stored between them.  Returns [sorted node indices] per run, in order of first node."""
    cg_ = Condensed([sorted({j for u in outs for j in consumers.get(u, [])}) for _, outs in IOs])
    pw = [i for i, n in enumerate(nodes) if n.kind in pointwise.KINDS]
    for i in pw:
        for u in IOs[i][1]:
            if graph.tensors[u].virtual:
                for j in consumers.get(u, []):
                    if nodes[j].kind in pointwise.KINDS:
                        cg_.join(i, j)
    roots = sorted({cg_.find(i) for i in pw}, key=lambda r: min(cg_.members[r]))
    return [sorted(cg_.members[r]) for r in roots]


def _pair_units(graph, nodes, R, IOs, units, unit_of, producer, consumers, ucond, fused_into,
                arch, use_mma):
    """Paired GEMMs: a pointwise run whose only inputs made by other units are the virtual
    outputs of two GEMM nodes (each read by that run alone) that their family can run as one
    kernel (``pair_fusable``: SwiGLU's silu(x W_gate) * (x W_up) - two matmuls sharing x) and
    that stores one output of their shape.  The second GEMM's unit and the run join the first
    GEMM's unit (``fused_into``); returns {first GEMM unit: ((node, node), run unit)}."""
    paired = {}
    for pu, (kind, pm) in enumerate(units):
        if kind != "pw" or pu in fused_into:
            continue
        made = {u for j in pm for u in IOs[j][1]}
        ext = sorted({u for j in pm for u in IOs[j][0] if u not in made and u in producer},
                     key=lambda u: producer[u])
        if len(ext) != 2:
            continue
        i1, i2 = producer[ext[0]], producer[ext[1]]
        u1, u2 = unit_of[i1], unit_of[i2]
        if u1 == u2 or units[u1][0] != units[u2][0] or u1 in paired or u2 in paired or \
                u1 in fused_into or u2 in fused_into:
            continue
        ok = getattr(ops.FAMILY.get(units[u1][0]), "pair_fusable", None)
        if ok is None or not ok(nodes[i1], R[i1], nodes[i2], R[i2], arch, use_mma):
            continue
        if not all(graph.tensors[u].virtual and {unit_of[j] for j in consumers.get(u, [])} == {pu}
                   for u in ext):
            continue
        domain = dims(graph.tensors[ext[0]])
        stored = [u for j in pm for u in IOs[j][1]
                  if not graph.tensors[u].virtual or any(unit_of[c] != pu for c in consumers.get(u, []))]
        if len(stored) != 1 or dims(graph.tensors[stored[0]]) != domain:
            continue
        if any(dt(graph.tensors[u]) in pointwise.NOT_FUSED or
               any(v < 0 for v in strides(graph.tensors[u])) or dims(graph.tensors[u]) != domain
               for j in pm for u in IOs[j][1]) or \
                any(pointwise.pw_mode_name(nodes[j]) == "GEN_INDEX" for j in pm) or \
                any(dt(graph.tensors[u]) in pointwise.NOT_FUSED for j in pm for u in IOs[j][0]):
            continue
        # the run's other inputs are graph inputs / constants, so the joined unit stays acyclic
        # (the GEMMs' outputs reach nothing but the run); join through ucond all the same
        if not (ucond.join(u1, pu) and ucond.join(u1, u2)):
            continue
        fused_into[pu] = u1
        fused_into[u2] = u1
        paired[u1] = ((i1, i2), pu)
    return paired


def _stat_units(graph, nodes, R, IOs, units, unit_of, producer, consumers, ucond, fused_into,
                arch, use_mma):
    """genstats spelled with reductions (hipDNN has no GENSTATS node; cuDNN's sums as the
    cuDNN peer row writes them): the per-channel REDUCTION ADD / AVG of a GEMM output y and of
    MUL(y, y) (a FLOAT virtual square read by that reduction only) join y's GEMM unit when its
    family is sure to accumulate y's channel sums in the epilogue (``stats_sure``: 16-bit on
    the wgmma core); a small kernel then writes the reductions' outputs from those sums.
    Returns {GEMM unit: (y, ([(output uid, 0 = sum | 1 = sum of squares, divisor)], absorbed
    units))}."""
    found = {}
    for gu, (kind, gm) in enumerate(units):
        sure = getattr(ops.FAMILY.get(kind), "stats_sure", None)
        sout = getattr(ops.FAMILY.get(kind), "stats_output", None)
        if sure is None or gu in fused_into or len(gm) != 1:
            continue
        i = gm[0]
        y = sout(nodes[i], R[i])
        if y is None or not sure(nodes[i], R[i], arch, use_mma):
            continue
        count = 1
        for d, v in enumerate(dims(graph.tensors[y])):
            count *= v if d != 1 else 1
        outs, take = [], []
        for j in dict.fromkeys(consumers.get(y, [])):      # MUL(y, y) reads y twice
            uj = unit_of[j]
            if nodes[j].kind in reduction.KINDS:
                cs = reduction.channel_stat(nodes[j], R[j])
                if cs is not None and cs[0] == y and uj not in fused_into:
                    outs.append((IOs[j][1][0], 0, count if cs[1] == "AVG" else 1))
                    take.append(uj)
            elif nodes[j].kind in pointwise.KINDS and units[uj][1] == [j] and uj not in fused_into \
                    and pointwise.pw_mode_name(nodes[j]) == "MUL" and IOs[j][0] == [y, y]:
                y2 = IOs[j][1][0]
                t2 = graph.tensors[y2]
                rc = consumers.get(y2, [])
                if not t2.virtual or dt(t2) != "FLOAT" or len(rc) != 1 or \
                        nodes[rc[0]].kind not in reduction.KINDS or unit_of[rc[0]] in fused_into:
                    continue
                cs = reduction.channel_stat(nodes[rc[0]], R[rc[0]])
                if cs is not None and cs[0] == y2:
                    outs.append((IOs[rc[0]][1][0], 1, count if cs[1] == "AVG" else 1))
                    take += [uj, unit_of[rc[0]]]
        if not outs or not all(ucond.join(gu, p) for p in take):
            continue
        for p in take:
            fused_into[p] = gu
        found[gu] = (y, (outs, take))
    return found


def build_program(graph, use_mma=True, sms=132, arch=None, tf32=False) -> Program:
    """``arch``: the device's target (``sm_90`` puts 16-bit GEMMs on the wgmma core; None: the
    mma.sync / SIMT kernels).  ``tf32``: fp32 GEMMs may use TF32 tensor cores (engine knob
    TF32_MATH; default off = true fp32 FFMA)."""
    _need(graph.nodes, "graph has no nodes")
    _need(not (arch or "").startswith("gfx") or arch in AMD_TARGETS,
          f"AMD target {arch}: the HIP engine's kernels are compiled and checked for "
          f"{' / '.join(AMD_TARGETS)} only (make check-amd)")
    _need(not graph.is_override_shape_enabled, "shape overrides not supported")
    for u, t in graph.tensors.items():
        al = int(getattr(t, "alignment", 16) or 0)
        _need(al == 0 or al % 16 == 0, f"tensor uid {u} declares {al}-byte alignment: the HIP "
                                      f"engine's kernels take 16-byte aligned buffers")
    nodes = graph.nodes
    R = [check_node(n, graph) for n in nodes]
    IOs = [io_uids(n, graph) for n in nodes]
    producer = {}
    consumers = {}
    for i, (ins, outs) in enumerate(IOs):
        _need(not set(ins) & set(outs), f"node {i} reads and writes the same tensor")
        for u in outs:
            _need(u not in producer, f"tensor {u} written twice")
            producer[u] = i
        for u in ins:
            consumers.setdefault(u, []).append(i)
    for u, t in graph.tensors.items():
        if t.virtual and u in consumers:
            _need(u in producer, f"virtual tensor {u} read but never written")
    groups = pointwise_groups(nodes, IOs, graph, consumers)
    # units: list of (kind, node indices)
    unit_of = {}
    units = []
    fused_into = {}
    for members in groups:
        units.append(["pw", members])
        for i in members:
            unit_of[i] = len(units) - 1
    for i, n in enumerate(nodes):
        if n.kind not in pointwise.KINDS:
            units.append([n.kind, [i]])
            unit_of[i] = len(units) - 1
    # epilogue fusion: an output a family can fuse a run onto (GEMM, norm forward, batchnorm)
    # virtual, read only by one pointwise unit that reads nothing else produced by another
    # node - batchnorm (its fused kernel is elementwise, and can store y too): y may be a graph
    # tensor or read elsewhere as well, and the run may read other units' outputs where the
    # fused unit stays acyclic (bn3 -> add(., downsample bn) -> relu)
    ucond = Condensed([sorted({unit_of[j] for i in m for u in IOs[i][1] for j in consumers.get(u, [])}
                              - {ui}) for ui, (_, m) in enumerate(units)])
    paired = _pair_units(graph, nodes, R, IOs, units, unit_of, producer, consumers, ucond,
                         fused_into, arch, use_mma)
    stat_units = _stat_units(graph, nodes, R, IOs, units, unit_of, producer, consumers, ucond,
                             fused_into, arch, use_mma)
    absorbed = {p for _, outs in stat_units.values() for p in outs[1]}
    for ui, (kind, members) in enumerate(units):
        fam = ops.FAMILY.get(kind)
        fusable = getattr(fam, "fusable_output", None)
        y = fusable(nodes[members[0]], R[members[0]]) if fusable else None
        free = getattr(fam, "ELEMENTWISE_FUSION", False)
        if y is None or not (graph.tensors[y].virtual or free):
            continue
        store_ok = getattr(fam, "fused_store_ok", None)
        cons = consumers.get(y, [])
        cu = {unit_of[j] for j in cons}
        if free:
            cu = {p for p in cu if units[p][0] == "pw"}
        if len(cu) != 1:
            continue
        pu = cu.pop()
        if units[pu][0] != "pw" or pu in fused_into:
            continue
        pmembers = units[pu][1]
        ok = True
        for j in pmembers:
            for u in IOs[j][0]:
                if u != y and u in producer and unit_of[producer[u]] != pu and not free:
                    ok = False
            if any(dt(graph.tensors[u]) in pointwise.NOT_FUSED for u in IOs[j][0] + IOs[j][1]):
                ok = False         # BOOLEAN / 8-bit integer operands: the elementwise kernel only
            if pointwise.pw_mode_name(nodes[j]) == "GEN_INDEX" or any(
                    v < 0 for u in IOs[j][0] + IOs[j][1] for v in strides(graph.tensors[u])):
                ok = False         # index outputs, negative strides: the elementwise kernel only
            for u in IOs[j][1]:
                if dims(graph.tensors[u]) != dims(graph.tensors[y]):
                    ok = False
                elif store_ok is not None and not store_ok(graph.tensors[u]):
                    ok = False     # e.g. the fused norm stores the run's outputs packed, like y
        if ok and ucond.join(ui, pu):
            fused_into[pu] = ui
    # topological order of units
    live = [ui for ui in range(len(units)) if ui not in fused_into]
    merged = {ui: [ui] + [p for p, g in fused_into.items() if g == ui] for ui in live}
    node_unit = {}
    for ui, parts in merged.items():
        for p in parts:
            for i in units[p][1]:
                node_unit[i] = ui
    deps = {ui: set() for ui in live}
    for i, (ins, _) in enumerate(IOs):
        for u in ins:
            if u in producer and node_unit[producer[u]] != node_unit[i]:
                deps[node_unit[i]].add(node_unit[producer[u]])
    order, done = [], set()
    while len(order) < len(live):
        ready = [ui for ui in live if ui not in done and deps[ui] <= done]
        _need(ready, "graph has a cycle")
        order.append(ready[0])
        done.add(ready[0])
    # where each tensor lives
    prog = Program()
    prog.arch, prog.tf32 = arch, tf32     # read by emitters (ops/moe.py: the GEMM core)
    loc = {}
    ext = []
    # a GEMM output whose reductions the epilogue does is still written (the kernel's store)
    kept = {y for y, _ in stat_units.values()}
    for u, t in graph.tensors.items():
        used = u in consumers or u in producer
        if not used or t.value is not None:
            continue
        if t.is_runtime_pass_by_value:
            loc[u] = ("s", u)        # host scalar, read at execute and passed by value
            continue
        if not t.virtual:
            loc[u] = ("t", u)
            ext.append(u)
    for ui in order:
        for p in merged[ui]:
            for i in units[p][1]:
                for u in IOs[i][1]:
                    t = graph.tensors[u]
                    if t.virtual and u not in loc:
                        inside = all(node_unit[j] == ui for j in consumers.get(u, []))
                        if not inside or u in kept:
                            # element 0 (negative strides address elements below it)
                            loc[u] = ("ws", prog.ws_alloc(span_elems(t) * cg.ELEM_SIZE[dt(t)])
                                      + neg_extent(t) * cg.ELEM_SIZE[dt(t)])
    prog.external = ext
    ctx = ops.EmitContext(prog, graph, loc, sms, use_mma, arch, tf32)
    # genstats: a training batchnorm's x written by a GEMM that can sum its channels
    for i, n in enumerate(nodes):
        want = getattr(ops.FAMILY[n.kind], "stats_wanted", None)
        x = want(n, R[i]) if want else None
        p = producer.get(x)
        sout = getattr(ops.FAMILY[nodes[p].kind], "stats_output", None) if p is not None else None
        if sout is not None and sout(nodes[p], R[p]) == x:
            ctx.stats_wanted.add(x)
    ctx.stats_wanted |= kept
    for k, ui in enumerate(order):
        kind, members = units[ui]
        fused = [p for p in merged[ui] if p != ui and p not in absorbed]
        tag = f"u{k}"
        if ui in stat_units:
            y, (outs, _) = stat_units[ui]
            ops.FAMILY[kind].emit(ctx, nodes[members[0]], R[members[0]], tag, None)
            _need(y in ctx.stats, "per-channel reductions left to a GEMM epilogue that kept none")
            from_gemm = [(graph.tensors[o], which, cnt) for o, which, cnt in outs]
            gemm.emit_stats_outputs(ctx, y, dims(graph.tensors[y])[1], from_gemm, tag)
        elif ui in paired:
            (i1, i2), pu = paired[ui]
            run = pointwise.Run(graph, nodes, units[pu][1], IOs, consumers, node_unit, ui)
            ops.FAMILY[kind].emit_pair(ctx, nodes[i1], R[i1], nodes[i2], R[i2], tag, run)
        elif kind == "pw":
            pointwise.emit(ctx, pointwise.Run(graph, nodes, members, IOs, consumers, node_unit, ui), tag)
        else:
            run = pointwise.Run(graph, nodes, units[fused[0]][1], IOs, consumers, node_unit, ui) \
                if fused else None
            ops.FAMILY[kind].emit(ctx, nodes[members[0]], R[members[0]], tag, run)
    return prog
