"""Recordings of model turns for the ``replay:`` model (JSON lines; see docs/agent.md)."""
