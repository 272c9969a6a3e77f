"""The ``spu`` command: one entry point that mounts the commands of each part (server, benchmark, agent)."""
