"""Racing link swaps against every path-taking tool, through a real ``spu serve`` over stdio: 0 reads of a
file outside the roots, counted by the kernel (:mod:`link_races`: inotify watches every outside file).

Every tool with a path-typed field (``InputPath``/``InputDir`` and their kinds, and ``file_reference`` texts
such as molecule arguments: :func:`tools_server.core.paths.path_fields`) is called; a tool added with such a
field fails :func:`test_every_path_taking_tool_is_raced` until it has a row in :data:`CALLS`. Each call
races every path field of the tool at once, each through its own generated layout (which component is
swapped, for what twin, how the path is spelled: :mod:`link_races`), and holds bytes no other call holds,
so the cache cannot answer for the file; the server's own reads (validation, the cache key) and the
worker's are all raced.

Budget: :data:`CI_CALLS` calls per tool with a fixed seed in CI; ``SPU_HYPOTHESIS=deep`` (marker
``large_budget``) runs :data:`LARGE_CALLS` per tool and prints the figures (calls, outside reads, reads of
the inside files that show the race met a reader).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from link_races import DIR_TWINS, FILE_TWINS, OUTSIDE_MARKER, Layout, Racer
from test_job_durability import RawServer

from tools_server.core.paths import path_fields
from tools_server.core.registry import load_registry

pytestmark = pytest.mark.slow  # a server and hundreds of racing calls
CI_CALLS = 12
LARGE_CALLS = 1000
LARGE = os.environ.get("SPU_HYPOTHESIS") == "deep"


def _garbage(tag: str, n: int) -> bytes:
    return f"{tag} call {n} {time.time_ns()}\nnot a valid file\n".encode()


def _task_files() -> dict[str, bytes]:
    from environment.demo_tasks import demo_task_dir
    from spu_common.contract import TASK_FILES

    folder = demo_task_dir("aromatic-acidity")
    return {name: (folder / name).read_bytes() for name in TASK_FILES if (folder / name).is_file()}


#: per field: the leaf's name and what it holds (``molecule``/``file`` garbage, or ``task``: a real task
#: folder, so the tool goes on to read the draft); per tool: its arguments from the raced paths
FIELDS: dict[tuple[str, str], str] = {
    ("dock", "receptor_path"): "input.pdb",
    ("md_run", "pdb_path"): "input.pdb",
    ("protein_pka", "pdb_path"): "input.pdb",
    ("md_analyze", "trajectory_path"): "input.dcd",
    ("md_analyze", "topology_path"): "top.pdb",
    ("ranking_check", "task_dir"): "task",
    ("ranking_check", "draft_path"): "draft.json",
}
WAIT = {"wait_s": 120}
CALLS: dict[str, Callable[[dict[str, str]], dict[str, Any]]] = {
    "chem_parse": lambda p: {"molecules": [p["molecules"]]},
    "chem_descriptors": lambda p: {"molecules": [p["molecules"]]},
    "chem_similarity": lambda p: {"molecules": [p["molecules"]], "references": [p["references"]]},
    "chem_substructure": lambda p: {"molecules": [p["molecules"]], "smarts": ["[OX2H]"]},
    "chem_conformers": lambda p: {"molecules": [p["molecules"]], "n_conformers": 1, **WAIT},
    "chem_depict": lambda p: {"molecules": [p["molecules"]], **WAIT},
    "xtb_run": lambda p: {"molecules": [p["molecules"]], **WAIT},
    "xtb_conformers": lambda p: {"molecule": p["molecule"], "n_conformers": 2, **WAIT},
    "dft_run": lambda p: {"molecule": p["molecule"], "functional": "HF", "basis": "sto-3g", **WAIT},
    "mlip_run": lambda p: {"molecules": [p["molecules"]], **WAIT},
    "mlip_conformers": lambda p: {"molecule": p["molecule"], "n_conformers": 2, **WAIT},
    "md_run": lambda p: {"pdb_path": p["pdb_path"], **WAIT},
    "md_analyze": lambda p: {
        "trajectory_path": p["trajectory_path"],
        "topology_path": p["topology_path"],
        **WAIT,
    },
    "protein_pka": lambda p: {"pdb_path": p["pdb_path"], **WAIT},
    "dock": lambda p: {
        "ligands": [p["ligands"]],
        "receptor_path": p["receptor_path"],
        "box_ligand": p["box_ligand"],
        **WAIT,
    },
    "ranking_check": lambda p: {"task_dir": p["task_dir"], "draft_path": p["draft_path"]},
}


@functools.cache
def _path_tools() -> dict[str, dict[str, str]]:
    return {
        name: fields
        for name, spec in sorted(load_registry().tools.items())
        if (fields := path_fields(spec.input_model))
    }


def test_every_path_taking_tool_is_raced():
    tools = _path_tools()
    assert {"chem_parse", "dock", "md_analyze", "ranking_check", "xtb_run"} <= set(tools)
    assert set(CALLS) == set(tools), "give every tool with a path-typed field a row in CALLS"


def layouts(folder: bool) -> st.SearchStrategy[Layout]:
    """A raced input: how deep, which component is swapped for which twin, how the path is spelled."""

    def build(depth: int) -> st.SearchStrategy[Layout]:
        return st.integers(0, depth).flatmap(
            lambda at: st.builds(
                Layout,
                depth=st.just(depth),
                swap_at=st.just(at),
                twin=st.sampled_from(DIR_TWINS if at < depth or folder else FILE_TWINS),
                spelling=st.sampled_from(("plain", "dot", "dotdot", "slashes")),
                lead=st.integers(0, 999),
            )
        )

    return st.integers(0, 3).flatmap(build)


@pytest.fixture(scope="module")
def raced(tmp_path_factory):
    """One ``spu serve`` for the module (its workers warm across calls), with its work folder, the racer
    building inputs inside it, and the outside folder the racer watches."""
    top = tmp_path_factory.mktemp("races")
    env = dict(os.environ)
    env.update(
        SPU_WORKDIR=str(top / "work"),
        SPU_CACHE_DIR=str(top / "cache"),
        SPU_WARM_WORKERS="0",
        SPU_WEIGHTS_DIR=str(top / "weights"),
    )
    server = RawServer(env)
    racer = Racer(top / "work" / "raced", top / "outside")
    try:
        yield server, racer
    finally:
        server.kill()
        racer.close()


@pytest.mark.parametrize(
    "budget",
    [
        pytest.param(CI_CALLS, id="ci"),
        pytest.param(
            LARGE_CALLS,
            id="large",
            marks=[
                pytest.mark.large_budget,
                pytest.mark.skipif(not LARGE, reason="the large budget runs with SPU_HYPOTHESIS=deep"),
            ],
        ),
    ],
)
@pytest.mark.parametrize("tool", sorted(CALLS))
def test_no_tool_reads_outside_the_roots_while_links_are_swapped(raced, tool, budget):
    server, racer = raced
    fields = _path_tools()[tool]
    task = _task_files()
    figures = {"calls": 0, "outside": [], "inside_reads": 0, "codes": {}}

    @settings(
        max_examples=budget,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.data())
    def one_call(data: st.DataObject) -> None:
        n = figures["calls"] = figures["calls"] + 1
        swaps, paths = [], {}
        for field, kind in fields.items():
            leaf = FIELDS.get((tool, field), "input.sdf" if kind == "reference" else "input.bin")
            payload: Any = task if leaf == "task" else _garbage(f"{tool}.{field}", n)
            layout = data.draw(layouts(folder=leaf == "task"), label=field)
            paths[field], swapped, twin = racer.prepare(layout, leaf, payload)
            swaps.append((swapped, twin, layout.lead))
        try:
            with contextlib.ExitStack() as racing:
                for swapped, twin, lead in swaps:
                    racing.enter_context(racer.racing(swapped, twin, lead))
                answer = server.request("tools/call", {"name": tool, "arguments": CALLS[tool](paths)}, 300)[
                    "result"
                ]
        finally:
            racer.clean()
        outside, inside = racer.reads()
        figures["inside_reads"] += inside
        figures["outside"] += outside
        text = json.dumps(answer)
        assert OUTSIDE_MARKER not in text, f"{tool} answered with an outside file's content"
        code = (answer.get("structuredContent") or {}).get("error", {}).get("code", "answered")
        figures["codes"][code] = figures["codes"].get(code, 0) + 1
        assert code != "internal_error", text[:500]
        assert not outside, f"{tool}: outside files opened or read: {sorted(set(outside))}"

    started = time.monotonic()
    one_call()
    took_s = time.monotonic() - started
    print(
        f"\n{tool}: {figures['calls']} racing calls in {took_s:.0f} s, {len(figures['outside'])} outside "
        f"reads, {figures['inside_reads']} reads of the raced inside files, answers {figures['codes']}"
    )
    assert figures["calls"] >= min(budget, 1)
