"""Engine knobs in the plugin SDK: knob declarations, hipDNN's global knobs, the knob settings of an
engine config checked against an engine's knobs, and the plan that benchmarks its variants.

* :class:`KnobSpec` declares one knob (id, int / float / string, default, constraints); an
  engine lists its knobs in ``EngineBase.knob_specs`` and the SDK writes them into EngineDetails
  (the backend's ENGINE_KNOB_INFO).
* The global knobs are those of hipDNN's plugin SDK (``GlobalKnobDefines.hpp``):
  ``global.benchmarking`` (int 0/1: benchmark the engine's variants and keep the fastest) and
  ``global.workspace_size_limit`` (int bytes: the most workspace a plan may ask for), plus the
  process-wide override ``HIPDNN_FORCE_BENCHMARKING`` (1/true/on/yes/enable(d) or
  0/false/off/no/disable(d); anything else is ignored with a warning).  :data:`GLOBAL_KNOBS` holds
  their declarations for an engine that honours them.
* :func:`resolve` turns the knob settings of an EngineConfig into values: every declared knob
  gets its setting or its default; a setting for a knob the engine does not declare is ignored
  (logged), as hipDNN does; a setting of the wrong value type or outside the knob's constraints is
  a :class:`PluginError` when ``strict`` (the SDK checks at plan build, so CreateExecutionContext
  fails and the backend answers HIPDNN_STATUS_PLUGIN_ERROR) and falls back to the default
  otherwise (the workspace query, an estimate, never fails on a knob).
* :class:`BenchmarkingPlan` is what ``global.benchmarking = 1`` makes of a plan with variants: its
  first execute runs every variant once, timed, keeps the fastest and logs the times; later
  executes run the fastest alone.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from .errors import BAD_PARAM, INVALID_VALUE, PluginError
from ..schemas._generated import (FloatConstraint, FloatValue, IntConstraint, IntValue, Knob, StringConstraint, StringValue)

BENCHMARKING_KNOB_NAME = "global.benchmarking"
WORKSPACE_SIZE_LIMIT_KNOB_NAME = "global.workspace_size_limit"
FORCE_BENCHMARKING_ENV_NAME = "HIPDNN_FORCE_BENCHMARKING"
INT64_MAX = (1 << 63) - 1

INT, FLOAT, STRING = "int", "float", "string"
_TAG = {1: INT, 2: FLOAT, 3: STRING}                      # KnobValue union tags
_UNION = {"IntValue": INT, "FloatValue": FLOAT, "StringValue": STRING}
_TRUE = frozenset({"1", "true", "on", "yes", "enable", "enabled"})
_FALSE = frozenset({"0", "false", "off", "no", "disable", "disabled"})

SEV_INFO, SEV_WARN = 0, 1


@dataclass(frozen=True)
class KnobSpec:
    """One knob an engine offers (knob_value.fbs ``Knob``)."""
    knob_id: str
    kind: str                        # INT, FLOAT or STRING
    default: object
    description: str = ""
    minimum: object = None
    maximum: object = None
    step: int | None = None          # int knobs
    valid: tuple = ()                # int or string knobs: the only values allowed
    max_length: int | None = None    # string knobs
    deprecated: bool = False

    def build(self, b):
        """The ``Knob`` table of this spec in FlatBuffer builder ``b``; returns its offset."""
        if self.kind == INT:
            IntValue.Start(b)
            IntValue.AddValue(b, int(self.default))
            dv, tag = IntValue.End(b), 1
        elif self.kind == FLOAT:
            FloatValue.Start(b)
            FloatValue.AddValue(b, float(self.default))
            dv, tag = FloatValue.End(b), 2
        else:
            s = b.CreateString(str(self.default))
            StringValue.Start(b)
            StringValue.AddValue(b, s)
            dv, tag = StringValue.End(b), 3
        con = None
        if self.kind == INT and (self.minimum is not None or self.valid or self.step):
            vv = None
            if self.valid:
                IntConstraint.StartValidValuesVector(b, len(self.valid))
                for v in reversed(self.valid):
                    b.PrependInt64(int(v))
                vv = b.EndVector()
            IntConstraint.Start(b)
            if self.minimum is not None:
                IntConstraint.AddMinValue(b, int(self.minimum))
                IntConstraint.AddMaxValue(b, int(self.maximum))
            IntConstraint.AddStep(b, int(self.step or 1))
            if vv is not None:
                IntConstraint.AddValidValues(b, vv)
            con = IntConstraint.End(b)
        elif self.kind == FLOAT and self.minimum is not None:
            FloatConstraint.Start(b)
            FloatConstraint.AddMinValue(b, float(self.minimum))
            FloatConstraint.AddMaxValue(b, float(self.maximum))
            con = FloatConstraint.End(b)
        elif self.kind == STRING and (self.valid or self.max_length is not None):
            vv = None
            if self.valid:
                offs = [b.CreateString(v) for v in self.valid]
                StringConstraint.StartValidValuesVector(b, len(offs))
                for o in reversed(offs):
                    b.PrependUOffsetTRelative(o)
                vv = b.EndVector()
            StringConstraint.Start(b)
            if self.max_length is not None:
                StringConstraint.AddMaxLength(b, int(self.max_length))
            if vv is not None:
                StringConstraint.AddValidValues(b, vv)
            con = StringConstraint.End(b)
        kid, desc = b.CreateString(self.knob_id), b.CreateString(self.description)
        Knob.Start(b)
        Knob.AddKnobId(b, kid)
        Knob.AddDescription(b, desc)
        Knob.AddDefaultValueType(b, tag)
        Knob.AddDefaultValue(b, dv)
        if con is not None:
            Knob.AddConstraintType(b, tag)
            Knob.AddConstraint(b, con)
        if self.deprecated:
            Knob.AddDeprecated(b, True)
        return Knob.End(b)

    def problem(self, kind: str, value) -> str | None:
        """Why ``value`` (of value type ``kind``) is not a valid setting of this knob (None: it is)."""
        if kind != self.kind:
            return f"knob {self.knob_id} takes a {self.kind} value, not a {kind} value"
        if self.valid and value not in self.valid:
            return f"knob {self.knob_id}: {value!r} is not one of {list(self.valid)}"
        if self.minimum is not None and not (self.minimum <= value <= self.maximum):
            return (f"knob {self.knob_id}: {value!r} is outside [{self.minimum}, "
                    f"{self.maximum}]")
        if self.kind == INT and self.step and self.step > 1 and self.minimum is not None \
                and (value - self.minimum) % self.step:
            return f"knob {self.knob_id}: {value} is not {self.minimum} + a multiple of {self.step}"
        if self.kind == STRING and self.max_length is not None and len(value) > self.max_length:
            return f"knob {self.knob_id}: the value is longer than {self.max_length} characters"
        return None


BENCHMARKING_KNOB = KnobSpec(
    BENCHMARKING_KNOB_NAME, INT, 0,
    "1: the plan's first execute runs each variant of the plan once, timed, and keeps the "
    "fastest (the times are logged); 0 (default): the engine's own choice. "
    "HIPDNN_FORCE_BENCHMARKING overrides it for the process.", 0, 1, 1)
WORKSPACE_SIZE_LIMIT_KNOB = KnobSpec(
    WORKSPACE_SIZE_LIMIT_KNOB_NAME, INT, INT64_MAX,
    "The most workspace, in bytes, a plan of this engine may ask for: a plan that needs more "
    "is refused at plan build (default: no limit).", 0, INT64_MAX, 1)
GLOBAL_KNOBS = (BENCHMARKING_KNOB, WORKSPACE_SIZE_LIMIT_KNOB)


def benchmarking_override_from_env(log=None) -> bool | None:
    """HIPDNN_FORCE_BENCHMARKING, read at each call: True / False, or None when unset, empty or
    not recognised (then logged at WARN through ``log(severity, message)``)."""
    raw = os.environ.get(FORCE_BENCHMARKING_ENV_NAME, "")
    v = raw.strip().lower()
    if not raw:
        return None
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    if log is not None:
        log(SEV_WARN, f"ignoring unrecognized value for {FORCE_BENCHMARKING_ENV_NAME}: '{raw}'")
    return None


def settings(config) -> dict:
    """{knob id: (value type, value)} of an engine config (``parse_engine_config``'s result, or
    None for no config)."""
    out = {}
    for kid, v in (getattr(config, "knobs", None) or {}).items():
        kind, val = None, v
        if isinstance(v, dict):
            kind = _UNION.get(v.get("type"))
            val = v.get("value")
            while isinstance(val, dict):
                val = val.get("value")
        if kind is None:   # a plain value (a config built by hand): its Python type
            kind = (INT if isinstance(val, int) else FLOAT if isinstance(val, float)
                    else STRING if isinstance(val, str) else None)
        if kind == FLOAT and val is not None:
            val = float(val)
        if kind == STRING and val is None:
            val = ""
        out[kid] = (kind, val)
    return out


def resolve(config, specs, *, strict: bool = True, log=None, engine: str = "") -> dict:
    """{knob id: value} for every knob in ``specs``: the config's setting, else the default.
    Unknown ids are ignored (logged at INFO); a wrong value type or an invalid value raises
    :class:`PluginError` when ``strict`` (BAD_PARAM / INVALID_VALUE), else the default stands.
    ``global.benchmarking`` follows HIPDNN_FORCE_BENCHMARKING when that is set."""
    by_id = {s.knob_id: s for s in specs}
    out = {s.knob_id: s.default for s in specs}
    who = f"{engine}: " if engine else ""
    for kid, (kind, value) in settings(config).items():
        spec = by_id.get(kid)
        if spec is None:
            if log is not None:
                log(SEV_INFO, f"{who}knob {kid} is not a knob of this engine; ignored")
            continue
        why = spec.problem(kind, value)
        if why is not None:
            if strict:
                raise PluginError(BAD_PARAM if kind != spec.kind else INVALID_VALUE, who + why)
            continue
        if spec.deprecated and log is not None:
            log(SEV_WARN, f"{who}knob {kid} is deprecated")
        out[kid] = value
    if BENCHMARKING_KNOB_NAME in out:
        forced = benchmarking_override_from_env(log)
        if forced is not None:
            out[BENCHMARKING_KNOB_NAME] = int(forced)
    return out


def workspace_limit_problem(engine: str, needed: int, limit) -> str | None:
    """The message of a plan that needs more workspace than ``global.workspace_size_limit``."""
    if limit is None or needed <= int(limit):
        return None
    return (f"{engine}: the plan needs {needed} bytes of workspace, more than "
            f"{WORKSPACE_SIZE_LIMIT_KNOB_NAME} = {int(limit)}")


@dataclass
class BenchmarkingPlan:
    """A plan with variants, benchmarked on its first execute (``global.benchmarking = 1``).

    ``variants``: [(label, PlanBase)], all computing the same outputs.  ``sync(handle)`` waits for
    work queued on the handle's stream (device engines), so the host clock measures it.  Like
    hipDNN's autotuning, benchmarking assumes the graph's execute can be repeated on the same
    buffers (no output is also an input).  ``timings`` holds [(label, ms)] after the first
    execute; ``chosen`` the label kept."""
    engine: str
    variants: list
    sync: object = None
    clock: object = time.perf_counter
    timings: list = field(default_factory=list)
    chosen: str | None = None

    def __post_init__(self):
        if not self.variants:
            raise ValueError("BenchmarkingPlan needs at least one variant")
        self._plan = None
        self._lock = threading.Lock()

    # PlanBase's interface
    def get_workspace_size(self, handle) -> int:
        return max(int(p.get_workspace_size(handle)) for _, p in self.variants)

    def release(self) -> None:
        for _, p in self.variants:
            rel = getattr(p, "release", None)
            if rel is not None:
                rel()

    def serialize_plan(self):
        return None

    def execute(self, handle, buffers, workspace) -> None:
        plan = self._plan
        if plan is not None:
            plan.execute(handle, buffers, workspace)
            return
        with self._lock:
            if self._plan is None:
                self._benchmark(handle, buffers, workspace)

    def _benchmark(self, handle, buffers, workspace):
        times = []
        for label, p in self.variants:
            if self.sync is not None:
                self.sync(handle)
            t0 = self.clock()
            p.execute(handle, buffers, workspace)
            if self.sync is not None:
                self.sync(handle)
            times.append((label, (self.clock() - t0) * 1e3))
        best = min(range(len(times)), key=lambda i: times[i][1])
        self.timings, self.chosen = times, times[best][0]
        self._plan = self.variants[best][1]
        plugin = getattr(handle, "plugin", None)
        if plugin is not None and hasattr(plugin, "log"):
            plugin.log(SEV_INFO, f"benchmarking: {self.engine}: " +
                       ", ".join(f"{lb} {ms:.3f} ms" for lb, ms in times) +
                       f"; keeping {self.chosen}")
