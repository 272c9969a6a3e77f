"""map_items' shared arguments on the local path, and a ToolError surviving pickling (how an item's error
comes back from a Dask task)."""

from __future__ import annotations

import pickle

from tools_server.core.errors import ToolError
from tools_server.core.fanout import map_items


def _scaled(factor: int, offset: int, value: int) -> int:
    return factor * value + offset


def test_shared_arguments_come_first_for_every_job_in_one_process_and_in_the_pool():
    jobs = [(v,) for v in range(5)]
    expected = [3 * v + 1 for v in range(5)]
    assert map_items(_scaled, jobs, 1, shared=(3, 1)) == expected
    assert map_items(_scaled, jobs, 2, shared=(3, 1)) == expected


def test_a_tool_error_pickles_with_its_code_hint_and_details():
    err = ToolError("weights_missing", "no weights", hint="place them", expected_path="/x.pt")
    back = pickle.loads(pickle.dumps(err))
    assert isinstance(back, ToolError)
    assert back.to_dict() == err.to_dict() and str(back) == str(err)
