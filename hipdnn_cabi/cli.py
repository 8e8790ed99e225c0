"""The ``hipdnn-cabi`` command: argparse subcommands, ``--help`` on each, ``--version``.

Each subcommand owns its argument parser (in the module that implements it); this front parser
routes the rest of the command line to it, so ``hipdnn-cabi <cmd> --help`` is that parser's help.
"""
from __future__ import annotations

import argparse
import os
import sys

import hipdnn_cabi as hc

from .conformance.cli import main as conform_main
from .frontend import cli_cmds
from .plugin_sdk.custom_ops import GUIDE
from .plugin_sdk.export import main as export_main

COMMANDS = {
    "info": "library, headers, plugin directories, loaded plugins and engines, GPU runtime",
    "engines": "list the loaded engines",
    "demo": "build and run the examples (C program + Python frontend) on the default engine",
    "export-plugin": "build a standalone engine-plugin .so from a Python plugin",
    "conform": "run the plugin ABI conformance suite on a plugin .so (or --backend)",
    "paths": "print the include, library, pkg-config and CMake directories",
    "custom-ops": "how a plugin claims CUSTOM_OP nodes by name",
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hipdnn-cabi",
                                description="hipDNN's C API implemented in Python: tools")
    p.add_argument("--version", action="version", version=f"hipdnn-cabi {hc.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, doc in COMMANDS.items():
        sub.add_parser(name, help=doc, description=doc, add_help=False)
    return p


def paths(argv) -> int:
    p = argparse.ArgumentParser(prog="hipdnn-cabi paths", description=COMMANDS["paths"])
    g = p.add_mutually_exclusive_group()
    for opt in ("include", "lib", "pkgconfig", "cmake"):
        g.add_argument(f"--{opt}", action="store_true", help=f"print only the {opt} directory")
    a = p.parse_args(argv)
    table = {"include": hc.include_dir(), "lib": hc.library_dir(),
             "pkgconfig": hc.pkgconfig_dir(), "cmake": hc.cmake_dir()}
    picked = [k for k in table if getattr(a, k)]
    for k in picked or table:
        print(table[k] if picked else f"{k}: {table[k]}")
    return 0


def _conform(argv) -> int:
    targets = [x for x in argv if not x.startswith("-")]
    for t in targets[:1]:
        if t.endswith(".py") or (os.path.isdir(t) and os.path.isfile(os.path.join(t, "__init__.py"))):
            print(f"hipdnn-cabi conform: {t} is a Python plugin; the suite checks a shared library "
                  f"through the C ABI. Export it first:\n"
                  f"    hipdnn-cabi export-plugin {t} -o lib{_stem(t)}.so\n"
                  f"    hipdnn-cabi conform lib{_stem(t)}.so", file=sys.stderr)
            return 2
    return conform_main(argv)


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path.rstrip("/")))[0] or "plugin"


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    if not argv:
        p.print_help()
        return 2
    if argv[0] not in COMMANDS:      # --version, --help, or an unknown command: argparse answers
        p.parse_args(argv)
        p.print_help()
        return 2
    command, rest = argv[0], argv[1:]   # the subcommand's own parser reads the rest (--help too)

    class a:  # noqa: N801
        pass
    a.command = command
    if a.command in ("info", "engines", "demo"):
        return {"info": cli_cmds.info, "engines": cli_cmds.engines_cmd, "demo": cli_cmds.demo}[a.command](rest)
    if a.command == "custom-ops":
        argparse.ArgumentParser(prog="hipdnn-cabi custom-ops",
                                description=COMMANDS["custom-ops"]).parse_args(rest)
        print(GUIDE, end="")
        return 0
    if a.command == "export-plugin":
        return export_main(rest) or 0
    if a.command == "conform":
        return _conform(rest)
    if a.command == "paths":
        return paths(rest)
    p.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
