"""Check registry, the child-process runner and the per-run suite state.

Every check talks to the plugin only through a *child process*: the C driver (``driver.c``,
compiled once per run with the system C compiler against the package's ``include/``).  A crash,
an abort or a hang (timeout) of the child is a failed check that names the signal, the call that
was in flight (the driver prints a ``pre`` record before each call) and the last output.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..backend.plugins.loader import fnv1a64, parse_version
from .corpus import build_corpus, device_properties_blob, load_user_graph, write_case

HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------------------- registry
class Fail(Exception):
    """The check failed; the message names the function, arguments, status and last error."""


class Skip(Exception):
    """The check does not apply to this plugin (e.g. an optional symbol is not exported)."""


@dataclass
class Check:
    id: str
    func: Callable
    mustpass: bool = True
    doc: str = ""
    slow: bool = False

    @property
    def group(self) -> str:
        return self.id.split(".")[1]


PLUGIN_CHECKS: dict = {}
BACKEND_CHECKS: dict = {}
HEURISTIC_CHECKS: dict = {}


def check(cid: str, *, mustpass: bool = True, slow: bool = False, backend: bool = False,
          heuristic: bool = False):
    def deco(fn):
        reg = BACKEND_CHECKS if backend else HEURISTIC_CHECKS if heuristic else PLUGIN_CHECKS
        assert cid not in reg, cid
        reg[cid] = Check(cid, fn, mustpass, (fn.__doc__ or "").strip().split("\n")[0], slow)
        return fn
    return deco


@dataclass
class Result:
    id: str
    verdict: str            # pass | fail | skip | xfail | xpass
    message: str = ""
    mustpass: bool = True
    seconds: float = 0.0

    def as_dict(self):
        return {"id": self.id, "verdict": self.verdict, "message": self.message,
                "mustpass": self.mustpass, "seconds": round(self.seconds, 3)}


# ---------------------------------------------------------------------------------- selection
def keyword_matcher(expr: Optional[str]):
    """pytest-like ``-k``: substrings combined with and/or/not and parentheses."""
    if not expr:
        return lambda cid: True
    toks = re.findall(r"\(|\)|[^\s()]+", expr)
    code = []
    for t in toks:
        if t in ("and", "or", "not", "(", ")"):
            code.append(t)
        else:
            code.append(f"({t!r} in cid)")
    src = " ".join(code)
    compile(src, "<-k>", "eval")
    return lambda cid: bool(eval(src, {"__builtins__": {}}, {"cid": cid}))


def read_xfail_file(path: Optional[str]) -> list:
    """Lines of check ids or id substrings; ``#`` starts a comment."""
    if not path:
        return []
    out = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line)
    return out


# ---------------------------------------------------------------------------------- driver build
def default_backend() -> str:
    """This package's libhipdnn_backend.so."""
    return os.path.join(os.path.dirname(HERE), "lib", "libhipdnn_backend.so")


def include_dir() -> str:
    for cand in (os.path.join(os.path.dirname(HERE), "include"),               # installed wheel
                 os.path.join(os.path.dirname(os.path.dirname(HERE)), "include")):  # checkout
        if os.path.isfile(os.path.join(cand, "hipdnn_plugin_sdk", "EnginePluginApi.h")):
            return cand
    raise RuntimeError("hipDNN headers (include/hipdnn_plugin_sdk) not found next to the package")


def build_driver(src_name: str, outdir: str, cc: Optional[str] = None) -> str:
    """Compile ``src_name`` (driver.c / backend_driver.c) once; cached by content hash."""
    src = os.path.join(HERE, src_name)
    inc = include_dir()
    h = hashlib.sha256()
    h.update(open(src, "rb").read())
    h.update(open(os.path.join(HERE, "driver_common.h"), "rb").read())
    for root, _, files in sorted(os.walk(inc)):
        for fn in sorted(files):
            h.update(fn.encode())
            h.update(open(os.path.join(root, fn), "rb").read())
    exe = os.path.join(outdir, f"{os.path.splitext(src_name)[0]}_{h.hexdigest()[:12]}")
    if os.path.exists(exe):
        return exe
    cc = cc or os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise RuntimeError("no C compiler found (set CC)")
    cmd = [cc, "-std=gnu11", "-O1", "-g", "-Wall", "-DHIPDNN_CABI_NO_HIP_HEADERS", "-I", inc,
           src, "-o", exe + ".tmp", "-ldl", "-pthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"compiling the conformance driver failed: {' '.join(cmd)}\n{r.stderr}")
    os.replace(exe + ".tmp", exe)
    return exe


# ---------------------------------------------------------------------------------- child runs
@dataclass
class ChildRun:
    argv: list
    returncode: Optional[int]
    timed_out: bool
    stdout: str
    stderr: str
    seconds: float
    records: list = field(default_factory=list)
    subject: str = "plugin"   # what the driver exercises: "plugin" or "backend"

    @property
    def finished(self) -> bool:
        return (not self.timed_out and self.returncode == 0
                and any(r.get("t") == "done" for r in self.records))

    def of(self, t: str, tag: Optional[str] = None) -> list:
        return [r for r in self.records if r.get("t") == t and (tag is None or r.get("tag") == tag)]

    def one(self, t: str, tag: Optional[str] = None):
        rs = self.of(t, tag)
        return rs[0] if rs else None

    def in_flight(self):
        """The last 'pre' record without a matching result: the call that crashed/hung."""
        last = None
        for r in self.records:
            if r.get("t") == "pre":
                last = r
            elif r.get("t") in ("call",) and last is not None and r.get("fn") == last.get("fn"):
                last = None
        return last

    def describe_death(self) -> str:
        missing = self.one("missing")
        if missing:
            if self.subject == "backend":
                return f"required symbol {missing['fn']} is missing from the backend library"
            return f"required symbol {missing['fn']} is not exported by the plugin"
        dl = self.one("dlopen")
        if dl:
            return f"dlopen failed: {dl.get('error')}"
        fatal = self.one("fatal")
        if self.timed_out:
            how = f"timed out after {self.seconds:.1f} s (hang)"
        elif self.returncode is not None and self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            how = f"killed by {name}"
        elif fatal:
            how = fatal.get("msg", "fatal")
            if self.subject == "backend":   # MUST(...) in backend_driver.c: a setup call failed
                how = "setup failed: " + how
            calls = self.of("call")
            if calls:
                c = calls[-1]
                how += f": {c['fn']}({c['args']}) -> status {c['st']}, last error {c.get('err')!r}"
            return how
        else:
            how = f"exited with status {self.returncode} before finishing"
        pre = self.in_flight()
        where = f" during {pre['fn']}({pre['args']})" if pre else ""
        tail = (self.stdout[-400:] + ("\nstderr: " + self.stderr[-400:] if self.stderr.strip() else "")).strip()
        return f"{self.subject} process {how}{where}; last output: {tail}"


def run_child(argv: list, timeout: float, env=None, subject: str = "plugin") -> ChildRun:
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         errors="replace", start_new_session=True, env=env)
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
    run = ChildRun(argv, p.returncode, timed_out, out or "", err or "", time.monotonic() - t0,
                   subject=subject)
    for line in run.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                run.records.append(json.loads(line))
            except ValueError:
                pass
    return run


def fmt_call(rec) -> str:
    err = rec.get("err")
    return (f"{rec['fn']}({rec['args']}) -> status {rec['st']}"
            + (f", last error {err!r}" if rec.get("st") else ""))


# ---------------------------------------------------------------------------------- suite state
@dataclass
class Scale:
    """Iteration counts; the CLI uses the full defaults, the self-tests a reduced set."""
    leak_cycles: int = 10000
    leak_bound_kib: int = 4096
    threads: int = 8
    thread_iters: int = 100
    handles: int = 64
    repeat: int = 1000
    timeout: float = 30.0
    long_timeout: float = 300.0

    @classmethod
    def quick(cls):
        return cls(leak_cycles=2000, threads=4, thread_iters=20, handles=16, repeat=200,
                   timeout=10.0, long_timeout=60.0)


class Suite:
    """Per-run state shared by the checks: the driver, a work dir, memoized child runs."""

    def __init__(self, plugin: str, *, scale: Optional[Scale] = None, workdir: Optional[str] = None,
                 driver: Optional[str] = None, plugin_dir: Optional[str] = None,
                 user_graphs=()):
        self.plugin = os.path.abspath(plugin)
        # backend checks that need an engine load the plugins of this directory (None: they skip)
        self.plugin_dir = os.path.abspath(plugin_dir) if plugin_dir else None
        self.scale = scale or Scale()
        self._own_tmp = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="hipdnn-conform-")
        os.makedirs(self.workdir, exist_ok=True)
        self._driver = driver
        self._memo: dict = {}
        self._locks: dict = {}
        self._lock = threading.Lock()
        self.corpus = build_corpus()
        # the user's own graphs (--graph), before the degenerate ones
        user = [load_user_graph(p) for p in (user_graphs or ())]
        n = next((i for i, g in enumerate(self.corpus) if g.degenerate), len(self.corpus))
        self.corpus[n:n] = user

    def applicable_pairs_or_none(self):
        """pairs(), or None when the plugin could not even be asked."""
        try:
            return self.pairs()
        except Exception:
            return None

    def close(self):
        if self._own_tmp:
            shutil.rmtree(self.workdir, ignore_errors=True)

    @property
    def driver(self) -> str:
        with self._lock:
            if self._driver is None:
                self._driver = build_driver("driver.c", self.workdir)
            return self._driver

    def memo(self, key, fn):
        """Compute once per run (thread-safe: concurrent callers wait for the first)."""
        with self._lock:
            if key in self._memo:
                return self._memo[key]
            lk = self._locks.setdefault(key, threading.Lock())
        with lk:
            with self._lock:
                if key in self._memo:
                    return self._memo[key]
            v = fn()
            with self._lock:
                self._memo[key] = v
            return v

    def child(self, mode: str, case: Optional[str] = None, *args, timeout: Optional[float] = None) -> ChildRun:
        argv = [self.driver, mode, self.plugin, case or "-", *map(str, args)]
        return self.memo(("child", tuple(argv)),
                         lambda: run_child(argv, timeout or self.scale.timeout))

    def finished(self, run: ChildRun) -> ChildRun:
        """The run, or Fail describing how the plugin process died."""
        if not run.finished:
            raise Fail(run.describe_death())
        return run

    # ------------------------------------------------------------------ shared facts
    @property
    def probe(self) -> ChildRun:
        return self.child("probe")

    def symbols(self) -> dict:
        return {r["fn"]: bool(r["found"]) for r in self.probe.of("sym")}

    def has(self, name: str) -> bool:
        return self.symbols().get(name, False)

    def engine_ids(self) -> list:
        run = self.finished(self.probe)
        rec = run.one("ids")
        if rec is None:
            cnt = run.one("count")
            raise Fail("hipdnnEnginePluginGetAllEngineIds(NULL, 0, &num) failed: "
                       + (fmt_call(run.one("call", "count")) if cnt else "not called"))
        return [int(x) for x in rec["ids"]]

    def string(self, tag: str):
        return self.probe.one("string", tag)

    def api_version(self):
        """Parsed (major, minor, patch) or None; (1,0,0) when the symbol is absent."""
        if not self.has("hipdnnPluginGetApiVersion"):
            return (1, 0, 0)
        rec = self.string("api_version")
        if not rec or rec["st1"] != 0 or rec["value"] is None:
            return None
        return parse_version(rec["value"])

    def graph_paths(self) -> list:
        def write():
            out = []
            for g in self.corpus:
                p = os.path.join(self.workdir, f"graph_{g.name}.bin")
                with open(p, "wb") as f:
                    f.write(g.to_bytes())
                out.append(p)
            return out
        return self.memo("graph_paths", write)

    def applicable_run(self) -> ChildRun:
        return self.child("applicable", None, *self.graph_paths())

    def applicable(self) -> dict:
        """{graph name: [ids]} from the max = #engines query (only ids the plugin lists)."""
        run = self.finished(self.applicable_run())
        out = {}
        for r in run.of("applicable"):
            if r["max"] == 0:
                continue
            out[self.corpus[r["graph"]].name] = [int(x) for x in r["ids"]] if r["st"] == 0 else []
        return out

    def pairs(self) -> list:
        """(CorpusGraph, engine id) pairs the plugin claims it can run (known ids only)."""
        known = set(self.engine_ids())
        app = self.applicable()
        out = []
        for g in self.corpus:
            if g.degenerate:
                continue
            for eid in app.get(g.name, []):
                if eid in known:
                    out.append((g, eid))
        return out

    def case(self, g, eid) -> str:
        return self.memo(("case", g.name, eid), lambda: write_case(self.workdir, g, eid))

    def first_case(self, required: bool = True):
        ps = self.pairs()
        if not ps:
            if required:
                raise Skip("the plugin runs none of the corpus graphs "
                           f"({', '.join(g.name for g in self.corpus if not g.degenerate)})")
            return None, None, None
        g, eid = ps[0]
        return g, eid, self.case(g, eid)


# ---------------------------------------------------------------------------------- heuristic plugins
PLUGIN_TYPE_ENGINE, PLUGIN_TYPE_HEURISTIC = 1, 2


def plugin_kind(path: str, workdir: Optional[str] = None, timeout: float = 30.0) -> str:
    """"heuristic" when hipdnnPluginGetType answers HIPDNN_PLUGIN_TYPE_HEURISTIC (asked in a child
    process), else "plugin" (the engine-plugin suite, which also judges a missing or failing
    GetType)."""
    tmp = None
    if workdir is None:
        tmp = workdir = tempfile.mkdtemp(prefix="hipdnn-conform-kind-")
    try:
        drv = build_driver("heuristic_driver.c", workdir)
        run = run_child([drv, "type", os.path.abspath(path)], timeout)
        rec = run.one("type")
        if run.finished and rec and rec["st"] == 0 and rec["value"] == PLUGIN_TYPE_HEURISTIC:
            return "heuristic"
        return "plugin"
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


class HeuristicSuite(Suite):
    """Per-run state of the heuristic-plugin checks (``heuristic_driver.c``)."""

    # candidate engine ids handed to every policy: names of real engines (FNV-1a-64), the CPU
    # reference not first, so an ordering policy has something to move
    CANDIDATE_NAMES = ("MIOPEN_ENGINE", "HIPDNN_CABI_C_SAMPLE_ENGINE", "HIPDNN_CABI_CPU_REFERENCE_ENGINE",
                       "HIPDNN_CABI_HIP_KERNELS_ENGINE")
    UNKNOWN_POLICY = "HipdnnCabiConform::NoSuchPolicy"

    def __init__(self, plugin: str, *, backend_lib: Optional[str] = None, **kw):
        super().__init__(plugin, **kw)
        self.backend_lib = backend_lib

    @property
    def driver(self) -> str:
        with self._lock:
            if self._driver is None:
                self._driver = build_driver("heuristic_driver.c", self.workdir)
            return self._driver

    def hchild(self, mode: str, *args, timeout: Optional[float] = None, env=None) -> ChildRun:
        argv = [self.driver, mode, self.plugin, *map(str, args)]
        return self.memo(("hchild", tuple(argv)),
                         lambda: run_child(argv, timeout or self.scale.timeout, env=env))

    # ------------------------------------------------------------------ shared facts
    @property
    def probe(self) -> ChildRun:
        return self.hchild("probe", self.unknown_policy_id())

    def unknown_policy_id(self) -> int:
        return fnv1a64(self.UNKNOWN_POLICY)

    def policy_ids(self) -> list:
        """The ids of the two-call GetAllPolicyIds (Fail when the plugin cannot list them)."""
        run = self.finished(self.probe)
        rec = run.one("ids")
        if rec is None or rec["st"] != 0:
            c = run.one("call", "ids") or run.one("call", "count")
            raise Skip("the policy ids cannot be listed (see conform.heuristic.policy_ids_two_call)"
                       + (f": {fmt_call(c)}" if c else ""))
        return [int(x) for x in rec["ids"]]

    def policy_names(self) -> dict:
        run = self.finished(self.probe)
        return {int(r["id"]): r["name"] for r in run.of("policy_name") if r["st"] == 0}

    def candidates(self) -> list:
        return [fnv1a64(n) for n in self.CANDIDATE_NAMES]

    def input_files(self) -> dict:
        """{cpu, gpu: DeviceProperties files; graph: the pw_add_f32 Graph file}."""
        def write():
            paths = {}
            for kind in ("cpu", "gpu"):
                p = os.path.join(self.workdir, f"devprops_{kind}.bin")
                with open(p, "wb") as f:
                    f.write(device_properties_blob(gpu=kind == "gpu"))
                paths[kind] = p
            g = next(g for g in self.corpus if g.name == "pw_add_f32")
            gp = os.path.join(self.workdir, "heuristic_graph.bin")
            with open(gp, "wb") as f:
                f.write(g.to_bytes())
            paths["graph"] = gp
            return paths
        return self.memo("heuristic_inputs", write)

    def inputs(self) -> list:
        """DEVPROPS GRAPH CANDS PIDS arguments of the pipeline modes (Skip without policies)."""
        paths = self.input_files()
        pids = self.policy_ids()
        if not pids:
            raise Skip("the plugin lists no policy")
        return [paths["cpu"], paths["graph"], ",".join(map(str, self.candidates())),
                ",".join(map(str, pids))]


# ---------------------------------------------------------------------------------- running
def make_suite(path: str, kind: str, *, scale=None, workdir=None, plugin_dir=None, backend_lib=None):
    """The Suite of one kind ("plugin", "heuristic" or "backend") for ``path``."""
    if kind == "heuristic":
        return HeuristicSuite(path, scale=scale, workdir=workdir, plugin_dir=plugin_dir, backend_lib=backend_lib)
    return Suite(path, scale=scale, workdir=workdir, plugin_dir=plugin_dir)


def run_checks(suite, checks: list, *, xfails=(), jobs: int = 8, on_result=None) -> list:
    """Run checks (list of Check) concurrently; returns Results in the given order."""
    from concurrent.futures import ThreadPoolExecutor

    def one(c: Check) -> Result:
        t0 = time.monotonic()
        try:
            msg = c.func(suite) or ""
            verdict = "pass"
        except Fail as e:
            verdict, msg = "fail", str(e)
        except Skip as e:
            verdict, msg = "skip", str(e)
        except Exception as e:  # a bug in a check or an unreadable answer: a failure, reported
            verdict, msg = "fail", f"{type(e).__name__}: {e}"
        if any(x == c.id or x in c.id for x in xfails):
            verdict = {"fail": "xfail", "pass": "xpass"}.get(verdict, verdict)
        r = Result(c.id, verdict, msg, c.mustpass, time.monotonic() - t0)
        if on_result:
            on_result(r)
        return r

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        return list(ex.map(one, checks))
