"""The server's mechanism: tool registry and domains, dispatch, jobs, cache, MCP server and its commands.

Nothing here names a domain: domains (``tools_server/chem``, ``qc``, ``web`` … and third-party packages)
register through the ``spu.tools`` entry points.
"""
