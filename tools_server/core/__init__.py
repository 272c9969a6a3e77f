"""The server's mechanism: tool registry and domains, dispatch, jobs, cache, the MCP server and its
transports. The operator commands that use it (``spu serve``, ``spu cache``, ``spu config``,
``spu doctor``) live in :mod:`tools_server.commands`.

Nothing here names a domain: domains (``tools_server/chem``, ``qc``, ``web`` … and third-party packages)
register through the ``spu.tools`` entry points and reach this mechanism through
:mod:`tools_server.plugin`.
"""
