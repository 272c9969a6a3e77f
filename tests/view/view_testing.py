"""What the ``spu view`` tests share: the ``spu`` command, the system Chromium and a recording browser tab.

Chromium is started so that nothing can leave loopback:
a proxy on a closed loopback port for every non-loopback URL and a resolver that resolves no name.
Screenshots go to ``SPU_TEST_ARTIFACTS/view`` when that variable is set, else to pytest's temporary
directory; each test prints where.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

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
