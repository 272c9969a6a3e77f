"""Third-party tools through the spu.tools entry point; the HTTP transport's safety rules; the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp_wire import HEADERS, INIT, http_spu_server

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory):
    """The example plugin installed (with its entry-point metadata) into a directory on PYTHONPATH."""
    target = tmp_path_factory.mktemp("plugin")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(REPO / "examples" / "spu-example-plugin"),
        ],
        check=True,
    )
    return target


def test_example_plugin_appears_and_runs(spu_env, plugin_dir, start_mcp_server):
    env = {**spu_env, "PYTHONPATH": os.pathsep.join([str(plugin_dir), spu_env["PYTHONPATH"]])}
    server = start_mcp_server(env)
    tools = {t.name: t for t in server.list_tools()}
    assert {"example_buffer_ph", "example_molar_volume"} <= set(tools)
    assert tools["example_buffer_ph"].annotations.read_only_hint is True
    assert "wait_s" in tools["example_molar_volume"].input_schema["properties"]
    result_branch = tools["example_molar_volume"].output_schema["anyOf"][0]  # or a job still running
    assert result_branch["properties"]["molar_volume_l_per_mol"] == {"type": "number"}
    assert (
        server.call_ok("example_buffer_ph", {"pka": 4.76, "acid_molar": 0.1, "base_molar": 0.1})["ph"] == 4.76
    )
    # R T / p at 273.15 K and 101325 Pa: 22.414 L/mol (CODATA molar volume of an ideal gas)
    vol = server.call_ok("example_molar_volume", {"temperature_k": 273.15, "pressure_pa": 101325})
    assert vol["molar_volume_l_per_mol"] == pytest.approx(22.414, abs=1e-3)
    error = server.call_error("example_buffer_ph", {"pka": 4.76, "acid_molar": 1, "base_molar": 1e-6})
    assert error["code"] == "buffer_out_of_range"
    assert error["hint"].startswith("Use the full acid-base equilibrium")
    # the batch tool: a typed item per ratio (its schema names the item's keys), a bad ratio its own error
    series = server.call_ok("example_buffer_series", {"pka": 4.76, "ratios": [1.0, 1e5]})
    assert series["items"][0] == {"index": 0, "ok": True, "ratio": 1.0, "ph": 4.76}
    assert series["items"][1]["error"]["code"] == "buffer_out_of_range"
    point = tools["example_buffer_series"].output_schema["properties"]["items"]["items"]
    assert {"ratio", "ph"} <= set(point["properties"]) and point["additionalProperties"] is False
    info = server.call_ok("system_info")
    assert "example" in info["domains"] and info["engines"]["scipy"]["importable"] is True
    assert vol["provenance"]["engines"]["scipy"] == info["engines"]["scipy"]["version"]
    # ctx.set_engine("scipy.constants") without a version: the installed scipy's (it was null before)
    assert vol["provenance"]["engine"] == "scipy.constants"
    assert vol["provenance"]["engine_version"] == info["engines"]["scipy"]["version"] is not None


def test_example_plugin_check_runs_in_spu_doctor(spu_env, plugin_dir):
    """The plugin's doctor check, found through its entry point with no core edit, runs for real."""
    env = {**spu_env, "PYTHONPATH": os.pathsep.join([str(plugin_dir), spu_env["PYTHONPATH"]])}
    out = _spu("doctor", "--json", "--only", "example-scipy", env=env)
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert checks["example-scipy"]["status"] == "ok"
    assert checks["example-scipy"]["detail"] == "R = 8.31446261815324 J/(mol K)"


def test_plugin_source_on_pythonpath_loads_through_spu_tool_modules(spu_env, start_mcp_server):
    """The second install route: the package's folder on PYTHONPATH, named in SPU_TOOL_MODULES, without
    entry-point metadata. The package's DOMAIN comes along: its tools, engine, doctor check and codes."""
    source = REPO / "examples" / "spu-example-plugin"
    env = {
        **spu_env,
        "PYTHONPATH": os.pathsep.join([str(source), spu_env["PYTHONPATH"]]),
        "SPU_TOOL_MODULES": "spu_example_plugin",
    }
    server = start_mcp_server(env)
    assert {"example_buffer_ph", "example_molar_volume"} <= {t.name for t in server.list_tools()}
    error = server.call_error("example_buffer_ph", {"pka": 4.76, "acid_molar": 1, "base_molar": 1e-6})
    assert error["code"] == "buffer_out_of_range"
    assert error["hint"] == "Use the full acid-base equilibrium instead of Henderson-Hasselbalch."
    info = server.call_ok("system_info")
    assert "example" in info["domains"] and info["engines"]["scipy"]["importable"] is True


BARE_PLUGIN = """
from pydantic import BaseModel, Field

from tools_server.plugin import ToolContext, ToolError, tool


class Value(BaseModel):
    x: float = Field(description="a number")


@tool(name="bare_refuse", resource="instant")
def bare_refuse(args: Value) -> dict:
    \"\"\"Refuses with the module's own error code.\"\"\"
    raise ToolError("bare_refused", f"{args.x} is refused here.", "Ask for another number.")


@tool(name="bare_norm", resource="cpu", engines=("numpy",))
def bare_norm(args: Value, ctx: ToolContext) -> dict:
    \"\"\"The absolute value, computed by numpy in a worker; refuses negative numbers in the job.\"\"\"
    import numpy

    if args.x < 0:
        raise ToolError("bare_negative", "Negative numbers are refused.", "Give a positive number.")
    ctx.set_engine("numpy")
    return {"norm": float(numpy.abs(args.x))}
"""


def test_a_bare_plugin_module_keeps_its_own_codes_and_engine_version(spu_env, start_mcp_server, tmp_path):
    """A module named in SPU_TOOL_MODULES that raises its own code got ``internal_error … a bug in the tool
    server``; its code and hint now reach the client, from the server process and from a worker alike."""
    import numpy

    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "bare_plugin.py").write_text(BARE_PLUGIN)
    env = {
        **spu_env,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "plugin"), spu_env["PYTHONPATH"]]),
        "SPU_TOOL_MODULES": "bare_plugin",
    }
    server = start_mcp_server(env)
    assert server.call_error("bare_refuse", {"x": 3}) == {
        "code": "bare_refused",
        "message": "3.0 is refused here.",
        "hint": "Ask for another number.",
    }
    in_job = server.call_error("bare_norm", {"x": -2})
    assert (in_job["code"], in_job["hint"]) == ("bare_negative", "Give a positive number.")
    out = server.call_ok("bare_norm", {"x": -0.0})
    assert out["norm"] == 0.0
    assert out["provenance"]["engine"] == "numpy"
    assert out["provenance"]["engine_version"] == numpy.__version__


def test_every_tool_is_annotated_and_named_by_the_rules(mcp_server):
    tools = mcp_server.list_tools()
    assert {"system_info", "job_wait", "job_cancel", "jobs"} <= {t.name for t in tools}
    for t in tools:
        assert len(t.name) < 40 and t.name == t.name.lower()
        a = t.annotations
        assert None not in (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint), (
            t.name
        )
        assert t.description and t.input_schema["type"] == "object"


def _spu(*args: str, env=None, check: bool = False, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spu", *args],
        capture_output=True,
        text=True,
        env=env,
        check=check,
        **kw,
    )


def test_http_refuses_public_bind_without_token(spu_env):
    # the refusal happens before any socket is bound
    res = _spu("serve", "--transport", "http", "--host", "0.0.0.0", env=spu_env, timeout=60)
    assert res.returncode == 2 and "needs --token" in res.stderr


@pytest.fixture
def http_server(spu_env):
    with http_spu_server(spu_env, token="s3cret") as (url, _):
        yield url, int(url.rsplit(":", 1)[1].split("/")[0])


def test_http_token_and_rebinding_checks(http_server):
    url, _ = http_server
    assert httpx.post(url, json=INIT, headers=HEADERS).status_code == 401
    auth = {**HEADERS, "authorization": "Bearer s3cret"}
    assert httpx.post(url, json=INIT, headers={**auth, "authorization": "Bearer wrong"}).status_code == 401
    # a rebound DNS name reaching the loopback server carries a foreign Host header
    bad_host = httpx.post(url, json=INIT, headers={**auth, "host": "evil.example:80"})
    assert bad_host.status_code in (403, 421)
    bad_origin = httpx.post(url, json=INIT, headers={**auth, "origin": "http://evil.example"})
    assert bad_origin.status_code == 403
    ok = httpx.post(url, json=INIT, headers=auth)
    assert ok.status_code == 200 and "protocolVersion" in ok.text


def test_http_client_calls_a_tool(http_server):
    import asyncio

    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    url, _ = http_server

    async def main():
        client = httpx.AsyncClient(headers={"authorization": "Bearer s3cret"}, timeout=30)
        async with (
            streamable_http_client(url, http_client=client) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            await session.initialize()
            return await session.call_tool("system_info", {})

    result = asyncio.run(main())
    assert not result.is_error and result.structured_content["cpu_cores"] >= 1


def test_server_starts_fast_without_engines(spu_env):
    """Heavy engines are imported only in workers: the server process must not import them."""
    code = (
        "import sys, time; t=time.perf_counter(); from tools_server.core.server import SpuServer; "
        "SpuServer(); "
        "print(time.perf_counter()-t); print(sorted(m for m in ('torch','pyscf','openmm','rdkit','tblite',"
        "'xtb','esm','transformers','mdtraj') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=spu_env, check=True
    )
    _, heavy = out.stdout.strip().splitlines()
    assert heavy == "[]", f"the server imported engines at start-up: {heavy}"


def test_cache_is_safe_under_two_writer_processes(tmp_path):
    script = (
        "import sys; from pathlib import Path; from tools_server.core.cache import ResultCache\n"
        "c = ResultCache(Path(sys.argv[1]))\n"
        "for i in range(300):\n"
        "    c.put(f'{i % 20:064x}', {'writer': sys.argv[2], 'i': i, 'pad': 'x' * 5000})\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), w]) for w in ("a", "b")]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    from tools_server.core.cache import ResultCache

    cache = ResultCache(tmp_path)
    entries = [cache.get(f"{i:064x}") for i in range(20)]
    assert all(e is not None and e["writer"] in ("a", "b") and len(e["pad"]) == 5000 for e in entries)
    assert not list((tmp_path / "v2").glob("*/.tmp-*"))


def test_cache_cli_stats_and_clear(job_server, job_env):
    job_server.call_ok("test_square", {"x": 11})
    stats = json.loads(_spu("cache", "stats", "--json", env=job_env, check=True).stdout)
    assert stats["entries"] == 1 and stats["per_tool"] == {"test_square": 1}
    assert json.loads(_spu("cache", "clear", "--json", env=job_env, check=True).stdout) == {"removed": 1}
    assert job_server.call_ok("test_square", {"x": 11})["provenance"]["cache"] == "miss"


def test_large_result_becomes_an_artifact(spu_env):
    from tools_server.core.dispatch import RESULT_BUDGET_CHARS, fit_budget

    big = {
        "rows": [{"i": i, "value": i * 0.5} for i in range(5000)],
        "count": 5000,
        "provenance": {"tool": "t"},
    }
    small = fit_budget("t", big, "abc")
    assert len(json.dumps(small)) < RESULT_BUDGET_CHARS
    assert small["count"] == 5000 and "rows" not in small
    assert json.loads(Path(small["result_artifact"]).read_text())["rows"][4999]["value"] == 2499.5


@pytest.mark.slow
def test_dask_jobs_get_their_reserved_cores(job_env, monkeypatch):
    """Before, every Dask task ran with one thread whatever its tool declared. With a ``cores`` resource
    on the workers, two all-cores jobs also never share a worker."""
    import asyncio

    from distributed import Client, LocalCluster

    from tools_server.core.dispatch import Dispatcher
    from tools_server.core.jobs import JobManager
    from tools_server.core.jobs.dask import DaskExecutor
    from tools_server.core.registry import load_registry

    sys.path.insert(0, str(Path(__file__).parent))
    monkeypatch.setenv("SPU_TOOL_MODULES", "spu_perf_tools")
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            resources={"cores": 2},
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        executor = DaskExecutor(client=client)
        assert executor.max_cores == 2
        dispatcher = Dispatcher(JobManager(executor), registry=load_registry())

        async def both():
            return await asyncio.gather(
                dispatcher.call("perf_all", {"seconds": 0.5, "tag": "a"}),
                dispatcher.call("perf_all", {"seconds": 0.5, "tag": "b"}),
                dispatcher.call("perf_single", {"seconds": 0, "tag": "one"}),
            )

        a, b, one = asyncio.run(both())
        assert a["threads"] == 2 and b["threads"] == 2 and one["threads"] == 1
        assert a["end"] <= b["start"] or b["end"] <= a["start"], "two all-cores jobs ran at once"


@pytest.mark.slow
def test_dask_backend_on_a_local_cluster(job_env, monkeypatch):
    """The swappable executor: the same job on a Dask LocalCluster (loopback only)."""
    import asyncio

    from distributed import Client, LocalCluster

    from tools_server.core.dispatch import Dispatcher
    from tools_server.core.jobs import JobManager
    from tools_server.core.jobs.dask import DaskExecutor
    from tools_server.core.registry import load_registry

    sys.path.insert(0, str(Path(__file__).parent))
    monkeypatch.setenv("SPU_TOOL_MODULES", "spu_testing_tools")
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        dispatcher = Dispatcher(JobManager(DaskExecutor(client=client)), registry=load_registry())
        out = asyncio.run(dispatcher.call("test_square", {"x": 12}))
        assert out["square"] == 144 and out["provenance"]["device"] == "dask"
        assert out["pid"] != os.getpid()
        slept = asyncio.run(dispatcher.call("test_sleep", {"seconds": 0.2, "steps": 1, "tag": "dask"}))
        assert slept["slept_s"] == 0.2 and slept["tag"] == "dask"
