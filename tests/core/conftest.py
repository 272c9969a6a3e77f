from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture
def job_env(spu_env, monkeypatch):
    """spu_env plus the test-only tools of spu_testing_tools loaded in the server and its workers."""
    import os

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ["PYTHONPATH"]]))
    monkeypatch.setenv("SPU_TOOL_MODULES", "spu_testing_tools")
    env = dict(os.environ)
    return env


@pytest.fixture
def job_server(job_env, start_mcp_server):
    return start_mcp_server(job_env)
