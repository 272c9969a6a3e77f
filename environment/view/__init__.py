"""``spu view``: agent runs, trajectories and reports as pages in the browser or one offline HTML file.

Benchmark-side reading tool: it reads run directories and report outputs and imports neither the
tool server nor the agent.
"""
