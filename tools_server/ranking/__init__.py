"""Ranking helpers for agents: check a draft against the task contract, aggregate proxies, compare orders."""
