"""Test module collected by the conformance pytest plugin: one item per check id."""
from __future__ import annotations

import pytest

from hipdnn_cabi.conformance.checks import registry
from hipdnn_cabi.conformance.core import (Result, Scale, default_backend,  # noqa: F401
                                          make_suite, read_xfail_file, run_checks)
from hipdnn_cabi.conformance.pytest_plugin import suite_kind


def _registry(config):
    return registry(suite_kind(config))


def pytest_generate_tests(metafunc):
    if "conform_check" in metafunc.fixturenames:
        ids = list(_registry(metafunc.config))
        metafunc.parametrize("conform_check", ids, ids=ids)


@pytest.fixture(scope="session")
def conform_suite(request):
    config = request.config
    backend = config.getoption("--hipdnn-backend")
    if backend is not None:
        target = backend or default_backend()
    else:
        target = config.getoption("--hipdnn-plugin")
    suite = make_suite(target, suite_kind(config),
                       scale=Scale.quick() if config.getoption("--hipdnn-quick") else Scale(),
                       plugin_dir=config.getoption("--hipdnn-plugin-dir"))
    config._hipdnn_suite = suite
    return suite


def test_conformance(conform_suite, conform_check, request):
    config = request.config
    check = _registry(config)[conform_check]
    xf = read_xfail_file(config.getoption("--hipdnn-xfail-file"))
    (r,) = run_checks(conform_suite, [check], xfails=xf, jobs=1)
    config._hipdnn_results.append(r)
    if r.verdict == "skip":
        pytest.skip(r.message)
    if r.verdict == "xfail":
        pytest.xfail(r.message)
    if r.verdict == "fail":
        pytest.fail(f"{r.id}: {r.message}", pytrace=False)
