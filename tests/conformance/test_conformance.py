"""The conformance suite itself: it passes on the plugins we ship (C sample, exported py_sample) and
fails exactly the expected checks on deliberately broken plugins (tests/conformance/broken/*.c,
one fault apiece, each forwarding everything else to the C sample plugin)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BROKEN = os.path.join(HERE, "broken")
INCLUDE = os.path.join(ROOT, "include")
PY = sys.executable

# broken plugin -> the checks it must fail (and no others)
EXPECTED = {
    "missing_symbol": {"conform.symbols.required_exported", "conform.lifecycle.set_stream",
                       "conform.null_args.set_stream"},
    "bad_version": {"conform.api_version.parses"},
    "wrong_engine_count": {"conform.engine_ids.two_call"},
    "non_subset_applicable": {"conform.applicable.subset_of_all_ids", "conform.applicable.unrunnable_graphs"},
    "invalid_details": {"conform.engine_details.valid_flatbuffer"},
    "crash_on_null": {"conform.null_args.get_applicable_engine_ids"},
    "hang_in_execute": {"conform.execute.numerics", "conform.execute.repeatable",
                        "conform.execute.buffers_respected", "conform.threads.one_handle",
                        "conform.threads.separate_handles", "conform.serialization.round_trip"},
    "wrong_numbers": {"conform.execute.numerics"},
    "no_last_error": {"conform.last_error.set_on_failure"},
    "leak": {"conform.leak.create_destroy_cycles"},
    "not_thread_safe": {"conform.threads.one_handle", "conform.threads.separate_handles"},
    # reports 1.2.0 (a C-sample-based runtime pass-by-value provider) but reads 0.0 instead of the
    # host scalar: only the host-value check can see that (defaults, inert overrides and the unbound
    # INVALID_VALUE are right)
    "ignores_host_scalar": {"conform.runtime_pbv.host_scalar"},
}

# plugin -> the checks that may skip on it (and why), everything else must pass
ALLOWED_SKIPS = {
    # API 1.1.0: a backend never sends it a runtime pass-by-value graph
    "c_sample": {"conform.runtime_pbv."},
    # API 1.0.0: no runtime scalars, no ExecuteOpGraphWithOverrides
    "py_sample": {"conform.runtime_pbv.", "conform.overrides."},
    # declines override-enabled graphs (it lists no engine for them)
    "cpu_reference": {"conform.overrides."},
}


def quick(embedded_python=False):
    """Reduced counts; short timeouts so the hang costs little.  Plugins that embed Python start an
    interpreter (and numpy) in every child and run 2000 leak cycles through it: they get longer
    timeouts, which cost nothing unless they really hang."""
    from hipdnn_cabi.conformance import Scale
    sc = Scale.quick()
    sc.timeout = 20.0 if embedded_python else 6.0
    sc.long_timeout = 60.0 if embedded_python else 10.0
    return sc


@pytest.fixture(scope="session")
def c_sample(tmp_path_factory):
    out = tmp_path_factory.mktemp("conform_c_sample")
    subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "engine_plugins", "c_sample"), f"OUT={out}"],
                   check=True, capture_output=True)
    return str(out / "libhipdnn_c_sample_plugin.so")


@pytest.fixture(scope="session")
def py_sample(tmp_path_factory):
    from hipdnn_cabi.plugin_sdk.export import build
    out = tmp_path_factory.mktemp("conform_py_sample")
    return build(os.path.join(ROOT, "engine_plugins", "py_sample"), str(out / "libpy_sample.so"))


@pytest.fixture(scope="session")
def broken(c_sample, tmp_path_factory):
    out = tmp_path_factory.mktemp("conform_broken")

    def build(name):
        lib = str(out / f"lib{name}.so")
        cmd = ["gcc", "-std=gnu11", "-O1", "-Wall", "-Werror", "-fPIC", "-shared", "-fvisibility=hidden",
               "-DHIPDNN_CABI_NO_HIP_HEADERS", f'-DBASE_PLUGIN="{c_sample}"', "-I", INCLUDE,
               os.path.join(BROKEN, name + ".c"), "-o", lib, "-ldl"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return lib
    return build


def run_suite(lib, embedded_python=False, **kw):
    from hipdnn_cabi.conformance import run_plugin_suite
    return run_plugin_suite(lib, scale=quick(embedded_python), **kw)


@pytest.fixture(scope="session")
def cpu_reference(tmp_path_factory):
    from hipdnn_cabi.plugin_sdk.export import build
    out = tmp_path_factory.mktemp("conform_cpu_reference")
    return build(os.path.join(ROOT, "engine_plugins", "cpu_reference"), str(out / "libcpu_reference.so"))


@pytest.fixture(scope="session")
def suites(c_sample, py_sample, cpu_reference, broken):
    """Every plugin's full suite, started together on first use (two at a time: most of a run is
    waiting on child processes and the hang timeouts); name -> Future of the results."""
    from concurrent.futures import ThreadPoolExecutor
    libs = {"hang_in_execute": broken("hang_in_execute"), "cpu_reference": cpu_reference,
            "py_sample": py_sample, "c_sample": c_sample}
    libs.update({n: broken(n) for n in sorted(EXPECTED) if n not in libs})
    ex = ThreadPoolExecutor(max_workers=2)
    futs = {name: ex.submit(run_suite, lib, name in ("py_sample", "cpu_reference")) for name, lib in libs.items()}
    yield futs
    ex.shutdown(wait=True)


def failing(results):
    return {r.id for r in results if r.verdict == "fail"}


def explain(results):
    return "\n".join(f"{r.id}: {r.verdict}: {r.message}" for r in results if r.verdict != "pass")


@pytest.mark.parametrize("name", sorted(ALLOWED_SKIPS))
def test_shipped_plugin_conforms(suites, name):
    res = suites[name].result()
    assert not failing(res), explain(res)
    bad_skips = [r.id for r in res if r.verdict == "skip" and not any(r.id.startswith(p) for p in ALLOWED_SKIPS[name])]
    assert not bad_skips, explain(res)


def test_runtime_pbv_and_overrides_run_where_they_apply(suites):
    """The new contract checks really execute on a plugin that qualifies (not skipped everywhere)."""
    verdicts = {r.id: r.verdict for r in suites["cpu_reference"].result()}
    for cid in ("host_scalar", "default_value", "override_inert", "unbound_rejected"):
        assert verdicts[f"conform.runtime_pbv.{cid}"] == "pass", cid
    verdicts = {r.id: r.verdict for r in suites["c_sample"].result()}
    assert verdicts["conform.overrides.shapes"] == verdicts["conform.overrides.strides"] == "pass"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_plugin_fails_exactly(suites, name):
    res = suites[name].result()
    assert failing(res) == EXPECTED[name], explain(res)


def test_failure_messages_name_the_call(suites):
    res = {r.id: r for r in suites["crash_on_null"].result()}
    msg = res["conform.null_args.get_applicable_engine_ids"].message
    assert "SIGSEGV" in msg and "hipdnnEnginePluginGetApplicableEngineIds(handle, graph=NULL" in msg, msg
    res = {r.id: r for r in suites["hang_in_execute"].result()}
    msg = res["conform.execute.numerics"].message
    assert "timed out" in msg and "hipdnnEnginePluginExecuteOpGraph" in msg, msg
    res = {r.id: r for r in suites["ignores_host_scalar"].result()}
    msg = res["conform.runtime_pbv.host_scalar"].message
    assert "the host value was ignored" in msg, msg


def test_cli_report_keyword_and_xfail(broken, tmp_path):
    lib = broken("wrong_numbers")
    xf = tmp_path / "xfail.txt"
    xf.write_text("# known bad numbers\nconform.execute.numerics\n")
    rep = tmp_path / "r.json"
    cmd = [PY, "-m", "hipdnn_cabi.cli", "conform", lib, "--quick", "-k", "execute or plugin_info",
           "--report", str(rep)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "conform.execute.numerics" in r.stdout and "FAIL" in r.stdout
    data = json.loads(rep.read_text())
    assert data["subject"]["name"] == "hipdnn_c_sample_plugin"
    assert data["subject"]["api_version"] == "1.1.0" and data["subject"]["version"] == "0.1.0"
    ids = {x["id"] for x in data["results"]}
    assert ids and all("execute" in i or "plugin_info" in i for i in ids)
    r = subprocess.run(cmd + ["--xfail-file", str(xf)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "XFAIL" in r.stdout


def test_mustpass_list_matches_docs():
    from hipdnn_cabi.conformance.mustpass import mustpass
    doc = open(os.path.join(ROOT, "docs", "conformance.md")).read()
    for cid in mustpass("plugin") + mustpass("backend"):
        assert f"`{cid}`" in doc, cid


def _plugin_args():
    """`-p` only when the package's pytest11 entry point is not installed (it auto-loads)."""
    from importlib.metadata import entry_points
    eps = {ep.value for ep in entry_points(group="pytest11")}
    return [] if "hipdnn_cabi.conformance.pytest_plugin" in eps else [
        "-p", "hipdnn_cabi.conformance.pytest_plugin"]


def test_pytest_plugin(c_sample, tmp_path):
    r = subprocess.run([PY, "-m", "pytest", "-q", *_plugin_args(),
                        "--hipdnn-plugin", c_sample, "--hipdnn-quick", "-k", "plugin_info or engine_ids",
                        "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-c", os.devnull],
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "10 passed" in r.stdout, r.stdout


def test_backend_checks_pass_on_our_backend(c_sample):
    """Our backend, with the C sample plugin's directory for the checks that need an engine: every
    check runs (no skips) and passes; without --plugin-dir those checks skip and the rest pass."""
    from hipdnn_cabi.conformance import run_plugin_suite
    from hipdnn_cabi.conformance.cli import default_backend
    if not os.path.exists(default_backend()):
        pytest.skip("libhipdnn_backend.so not built")
    res = run_plugin_suite(default_backend(), backend=True, scale=quick(), plugin_dir=os.path.dirname(c_sample))
    assert len(res) >= 20 and not failing(res), explain(res)
    assert not [r for r in res if r.verdict == "skip"], explain(res)
    res = run_plugin_suite(default_backend(), backend=True, scale=quick(), keyword="heuristic or graph_finalize")
    verdicts = {r.id: r.verdict for r in res}
    assert verdicts == {"conform.backend.heuristic_results_two_call": "skip",
                        "conform.backend.graph_finalize_rules": "pass"}, explain(res)
    assert "--plugin-dir" in res[-1].message or "--plugin-dir" in res[0].message


def test_backend_checks_fail_on_a_non_backend(c_sample):
    from hipdnn_cabi.conformance import run_plugin_suite
    res = run_plugin_suite(c_sample, backend=True, scale=quick(), plugin_dir=os.path.dirname(c_sample))
    assert all(r.verdict == "fail" for r in res), explain(res)
    assert "required symbol hipdnnCreate is missing from the backend library" in {r.id: r for r in res}[
        "conform.backend.handle_null"].message


def _fake_backend(tmp_path, *defines):
    import subprocess as sp
    src = os.path.join(HERE, "fake_backend", "no_tensors.c")
    out = str(tmp_path / ("libfake_" + "_".join(d.lower() for d in defines or ("backend",)) + ".so"))
    sp.run(["gcc", "-shared", "-fPIC", "-std=c11", f"-I{INCLUDE}", *[f"-D{d}" for d in defines],
            src, "-o", out], check=True)
    return out


def test_backend_setup_failures_are_reported_as_such(tmp_path):
    """A backend without tensor descriptors: the tensor checks name the failed setup call
    (CreateDescriptor(TENSOR)), not the misleading statuses of the calls that followed."""
    from hipdnn_cabi.conformance import run_plugin_suite
    res = {r.id: r for r in run_plugin_suite(_fake_backend(tmp_path), backend=True, scale=quick(),
                                             keyword="tensor or last_error_get_peek or handle")}
    assert res["conform.backend.handle_create_destroy"].verdict == "pass", explain(list(res.values()))
    for cid in ("conform.backend.tensor_finalize_rules", "conform.backend.tensor_set_misuse",
                "conform.backend.tensor_get_two_call", "conform.backend.last_error_get_peek"):
        r = res[cid]
        assert r.verdict == "fail", (cid, r.message)
        assert r.message.startswith("setup failed: hipdnnBackendCreateDescriptor("), (cid, r.message)
        assert "this backend creates no descriptors" in r.message, (cid, r.message)


def test_backend_missing_symbol_is_named_as_missing_from_the_backend(tmp_path):
    from hipdnn_cabi.conformance import run_plugin_suite
    res = run_plugin_suite(_fake_backend(tmp_path, "OMIT_SET_ATTRIBUTE"), backend=True,
                           scale=quick(), keyword="tensor_set_misuse")
    assert [r.verdict for r in res] == ["fail"], explain(res)
    msg = res[0].message
    assert "hipdnnBackendSetAttribute is missing from the backend library" in msg, msg
    assert "plugin" not in msg, msg
