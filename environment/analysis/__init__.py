"""Reading runs after the fact: trajectories (the reference agent's JSONL, ATIF from any agent), drafts,
activities, the monotone prior, agreement and consensus. ``spu analyze`` and ``spu baselines`` use it.

This package reads files only; it imports neither the tool server nor the agent.
"""
