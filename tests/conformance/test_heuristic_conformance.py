"""The heuristic-plugin conformance checks (``conform.heuristic.*``): they pass on the heuristic
plugins we ship (the C sample, an exported Python plugin, the configurable mini plugin with every
optional symbol) and fail exactly the expected checks on mini plugin variants with one fault each
(tests/plugins/heuristics/mini_heuristic.c switches).  The host checks run through our backend
with two real engines (the C sample engine plugin and the CPU reference engine)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
INCLUDE = os.path.join(ROOT, "include")
MINI = os.path.join(ROOT, "tests", "plugins", "heuristics", "mini_heuristic.c")
PYREV = os.path.join(ROOT, "tests", "plugins", "heuristics", "pydir", "py_reverse_heuristic.py")
PY = sys.executable
H = "conform.heuristic."

# mini variant -> (compile-time switches, the must-pass checks it fails, and no others)
VARIANTS = {
    "mini_full": (("WITH_HOST", "WITH_TRACE", "WITH_CONFIG", 'SECOND_POLICY="MiniHeuristic::never"'), set()),
    "mini_decline": (("MODE_DECLINE",), set()),
    "mini_wrong_ids": (("MODE_WRONG_IDS",), {"sorted_ids_subset", "host_orders_engines"}),
    "mini_dup_ids": (("MODE_DUP_IDS",), {"sorted_ids_subset", "host_orders_engines"}),
    "mini_empty": (("MODE_EMPTY",), {"sorted_ids_subset", "host_orders_engines"}),
    "mini_fail": (("MODE_FAIL",), {"finalize_applied", "host_orders_engines"}),
    "mini_no_finalize": (("NO_FINALIZE",), {"required_symbols", "host_policies_listed"}),
    "mini_bad_policy_hash": (("BAD_POLICY_HASH",), {"policy_names_hash", "host_policies_listed"}),
    "mini_api_major": (('API_VERSION="1.0.0"',), {"api_version_major", "host_policies_listed"}),
    "mini_crash_on_null_graph": (("CRASH_ON_NULL_GRAPH",), {"null_args_policy_desc"}),
    "mini_null_last_error": (("NULL_LAST_ERROR",), {"last_error_set"}),
    "mini_short_buffer_fails": (("SHORT_BUFFER_FAILS",), {"sorted_ids_prefix"}),
    "mini_config_junk": (("CONFIG_JUNK",), {"engine_config"}),
}
# every mini variant hands out one static handle: the advisory distinctness check says so
MINI_ADVISORY = {H + "handles_distinct"}
# shipped plugin -> checks that may skip on it (optional symbols it does not export)
ALLOWED_SKIPS = {
    "c_sample_heuristic": {H + "finalize_with_host", H + "engine_config"},
    "py_reverse_heuristic": set(),
    "mini_full": set(),
}


def quick(embedded_python=False):
    from hipdnn_cabi.conformance import Scale
    sc = Scale.quick()
    sc.timeout = 20.0 if embedded_python else 8.0
    sc.long_timeout = 60.0   # the host checks start our backend (an embedded interpreter)
    return sc


@pytest.fixture(scope="session")
def c_sample_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("hconf_c_sample")
    subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "engine_plugins", "c_sample"), f"OUT={out}"],
                   check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def engines(c_sample_build, tmp_path_factory):
    """Engine plugins for the host checks: the C sample engine and the CPU reference (a shim)."""
    d = tmp_path_factory.mktemp("hconf_engines")
    os.symlink(c_sample_build / "libhipdnn_c_sample_plugin.so", d / "libhipdnn_c_sample_plugin.so")
    shim = os.path.join(ROOT, "hipdnn_cabi", "lib", "hipdnn_plugins", "engines", "cpu_reference.py")
    if os.path.exists(shim):
        shutil.copy(shim, d / "cpu_reference.py")
    else:
        (d / "cpu_reference.py").write_text("from engine_plugins.cpu_reference import hipdnn_plugin  # noqa: F401\n")
    return str(d)


@pytest.fixture(scope="session")
def mini(tmp_path_factory):
    out = tmp_path_factory.mktemp("hconf_mini")

    def build(name):
        defines = VARIANTS[name][0]
        so = str(out / f"lib{name}.so")
        cmd = ["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-DHIPDNN_CABI_NO_HIP_HEADERS",
               f"-I{INCLUDE}", f'-DHEUR_TAG="{name}"', *[f"-D{x}" for x in defines], MINI, "-o", so]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return so
    return build


@pytest.fixture(scope="session")
def py_heuristic(tmp_path_factory):
    from hipdnn_cabi.plugin_sdk.export import build
    out = tmp_path_factory.mktemp("hconf_py")
    return build(PYREV, str(out / "libpy_reverse_heuristic.so"), tmp_dir=str(out / "build"))


@pytest.fixture(scope="session")
def suites(c_sample_build, py_heuristic, mini, engines):
    """Every heuristic plugin's suite, started together (two at a time); name -> Future."""
    from concurrent.futures import ThreadPoolExecutor

    from hipdnn_cabi.conformance import run_plugin_suite
    libs = {"c_sample_heuristic": str(c_sample_build / "libhipdnn_c_sample_heuristic.so"),
            "py_reverse_heuristic": py_heuristic}
    libs.update({n: mini(n) for n in VARIANTS})
    ex = ThreadPoolExecutor(max_workers=2)
    futs = {n: ex.submit(run_plugin_suite, lib, scale=quick(n.startswith("py_")), plugin_dir=engines)
            for n, lib in libs.items()}
    yield futs
    ex.shutdown(wait=True)


def failing(results, mustpass=True):
    return {r.id for r in results if r.verdict == "fail" and r.mustpass == mustpass}


def explain(results):
    return "\n".join(f"{r.id}: {r.verdict}: {r.message}" for r in results if r.verdict != "pass")


def test_suite_detected_by_plugin_type(c_sample_build):
    from hipdnn_cabi.conformance import plugin_kind
    assert plugin_kind(str(c_sample_build / "libhipdnn_c_sample_heuristic.so")) == "heuristic"
    assert plugin_kind(str(c_sample_build / "libhipdnn_c_sample_plugin.so")) == "plugin"


@pytest.mark.parametrize("name", sorted(ALLOWED_SKIPS))
def test_shipped_heuristic_plugin_conforms(suites, name):
    res = suites[name].result()
    assert all(r.id.startswith(H) for r in res) and len(res) >= 30
    assert not failing(res) and not failing(res, False) - MINI_ADVISORY, explain(res)
    if not name.startswith("mini"):
        assert not failing(res, False), explain(res)
    bad_skips = [r.id for r in res if r.verdict == "skip" and r.id not in ALLOWED_SKIPS[name]]
    assert not bad_skips, explain(res)


def test_host_pipeline_orders_real_engines(suites):
    """The host checks really ran the policy through our backend over both engines."""
    for name, want in (("c_sample_heuristic", "'HipdnnCabiSample::DeviceAware' ordered 2 of 2"),
                       ("py_reverse_heuristic", "'PyHeuristic::Reverse' ordered 2 of 2"),
                       ("mini_full", "'MiniHeuristic::never' declined")):
        msg = {r.id: r.message for r in suites[name].result()}[H + "host_orders_engines"]
        assert want in msg, msg
    msg = {r.id: r.message for r in suites["py_reverse_heuristic"].result()}[H + "host_policies_listed"]
    assert msg.startswith("2 policies listed"), msg


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_mini_variant_fails_exactly(suites, name):
    res = suites[name].result()
    assert failing(res) == {H + c for c in VARIANTS[name][1]}, explain(res)
    assert failing(res, False) == MINI_ADVISORY, explain(res)


def test_failure_messages_name_the_call(suites):
    res = {r.id: r for r in suites["mini_crash_on_null_graph"].result()}
    msg = res[H + "null_args_policy_desc"].message
    assert "SIGSEGV" in msg and "hipdnnHeuristicPolicySetSerializedGraph(desc, NULL)" in msg, msg
    res = {r.id: r for r in suites["mini_wrong_ids"].result()}
    assert "424242" in res[H + "sorted_ids_subset"].message
    assert "which is not an applicable engine" in res[H + "host_orders_engines"].message
    res = {r.id: r for r in suites["mini_bad_policy_hash"].result()}
    assert "Policy ID/name mismatch" in res[H + "host_policies_listed"].message
    res = {r.id: r for r in suites["mini_no_finalize"].result()}
    assert "hipdnnHeuristicPolicyFinalize" in res[H + "required_symbols"].message
    assert res[H + "finalize_applied"].verdict == "skip"   # no cascade of failures


def test_cli_on_heuristic_plugins(c_sample_build, mini, engines, tmp_path):
    lib = str(c_sample_build / "libhipdnn_c_sample_heuristic.so")
    rep = tmp_path / "r.json"
    base = [PY, "-m", "hipdnn_cabi.cli", "conform"]
    r = subprocess.run(base + [lib, "--quick", "--plugin-dir", engines, "--report", str(rep)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "heuristic plugin 'hipdnn_cabi_c_sample_heuristic'" in r.stdout and "CONFORMANT" in r.stdout
    data = json.loads(rep.read_text())
    assert data["kind"] == "heuristic" and data["summary"]["conformant"]
    assert list(data["subject"]["policy_names"].values()) == ["HipdnnCabiSample::DeviceAware"]
    r = subprocess.run(base + [lib, "--list"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "conform.heuristic.host_orders_engines" in r.stdout
    assert "conform.engine_ids" not in r.stdout
    r = subprocess.run(base + [mini("mini_wrong_ids"), "--quick", "-q", "-k", "sorted_ids"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and "NOT CONFORMANT: conform.heuristic.sorted_ids_subset" in r.stdout, r.stdout
    r = subprocess.run(base + ["--kind", "heuristic", "--list"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "conform.heuristic.required_symbols" in r.stdout


def test_pytest_plugin_on_a_heuristic_plugin(c_sample_build, tmp_path):
    from importlib.metadata import entry_points
    eps = {ep.value for ep in entry_points(group="pytest11")}
    extra = [] if "hipdnn_cabi.conformance.pytest_plugin" in eps else ["-p", "hipdnn_cabi.conformance.pytest_plugin"]
    r = subprocess.run([PY, "-m", "pytest", "-q", *extra, "--hipdnn-plugin",
                        str(c_sample_build / "libhipdnn_c_sample_heuristic.so"), "--hipdnn-quick",
                        "-k", "policy_ids or policy_names", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        "-c", os.devnull], capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 passed" in r.stdout, r.stdout


def test_mustpass_list_matches_docs():
    from hipdnn_cabi.conformance.mustpass import mustpass
    doc = open(os.path.join(ROOT, "docs", "conformance.md")).read()
    for cid in mustpass("heuristic"):
        assert f"`{cid}`" in doc, cid
