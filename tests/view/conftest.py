"""Fixtures for ``spu view``: a recorded run (the reference agent replaying the shipped demo recording
against the live tools), a screenshot folder, and a headless system Chromium driven by Playwright.

The browser tests skip, saying why, where Chromium or Playwright is missing (``bash scripts/test.sh``
installs Chromium with apt-get where it can).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from view_testing import LOOPBACK_ONLY_ARGS, Page, find_chromium, spu


@pytest.fixture(scope="session")
def recorded_env(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("view-env")
    env = dict(os.environ)
    env["SPU_WORKDIR"] = str(base / "spu-work")
    env["SPU_CACHE_DIR"] = str(base / "spu-cache")
    return env


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory, recorded_env) -> Path:
    """A real run: `spu agent run` with the `replay:` model on the aromatic-acidity demo task."""
    from environment.demo_tasks import demo_task_dir

    out = tmp_path_factory.mktemp("recorded") / "demo"
    done = spu(
        "agent",
        "run",
        "--task",
        str(demo_task_dir("aromatic-acidity")),
        "--out",
        str(out),
        "--model",
        "replay:demo-aromatic-acidity",
        env=recorded_env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((out / "run.json").read_text())["exit_status"] == "submitted"
    return out


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory) -> Path:
    root = os.environ.get("SPU_TEST_ARTIFACTS")
    folder = Path(root) / "view" if root else tmp_path_factory.mktemp("view-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless system Chromium under Playwright; skips with the reason when either is missing. Ended
    with its module: while Playwright's sync API is open, its event loop counts as running in this thread,
    and a later file's asyncio.run() in the same test process fails (two processes run the suite)."""
    executable = find_chromium()
    if executable is None:
        pytest.skip(
            "no Chromium found (looked for chromium, chromium-browser, google-chrome, $SPU_CHROMIUM): "
            "run `bash scripts/setup-browser.sh` as root or `apt-get install -y chromium`"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright for Python is not installed: `pip install -e .[dev]`")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True, args=LOOPBACK_ONLY_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def tab(chromium) -> Iterator[Page]:
    page = Page(chromium)
    yield page
    page.close()
