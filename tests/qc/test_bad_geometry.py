"""Non-finite, absurd and coincident coordinates and unknown elements are refused before xTB or PySCF
run (issue 27 item 6); a non-finite number never leaves a tool."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tools_server.core.errors import ToolError
from tools_server.core.finite import check_finite_arguments, check_finite_result
from tools_server.qc import tools as Q

WATER = "3\n\nO 0 0 0.1173\nH 0 0.7572 -0.4692\nH 0 -0.7572 -0.4692\n"
NAN_WATER = WATER.replace("0.1173", "nan")
INF_WATER = WATER.replace("0.1173", "inf")
HUGE_WATER = WATER.replace("0.1173", "1e300")
ONE_POINT = "3\n\nO 0 0 0\nH 0 0 0\nH 0 0.00001 0\n"
OGANESSON = "1\n\nOg 0 0 0\n"


@pytest.mark.parametrize(
    ("xyz", "code"),
    [
        (NAN_WATER, "invalid_input"),
        (INF_WATER, "invalid_input"),
        (HUGE_WATER, "invalid_input"),
        (ONE_POINT, "invalid_structure"),
        (OGANESSON, "unsupported_element"),
    ],
)
def test_xtb_refuses_bad_geometry_before_the_engine(ctx, xyz, code):
    with pytest.raises(ToolError) as err:
        Q.xtb_run(Q.XtbInput(molecules=[xyz]), ctx)
    assert err.value.code == code
    assert err.value.hint  # every code carries a recovery hint


def test_xtb_batch_keeps_bad_geometry_as_item_errors(ctx):
    out = Q.xtb_run(Q.XtbInput(molecules=[WATER, NAN_WATER, ONE_POINT]), ctx)
    codes = [it.error.code if it.error else None for it in out.items]
    assert codes == [None, "invalid_input", "invalid_structure"]


@pytest.mark.parametrize(
    ("xyz", "code"),
    [(NAN_WATER, "invalid_input"), (ONE_POINT, "invalid_structure"), (OGANESSON, "unsupported_element")],
)
def test_dft_refuses_bad_geometry_before_pyscf(ctx, xyz, code):
    with pytest.raises(ToolError) as err:
        Q.dft_run(Q.DftInput(molecule=xyz, basis="sto-3g", functional="HF"), ctx)
    assert err.value.code == code


def test_non_finite_arguments_are_invalid_input():
    # pydantic lets infinity through a field bounded only below, and turns the string "nan" into a float
    with pytest.raises(ToolError) as err:
        check_finite_arguments(Q.XtbInput(molecules=["O"], pressure_pa=float("inf")))
    assert err.value.code == "invalid_input" and "pressure_pa" in err.value.message
    check_finite_arguments(Q.XtbInput(molecules=["O"], pressure_pa=1e5))


def test_a_non_finite_result_is_an_engine_error():
    with pytest.raises(ToolError) as err:
        check_finite_result("xtb_run", {"items": [{"energy_hartree": float("nan")}]})
    assert err.value.code == "engine_error" and "items.0.energy_hartree" in err.value.message


def _strict(line: bytes) -> dict:
    def refuse(token: str) -> None:
        raise AssertionError(f"reply holds the bare token {token}: not JSON")

    return json.loads(line, parse_constant=refuse)


def test_bare_nan_and_infinity_over_stdio_are_refused_and_replies_stay_strict_json(spu_env):
    """The real server over stdio, fed frames as a careless client writes them (Python's json.dumps
    emits the bare tokens NaN and Infinity)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "spu", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=spu_env,
    )
    calls = {
        2: ("xtb_run", {"molecules": ["O"], "pressure_pa": float("inf"), "task": "frequencies"}),
        3: (
            "dock",
            {"ligands": ["C"], "receptor_text": "END", "center": [float("nan"), 0, 0], "size": [9, 9, 9]},
        ),
        4: ("xtb_run", {"molecules": [NAN_WATER]}),
        5: ("xtb_run", {"molecules": [ONE_POINT]}),
    }
    try:
        assert proc.stdin is not None and proc.stdout is not None
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        }
        frames = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}]
        frames.append({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for i, (name, arguments) in calls.items():
            params = {"name": name, "arguments": arguments}
            frames.append({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
        proc.stdin.write("".join(json.dumps(f) + "\n" for f in frames).encode())
        proc.stdin.flush()
        replies: dict[int, dict] = {}
        while len(replies) < 1 + len(calls):
            line = proc.stdout.readline()
            assert line, "the server closed stdout"
            message = _strict(line)
            if "id" in message:
                replies[message["id"]] = message
    finally:
        proc.kill()
        proc.wait(timeout=10)
    errors = {i: replies[i]["result"]["structuredContent"]["error"] for i in calls}
    assert all(replies[i]["result"]["isError"] for i in calls)
    assert errors[2]["code"] == "invalid_input" and "pressure_pa" in errors[2]["message"]
    assert errors[3]["code"] == "invalid_input" and "center" in errors[3]["message"]
    assert errors[4]["code"] == "invalid_input" and "non-finite" in errors[4]["message"]
    assert errors[5]["code"] == "invalid_structure"
