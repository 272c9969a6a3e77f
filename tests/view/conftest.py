"""Fixtures for ``spu view``: recorded runs (the reference agent replaying the shipped demo recording
against the live tools), broken run directories, and a headless system Chromium driven by Playwright.

The browser tests skip, saying why, where Chromium or Playwright is missing (``bash scripts/test.sh``
installs Chromium with apt-get where it can). Chromium is started so that nothing can leave loopback:
a proxy on a closed loopback port for every non-loopback URL and a resolver that resolves no name.
Screenshots go to ``SPU_TEST_ARTIFACTS/view`` when that variable is set, else to pytest's temporary
directory; each test prints where.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SPU = Path(sys.executable).with_name("spu")
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: Chromium switches that keep every request on loopback (non-loopback URLs go to a closed port)
LOOPBACK_ONLY_ARGS = [
    "--no-sandbox",
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
]


def spu(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SPU), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def find_chromium() -> str | None:
    explicit = os.environ.get("SPU_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else None
    # Debian's /usr/bin/chromium is a shell wrapper; the binary itself starts faster and quieter
    if Path("/usr/lib/chromium/chromium").exists():
        return "/usr/lib/chromium/chromium"
    for name in CHROMIUM_NAMES:
        if found := shutil.which(name):
            return found
    return None


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


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """A headless system Chromium under Playwright; skips with the reason when either is missing."""
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


class Page:
    """A browser tab that records every request it makes and every script error it hits."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda req: self.requests.append(req.url))
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def off_loopback(self) -> list[str]:
        """Requests to anything but 127.0.0.1, a file or inline data."""
        return [
            url
            for url in self.requests
            if not url.startswith(("http://127.0.0.1:", "file://", "data:", "about:"))
        ]

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def tab(chromium) -> Iterator[Page]:
    page = Page(chromium)
    yield page
    page.close()
