"""``python -m tools_server.commands.ship_tool_list``: rebuild the tool list shipped with the package
(``tools_server/core/tool-list.json``, see :mod:`tools_server.core.toollist`) from the in-tree tools. Run it
after changing an in-tree tool; ``tests/core/test_toollist.py`` fails on a stale list."""

from __future__ import annotations

from tools_server.core import toollist
from tools_server.core.server import SpuServer, dump_tool


def main() -> None:
    path = toollist.write_shipped([dump_tool(tool) for tool in SpuServer().tools()])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
