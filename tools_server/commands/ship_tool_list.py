"""``python -m tools_server.commands.ship_tool_list``: rebuild the tool list shipped with the package
(``tools_server/core/tool-list.json``, see :mod:`tools_server.core.toollist`) from the in-tree tools. Run it
after changing an in-tree tool; ``tests/core/test_toollist.py`` fails on a stale list. ``--check`` writes
nothing and exits with status 1 when the shipped list is not the one the code here builds: a check in
seconds before a commit, where the test fails only in a full run."""

from __future__ import annotations

import sys

from tools_server.core import toollist
from tools_server.core.server import SpuServer, dump_tool


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print("usage: python -m tools_server.commands.ship_tool_list [--check]", file=sys.stderr)
        return 2
    tools = [dump_tool(tool) for tool in SpuServer().tools()]
    if args == ["--check"]:
        shipped = toollist.SHIPPED.read_text(encoding="utf-8") if toollist.SHIPPED.is_file() else ""
        if shipped != toollist.shipped_text(tools):
            print(
                f"{toollist.SHIPPED} is stale: run python -m tools_server.commands.ship_tool_list",
                file=sys.stderr,
            )
            return 1
        print(f"{toollist.SHIPPED} is up to date")
        return 0
    print(f"wrote {toollist.write_shipped(tools)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
