"""Per-machine calibration of cost estimates: each tool's scaling law, corrected by what this machine took.

A tool that refuses jobs it cannot finish in time (DFT, MD on the CPU) estimates the time with a scaling
law fitted on this project's measurements. The law does not know the machine: its clock, memory bandwidth
or how busy it is. So every finished run records ``measured / law`` here, and the next estimate is the law
times the median of the recent ratios of this machine (1 until it has run anything). The file lives in the
cache directory, keyed by the machine (host name, CPU model, cores), so it survives restarts and is shared
by every server of the machine::

    model = CostModel("dft_cpu")
    estimate = model.estimate(law_s)         # law x this machine's factor
    ...run...
    provenance = model.record(law_s, estimate, measured_s)   # {estimate_s, measured_s, estimate_ratio}
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from tools_server.core import hardware, settings

#: How many recent runs the machine's factor is the median of.
WINDOW = 20
#: A run this far off the law (a suspended laptop, a swap storm) does not move the factor.
_OUTLIER = 20.0
_lock = threading.Lock()
_ran_in_process: set[str] = set()


def first_in_process(kind: str) -> bool:
    """True the first time a job of ``kind`` asks in this process (a worker's first run pays one-time
    costs, such as an engine's first context, that do not scale with the job); false afterwards."""
    with _lock:
        first = kind not in _ran_in_process
        _ran_in_process.add(kind)
    return first


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_key() -> str:
    """A short id of this machine as its speed goes: host, CPU model and usable cores."""
    text = f"{platform.node()}|{_cpu_model()}|{hardware.cpu_count()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class CostModel:
    """The measured/law ratios of one kind of job (``dft_cpu``, ``md_cpu``) on this machine."""

    def __init__(self, kind: str, root: Path | None = None) -> None:
        self.kind = kind
        self.path = (root or settings.cache_dir()) / "calibration" / f"{machine_key()}.json"

    def _load(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def ratios(self) -> list[float]:
        entry = self._load().get(self.kind) or {}
        return [float(r) for r in entry.get("ratios", []) if isinstance(r, int | float) and r > 0]

    def factor(self) -> float:
        """This machine's median measured/law ratio over its recent runs; 1 before the first."""
        ratios = self.ratios()
        return statistics.median(ratios) if ratios else 1.0

    def estimate(self, law_s: float) -> float:
        return law_s * self.factor()

    def record(
        self, law_s: float, estimate_s: float, measured_s: float, *, calibrate: bool = True
    ) -> dict[str, Any]:
        """Store ``measured / law`` for the next estimates (unless ``calibrate`` is false: a run that paid
        one-time costs); returns the provenance fields: the estimate, the measured time and their ratio
        (``estimate_ratio`` > 1: the run took longer than estimated)."""
        out = {
            "estimate_s": round(estimate_s, 3),
            "measured_s": round(measured_s, 3),
            "estimate_ratio": round(measured_s / estimate_s, 3) if estimate_s > 0 else None,
            "calibration": {"machine": machine_key(), "runs": len(self.ratios()), "recorded": calibrate},
        }
        if (
            not calibrate
            or law_s <= 0
            or measured_s <= 0
            or not (1 / _OUTLIER < measured_s / law_s < _OUTLIER)
        ):
            return out
        with _lock:
            data = self._load()
            entry = data.setdefault(self.kind, {})
            entry["ratios"] = [*entry.get("ratios", []), round(measured_s / law_s, 4)][-WINDOW:]
            entry["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
                tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
                os.replace(tmp, self.path)
            except OSError:
                pass  # calibration is a refinement: a read-only cache only leaves the law uncorrected
        return out
