"""spu tool server: domain tools exposed over MCP, with jobs, a result cache and provenance."""

__version__ = "0.1.0"
