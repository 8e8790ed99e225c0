"""Scalar-taking operations for the RFC 0016 sentinel regressions: the graphs (built through the
backend C API in a child process: ``build``), their deterministic inputs and independent float64
references (pure numpy: ``data``, ``reference``; importable in the pytest process).

Every operation the CPU reference engine serves with a 1-element scalar tensor is here:
batchnorm inference-with-variance (epsilon), batchnorm training (epsilon, momentum), layernorm
forward (epsilon), layernorm backward without saved statistics (epsilon), RMS-norm forward
(epsilon).  The pointwise scalar operands (alpha as a MUL operand, beta as an ADD operand) are
covered by test_runtime_pbv.py.  The data make epsilon dominate the variance, so a provider that
ignores the runtime value (or reads the baked default instead) is far off.
"""
from __future__ import annotations

import numpy as np

EPS, MOM = 10, 11                 # scalar uids
SENTINEL = {EPS: 0.123, MOM: 0.37}
DEFAULT = {EPS: 1e-5, MOM: 0.1}
SCALARS = {"bn_inf_var": (EPS,), "bn_train": (EPS, MOM), "layernorm": (EPS,),
           "layernorm_bwd": (EPS,), "rmsnorm": (EPS,)}
OPS = tuple(SCALARS)

# uid -> (name, dims) of the non-scalar tensors; inputs first, then outputs
_BN = [2, 3, 2, 2]
_CH = [1, 3, 1, 1]
_LN = [2, 4, 3]
_LNP = [1, 4, 3]
_ST = [2, 1, 1]
TENSORS = {
    "bn_inf_var": ({1: ("x", _BN), 2: ("mean", _CH), 3: ("variance", _CH), 4: ("scale", _CH),
                    5: ("bias", _CH)}, {6: ("y", _BN)}),
    "bn_train": ({1: ("x", _BN), 4: ("scale", _CH), 5: ("bias", _CH), 7: ("prev_running_mean", _CH),
                  8: ("prev_running_variance", _CH)},
                 {6: ("y", _BN), 12: ("mean", _CH), 13: ("inv_variance", _CH),
                  14: ("next_running_mean", _CH), 15: ("next_running_variance", _CH)}),
    "layernorm": ({1: ("x", _LN), 4: ("scale", _LNP), 5: ("bias", _LNP)},
                  {6: ("y", _LN), 12: ("mean", _ST), 13: ("inv_variance", _ST)}),
    "layernorm_bwd": ({16: ("dy", _LN), 1: ("x", _LN), 4: ("scale", _LNP)},
                      {17: ("dx", _LN), 18: ("dscale", _LNP), 19: ("dbias", _LNP)}),
    "rmsnorm": ({1: ("x", _LN), 4: ("scale", _LNP)}, {6: ("y", _LN), 13: ("inv_rms", _ST)}),
}


def data(op):
    """{uid: float32 array} of the inputs of ``op`` (fixed seed)."""
    rng = np.random.default_rng(sum(map(ord, op)))
    out = {}
    for uid, (name, dims) in TENSORS[op][0].items():
        if name in ("x", "dy"):
            a = rng.standard_normal(dims) * 0.05          # variance ~ 2.5e-3 << 0.123
        elif name in ("variance", "prev_running_variance"):
            a = rng.uniform(0.005, 0.02, dims)
        elif name == "scale":
            a = rng.uniform(0.5, 1.5, dims)
        else:
            a = rng.standard_normal(dims) * 0.1
        out[uid] = np.ascontiguousarray(a, np.float32)
    return out


def reference(op, inp, eps, mom=None):
    """{uid: float64 array} of the outputs of ``op`` for ``inp`` with the given scalars."""
    d = {TENSORS[op][0][u][0]: inp[u].astype(np.float64) for u in inp}
    x = d.get("x")
    if op == "bn_inf_var":
        y = d["scale"] * (x - d["mean"]) / np.sqrt(d["variance"] + eps) + d["bias"]
        return {6: y}
    if op == "bn_train":
        ax = (0, 2, 3)
        m = x.mean(axis=ax, keepdims=True)
        v = ((x - m) ** 2).mean(axis=ax, keepdims=True)
        n = x.size // x.shape[1]
        inv = 1.0 / np.sqrt(v + eps)
        return {6: d["scale"] * (x - m) * inv + d["bias"], 12: m, 13: inv,
                14: (1 - mom) * d["prev_running_mean"] + mom * m,
                15: (1 - mom) * d["prev_running_variance"] + mom * v * n / (n - 1)}
    ax = (1, 2)
    if op == "layernorm":
        m = x.mean(axis=ax, keepdims=True)
        inv = 1.0 / np.sqrt(((x - m) ** 2).mean(axis=ax, keepdims=True) + eps)
        return {6: (x - m) * inv * d["scale"] + d["bias"], 12: m, 13: inv}
    if op == "layernorm_bwd":
        dy, s = d["dy"], d["scale"]
        m = x.mean(axis=ax, keepdims=True)
        inv = 1.0 / np.sqrt(((x - m) ** 2).mean(axis=ax, keepdims=True) + eps)
        xh = (x - m) * inv
        g = dy * s
        dx = inv * (g - g.mean(axis=ax, keepdims=True) - xh * (g * xh).mean(axis=ax, keepdims=True))
        return {17: dx, 18: (dy * xh).sum(axis=0, keepdims=True), 19: dy.sum(axis=0, keepdims=True)}
    if op == "rmsnorm":
        inv = 1.0 / np.sqrt((x * x).mean(axis=ax, keepdims=True) + eps)
        return {6: x * inv * d["scale"], 13: inv}
    raise ValueError(op)


def outputs(op):
    """{uid: zero float32 array} for the outputs of ``op``."""
    return {uid: np.zeros(dims, np.float32) for uid, (_, dims) in TENSORS[op][1].items()}


# ------------------------------------------------------------------ child-process side (C API)
def build(h, op, states, baked):
    """(status, graph) for ``op`` with scalar uid -> state (ctlib CONST / DEFAULT / RUNTIME) and
    uid -> baked value (used by CONST and DEFAULT)."""
    from ctlib import L, NORM_FWD_TRAINING, graph, scalar, tensor
    from ctlib import op as mkop
    ins, outs = TENSORS[op]
    t = {name: tensor(uid, dims) for uid, (name, dims) in {**ins, **outs}.items()}
    for uid in SCALARS[op]:
        t["epsilon" if uid == EPS else "momentum"] = scalar(uid, states[uid], baked[uid])
    phase = L.HIPDNN_TYPE_NORM_FWD_PHASE
    if op == "bn_inf_var":
        p = "OPERATION_BATCHNORM_INFERENCE_VARIANCE_"
        o = mkop(L.HIPDNN_BACKEND_OPERATION_BATCHNORM_INFERENCE_VARIANCE_DESCRIPTOR_EXT,
                 {f"HIPDNN_ATTR_{p}{r.upper()}_EXT": t[r]
                  for r in ("x", "mean", "variance", "scale", "bias", "y", "epsilon")})
    elif op == "bn_train":
        o = mkop(L.HIPDNN_BACKEND_OPERATION_BATCHNORM_DESCRIPTOR_EXT,
                 {f"HIPDNN_ATTR_OPERATION_BATCHNORM_{r.upper()}_EXT": t[r]
                  for r in ("x", "scale", "bias", "epsilon", "prev_running_mean",
                            "prev_running_variance", "momentum", "y", "mean", "inv_variance",
                            "next_running_mean", "next_running_variance")})
    elif op == "layernorm":
        o = mkop(L.HIPDNN_BACKEND_OPERATION_LAYERNORM_DESCRIPTOR_EXT,
                 {f"HIPDNN_ATTR_OPERATION_LAYERNORM_{r.upper()}_EXT": t[r]
                  for r in ("x", "scale", "bias", "epsilon", "y", "mean", "inv_variance")},
                 {"HIPDNN_ATTR_OPERATION_LAYERNORM_FWD_PHASE_EXT": (phase, NORM_FWD_TRAINING)})
    elif op == "layernorm_bwd":
        o = mkop(L.HIPDNN_BACKEND_OPERATION_LAYERNORM_BACKWARD_DESCRIPTOR_EXT,
                 {f"HIPDNN_ATTR_OPERATION_LAYERNORM_BACKWARD_{r.upper()}_EXT": t[r]
                  for r in ("dy", "x", "scale", "epsilon", "dx", "dscale", "dbias")})
    elif op == "rmsnorm":
        o = mkop(L.HIPDNN_BACKEND_OPERATION_RMSNORM_DESCRIPTOR_EXT,
                 {f"HIPDNN_ATTR_OPERATION_RMSNORM_{r.upper()}_EXT": t[r]
                  for r in ("x", "scale", "epsilon", "y", "inv_rms")},
                 {"HIPDNN_ATTR_OPERATION_RMSNORM_FWD_PHASE_EXT": (phase, NORM_FWD_TRAINING)})
    else:
        raise ValueError(op)
    return graph(h, [o], name=op.encode())


def execute(h, p, op, scalars):
    """Run plan p of ``op`` on data(op); (status, {uid: list}) with host scalars {uid: value or
    None (omitted)}."""
    from ctlib import run_arrays
    arrays = {**data(op), **outputs(op)}
    st = run_arrays(h, p, arrays, scalars)
    return st, {str(u): arrays[u].tolist() for u in TENSORS[op][1]}
