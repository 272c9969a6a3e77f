"""The batch runner of xtb_run/xtb_conformers: this process and kept helper processes share the items."""

from __future__ import annotations

import operator

from tools_server.core.fanout import _POOLS, map_items


def test_results_in_input_order_across_this_process_and_helpers():
    jobs = [("m" * n, str(k)) for k, n in enumerate((3, 40, 1, 25, 7, 12, 2, 30))]
    seen: list[int] = []
    out = map_items(operator.add, jobs, threads=2, progress=lambda done, total: seen.append(done))
    assert out == [a + b for a, b in jobs]
    assert seen == list(range(1, len(jobs) + 1))
    pool = _POOLS[1]  # one helper beside this process, kept for the next batch
    again = map_items(operator.add, jobs[:3], threads=2)
    assert again == out[:3] and _POOLS[1] is pool


def test_one_core_runs_everything_here():
    assert map_items(operator.mul, [(2, 3), (4, 5)], threads=1) == [6, 20]
