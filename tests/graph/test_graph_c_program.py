"""tests/graph/graph_build.c: the §2.2 call sequence from a real C program."""
import os

from conftest_root import run_exe

HERE = os.path.dirname(os.path.abspath(__file__))


def test_graph_build_c(c_build):
    exe = c_build(os.path.join(HERE, "graph_build.c"))
    r = run_exe([exe])
    assert "graph_build: OK" in r.stdout
