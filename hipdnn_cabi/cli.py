"""The ``hipdnn-cabi`` command."""
from __future__ import annotations

import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: hipdnn-cabi export-plugin <module-or-file.py> -o lib<name>.so\n"
              "       hipdnn-cabi conform <libplugin.so> | --backend [lib] [--report R.json] [-k EXPR]")
        print("       hipdnn-cabi info [--json] | engines [--json] | demo")
        print("       hipdnn-cabi custom-ops   (how a plugin claims CUSTOM_OP nodes by name)")
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd in ("info", "engines", "demo"):
        from .frontend import cli_cmds
        return {"info": cli_cmds.info, "engines": cli_cmds.engines_cmd, "demo": cli_cmds.demo}[cmd](rest)
    if cmd == "custom-ops":
        from .plugin_sdk.custom_ops import GUIDE
        print(GUIDE, end="")
        return 0
    if cmd == "export-plugin":
        from .plugin_sdk.export import main as export_main
        return export_main(rest)
    if cmd == "conform":
        from .conformance.cli import main as conform_main
        return conform_main(rest)
    print(f"hipdnn-cabi: unknown command {cmd!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
