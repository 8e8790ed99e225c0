"""The exact-match autotune ranking cache (``hipdnnBackendWriteEngineRankingResults_ext``).

A ranking (engine ids, fastest first) is stored per *cache key*: a SHA-256 over the graph's
structure — every tensor's data type, dims, strides, virtual flag and value, every node's operation
and attributes, the graph-level data types — with tensor uids renumbered in the order the nodes'
``cache_uid`` fields name them and every name (graph, node, tensor) and the graph uuid left out,
together with the device (its DeviceProperties: id, multiprocessor count, memory, architecture).
Two graphs that differ only in uids or names share a ranking; the same graph on another device
does not.

The store is one SQLite database (the standard library's ``sqlite3``) under ``HIPDNN_CACHE_DIR``
(default ``$XDG_CACHE_HOME/hipdnn`` or ``~/.cache/hipdnn``): it survives processes, serialises
concurrent writers (busy timeout, ``BEGIN IMMEDIATE``), and a corrupt or truncated file is logged,
moved aside and rewritten.  ``HIPDNN_DISABLE_EXACT_ENGINE_CACHE`` or ``HIPDNN_DISABLE_CACHE`` set to a
truthy value (1, true, on, yes, enable, enabled) disables it: writes answer DECLINED_DISABLED and
lookups find nothing.  The built-in policy ``SelectionHeuristic::Config`` consults it.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time

from .._generated.enums import DescriptorType, Severity
from ..errors import BadParamError, InternalError, NullPointerError
from . import env, graph_fb, log, registry, runtime
from .plugins.heuristics import device_properties

WRITTEN, DECLINED_DISABLED, DECLINED_UNKEYABLE, DECLINED_NO_ENGINES, UNCHANGED = 0, 1, 2, 3, 4
TRUTHY = frozenset({"1", "true", "on", "yes", "enable", "enabled"})
DB_NAME = "hipdnn_cabi_engine_ranking.sqlite3"
SCHEMA_VERSION = 1
_lock = threading.Lock()


def _env(name):
    return env.get(name)


def disabled() -> bool:
    return any((_env(v) or "").strip().lower() in TRUTHY
               for v in ("HIPDNN_DISABLE_EXACT_ENGINE_CACHE", "HIPDNN_DISABLE_CACHE"))


def cache_dir() -> str:
    d = (_env("HIPDNN_CACHE_DIR") or "").strip()
    if d:
        return d
    base = (_env("XDG_CACHE_HOME") or "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hipdnn")


def db_path() -> str:
    return os.path.join(cache_dir(), DB_NAME)


# =========================================================================== the key
def _canonical_graph(g: dict) -> dict:
    order: dict = {}

    def canon(uid):
        if uid not in order:
            order[uid] = len(order)
        return order[uid]

    nodes = []
    for node in g.get("nodes", []):
        kind, attrs = node["attributes"]
        a = {}
        for k in sorted(attrs):
            v = attrs[k]
            if k.endswith("_tensor_uid") or k.endswith("_tensor_uids"):
                v = [canon(x) for x in v] if isinstance(v, list) else canon(v)
            a[k] = v
        nodes.append({"op": kind, "compute": node.get("compute_data_type"), "attributes": a})
    tensors = []
    for t in g.get("tensors", []):
        d = {k: v for k, v in t.items() if k not in ("name", "uid")}
        if "ragged_offset_tensor_uid" in d:
            d["ragged_offset_tensor_uid"] = canon(d["ragged_offset_tensor_uid"])
        tensors.append((canon(t["uid"]), d))
    tensors.sort(key=lambda e: e[0])
    return {"v": SCHEMA_VERSION, "nodes": nodes, "tensors": tensors,
            "types": [g.get(k) for k in ("compute_data_type", "intermediate_data_type",
                                         "io_data_type")],
            "override": bool(g.get("is_override_shape_enabled"))}


def cache_key(graph) -> str | None:
    """The cache key of a finalized GraphDescriptor, or None when it cannot be keyed."""
    if graph is None or not getattr(graph, "finalized", False):
        return None
    try:
        gdict = _canonical_graph(graph_fb.read(graph.serialized(), "Graph"))
        dev = device_properties(getattr(graph, "handle", None))
    except Exception as e:  # noqa: BLE001 - an unkeyable graph is an outcome, not an error
        log.log(Severity.HIPDNN_SEV_WARN, f"Autotune cache: graph cannot be keyed: {e}")
        return None
    text = json.dumps({"graph": gdict, "device": dev}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# =========================================================================== the store
def _connect(path: str) -> sqlite3.Connection:
    c = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    c.execute("CREATE TABLE IF NOT EXISTS ranking (key TEXT PRIMARY KEY, engine_ids TEXT NOT NULL,"
              " written REAL NOT NULL)")
    c.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
    c.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
    return c


def _open() -> sqlite3.Connection:
    path = db_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        c = _connect(path)
        c.execute("SELECT count(*) FROM ranking").fetchone()
        return c
    except sqlite3.DatabaseError as e:
        aside = f"{path}.corrupt-{os.getpid()}-{int(time.time())}"
        log.log(Severity.HIPDNN_SEV_WARN, f"Autotune cache {path} is unreadable ({e}); moved to "
                f"{aside} and rewritten")
        try:
            os.replace(path, aside)
        except OSError:
            try:
                os.unlink(path)
            except OSError:
                pass
        for extra in ("-journal", "-wal", "-shm"):
            try:
                os.unlink(path + extra)
            except OSError:
                pass
        return _connect(path)


def _decode(text: str):
    try:
        v = json.loads(text)
    except ValueError:
        return None
    if not isinstance(v, list) or not all(isinstance(x, int) for x in v):
        return None
    return v


def lookup(graph) -> list[int] | None:
    if disabled():
        return None
    path = db_path()
    if not os.path.exists(path):   # the common case: no ranking was ever written (no key work)
        return None
    key = cache_key(graph)
    if key is None:
        return None
    with _lock:
        c = _open()
        try:
            row = c.execute("SELECT engine_ids FROM ranking WHERE key = ?", (key,)).fetchone()
        finally:
            c.close()
    return _decode(row[0]) if row else None


def store(key: str, ids: list[int]) -> int:
    text = json.dumps([int(x) for x in ids])
    with _lock:
        c = _open()
        try:
            c.execute("BEGIN IMMEDIATE")
            row = c.execute("SELECT engine_ids FROM ranking WHERE key = ?", (key,)).fetchone()
            if row and _decode(row[0]) == [int(x) for x in ids]:
                c.execute("COMMIT")
                return UNCHANGED
            c.execute("INSERT OR REPLACE INTO ranking VALUES (?, ?, ?)", (key, text, time.time()))
            c.execute("COMMIT")
            return WRITTEN
        except BaseException:
            try:
                c.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        finally:
            c.close()


# =========================================================================== the C entry
def write_ranking_results(handle, g, ids, n, outcome) -> int:
    """hipdnnBackendWriteEngineRankingResults_ext(handle, graph, engineIdsInRankOrder, count,
    &outcome) — docs/plugins.md "Autotune cache" gives every outcome."""
    fn = "hipdnnBackendWriteEngineRankingResults_ext"
    if not g:
        raise NullPointerError(f"{fn}: graphDescriptor is nullptr")
    if not outcome:
        raise NullPointerError(f"{fn}: outcome is nullptr")
    if n and not ids:
        raise NullPointerError(f"{fn}: engineIdsInRankOrder is nullptr")
    if n > 1 << 16:
        raise BadParamError(f"{fn}: engineIdCount {n} is too large")
    graph = registry.resolve(int(g) if isinstance(g, int)
                             else int(runtime.ffi.cast("uintptr_t", g)))
    if graph is None:
        raise NullPointerError(f"{fn}: graphDescriptor is invalid or was destroyed")
    if getattr(graph, "DESCRIPTOR_TYPE", None) != DescriptorType.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
        raise BadParamError(f"{fn}: graphDescriptor is not an operation graph descriptor")
    rank = [int(ids[i]) for i in range(n)]
    if len(set(rank)) != len(rank):
        raise BadParamError(f"{fn}: engine ids must be unique")
    hp = handle.plugins
    if hp is not None:
        unknown = [e for e in rank if hp.owner(e) is None]
        if unknown:
            raise BadParamError(f"{fn}: engine id {unknown[0]} is not a loaded engine")
    if disabled():
        outcome[0] = DECLINED_DISABLED
        return 0
    if not rank:
        outcome[0] = DECLINED_NO_ENGINES
        return 0
    key = cache_key(graph)
    if key is None:
        outcome[0] = DECLINED_UNKEYABLE
        return 0
    try:
        outcome[0] = store(key, rank)
    except (OSError, sqlite3.Error) as e:   # an unwritable HIPDNN_CACHE_DIR, a locked database
        raise InternalError(f"{fn}: cannot write the autotune cache {db_path()}: {e}") from None
    if log.enabled(Severity.HIPDNN_SEV_INFO):
        log.log(Severity.HIPDNN_SEV_INFO, f"Autotune cache: ranking of {len(rank)} engine(s) "
                f"{'written' if outcome[0] == WRITTEN else 'unchanged'} for key {key[:16]}")
    return 0
