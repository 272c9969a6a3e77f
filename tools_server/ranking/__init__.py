"""Ranking helpers for agents: check a draft against the task contract, aggregate proxies, compare orders."""

from tools_server.plugin import Domain

DOMAIN = Domain(name="ranking", tool_modules=("tools_server.ranking.tools",))
