"""The server's operator commands: ``spu serve``, ``spu cache``, ``spu config claude|codex`` and
``spu doctor``. They use the mechanism in :mod:`tools_server.core` (registry, server, cache, domains'
doctor checks); nothing there imports them.
"""
