"""Environment variables set by a C program after the library started (read from the C
environment when hipDNN consults them), the loaded-plugin list for a default plugin directory, and
hipdnnPluginSetLogLevel at load and on every level change (.so and Python plugins)."""
from __future__ import annotations

import os
import shutil
import textwrap

import pytest

from cabi_testlib import run
from hipdnn_cabi.backend.plugins.loader import fnv1a64

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = {"HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS": "1", "HIPDNN_LOG_LEVEL": "", "HIPDNN_LOG_FILE": ""}

PY_LEVEL_PLUGIN = textwrap.dedent('''
    """A Python plugin whose log-level hook logs what it got (like hipDNN's test plugin)."""
    from hipdnn_cabi.plugin_sdk import EngineBase, EnginePluginBase, PlanBuilderBase


    class _Never(PlanBuilderBase):
        def is_applicable(self, handle, graph):
            return False

        def get_max_workspace_size(self, handle, graph, config):
            return 0

        def build_plan(self, handle, graph, config):
            raise NotImplementedError


    class LevelEngine(EngineBase):
        name = "PY_LEVEL_ENGINE"
        plan_builder = _Never()


    class LevelPlugin(EnginePluginBase):
        name = "py_lvl"
        version = "0.0.1"
        api_version = "1.0.0"
        engines = [LevelEngine]

        @property
        def log_level(self):
            return self._lvl

        @log_level.setter
        def log_level(self, v):
            self._lvl = v
            if v != 4:
                self.log(v, "py_lvl: pluginSetLogLevel level=%d" % v)


    hipdnn_plugin = LevelPlugin
''')


@pytest.fixture(scope="module")
def prog(c_build):
    return c_build(os.path.join(HERE, "env_at_use.c"))


def _lines(out, head):
    return [ln.split()[1:] for ln in out.splitlines() if ln.startswith(head + " ")]


def test_plugin_dir_set_after_start_and_default_dir_listing(prog, mini, tmp_path):
    """HIPDNN_PLUGIN_DIR set with setenv after the first call is honoured at each load, and the
    default-path listing is exactly hipDNN's for the directory: every regular *.so directly
    inside (sorted, canonical, a symlink counted once), nothing else."""
    a = tmp_path / "a"
    a.mkdir()
    a1, a2 = mini("ea1"), mini("ea2")
    shutil.copy(a1, a / "libmini_ea1.so")
    shutil.copy(a2, a / "libmini_ea2.so")
    shutil.copy(mini("enh", src="null_handle.c"), a / "libmini_enh.so")  # loads; no plugin handle
    shutil.copy(mini("ebad", 'API_VERSION="2.0.0"'), a / "libmini_ebad.so")  # refused: not listed
    os.symlink(a / "libmini_ea1.so", a / "liblink.so")        # same file: loaded/listed once
    shutil.copy(a1, a / "libmini_ea1.so.1")                    # extension .1: not a candidate
    (a / "notes.txt").write_text("not a plugin")
    (a / "dir.so").mkdir()                                     # a directory named *.so
    (a / "sub").mkdir()
    shutil.copy(mini("ea3"), a / "sub" / "libmini_ea3.so")     # not recursive
    b = tmp_path / "b"
    b.mkdir()
    shutil.copy(mini("eb1"), b / "libmini_eb1.so")
    r = run([prog, "dirs", str(a), str(b)], env=ENV)
    out = r.stdout
    want_a = sorted(os.path.realpath(a / n) for n in ("libmini_ea1.so", "libmini_ea2.so",
                                                        "libmini_enh.so"))
    want_b = [os.path.realpath(b / "libmini_eb1.so")]
    blocks = out.split("paths ")[1:]
    assert len(blocks) == 2, out
    got = {}
    for blk in blocks:
        lines = blk.strip().splitlines()
        label, n = lines[0].split()
        got[label] = (int(n), [ln[len("path "):] for ln in lines[1:]])
    assert got["A"] == (3, want_a), out
    assert got["B"] == (1, want_b), out


def test_heuristic_and_graph_log_variables_set_after_start(prog, mini, tmp_path):
    d = os.path.dirname(mini("p", dirname="heur"))
    mini("q", dirname="heur")
    gdir = tmp_path / "graphs"
    r = run([prog, "heur", d, str(gdir)], env=ENV)
    heur = {x[0]: x[1:] for x in _lines(r.stdout, "heur")}
    p, q = str(fnv1a64("MINI_p")), str(fnv1a64("MINI_q"))
    assert heur["plain"] == ["0", "2", p, q], r.stdout
    assert heur["fallback_q"] == ["0", "1", q], r.stdout          # HIPDNN_HEUR_FALLBACK_ENGINE_ORDER
    assert heur["fallback_qp"] == ["0", "2", q, p], r.stdout
    assert heur["policy_config"][0] != "0", r.stdout               # HIPDNN_HEUR_POLICY_ORDER: Config declines
    assert heur["plain_again"] == ["0", "2", p, q], r.stdout
    files = sorted(os.listdir(gdir)) if gdir.exists() else []      # HIPDNN_LOG_GRAPH_DIR: one graph only
    assert len(files) == 1 and files[0].startswith("graph_") and files[0].endswith(".json"), files


def test_log_variables_read_at_logger_initialisation(prog, tmp_path):
    logf = tmp_path / "log.txt"
    env = dict(ENV)
    del env["HIPDNN_LOG_LEVEL"], env["HIPDNN_LOG_FILE"]
    r = run([prog, "log", str(logf)], env={**env, "HIPDNN_PLUGIN_DIR": str(tmp_path)})
    assert "level 0" in r.stdout                                   # INFO, not changed by the later setenv
    text = logf.read_text()
    assert "API success: [hipdnnCreate]" in text and "API success: [hipdnnDestroy]" in text


def test_log_level_handed_to_plugins_at_load_and_on_change(prog, mini, tmp_path):
    d = tmp_path / "lv"
    d.mkdir()
    shutil.copy(mini("lh", "LOG_HOOKS"), d / "libmini_lh.so")
    shutil.copy(mini("lf", "LOG_HOOKS", "FAIL_SET_LOG_LEVEL"), d / "libmini_lf.so")
    (d / "py_lvl.py").write_text(PY_LEVEL_PLUGIN)
    r = run([prog, "levels", str(d)], env=ENV)
    assert r.stdout.strip().endswith("ok"), r.stdout + r.stderr
    msgs = {}
    for phase, sev, *words in _lines(r.stdout, "msg"):
        msgs.setdefault(phase, []).append((int(sev), " ".join(words)))

    def hook(phase):
        return [(s, m) for s, m in msgs.get(phase, []) if "pluginSetLogLevel" in m
                or "Failed to set log level" in m]

    refused = ("Failed to set log level {} on plugin 'mini_lf'. Status: "
               "HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3), Error: mini: log level refused")
    assert msgs.get("load_off", []) == []                          # OFF: the plugins stay quiet
    assert sorted(hook("load_info")) == sorted([
        (0, "mini_lh: pluginSetLogLevel level=0"), (0, "py_lvl: pluginSetLogLevel level=0"),
        (1, refused.format(0))]), msgs
    assert sorted(hook("set_warn")) == sorted([
        (1, "mini_lh: pluginSetLogLevel level=1"), (1, "py_lvl: pluginSetLogLevel level=1"),
        (1, refused.format(1))]), msgs
    assert sorted(hook("set_info_again")) == sorted([
        (0, "mini_lh: pluginSetLogLevel level=0"), (0, "py_lvl: pluginSetLogLevel level=0"),
        (1, refused.format(0))]), msgs
    assert hook("set_off") == [] and hook("done") == []
    # the plugin whose hook fails still loads and the load logs use hipDNN's wording
    load = [m for _, m in msgs["load_info"]]
    lf = os.path.realpath(d / "libmini_lf.so")
    assert f"Attempting to load plugin from [{lf}]" in load
    assert f"Plugin loaded successfully: {lf}" in load
    assert "Plugin info: name=mini_lf, version=9.9.9, type=HIPDNN_PLUGIN_TYPE_ENGINE(1)" in load
