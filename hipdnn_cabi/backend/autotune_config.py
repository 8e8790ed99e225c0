"""The engine-override configuration file of ``SelectionHeuristic::Config`` (``HIPDNN_HEUR_CONFIG_PATH``)
in the JSON format hipDNN's autotuner writes (RFC 0013 §6.5, ``EngineOverrideConfig``):

    {"version": 2,
     "engine_overrides": [
       {"op": "conv_fprop", "engine_name": "MIOPEN_ENGINE", "criteria": {"pointwise_mode": 1},
        "tensors": [{"tensor_id": "x_tensor_uid", "dim": [16, 64, 56, 56], "stride": [...]}, ...],
        "autotune_metadata": {"rank": 0, "min_time_ms": ..., "knobs": [
            {"knob_id": "global.workspace_size_limit", "type": "int", "value": 16777216}]}}]}

A rule matches a graph by its *match key*: the operation of the graph's primary node (the node of
the highest priority: convolution 70 > SDPA 60 > matmul 50 > batchnorm 40 > norms 30 > reduction =
resample 20 > pointwise 10; nodes of the same priority are tried in graph order), the node's
behavioural criteria (pointwise / reduction / resample / padding mode, norm forward phase) and its
input tensors, each named by its FlatBuffer field (``x_tensor_uid``) with dims and, when the rule
gives them, strides (-1 matches any value).  A file without ``version`` (v1) matches tensors by
position.  Rules are tried in file order; the first match names the engine (a registered engine
name, a decimal or 0x id, or any other name, hashed).  These rules are upstream's
(``ConfigBuiltIn.cpp``, ``EngineOverrideConfig.hpp``, ``AutotuneConfigNames.hpp``, checked against
the newest sources).

Ours on top: an entry may carry ``autotune_metadata.graph_key`` (written by our frontend's
``Graph.autotune``), the SHA-256 of the graph's structure (:func:`graph_key`, the autotune cache's
key without the device): such an entry matches only a graph with that key, so two graphs that share
a match key (fp16 and fp32 of one shape) keep their own winners.  The winner's knob settings
(``autotune_metadata.knobs``) become the engine config of the selected engine (docs/plugins.md).

A file that cannot be read or is not such a document — missing, truncated, malformed JSON, the
wrong shape, a foreign format — is logged as a warning and the policy declines, so the next policy
decides; it never raises.
"""
from __future__ import annotations

import hashlib
import json

from .._generated.enums import Severity
from . import log
from .env import get
from .graph_fb import UNIONS
from .autotune_cache import _canonical_graph

ENV = "HIPDNN_HEUR_CONFIG_PATH"
VERSION, ENGINE_OVERRIDES, OP, CRITERIA, ENGINE_NAME, TENSORS, TENSOR_ID, DIM, STRIDE = (
    "version", "engine_overrides", "op", "criteria", "engine_name", "tensors", "tensor_id", "dim",
    "stride")
METADATA = "autotune_metadata"
VERSION_DEFAULT, VERSION_NAMED_TENSOR_IDS = 1, 2
VERSION_CURRENT = VERSION_NAMED_TENSOR_IDS
WILDCARD = -1
KNOB_TYPES = {"int": 1, "double": 2, "string": 3}          # -> KnobValue union tags
KNOB_TYPE_NAMES = {v: k for k, v in KNOB_TYPES.items()}
MAX_FILE_BYTES = 64 << 20

# node table -> (op, priority, required inputs, optional inputs, criteria (name, field))
_CONV, _SDPA, _MATMUL, _BN, _NORM, _RED, _PW = 70, 60, 50, 40, 30, 20, 10
OPS = {
    "ConvolutionFwdAttributes": ("conv_fprop", _CONV, ("x", "w"), (), ()),
    "ConvolutionBwdAttributes": ("conv_dgrad", _CONV, ("dy", "w"), (), ()),
    "ConvolutionWrwAttributes": ("conv_wgrad", _CONV, ("x", "dy"), (), ()),
    "SdpaAttributes": ("sdpa_fwd", _SDPA, ("q", "k", "v"),
                       ("scale", "attn_mask", "seq_len_q", "seq_len_kv", "seed", "offset",
                        "dropout_mask", "dropout_scale", "page_table_k", "page_table_v",
                        "block_mask", "sink_token", "descale_q", "descale_k", "descale_v",
                        "descale_s", "scale_s", "scale_o"), ()),
    "SdpaBackwardAttributes": ("sdpa_bwd", _SDPA, ("q", "k", "v", "o", "do", "stats"),
                               ("scale", "attn_mask", "seq_len_q", "seq_len_kv", "seed", "offset",
                                "dropout_mask", "dropout_scale", "dropout_scale_inv"), ()),
    "MatmulAttributes": ("matmul", _MATMUL, ("a", "b"), (), ()),
    "BatchnormAttributes": ("batchnorm_training", _BN, ("x", "scale", "bias", "epsilon"),
                            ("prev_running_mean", "prev_running_variance", "momentum"), ()),
    "BatchnormInferenceAttributes": ("batchnorm_inference", _BN,
                                     ("x", "mean", "inv_variance", "scale", "bias"), (), ()),
    "BatchnormInferenceAttributesVarianceExt": ("batchnorm_inference_variance_ext", _BN,
                                                ("x", "mean", "variance", "scale", "bias",
                                                 "epsilon"), (), ()),
    "BatchnormBackwardAttributes": ("batchnorm_backward", _BN, ("dy", "x", "scale"),
                                    ("mean", "inv_variance"), ()),
    "LayernormAttributes": ("layernorm", _NORM, ("x", "scale", "bias", "epsilon"), (),
                            (("norm_fwd_phase", "forward_phase"),)),
    "RMSNormAttributes": ("rmsnorm", _NORM, ("x", "scale", "epsilon"), ("bias",),
                          (("norm_fwd_phase", "forward_phase"),)),
    "RMSNormBackwardAttributes": ("rmsnorm_backward", _NORM, ("dy", "x", "scale", "inv_rms"), (),
                                  ()),
    "ReductionAttributes": ("reduction", _RED, ("in",), (), (("reduction_mode", "mode"),)),
    "ResampleFwdAttributes": ("resample_fwd", _RED, ("x",), (),
                              (("resample_mode", "resample_mode"),
                               ("padding_mode", "padding_mode"))),
    "PointwiseAttributes": ("pointwise", _PW, ("in_0",), ("in_1", "in_2"),
                            (("pointwise_mode", "operation"),)),
}


class ConfigError(ValueError):
    """The file is not an engine-override configuration (the message says why)."""


class MatchKey:
    __slots__ = ("op", "priority", "criteria", "tensors")

    def __init__(self, op, priority, criteria, tensors):
        self.op, self.priority = op, priority
        self.criteria = tuple(sorted(criteria))          # ((name, value), ...)
        self.tensors = tensors                           # [(tensor id, dims, strides)]

    def to_json(self) -> dict:
        d = {OP: self.op}
        if self.criteria:
            d[CRITERIA] = dict(self.criteria)
        d[TENSORS] = [{TENSOR_ID: tid, DIM: list(dims), STRIDE: list(strides)}
                      for tid, dims, strides in self.tensors]
        return d


class Rule:
    __slots__ = ("op", "engine_name", "engine_id", "criteria", "tensors", "named", "knobs",
                 "graph_key")

    def _dims_match(self, pattern, actual) -> bool:
        return len(pattern) == len(actual) and all(p == WILDCARD or p == a
                                                   for p, a in zip(pattern, actual))

    def _tensor_match(self, pattern, view) -> bool:
        _, pdim, pstride = pattern
        _, dims, strides = view
        return self._dims_match(pdim, dims) and (not pstride or self._dims_match(pstride, strides))

    def matches(self, key: MatchKey, graph_key: str | None) -> bool:
        if self.op != key.op or self.criteria != key.criteria:
            return False
        if self.graph_key is not None and graph_key is not None and self.graph_key != graph_key:
            return False
        if len(self.tensors) != len(key.tensors):
            return False
        if not self.named:
            return all(self._tensor_match(p, v) for p, v in zip(self.tensors, key.tensors))
        return all(p[0] is not None and any(v[0] == p[0] and self._tensor_match(p, v)
                                            for v in key.tensors) for p in self.tensors)


def engine_name_or_id_to_id(name: str) -> int:
    """hipDNN's engineNameOrIdToId: a 0x-hex or decimal id (optional '+') is that id; any other
    name hashes (FNV-1a-64).  (Upstream hashes a registered engine name first: none is numeric.)"""
    s = name or ""
    try:
        if s[:2].lower() == "0x" and len(s) > 2:
            v = int(s[2:], 16)
            if v < 1 << 64:
                return v - (1 << 64) if v >= 1 << 63 else v
        elif (s[1:] if s[:1] in ("+", "-") else s).isdigit():
            v = int(s, 10)
            if -(1 << 63) <= v < 1 << 63:
                return v
    except ValueError:
        pass
    return _fnv1a64(name)


def _fnv1a64(name: str) -> int:
    """FNV-1a-64 of the name's UTF-8 bytes as a signed int64 (hipDNN's engineNameToId)."""
    h = 0xCBF29CE484222325
    for b in name.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & ((1 << 64) - 1)
    return h - (1 << 64) if h >= (1 << 63) else h


def _int(v, where) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(f"{where}: expected an integer, got {json.dumps(v)[:40]}")
    return v


def _ints(v, where) -> tuple:
    if not isinstance(v, list):
        raise ConfigError(f"{where}: expected a list of integers")
    return tuple(_int(x, f"{where}[{i}]") for i, x in enumerate(v))


def _str(v, where) -> str:
    if not isinstance(v, str):
        raise ConfigError(f"{where}: expected a string")
    return v


def _knobs(meta, where) -> list:
    out, seen = [], set()
    knobs = meta.get("knobs", [])
    if not isinstance(knobs, list):
        raise ConfigError(f"{where}.knobs: expected a list")
    for i, k in enumerate(knobs):
        w = f"{where}.knobs[{i}]"
        if not isinstance(k, dict):
            raise ConfigError(f"{w}: expected an object")
        kid = _str(k.get("knob_id"), f"{w}.knob_id")
        if not kid or kid in seen:
            raise ConfigError(f"{w}.knob_id: empty or repeated")
        seen.add(kid)
        kind = KNOB_TYPES.get(k.get("type"))
        if kind is None:
            raise ConfigError(f"{w}.type: expected \"int\", \"double\" or \"string\"")
        v = k.get("value")
        if kind == 1:
            v = _int(v, f"{w}.value")
        elif kind == 2:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or \
                    v in (float("inf"), float("-inf")):
                raise ConfigError(f"{w}.value: expected a finite number")
            v = float(v)
        else:
            v = _str(v, f"{w}.value")
        out.append((kid, kind, v))
    return out


def parse(doc) -> list:
    """The rules of a decoded JSON document (ConfigError when it is not a configuration)."""
    if not isinstance(doc, dict):
        raise ConfigError("the top level is not a JSON object")
    if ENGINE_OVERRIDES not in doc:
        raise ConfigError(f"no \"{ENGINE_OVERRIDES}\" list (not an engine-override configuration)")
    version = _int(doc.get(VERSION, VERSION_DEFAULT), VERSION)
    if version < VERSION_DEFAULT:
        raise ConfigError(f"version {version} is not a configuration version")
    named = version >= VERSION_NAMED_TENSOR_IDS
    entries = doc[ENGINE_OVERRIDES]
    if not isinstance(entries, list):
        raise ConfigError(f"\"{ENGINE_OVERRIDES}\" is not a list")
    rules = []
    for i, e in enumerate(entries):
        w = f"{ENGINE_OVERRIDES}[{i}]"
        if not isinstance(e, dict):
            raise ConfigError(f"{w}: expected an object")
        r = Rule()
        r.named = named
        r.op = _str(e.get(OP), f"{w}.{OP}")
        r.engine_name = _str(e.get(ENGINE_NAME), f"{w}.{ENGINE_NAME}")
        r.engine_id = engine_name_or_id_to_id(r.engine_name)
        crit = e.get(CRITERIA, {})
        if not isinstance(crit, dict):
            raise ConfigError(f"{w}.{CRITERIA}: criteria must be an object")
        r.criteria = tuple(sorted((str(k), _int(v, f"{w}.{CRITERIA}.{k}"))
                                  for k, v in crit.items()))
        tensors = e.get(TENSORS)
        if not isinstance(tensors, list):
            raise ConfigError(f"{w}.{TENSORS}: expected a list")
        r.tensors, ids = [], set()
        for j, t in enumerate(tensors):
            wt = f"{w}.{TENSORS}[{j}]"
            if not isinstance(t, dict):
                raise ConfigError(f"{wt}: expected an object")
            tid = t.get(TENSOR_ID)
            if named:
                tid = _str(tid, f"{wt}.{TENSOR_ID}")
                if tid in ids:
                    raise ConfigError(f"{wt}.{TENSOR_ID}: versioned tensor_id entries must be unique")
                ids.add(tid)
            elif tid is not None:
                tid = _str(tid, f"{wt}.{TENSOR_ID}")
            dims = _ints(t.get(DIM), f"{wt}.{DIM}")
            strides = _ints(t[STRIDE], f"{wt}.{STRIDE}") if STRIDE in t else ()
            r.tensors.append((tid, dims, strides))
        meta = e.get(METADATA, {})
        if not isinstance(meta, dict):
            raise ConfigError(f"{w}.{METADATA}: expected an object")
        r.knobs = _knobs(meta, f"{w}.{METADATA}")
        gk = meta.get("graph_key")
        r.graph_key = _str(gk, f"{w}.{METADATA}.graph_key") if gk is not None else None
        rules.append(r)
    return rules


def load(path: str) -> list:
    """The rules of the file at ``path`` (ConfigError naming the problem)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"cannot read it: {e.strerror or e}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"larger than {MAX_FILE_BYTES >> 20} MiB")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"not valid JSON ({e})") from None
    return parse(doc)


def load_from_env():
    """(rules, path): the rules of HIPDNN_HEUR_CONFIG_PATH, read at each call; (None, None) when
    the variable is unset or empty; (None, path) after a logged warning when the file is not a
    usable configuration."""
    path = (get(ENV) or "").strip()
    if not path:
        return None, None
    try:
        return load(path), path
    except ConfigError as e:
        log.log(Severity.HIPDNN_SEV_WARN, f"SelectionHeuristic::Config: {ENV}={path} is ignored: "
                f"{e}; the next heuristic policy decides")
        return None, path


# ------------------------------------------------------------------------------ match keys
def _node_key(table: str, attrs: dict, tensors: dict) -> MatchKey | None:
    spec = OPS.get(table)
    if spec is None:
        return None
    op, prio, required, optional, criteria = spec
    views = []
    for name in required:
        uid = attrs.get(f"{name}_tensor_uid")
        t = tensors.get(uid) if uid is not None else None
        if t is None:
            return None
        views.append((f"{name}_tensor_uid", tuple(t.get("dims", ())), tuple(t.get("strides", ()))))
    for name in optional:
        uid = attrs.get(f"{name}_tensor_uid")
        if uid is None:
            continue
        t = tensors.get(uid)
        if t is None:
            return None
        views.append((f"{name}_tensor_uid", tuple(t.get("dims", ())), tuple(t.get("strides", ()))))
    crit = [(cname, int(attrs.get(field, 0))) for cname, field in criteria]
    return MatchKey(op, prio, crit, views)


def match_keys(gdict: dict) -> list:
    """The match keys of a graph (``graph_fb.read(..., "Graph")``): those of its nodes of the
    highest priority, in graph order."""
    tensors = {t.get("uid"): t for t in gdict.get("tensors", [])}
    keys, best = [], 0
    for node in gdict.get("nodes", []):
        attrs = node.get("attributes")
        if not attrs:
            continue
        member = UNIONS["NodeAttributes"].get(attrs[0])
        if member is None:
            continue
        k = _node_key(member[0], attrs[1] or {}, tensors)
        if k is None:
            continue
        if k.priority > best:
            best, keys = k.priority, []
        if k.priority == best:
            keys.append(k)
    return keys


def graph_key(gdict: dict) -> str:
    """SHA-256 of the graph's structure (the autotune cache's canonical form, no device)."""
    text = json.dumps(_canonical_graph(gdict), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def select(rules, gdict: dict):
    """The first rule matching the graph, or None."""
    keys = match_keys(gdict)
    if not keys:
        return None
    gk = graph_key(gdict)
    for key in keys:
        for r in rules:
            if r.matches(key, gk):
                return r
    return None
