"""The ``hipdnn-cabi`` command."""
from __future__ import annotations

import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: hipdnn-cabi export-plugin <module-or-file.py> -o lib<name>.so")
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "export-plugin":
        from .plugin_sdk.export import main as export_main
        return export_main(rest)
    print(f"hipdnn-cabi: unknown command {cmd!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
