"""Autotuning a ``Graph`` (hipDNN RFC 0013): benchmark engine configurations on the caller's buffers,
activate the fastest, remember it.

``g.autotune(variant_pack, workspace=None, config=AutotuneConfig(...),
storage=AutotuneStorageConfig(file_path=...), sweeps=[EngineSweepSpec(...)])``:

* candidates: every engine configuration of the graph's heuristics with its default knobs, plus
  the knob variants of ``sweeps`` (the Cartesian product of each spec's axes, merged with its fixed
  settings; ``global.benchmarking`` is stripped from sweeps, as upstream does), restricted to
  ``config.engine_id_filter`` when given;
* modes: STANDARD times the plans as built; EXHAUSTIVE first primes every candidate whose engine
  offers ``global.benchmarking`` with a temporary plan of the same knobs plus
  ``global.benchmarking = 1``, executed once and discarded (a priming failure aborts, or with
  ``BENCHMARK_UNPRIMED`` is noted and the candidate benchmarked unprimed);
* strategies (after ``warmup_iterations`` untimed runs, each timed run bracketed by a
  PROFILING_CONTROL_EXT descriptor): SINGLE_SHOT (one run), FIXED_AVERAGE (``timed_iterations``
  runs), RUN_UNTIL_STABLE (until the coefficient of variation of the last ``window_size`` runs is
  below ``stability_threshold``, at most ``max_iterations``);
* ranking by the minimum time (or ``config.ranking_fn``, which reorders the succeeded results in
  place); failed candidates follow with rank -1;
* the winner becomes the active plan (with its knobs); the engine ranking is written to the
  autotune cache (``hipdnnBackendWriteEngineRankingResults_ext``) unless ``write_cache=False``;
  with ``storage.file_path`` the winner is written to the engine-override configuration file that
  ``SelectionHeuristic::Config`` reads through ``HIPDNN_HEUR_CONFIG_PATH`` (RFC 0013 §6.5: version
  2, the graph's match key, ``autotune_metadata`` with the timings and the winner's knobs).

Log lines go to the ``hipdnn_cabi.frontend`` Python logger with the prefix ``autotune:``.
"""
from __future__ import annotations

import datetime
import enum
import itertools
import json
import logging
import math
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field

from ...errors import BadParamError, HipdnnError
from ._types import GraphNotSupportedError
from ...backend.autotune_config import ENGINE_OVERRIDES, VERSION, VERSION_CURRENT
from .. import buffers as _buffers
from ..handle import engine_memory_kind
from ..._generated.enums import DescriptorType as D
from ...backend import autotune_config, graph_fb

LOG = logging.getLogger("hipdnn_cabi.frontend")
BENCHMARKING_KNOB = "global.benchmarking"
MAX_SWEEP_SPECS = 10000
WARN_SWEEP_SPECS = 1000


class TuneMode(enum.Enum):
    STANDARD = "standard"
    EXHAUSTIVE = "exhaustive"


class AutotuneStrategy(enum.Enum):
    SINGLE_SHOT = "single_shot"
    FIXED_AVERAGE = "fixed_average"
    RUN_UNTIL_STABLE = "run_until_stable"


class PrimingFailurePolicy(enum.Enum):
    ABORT_ON_PRIMING_FAILURE = "abort_on_priming_failure"
    BENCHMARK_UNPRIMED = "benchmark_unprimed"


@dataclass
class AutotuneConfig:
    mode: TuneMode = TuneMode.STANDARD
    strategy: AutotuneStrategy = AutotuneStrategy.RUN_UNTIL_STABLE
    warmup_iterations: int = 1
    timed_iterations: int = 10            # FIXED_AVERAGE
    max_iterations: int = 100             # RUN_UNTIL_STABLE
    window_size: int = 3
    stability_threshold: float = 0.05     # coefficient of variation
    engine_id_filter: tuple = ()
    ranking_fn: object = None
    priming_failure_policy: PrimingFailurePolicy = PrimingFailurePolicy.ABORT_ON_PRIMING_FAILURE

    def validate(self):
        try:
            mode, strategy = TuneMode(self.mode), AutotuneStrategy(self.strategy)
            policy = PrimingFailurePolicy(self.priming_failure_policy)
        except ValueError as e:
            raise BadParamError(f"autotune: {e}") from None
        self.mode, self.strategy, self.priming_failure_policy = mode, strategy, policy
        if self.warmup_iterations < 0:
            raise BadParamError("autotune: warmup_iterations must be >= 0")
        if strategy is AutotuneStrategy.FIXED_AVERAGE and self.timed_iterations < 1:
            raise BadParamError("autotune: timed_iterations must be >= 1")
        if strategy is AutotuneStrategy.RUN_UNTIL_STABLE:
            if self.window_size < 2:
                raise BadParamError("autotune: window_size must be >= 2")
            if self.max_iterations < self.window_size:
                raise BadParamError("autotune: max_iterations must be >= window_size")
            if not 0.0 < self.stability_threshold < 1.0:
                raise BadParamError("autotune: stability_threshold must be in (0, 1)")


@dataclass
class AutotuneStorageConfig:
    file_path: str | None = None
    delete_all_existing_file_content: bool = False


@dataclass
class EngineSweepSpec:
    """Knob variants of one engine: every combination of ``axes`` ({knob id: [values]}) merged with
    ``fixed_settings`` ({knob id: value})."""
    engine_id: int
    axes: dict = field(default_factory=dict)
    fixed_settings: dict = field(default_factory=dict)


@dataclass
class AutotuneResult:
    engine_id: int = -1
    engine_name: str = ""
    knob_settings: dict = field(default_factory=dict)
    min_time_ms: float = 0.0
    avg_time_ms: float = 0.0
    stddev_ms: float = 0.0
    iterations_run: int = 0
    converged: bool = False
    rank: int = -1
    succeeded: bool = False
    error_message: str = ""
    workspace_size: int = -1
    mode_used: TuneMode = TuneMode.STANDARD
    supports_exhaustive: bool = False
    ran_exhaustive: bool = False
    exhaustive_not_run_reason: str = ""
    strategy_used: AutotuneStrategy = AutotuneStrategy.RUN_UNTIL_STABLE


# ------------------------------------------------------------------------------ strategies
def coefficient_of_variation(times) -> float:
    m = statistics.fmean(times)
    return statistics.pstdev(times) / m if m > 0 else 0.0


def measure(config: AutotuneConfig, timed_run) -> tuple[list, bool]:
    """The timed runs of one candidate under ``config.strategy``: ([ms, ...], converged).
    ``timed_run()`` executes once and returns its time in ms."""
    s = config.strategy
    if s is AutotuneStrategy.SINGLE_SHOT:
        return [timed_run()], True
    if s is AutotuneStrategy.FIXED_AVERAGE:
        return [timed_run() for _ in range(config.timed_iterations)], True
    times = []
    while len(times) < config.max_iterations:
        times.append(timed_run())
        if len(times) >= config.window_size and coefficient_of_variation(
                times[-config.window_size:]) < config.stability_threshold:
            return times, True
    return times, False


def sweep_variants(spec: EngineSweepSpec) -> list[dict]:
    """The knob settings of a sweep spec (benchmarking knob and empty axes dropped, with a log)."""
    axes = []
    for kid, values in (spec.axes or {}).items():
        if kid == BENCHMARKING_KNOB:
            LOG.warning("autotune: sweep of engine %d: %s is managed by the EXHAUSTIVE mode; "
                        "stripped", spec.engine_id, kid)
            continue
        values = list(values)
        if not values:
            LOG.warning("autotune: sweep of engine %d: axis %s has no values; the engine default "
                        "stands", spec.engine_id, kid)
            continue
        axes.append((kid, values))
    fixed = {k: v for k, v in (spec.fixed_settings or {}).items() if k != BENCHMARKING_KNOB}
    n = math.prod(len(v) for _, v in axes) if axes else 1
    if n > MAX_SWEEP_SPECS:
        raise BadParamError(f"autotune: the sweep of engine {spec.engine_id} makes {n} plan specs "
                            f"(at most {MAX_SWEEP_SPECS})")
    if n > WARN_SWEEP_SPECS:
        LOG.warning("autotune: the sweep of engine %d makes %d plan specs", spec.engine_id, n)
    out = []
    for combo in itertools.product(*(v for _, v in axes)):
        d = dict(fixed)
        d.update({kid: val for (kid, _), val in zip(axes, combo)})
        out.append(d)
    return out


# ------------------------------------------------------------------------------ the config file
def _knob_json(kid, value) -> dict:
    if isinstance(value, bool) or isinstance(value, int):
        return {"knob_id": kid, "type": "int", "value": int(value)}
    if isinstance(value, float):
        return {"knob_id": kid, "type": "double", "value": float(value)}
    return {"knob_id": kid, "type": "string", "value": str(value)}


def _same_key(a: dict, b: dict) -> bool:
    """The writer's match key: (op, criteria, tensors by named id ignoring order), plus ours:
    entries with different graph keys are different entries."""
    def tensors(e):
        return sorted((t.get("tensor_id"), tuple(t.get("dim", ())), tuple(t.get("stride", ())))
                      for t in e.get("tensors", []) if isinstance(t, dict))
    ga = (a.get("autotune_metadata") or {}).get("graph_key")
    gb = (b.get("autotune_metadata") or {}).get("graph_key")
    return (a.get("op") == b.get("op") and (a.get("criteria") or {}) == (b.get("criteria") or {})
            and tensors(a) == tensors(b) and (ga is None or gb is None or ga == gb))


def write_config_entry(path: str, entry: dict, delete_existing: bool = False) -> None:
    """Write ``entry`` into the engine-override file at ``path`` (RFC 0013 §6.5): a version 2
    document; an entry with the same match key is replaced, others are kept (unless
    ``delete_existing``).  An existing file that is not valid JSON is moved aside to
    ``<path>.corrupt-<epoch>`` and a new one written; a valid file that is not a version 2
    configuration is refused (BadParamError) and left as it is."""
    doc = None
    if not delete_existing and os.path.exists(path):
        try:
            with open(path, "rb") as f:
                doc = json.loads(f.read().decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            aside = f"{path}.corrupt-{int(time.time())}"
            try:
                os.replace(path, aside)
                LOG.error("autotune: %s is not valid JSON (%s); moved to %s, writing a new file",
                          path, e, aside)
            except OSError as e2:
                LOG.warning("autotune: %s is not valid JSON (%s) and cannot be moved aside (%s); "
                            "overwriting it", path, e, e2)
            doc = None
        if doc is not None and not (isinstance(doc, dict) and doc.get(VERSION) == VERSION_CURRENT
                                    and isinstance(doc.get(ENGINE_OVERRIDES), list)):
            raise BadParamError(f"autotune: {path} is not a version {VERSION_CURRENT} engine-"
                                f"override configuration; appending to it is refused (nothing "
                                f"was written; use delete_all_existing_file_content=True or "
                                f"another file)")
    if doc is None:
        doc = {VERSION: VERSION_CURRENT, ENGINE_OVERRIDES: []}
    entries = [e for e in doc[ENGINE_OVERRIDES] if not (isinstance(e, dict) and _same_key(e, entry))]
    entries.append(entry)
    doc[ENGINE_OVERRIDES] = entries
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".autotune-", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ------------------------------------------------------------------------------ the mixin
class _Candidate:
    __slots__ = ("eid", "knobs", "index", "temp", "result")

    def __init__(self, eid, knobs, index=None):
        self.eid, self.knobs, self.index, self.temp = eid, dict(knobs), index, None
        self.result = None


class AutotuneMixin:
    """Mixin of :class:`Graph`."""

    def autotune(self, variant_pack: dict, workspace=None, *, iterations: int = 3, warmup: int = 1,
                 write_cache: bool = True, config: AutotuneConfig | None = None,
                 storage: AutotuneStorageConfig | None = None, sweeps=None, results=None):
        """Benchmark the engine configurations on these buffers and make the fastest the active
        plan (module docstring).  Without ``config``: FIXED_AVERAGE of ``iterations`` runs after
        ``warmup``.  Returns ``[(engine_id, min_ms)]`` of the succeeded candidates, fastest
        first; ``self.autotune_results`` (and ``results``, a list, when given) holds one
        :class:`AutotuneResult` per candidate; ``self.autotune_outcome`` the cache write outcome
        (None when not written)."""
        if config is None:
            if iterations < 1 or warmup < 0:
                raise BadParamError("autotune: iterations must be >= 1 and warmup >= 0")
            config = AutotuneConfig(strategy=AutotuneStrategy.FIXED_AVERAGE,
                                    timed_iterations=iterations, warmup_iterations=warmup)
        config.validate()
        if not variant_pack:
            raise BadParamError("autotune: the variant pack is empty")
        self._need_plan()
        cands = self._autotune_candidates(config, sweeps)
        if not cands:
            raise GraphNotSupportedError("autotune: no candidate is left after engine_id_filter")
        LOG.info("autotune: %d candidate(s), mode %s, strategy %s", len(cands),
                 config.mode.value, config.strategy.value)
        kinds = {_buffers.memory_kind(v) for v in variant_pack.values()} - {None}
        base = len(self._plans)
        saved = (self._active, self.select_engine_by_memory, self._explicit_engine)
        self.select_engine_by_memory = False
        out = []
        try:
            for c in cands:
                r = c.result = AutotuneResult(c.eid, self._engine_name_of(c.eid) or "",
                                              dict(c.knobs), mode_used=config.mode,
                                              strategy_used=config.strategy)
                mk = engine_memory_kind(r.engine_name)
                if kinds and mk is not None and mk not in kinds:
                    r.error_message = f"the engine cannot reach the buffers' {'/'.join(kinds)} memory"
                    continue
                try:
                    if config.mode is TuneMode.EXHAUSTIVE:
                        self._prime(c, variant_pack, workspace, config)
                    i = self._candidate_plan(c)
                    self._activate(i)
                    r.workspace_size = int(self._ws_sizes.get(i, 0) or 0)
                    for _ in range(config.warmup_iterations):
                        self.execute(variant_pack, workspace)
                    times, conv = measure(config, lambda: self._timed_execute(variant_pack,
                                                                              workspace))
                except HipdnnError as e:
                    r.error_message = e.message
                    LOG.warning("autotune: %s failed: %s", r.engine_name or c.eid, r.error_message)
                    continue
                r.min_time_ms, r.avg_time_ms = min(times), statistics.fmean(times)
                r.stddev_ms = statistics.pstdev(times) if len(times) > 1 else 0.0
                r.iterations_run, r.converged, r.succeeded = len(times), conv, True
                LOG.info("autotune: %s %s: min %.4f ms, avg %.4f ms, %d run(s)%s", r.engine_name,
                         r.knob_settings or "", r.min_time_ms, r.avg_time_ms, r.iterations_run,
                         "" if conv else " (not converged)")
                out.append(c)
        except BaseException:
            self._drop_temp_plans(base, keep=None)
            self.select_engine_by_memory, self._explicit_engine = saved[1], saved[2]
            if saved[0] is not None:
                self._activate(saved[0])
            raise
        self.select_engine_by_memory, self._explicit_engine = saved[1], saved[2]
        ok = [c.result for c in out]
        ranked = sorted(ok, key=lambda r: r.min_time_ms)
        if config.ranking_fn is not None:
            trial = list(ok)
            try:
                config.ranking_fn(trial)
                if sorted(map(id, trial)) == sorted(map(id, ok)):
                    ranked = trial
            except Exception as e:  # noqa: BLE001 - the default ranking stands
                LOG.warning("autotune: ranking_fn failed (%s); ranked by minimum time", e)
        for k, r in enumerate(ranked):
            r.rank = k
        all_results = ranked + [c.result for c in cands if not c.result.succeeded]
        self.autotune_results = all_results
        if results is not None:
            results[:] = all_results
        if not ranked:
            self._drop_temp_plans(base, keep=None)
            if saved[0] is not None:
                self._activate(saved[0])
            raise GraphNotSupportedError("autotune: no engine configuration could run these "
                                         "buffers (" + "; ".join(
                                             f"{r.engine_name or r.engine_id}: {r.error_message}"
                                             for r in all_results) + ")")
        win = next(c for c in cands if c.result is ranked[0])
        self._activate(self._drop_temp_plans(base, keep=win))
        LOG.info("autotune: %d succeeded, %d failed; winner %s %s", len(ranked),
                 len(all_results) - len(ranked), ranked[0].engine_name, ranked[0].knob_settings)
        self.autotune_outcome = None
        if write_cache:
            order = list(dict.fromkeys(r.engine_id for r in ranked))
            self.autotune_outcome = self._write_ranking(order)
        if storage is not None and storage.file_path:
            self._write_autotune_file(storage, ranked[0], config)
        return [(r.engine_id, r.min_time_ms) for r in ranked]

    # ------------------------------------------------------------------ candidates and plans
    def _autotune_candidates(self, config, sweeps):
        flt = {int(e) for e in (config.engine_id_filter or ())}
        cands, seen = [], set()

        def add(c):
            key = (c.eid, tuple(sorted(c.knobs.items())))
            if key in seen or (flt and c.eid not in flt):
                return
            seen.add(key)
            cands.append(c)
        for i, eid in enumerate(self._engine_ids):
            if eid is not None:
                add(_Candidate(eid, {}, i))
        for spec in sweeps or ():
            if spec.engine_id not in self._engine_ids and flt and spec.engine_id not in flt:
                continue
            for knobs in sweep_variants(spec):
                if not knobs and spec.engine_id in self._engine_ids:
                    add(_Candidate(spec.engine_id, {}, self._engine_ids.index(spec.engine_id)))
                else:
                    add(_Candidate(spec.engine_id, knobs))
        return cands

    def _candidate_plan(self, c) -> int:
        """The index of the candidate's plan in the graph's plan list (a knob variant is
        appended; :meth:`_drop_temp_plans` removes it again unless it wins)."""
        if c.index is not None:
            if not self._plan_ok[c.index]:
                self._build_plan(c.index)
            return c.index
        a = self.api
        cfg, keep = self._knob_config(c.eid, c.knobs)
        plan = a.create(D.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
        self._cfgs.append(cfg)
        self._plans.append(plan)
        self._engine_ids.append(c.eid)
        self._plan_ok.append(False)
        c.index = len(self._plans) - 1
        self.__dict__.setdefault("_temp_knob_descs", {})[c.index] = keep
        self._build_plan(c.index)
        return c.index

    def _drop_temp_plans(self, base, keep):
        """Destroy the knob-variant plans appended after index ``base`` except ``keep``'s, which
        moves to index ``base``; returns the winner's index."""
        a = self.api
        self._xcache_clear()
        win = keep.index if keep is not None else None
        idx = win
        kept = None
        descs = self.__dict__.setdefault("_temp_knob_descs", {})
        for i in range(len(self._plans) - 1, base - 1, -1):
            entry = (self._cfgs.pop(i), self._plans.pop(i), self._engine_ids.pop(i),
                     self._plan_ok.pop(i), self._ws_sizes.pop(i, None))
            owned = descs.pop(i, [])
            if i == win:
                kept = entry
                self._knob_descs.extend(owned)   # destroyed with the graph's plans
                continue
            a.destroy(entry[1])
            a.destroy(entry[0])
            for d in owned:
                a.destroy(d)
        for k in [m for m, v in self._mem_plan.items() if v is not None and v >= base]:
            del self._mem_plan[k]
        if kept is not None:
            cfg, plan, eid, ok, ws = kept
            self._cfgs.append(cfg)
            self._plans.append(plan)
            self._engine_ids.append(eid)
            self._plan_ok.append(ok)
            idx = len(self._plans) - 1
            if ws is not None:
                self._ws_sizes[idx] = ws
        return idx

    def _prime(self, c, variant_pack, workspace, config):
        """EXHAUSTIVE: a temporary plan with the candidate's knobs plus global.benchmarking = 1,
        executed once and destroyed."""
        r = c.result
        r.supports_exhaustive = any(k.id == BENCHMARKING_KNOB
                                    for k in self.get_knobs_for_engine(c.eid))
        if not r.supports_exhaustive:
            r.exhaustive_not_run_reason = "the engine has no global.benchmarking knob"
            return
        base = len(self._plans)
        temp = _Candidate(c.eid, {**c.knobs, BENCHMARKING_KNOB: 1})
        try:
            i = self._candidate_plan(temp)
            self._activate(i)
            self.execute(variant_pack, workspace)
            r.ran_exhaustive = True
        except HipdnnError as e:
            msg = e.message
            if config.priming_failure_policy is PrimingFailurePolicy.ABORT_ON_PRIMING_FAILURE:
                raise BadParamError(f"autotune: priming {r.engine_name or c.eid} failed: {msg}") \
                    from None
            r.exhaustive_not_run_reason = f"priming failed: {msg}"
        finally:
            self._drop_temp_plans(base, keep=None)

    # ------------------------------------------------------------------ the config file
    def _write_autotune_file(self, storage, r, config):
        raw = self._two_call_bytes(self.api.lib.hipdnnBackendGetSerializedBinaryGraph_ext,
                                   self._gdesc)
        gdict = graph_fb.read(raw, "Graph")
        keys = autotune_config.match_keys(gdict)
        if not keys:
            LOG.warning("autotune: the graph has no operation with a configuration match key; "
                        "%s is not written", storage.file_path)
            return
        meta = {"rank": 0, "min_time_ms": r.min_time_ms, "avg_time_ms": r.avg_time_ms,
                "stddev_ms": r.stddev_ms, "workspace_size": r.workspace_size,
                "mode": config.mode.value, "supports_exhaustive": r.supports_exhaustive,
                "ran_exhaustive": r.ran_exhaustive, "strategy": config.strategy.value,
                "iterations_run": r.iterations_run,
                "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"),
                "graph_key": autotune_config.graph_key(gdict)}
        if config.mode is TuneMode.EXHAUSTIVE and not r.ran_exhaustive:
            meta["exhaustive_not_run_reason"] = r.exhaustive_not_run_reason
        if config.strategy is AutotuneStrategy.RUN_UNTIL_STABLE:
            meta["converged"] = r.converged
        if r.knob_settings:
            meta["knobs"] = [_knob_json(k, v) for k, v in r.knob_settings.items()]
        entry = keys[0].to_json()
        entry["engine_name"] = r.engine_name or "0x%016X" % (r.engine_id & ((1 << 64) - 1))
        entry = {k: entry[k] for k in ("op", "engine_name", "criteria", "tensors") if k in entry}
        entry["autotune_metadata"] = meta
        write_config_entry(storage.file_path, entry, storage.delete_all_existing_file_content)
        LOG.info("autotune: winner written to %s", storage.file_path)
