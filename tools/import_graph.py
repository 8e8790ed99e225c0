#!/usr/bin/env python3
"""Import cycles of a Python package: the strongly connected components of its module import graph.

Each module of the package is a node; `import a.b`, `from a import b` and relative imports add an
edge to the package module they name (`from pkg import name` points at `pkg.name` when that is a
module, else at `pkg`).  Importing `a.b.c` also runs `a/__init__.py` and `a/b/__init__.py`, but
those implicit edges are left out: only the modules a file names count; so are imports under
`if TYPE_CHECKING:` and imports of excluded modules.  Two graphs are measured:
top-level imports only (what runs when a module is imported, including imports under `if`/`try`
at module level), and all imports, including those inside function bodies.

    tools/import_graph.py hipdnn_cabi                    # both graphs, one line per cycle
    tools/import_graph.py hipdnn_cabi --members          # also the modules of each cycle
    tools/import_graph.py hipdnn_cabi --max-cycle-size 1 # exit 1 when a top-level cycle exists
    tools/import_graph.py hipdnn_cabi --in-function      # the imports inside function bodies

`--exclude` skips directories by name (default: `_generated`).
"""
from __future__ import annotations

import argparse
import ast
import pathlib
import sys


def module_name(root: pathlib.Path, path: pathlib.Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def collect_modules(root: pathlib.Path, exclude: set[str]) -> dict[str, pathlib.Path]:
    mods = {}
    for path in sorted(root.rglob("*.py")):
        if exclude & set(path.relative_to(root).parts):
            continue
        mods[module_name(root, path)] = path
    return mods


class _Imports(ast.NodeVisitor):
    """(target module, inside a function body, line) for every import statement of one module."""

    def __init__(self, mod: str, is_package: bool, modules: dict):
        self.mod, self.is_package, self.modules = mod, is_package, modules
        self.depth = 0
        self.found: list[tuple[str, bool, int]] = []

    def visit_FunctionDef(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_If(self, node):
        # `if TYPE_CHECKING:` imports never run: only the else branch counts.
        t = node.test
        if (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
                isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"):
            for stmt in node.orelse:
                self.visit(stmt)
        else:
            self.generic_visit(node)

    def _add(self, name: str, lineno: int):
        if name in self.modules and name != self.mod:
            self.found.append((name, self.depth > 0, lineno))

    def visit_Import(self, node):
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node):
        if node.level:
            base = self.mod.split(".")
            if not self.is_package:
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        for alias in node.names:
            full = f"{module}.{alias.name}"
            self._add(full if full in self.modules else module, node.lineno)


def import_edges(modules: dict[str, pathlib.Path]) -> list[tuple[str, str, bool, int]]:
    """(importer, imported, inside a function, line) over the package."""
    edges = []
    for mod, path in modules.items():
        v = _Imports(mod, path.name == "__init__.py", modules)
        v.visit(ast.parse(path.read_text(), str(path)))
        edges += [(mod, tgt, in_fn, line) for tgt, in_fn, line in v.found]
    return edges


def strongly_connected(nodes, graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    out.append(sorted(comp))
    return out


def cycles(modules, edges, include_functions: bool) -> list[list[str]]:
    graph: dict[str, set[str]] = {}
    for src, dst, in_fn, _ in edges:
        if include_functions or not in_fn:
            graph.setdefault(src, set()).add(dst)
    comps = strongly_connected(sorted(modules), graph)
    return sorted((c for c in comps if len(c) > 1), key=lambda c: (-len(c), c))


def report(title: str, comps: list[list[str]], members: bool):
    sizes = [len(c) for c in comps]
    print(f"{title}: {len(comps)} cycle(s), sizes {sizes}, {sum(sizes)} modules involved")
    for c in comps:
        print(f"  [{len(c)}] " + (", ".join(c) if members or len(c) <= 4 else
                                  ", ".join(c[:4]) + f", ... ({len(c) - 4} more)"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("package", help="package directory, e.g. hipdnn_cabi")
    ap.add_argument("--exclude", action="append", default=None,
                    help="directory name to skip (repeatable; default: _generated)")
    ap.add_argument("--members", action="store_true", help="list every module of each cycle")
    ap.add_argument("--in-function", action="store_true",
                    help="list the package imports made inside function bodies")
    ap.add_argument("--max-cycle-size", type=int, default=None, metavar="N",
                    help="exit 1 when a cycle of the top-level graph has more than N modules")
    args = ap.parse_args(argv)

    root = pathlib.Path(args.package).resolve()
    modules = collect_modules(root, set(args.exclude or ["_generated"]))
    edges = import_edges(modules)
    top = cycles(modules, edges, include_functions=False)
    full = cycles(modules, edges, include_functions=True)
    print(f"{len(modules)} modules, {sum(1 for e in edges if not e[2])} top-level import edges, "
          f"{sum(1 for e in edges if e[2])} in-function")
    report("top-level imports", top, args.members)
    report("with in-function imports", full, args.members)
    if args.in_function:
        for src, dst, in_fn, line in sorted(edges, key=lambda e: (e[0], e[3])):
            if in_fn:
                print(f"  {modules[src].relative_to(root.parent)}:{line}: {dst}")
    if args.max_cycle_size is not None:
        worst = max((len(c) for c in top), default=1)
        if worst > args.max_cycle_size:
            print(f"largest top-level cycle has {worst} modules (> {args.max_cycle_size})",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
