"""``spu doctor``: what works on this machine, and how to fix what does not.

Every engine check runs in its own Python subprocess (a session of its own) with a timeout, so an engine
whose import crashes (a segfault in a CUDA library, a Fortran ``STOP``) or hangs is reported as broken
while doctor keeps going. The checks run at once, the slowest of the last run first, and each result is
handed to the caller as it comes; an interrupted doctor kills the checks it started. Each check does a
tiny real computation and compares it with a known value, because an engine that imports but computes
garbage is broken too. The checks come from the domains (each :class:`~tools_server.core.domain.Domain`
declares its own, in its folder's ``checks.py``); the core adds the MCP SDK and the CUDA libraries.

Plus the GPU (``nvidia-smi``), the CUDA libraries (libcudart, libcublas, from the system or from the
``nvidia-*`` wheels), the work, cache and weights directories. A failing *required* check makes the exit
status 1. Required: the core and every engine of ``spu-scaffold[all]`` (``--profile all``, the default) or
only the core (``--profile core``); on a machine with a GPU, the GPU engines too.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import signal
import sys
import textwrap
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tools_server.commands.doctor_runner import (
    Zygote,
    ZygoteGone,
    imports_of,
    kill_all,
    run_fresh,
    shared_imports,
)
from tools_server.core.domain import DoctorCheck

MARKER = "SPU-DOCTOR-RESULT:"
PROFILES = ("core", "all")
WEIGHT_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors", ".ckpt", ".npz")

#: Prepended to every check's code: ``report(**facts)`` prints the result line doctor parses;
#: ``report(..., warning=TEXT, warning_fix=TEXT)`` makes a working engine a warning (weights missing).
_PRELUDE = f"""
import json, os, sys
GPU = os.environ.get("SPU_DOCTOR_GPU") == "1"
def report(**facts):
    sys.stdout.write("\\n{MARKER}" + json.dumps(facts) + "\\n")
    sys.stdout.flush()
"""


@dataclass
class CheckResult:
    name: str
    what: str
    status: str  # ok | fail | warn | skip
    required: bool
    detail: str
    fix: str | None = None
    version: str | None = None
    wall_s: float = 0.0
    facts: dict[str, Any] = field(default_factory=dict)
    #: reused from the last run (the environment's fingerprint and the check's code unchanged)
    cached: bool = False


CORE_CHECKS: tuple[DoctorCheck, ...] = (
    DoctorCheck(
        "mcp",
        "MCP Python SDK",
        """
            import mcp, importlib.metadata as md
            report(version=md.version("mcp"), detail="imports")
            """,
        "pip install 'mcp>=2.3,<3' (a core dependency of spu-scaffold)",
        profile="core",
    ),
    DoctorCheck(
        "cuda-libs",
        "CUDA runtime and cuBLAS libraries",
        """
            import ctypes, glob, site, sysconfig
            found = {}
            for lib, names in {"cudart": ["libcudart.so.12", "libcudart.so"],
                               "cublas": ["libcublas.so.12", "libcublas.so"]}.items():
                for name in names:
                    try:
                        ctypes.CDLL(name)
                        found[lib] = name + " (system)"
                        break
                    except OSError:
                        pass
                else:
                    roots = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
                    hits = [p for r in roots for p in glob.glob(f"{r}/nvidia/*/lib/lib{lib}.so*")]
                    for path in hits:
                        try:
                            ctypes.CDLL(path)
                            found[lib] = path.rsplit("site-packages/", 1)[-1] + " (wheel)"
                            break
                        except OSError:
                            pass
            missing = [lib for lib in ("cudart", "cublas") if lib not in found]
            if missing:
                raise SystemExit(f"not loadable: {', '.join('lib' + m for m in missing)}")
            report(detail="; ".join(f"lib{k}: {v}" for k, v in found.items()), libraries=found)
            """,
        "use the nvidia/cuda runtime base image (Dockerfile.gpu) or pip install nvidia-cuda-runtime-cu12 "
        "nvidia-cublas-cu12; check LD_LIBRARY_PATH",
        gpu_only=True,
    ),
)


def engine_checks(registry: Any = None) -> list[DoctorCheck]:
    """The core's checks, then every loaded domain's (the project's own and third-party)."""
    from tools_server.core.registry import load_registry

    return [*CORE_CHECKS, *(registry or load_registry()).doctor_checks()]


def plugin_results(registry: Any) -> list[CheckResult]:
    """One failed check per plugin the server could not load (it skips them; the other tools work), with
    the fix where it was named: an entry point is fixed in the package that declares it, a module in
    ``SPU_TOOL_MODULES``."""
    return [
        CheckResult(
            f"plugin {e['plugin']}",
            f"tool plugin named in {e['source']}",
            "fail",
            True,
            e["error"],
            _plugin_fix(e),
        )
        for e in registry.load_errors
    ]


def _plugin_fix(error: dict[str, str]) -> str:
    if error["source"] == "SPU_TOOL_MODULES":
        return "fix the module, or remove it from SPU_TOOL_MODULES"
    dist = error.get("distribution")
    if dist:
        return (
            f"the installed package {dist} declares this entry point: reinstall it (pip install "
            f"--force-reinstall {dist}) or, if you do not use it, uninstall it (pip uninstall {dist})"
        )
    return "the installed package that declares this entry point is broken: reinstall or uninstall it"


def check_names(checks: list[DoctorCheck] | None = None) -> list[str]:
    names = [c.name for c in (engine_checks() if checks is None else checks)]
    return ["gpu", *names, "dirs", "weights", "executor"]


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _last_error_line(stderr: str, stdout: str) -> str:
    for text in (stderr, stdout):
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        if lines:
            return lines[-1][:300]
    return "no output"


def run_engine_check(
    check: DoctorCheck, *, gpu: bool, timeout_s: float, required: bool, zygote: Zygote | None = None
) -> CheckResult:
    """Run one check in a process of its own (forked from ``zygote`` when it imports what the zygote
    preloaded, else a fresh interpreter: :mod:`~tools_server.commands.doctor_runner`); a crash, hang or
    wrong number is a failure, never an exception."""
    check_code = textwrap.dedent(check.code)
    code = _PRELUDE + check_code
    env = dict(os.environ, SPU_DOCTOR_GPU="1" if gpu else "0", PYTHONUNBUFFERED="1")
    result = CheckResult(check.name, check.what, "fail", required, "", check.fix)
    limit = check.timeout_s if check.timeout_s and check.timeout_s > timeout_s else timeout_s
    started = time.monotonic()
    warm = zygote is not None and not check.gpu_only and bool(imports_of(check_code) & set(zygote.preload))
    finished = None
    if warm:
        assert zygote is not None
        with contextlib.suppress(ZygoteGone):
            finished = zygote.run(code, env, limit)
    if finished is None:
        finished = run_fresh(code, env, limit)
    result.wall_s = round(time.monotonic() - started, 2)
    if finished.returncode is None:
        result.detail = f"timed out after {limit:g} s (import or computation hangs)"
        result.facts = {"timed_out": True}
        return result
    stdout, stderr = finished.stdout, finished.stderr
    facts = None
    for line in stdout.splitlines():
        if line.startswith(MARKER):
            facts = json.loads(line[len(MARKER) :])
    if finished.returncode < 0:
        result.detail = f"crashed with {_signal_name(finished.returncode)} ({_last_error_line(stderr, '')})"
    elif finished.returncode != 0 or facts is None:
        message = _last_error_line(stderr, stdout)
        if "ModuleNotFoundError" in message or "ImportError" in message:
            result.detail = f"not installed or not importable: {message}"
        else:
            result.detail = message
    else:
        # the engine works; a check may still warn (its weights are missing, so its tools answer
        # weights_missing): report(warning=..., warning_fix=...) names what to set
        warning = facts.pop("warning", None)
        result.status = "warn" if warning else "ok"
        result.fix = facts.pop("warning_fix", None) or check.fix if warning else None
        result.version = facts.pop("version", None)
        result.detail = "; ".join(filter(None, [facts.pop("detail", ""), warning]))
        result.facts = facts
    if result.status == "fail" and not required:
        result.status = "warn"
    return result


#: (lowest NVIDIA Linux driver major version, the extra whose wheels it runs), newest CUDA first
CUDA_EXTRAS = ((580, "gpu-cu13", "CUDA 13"), (525, "gpu", "CUDA 12"))
#: distributions that tie an installation to one CUDA major version
CUDA_DISTRIBUTIONS = {
    "gpu-cu13": ("gpu4pyscf-cuda13x", "cupy-cuda13x", "openmm-cuda-13"),
    "gpu": ("gpu4pyscf-cuda12x", "cupy-cuda12x", "openmm-cuda-12"),
}


def cuda_extra_for_driver(driver: str) -> tuple[str, str] | None:
    """The extra (``gpu-cu13`` or ``gpu``) and CUDA version an NVIDIA driver runs, newest first; None for
    a driver too old for CUDA 12 or a version that cannot be read."""
    try:
        major = int(driver.strip().split(".")[0])
    except ValueError:
        return None
    return next(((extra, cuda) for lowest, extra, cuda in CUDA_EXTRAS if major >= lowest), None)


def installed_cuda_extras() -> dict[str, list[str]]:
    """Which CUDA-specific distributions are installed, per extra."""
    from importlib import metadata

    found: dict[str, list[str]] = {}
    for extra, names in CUDA_DISTRIBUTIONS.items():
        for name in names:
            try:
                metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
            found.setdefault(extra, []).append(name)
    return found


def gpu_check(gpus: list[dict[str, str]], installed: dict[str, list[str]] | None = None) -> CheckResult:
    if gpus:
        names = "; ".join(f"{g['name']} ({g['memory']}, driver {g['driver']})" for g in gpus)
        drivers = [d for d in (cuda_extra_for_driver(g["driver"]) for g in gpus) if d]
        facts: dict = {"gpus": gpus}
        if len(drivers) < len(gpus):
            return CheckResult(
                "gpu",
                "NVIDIA GPU (nvidia-smi)",
                "warn",
                False,
                f"{names}; the driver is too old for CUDA 12",
                "update the NVIDIA driver to 525 or newer (580 or newer for CUDA 13)",
                facts=facts,
            )
        extra, cuda = min(drivers, key=lambda d: [e for _, e, _ in CUDA_EXTRAS].index(d[0]))
        facts["cuda_extra"] = extra
        installed = installed_cuda_extras() if installed is None else installed
        detail = f"{names}; the driver runs {cuda}: install spu-scaffold[{extra}]"
        # CUDA 12 wheels run on a CUDA 13 driver; CUDA 13 wheels do not run on a CUDA 12 driver
        wrong = installed.get("gpu-cu13", []) if extra == "gpu" else []
        if wrong:
            return CheckResult(
                "gpu",
                "NVIDIA GPU (nvidia-smi)",
                "warn",
                False,
                f"{detail}; installed for a newer CUDA than the driver runs: {', '.join(wrong)}",
                f"pip uninstall {' '.join(wrong)} && pip install 'spu-scaffold[{extra}]'",
                facts=facts,
            )
        return CheckResult("gpu", "NVIDIA GPU (nvidia-smi)", "ok", False, detail, facts=facts)
    why = (
        "SPU_DISABLE_GPU=1 hides it"
        if os.environ.get("SPU_DISABLE_GPU") == "1"
        else "no GPU found by nvidia-smi"
    )
    return CheckResult(
        "gpu",
        "NVIDIA GPU (nvidia-smi)",
        "skip",
        False,
        f"{why}; the GPU checks are skipped",
        "on a GPU host run the container with --gpus all (NVIDIA Container Toolkit); "
        "Harbor tasks request gpus = 1",
    )


def _writable(path: Path) -> str | None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".spu-doctor-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    return None


def dirs_check() -> CheckResult:
    import platformdirs

    work = Path(os.environ.get("SPU_WORKDIR") or "spu-work").absolute()
    cache = Path(os.environ.get("SPU_CACHE_DIR") or platformdirs.user_cache_dir("spu")).absolute()
    problems = [p for p in (_writable(work), _writable(cache)) if p]
    detail = f"work {work}; cache {cache}"
    if problems:
        return CheckResult(
            "dirs",
            "work and cache directories writable",
            "fail",
            True,
            "not writable: " + "; ".join(problems),
            "set SPU_WORKDIR and SPU_CACHE_DIR to writable directories (in Docker: a volume "
            "owned by the image's user, uid 1000)",
        )
    return CheckResult("dirs", "work and cache directories writable", "ok", True, detail)


def weights_check() -> CheckResult:
    from tools_server.core import settings

    root = settings.weights_dir()
    files = (
        sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
        if root.is_dir()
        else []
    )
    if not files:
        return CheckResult(
            "weights",
            "model weights (ESM-2, ESMFold)",
            "warn",
            False,
            f"none in {root}; protein tools that need weights answer weights_missing",
            "copy the checkpoints into SPU_WEIGHTS_DIR (docs/docker.md: put them in docker/weights/ "
            "before the build to bake them into the GPU image)",
        )
    listed = [{"file": str(p.relative_to(root)), "mb": round(p.stat().st_size / 2**20, 1)} for p in files]
    shown = ", ".join(f"{w['file']} ({w['mb']} MB)" for w in listed[:6])
    more = f" and {len(listed) - 6} more" if len(listed) > 6 else ""
    return CheckResult(
        "weights",
        "model weights (ESM-2, ESMFold)",
        "ok",
        False,
        f"{root}: {shown}{more}",
        facts={"files": listed},
    )


def executor_check(timeout_s: float = 20.0) -> CheckResult:
    """Where jobs run: the local executor's slots, or the Dask scheduler (``SPU_EXECUTOR=dask``) with its
    workers, their threads and ``cores`` resources; an unreachable scheduler fails (jobs could not run)."""
    from tools_server.core import hardware

    what = "job executor"
    if os.environ.get("SPU_EXECUTOR", "local") != "dask":
        slots = int(os.environ.get("SPU_CPU_SLOTS") or 0) or hardware.cpu_count()
        return CheckResult(
            "executor", what, "ok", True, f"local: {slots} CPU slot(s)", facts={"executor": "local"}
        )
    address = os.environ.get("SPU_DASK_SCHEDULER")
    fix = "start the scheduler and workers (docs/server.md, Dask), or unset SPU_EXECUTOR to run jobs locally"
    if not address:
        return CheckResult(
            "executor", what, "fail", True, "SPU_EXECUTOR=dask without SPU_DASK_SCHEDULER", fix
        )
    try:
        from distributed import Client

        with Client(address, timeout=timeout_s, set_as_default=False) as client:
            workers = list(client.scheduler_info().get("workers", {}).values())
    except ImportError:
        return CheckResult(
            "executor",
            what,
            "fail",
            True,
            "distributed is not installed",
            "pip install 'spu-scaffold[cluster]'",
        )
    except Exception as exc:  # unreachable, refused, timed out
        return CheckResult("executor", what, "fail", True, f"scheduler {address}: {exc}", fix)
    facts = {
        "executor": "dask",
        "scheduler": address,
        "workers": [
            {"name": str(w.get("name")), "threads": w.get("nthreads"), "resources": w.get("resources", {})}
            for w in workers
        ],
    }
    threads = sum(int(w.get("nthreads") or 0) for w in workers)
    status = "ok" if workers else "warn"
    detail = f"dask scheduler {address}: {len(workers)} worker(s), {threads} thread(s)"
    return CheckResult(
        "executor", what, status, True, detail, None if workers else "start dask workers", facts=facts
    )


def default_jobs() -> int:
    """Checks run at once by default: one more than the cores. A check is mostly an interpreter importing
    its engine (CPU and disk), and a subprocess waiting on the disk leaves its core to the next one."""
    return (os.cpu_count() or 1) + 1


def run_doctor(
    *,
    profile: str = "all",
    only: list[str] | None = None,
    timeout_s: float = 120.0,
    jobs: int | None = None,
    gpus: list[dict[str, str]] | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    fresh: bool = False,
) -> dict[str, Any]:
    """All checks; returns ``{"ok", "profile", "gpu", "checks": [...], "cached": N, "fingerprint"}``
    (``ok``: no required check failed). The quick checks (GPU, folders, weights, executor) come first; the
    engine checks run at once, ``jobs`` at a time (default :func:`default_jobs`), those slowest in the last
    run first, forked from a warm zygote where they share imports. An engine check's result is reused
    from the last run when the environment's fingerprint (:func:`environment_fingerprint`) and the
    check's code are unchanged and ``fresh`` is false; ``on_result`` is called with each result as it
    comes, in this thread."""
    from tools_server.core import hardware

    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}")
    results: list[CheckResult] = []

    def done(result: CheckResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    found_gpus = hardware.gpus() if gpus is None else gpus
    has_gpu = bool(found_gpus)
    local: dict[str, Callable[[], CheckResult]] = {
        "gpu": functools.partial(gpu_check, found_gpus),
        "dirs": dirs_check,
        "weights": weights_check,
        "executor": functools.partial(executor_check, timeout_s=min(timeout_s, 20.0)),
    }
    if not only:  # shown before the engines are even listed (loading the domains takes a moment)
        for check_fn in local.values():
            done(check_fn())
    from tools_server.core.registry import load_registry

    registry = load_registry()
    checks = engine_checks(registry)
    names = check_names(checks)
    unknown = sorted(set(only or []) - set(names))
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(names)}")
    wanted = set(only or names)
    if only:
        for name in (n for n in local if n in wanted):
            done(local[name]())
    fingerprint = environment_fingerprint(found_gpus)
    cached = {} if fresh else _cached_results(fingerprint)
    reused = 0
    last = _last_times()
    # the slowest first (in the last run; before one, those that declare a long time limit), so the run
    # ends about when its slowest check does
    slowest_first = sorted(
        (c for c in checks if c.name in wanted), key=lambda c: -last.get(c.name, c.timeout_s or 0.0)
    )
    to_run: list[tuple[DoctorCheck, bool]] = []
    for check in slowest_first:
        if check.gpu_only and not has_gpu:
            done(CheckResult(check.name, check.what, "skip", False, "no GPU", None))
            continue
        required = check.profile == "core" or (check.profile == "all" and profile == "all") or check.gpu_only
        hit = cached.get(_check_key(check, has_gpu, required))
        if hit is not None:
            reused += 1
            done(CheckResult(**{**hit, "cached": True}))
        else:
            to_run.append((check, required))
    ran = _run_engine_checks(to_run, has_gpu, timeout_s, jobs, done)
    _remember_times({**last, **{r.name: r.wall_s for r in ran if r.status != "skip"}})
    _save_results(fingerprint, cached, ran, has_gpu, {c.name: c for c, _ in to_run})
    order = {name: i for i, name in enumerate(names)}
    results.sort(key=lambda r: order[r.name])
    results += plugin_results(registry)
    ok = not any(r.status == "fail" and r.required for r in results)
    return {
        "ok": ok,
        "profile": profile,
        "gpu": has_gpu,
        "python": sys.version.split()[0],
        "cached": reused,
        "fingerprint": fingerprint,
        "checks": [asdict(r) for r in results],
    }


def _run_engine_checks(
    to_run: list[tuple[DoctorCheck, bool]],
    has_gpu: bool,
    timeout_s: float,
    jobs: int | None,
    done: Callable[[CheckResult], None],
) -> list[CheckResult]:
    """Run the checks at once, ``jobs`` at a time, forked from one zygote where they share imports."""
    codes = [textwrap.dedent(check.code) for check, _ in to_run if not check.gpu_only]
    preload = [m for m in shared_imports(codes) if m.split(".")[0] not in sys.stdlib_module_names]
    zygote = Zygote(preload, dict(os.environ)) if preload else None
    ran: list[CheckResult] = []
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs or default_jobs())) as pool:
            run = functools.partial(run_engine_check, gpu=has_gpu, timeout_s=timeout_s, zygote=zygote)
            futures = [pool.submit(run, check, required=required) for check, required in to_run]
            try:
                for future in as_completed(futures):
                    ran.append(future.result())
                    done(ran[-1])
            except KeyboardInterrupt:  # Ctrl-C: no check is left running (each runs in its own session)
                pool.shutdown(wait=False, cancel_futures=True)
                while not all(f.done() for f in futures):  # until no thread is left to start a check
                    kill_all()
                    wait(futures, timeout=0.1)
                raise
    finally:
        if zygote is not None:
            zygote.close()
    return ran


#: environment variables that change what a check finds (where weights are, which GPU, which plugins,
#: which libraries load)
FINGERPRINT_ENV = (
    "SPU_WEIGHTS_DIR",
    "SPU_WEIGHTS_DOWNLOAD",
    "SPU_DISABLE_GPU",
    "SPU_TOOL_MODULES",
    "CUDA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "OMP_NUM_THREADS",
)


def environment_fingerprint(gpus: list[dict[str, str]]) -> str:
    """A key of everything an engine check's verdict depends on but its code: the interpreter, every
    installed distribution and its version, the GPUs and driver, the variables in :data:`FINGERPRINT_ENV`,
    the weights folder's files (names, sizes, times), and the project's own modules (their sizes and
    times: a check may import them). Costs tens of milliseconds: no engine is imported."""
    from importlib import metadata

    from tools_server.core import settings

    digest = hashlib.sha256()

    def add(*parts: object) -> None:
        digest.update(json.dumps(parts, default=str).encode())

    add(sys.executable, sys.version, sys.path)
    add(sorted({(d.metadata["Name"] or "", d.version) for d in metadata.distributions()}))
    add(sorted((g.get("name", ""), g.get("driver", ""), g.get("memory", "")) for g in gpus))
    add({name: os.environ.get(name) for name in FINGERPRINT_ENV})
    add(_tree_stat(settings.weights_dir()))
    add(_tree_stat(Path(__file__).resolve().parents[1], suffix=".py"))
    return digest.hexdigest()


def _tree_stat(root: Path, suffix: str | None = None) -> list[tuple[str, int, int]]:
    """(relative path, size, modification time) of every file under ``root`` (links not followed)."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if suffix is None or name.endswith(suffix):
                path = Path(folder, name)
                with contextlib.suppress(OSError):
                    st = path.lstat()
                    out.append((str(path.relative_to(root)), st.st_size, st.st_mtime_ns))
    return sorted(out)


def _check_key(check: DoctorCheck, gpu: bool, required: bool) -> str:
    """A check's entry in the result cache: its name, code and what it was run as."""
    text = json.dumps([check.name, check.code, check.timeout_s, check.profile, gpu, required])
    return hashlib.sha256(text.encode()).hexdigest()


def _results_file() -> Path:
    from tools_server.core import settings

    return settings.cache_dir() / "doctor-results.json"


def _cached_results(fingerprint: str) -> dict[str, dict[str, Any]]:
    """The last run's engine results by check key, when the environment's fingerprint is unchanged."""
    try:
        data = json.loads(_results_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("fingerprint") != fingerprint:
        return {}
    fields = set(CheckResult.__dataclass_fields__)
    results = data.get("results")
    if not isinstance(results, dict):
        return {}
    return {
        key: value
        for key, value in results.items()
        if isinstance(value, dict) and set(value) <= fields and {"name", "status"} <= set(value)
    }


def _save_results(
    fingerprint: str,
    kept: dict[str, dict[str, Any]],
    ran: list[CheckResult],
    gpu: bool,
    by_name: dict[str, DoctorCheck],
) -> None:
    """Keep this run's engine results for the next (a check that timed out is not kept: under load it may
    pass next time); a cache folder that cannot be written only costs the next run its speed."""
    from spu_common.jsonfiles import atomic_write_json

    results = dict(kept)
    for result in ran:
        check = by_name.get(result.name)
        if check is None or result.facts.get("timed_out") or result.status == "skip":
            continue
        entry = {k: v for k, v in asdict(result).items() if k != "cached"}
        results[_check_key(check, gpu, result.required)] = entry
    with contextlib.suppress(OSError):
        atomic_write_json(_results_file(), {"fingerprint": fingerprint, "results": results})


def _times_file() -> Path:
    from tools_server.core import settings

    return settings.cache_dir() / "doctor-times.json"


def _last_times() -> dict[str, float]:
    """Each check's wall time in the last run on this machine (none before the first run)."""
    try:
        times = json.loads(_times_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in times.items() if isinstance(v, int | float)} if isinstance(times, dict) else {}


def _remember_times(times: dict[str, float]) -> None:
    """Kept for the next run's order; a cache folder that cannot be written only costs that order (the
    dirs check reports the folder)."""
    from spu_common.jsonfiles import atomic_write_json

    with contextlib.suppress(OSError):
        atomic_write_json(_times_file(), times)
