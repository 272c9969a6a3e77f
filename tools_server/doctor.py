"""``spu doctor``: what works on this machine, and how to fix what does not.

Every engine check runs in its own Python subprocess with a timeout, so an engine whose import crashes
(a segfault in a CUDA library, a Fortran ``STOP``) or hangs is reported as broken while doctor keeps
going. Each check does a tiny real computation and compares it with a known value, because an engine
that imports but computes garbage is broken too:

* RDKit parses benzoic acid (9 heavy atoms).
* tblite and xtb-python: GFN2-xTB energy of water at its experimental geometry, -5.0704 Eh
  (both engines give -5.070371 Eh here; they agree to 5e-9 Eh, see ARCHITECTURE.md).
* PySCF: RHF/STO-3G of H2 at 0.74 Å, -1.11676 Eh (Szabo & Ostlund, table 3.6, at 1.4 bohr).
* OpenMM: the platforms, and one harmonic bond stretched by 0.1 nm with k = 1000 kJ/mol/nm², whose
  energy is 5 kJ/mol exactly (on the CUDA platform when a GPU is present).
* torch: a 2×2 matrix product (on CUDA when a GPU is present); fair-esm: a one-layer ESM-2 built from
  scratch scores a sequence (no weights); transformers: the ESMFold classes import.
* gpu4pyscf and cupy (GPU only): the same H2 RHF on the GPU; a reduction on the GPU.
* mdtraj: one distance (0.3 nm); trafilatura: main text from a small page; Biopython: a sequence's mass.

Plus the GPU (``nvidia-smi``), the CUDA libraries (libcudart, libcublas, from the system or from the
``nvidia-*`` wheels), the work, cache and weights directories. A failing *required* check makes the exit
status 1. Required: the core and every engine of ``spu-scaffold[all]`` (``--profile all``, the default) or
only the core (``--profile core``); on a machine with a GPU, the GPU engines too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MARKER = "SPU-DOCTOR-RESULT:"
PROFILES = ("core", "all")
WEIGHT_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors", ".ckpt", ".npz")

#: Prepended to every check's code: ``report(**facts)`` prints the result line doctor parses.
_PRELUDE = f"""
import json, os, sys
GPU = os.environ.get("SPU_DOCTOR_GPU") == "1"
def report(**facts):
    sys.stdout.write("\\n{MARKER}" + json.dumps(facts) + "\\n")
    sys.stdout.flush()
"""


@dataclass(frozen=True)
class EngineCheck:
    name: str
    what: str
    code: str
    fix: str
    profile: str = "all"  # "core": always required; "all": required under --profile all
    gpu_only: bool = False  # skipped without a GPU; required with one
    timeout_s: float | None = None  # overrides the default (GPU kernels compile on first use)


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


ENGINE_CHECKS: tuple[EngineCheck, ...] = (
    EngineCheck(
        "mcp",
        "MCP Python SDK",
        """
        import mcp, importlib.metadata as md
        report(version=md.version("mcp"), detail="imports")
        """,
        "pip install 'mcp>=2.3,<3' (a core dependency of spu-scaffold)",
        profile="core",
    ),
    EngineCheck(
        "rdkit",
        "RDKit (cheminformatics)",
        """
        from rdkit import Chem, rdBase
        mol = Chem.MolFromSmiles("OC(=O)c1ccccc1")
        n = mol.GetNumAtoms()
        assert n == 9, f"benzoic acid parsed with {n} heavy atoms, expected 9"
        report(version=rdBase.rdkitVersion, detail="benzoic acid: 9 heavy atoms")
        """,
        "pip install 'rdkit>=2024.3'",
        profile="core",
    ),
    EngineCheck(
        "tblite",
        "tblite (GFN2-xTB)",
        """
        import numpy as np, importlib.metadata as md
        from tblite.interface import Calculator
        bohr = 1 / 0.52917721067
        pos = np.array([[0, 0, 0.1173], [0, 0.7572, -0.4692], [0, -0.7572, -0.4692]]) * bohr
        calc = Calculator("GFN2-xTB", np.array([8, 1, 1]), pos)
        calc.set("verbosity", 0)
        e = float(calc.singlepoint().get("energy"))
        assert abs(e - -5.0704) < 1e-3, f"water GFN2 energy {e:.6f} Eh, expected -5.0704"
        report(version=md.version("tblite"), detail=f"water GFN2 energy {e:.6f} Eh", energy_hartree=e)
        """,
        "pip install 'spu-scaffold[qc]' (tblite wheels exist for Python 3.11 to 3.13)",
    ),
    EngineCheck(
        "xtb",
        "xtb-python (GFN2-xTB, optional beside tblite)",
        """
        import numpy as np, importlib.metadata as md
        from xtb.interface import Calculator
        from xtb.utils import get_method
        bohr = 1 / 0.52917721067
        pos = np.array([[0, 0, 0.1173], [0, 0.7572, -0.4692], [0, -0.7572, -0.4692]]) * bohr
        calc = Calculator(get_method("GFN2-xTB"), np.array([8, 1, 1]), pos)
        calc.set_verbosity(0)
        e = float(calc.singlepoint().get_energy())
        assert abs(e - -5.0704) < 1e-3, f"water GFN2 energy {e:.6f} Eh, expected -5.0704"
        report(version=md.version("xtb"), detail=f"water GFN2 energy {e:.6f} Eh", energy_hartree=e)
        """,
        "pip install xtb (wheels only for Python <= 3.11); tblite covers the same methods",
        profile="optional",
    ),
    EngineCheck(
        "pyscf",
        "PySCF (DFT on CPU)",
        """
        import pyscf
        from pyscf import gto, scf
        mol = gto.M(atom="H 0 0 0; H 0 0 0.74", basis="sto-3g", verbose=0)
        e = float(scf.RHF(mol).kernel())
        assert abs(e - -1.11676) < 1e-4, f"H2 RHF/STO-3G energy {e:.6f} Eh, expected -1.11676"
        report(version=pyscf.__version__, detail=f"H2 RHF/STO-3G {e:.6f} Eh", energy_hartree=e)
        """,
        "pip install 'spu-scaffold[qc]'",
    ),
    EngineCheck(
        "openmm",
        "OpenMM (molecular dynamics)",
        """
        import openmm as mm, openmm.unit as u
        names = [mm.Platform.getPlatform(i).getName() for i in range(mm.Platform.getNumPlatforms())]
        system = mm.System(); system.addParticle(1.0); system.addParticle(1.0)
        bond = mm.HarmonicBondForce(); bond.addBond(0, 1, 0.1, 1000.0); system.addForce(bond)
        platform = "CPU" if "CPU" in names else "Reference"
        ctx = mm.Context(system, mm.VerletIntegrator(0.001), mm.Platform.getPlatformByName(platform))
        ctx.setPositions([[0, 0, 0], [0.2, 0, 0]])
        e = ctx.getState(getEnergy=True).getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
        assert abs(e - 5.0) < 1e-4, f"bond energy {e} kJ/mol, expected 5"
        failures = [f.splitlines()[0] for f in mm.Platform.getPluginLoadFailures()]
        report(version=mm.__version__, detail=f"platforms {', '.join(names)}; bond energy {e:.3f} kJ/mol",
               platforms=names, plugin_failures=failures)
        """,
        "pip install 'spu-scaffold[md]'",
    ),
    EngineCheck(
        "openmm-cuda",
        "OpenMM CUDA platform",
        """
        import openmm as mm, openmm.unit as u
        names = [mm.Platform.getPlatform(i).getName() for i in range(mm.Platform.getNumPlatforms())]
        if "CUDA" not in names:
            failures = "; ".join(f.splitlines()[0] for f in mm.Platform.getPluginLoadFailures())
            raise SystemExit(f"no CUDA platform (platforms: {', '.join(names)}; plugin failures: {failures or 'none'})")
        system = mm.System(); system.addParticle(1.0); system.addParticle(1.0)
        bond = mm.HarmonicBondForce(); bond.addBond(0, 1, 0.1, 1000.0); system.addForce(bond)
        ctx = mm.Context(system, mm.VerletIntegrator(0.001), mm.Platform.getPlatformByName("CUDA"))
        ctx.setPositions([[0, 0, 0], [0.2, 0, 0]])
        e = ctx.getState(getEnergy=True).getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
        assert abs(e - 5.0) < 1e-3, f"bond energy {e} kJ/mol on CUDA, expected 5"
        report(version=mm.__version__, detail=f"CUDA platform: bond energy {e:.3f} kJ/mol")
        """,
        "pip install 'openmm[cuda12]' (the OpenMM-CUDA-12 plugin; the plain openmm wheel has no CUDA platform)",
        gpu_only=True,
        timeout_s=300,
    ),
    EngineCheck(
        "torch",
        "PyTorch",
        """
        import torch
        a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
        trace = float((a @ a).trace())
        assert trace == 29.0, f"trace of A@A is {trace}, expected 29"
        report(version=torch.__version__, detail=f"CPU matmul ok; built for CUDA {torch.version.cuda}; "
               f"cuda available: {torch.cuda.is_available()}", cuda_build=torch.version.cuda)
        """,
        "pip install torch (CPU: torch==2.13.0; GPU: a CUDA 12 build, see docs/docker.md)",
    ),
    EngineCheck(
        "torch-cuda",
        "PyTorch on the GPU",
        """
        import torch
        if not torch.cuda.is_available():
            raise SystemExit(f"torch {torch.__version__} sees no CUDA device (built for CUDA {torch.version.cuda})")
        a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device="cuda")
        trace = float((a @ a).trace())
        assert trace == 29.0, f"trace of A@A on CUDA is {trace}, expected 29"
        report(version=torch.__version__, detail=f"{torch.cuda.get_device_name(0)}: matmul ok")
        """,
        "install a CUDA build of torch matching the driver (pip install torch --index-url "
        "https://download.pytorch.org/whl/cu128); check `nvidia-smi` works in this container",
        gpu_only=True,
        timeout_s=300,
    ),
    EngineCheck(
        "cupy",
        "CuPy (CUDA arrays for gpu4pyscf)",
        """
        import cupy
        total = int(cupy.arange(10).sum())
        assert total == 45, f"sum(0..9) on the GPU is {total}, expected 45"
        rt = cupy.cuda.runtime.runtimeGetVersion()
        report(version=cupy.__version__, detail=f"CUDA runtime {rt // 1000}.{rt % 1000 // 10}; reduction ok")
        """,
        "pip install cupy-cuda12x (must match the CUDA major version of the driver)",
        gpu_only=True,
        timeout_s=300,
    ),
    EngineCheck(
        "gpu4pyscf",
        "gpu4pyscf (DFT on the GPU)",
        """
        import gpu4pyscf
        from pyscf import gto
        from gpu4pyscf import scf
        mol = gto.M(atom="H 0 0 0; H 0 0 0.74", basis="sto-3g", verbose=0)
        e = float(scf.RHF(mol).kernel())
        assert abs(e - -1.11676) < 1e-4, f"H2 RHF/STO-3G on the GPU {e:.6f} Eh, expected -1.11676"
        report(version=gpu4pyscf.__version__, detail=f"H2 RHF/STO-3G on the GPU {e:.6f} Eh")
        """,
        "pip install 'spu-scaffold[gpu]' (gpu4pyscf-cuda12x and cupy-cuda12x)",
        gpu_only=True,
        timeout_s=600,
    ),
    EngineCheck(
        "fair-esm",
        "fair-esm (ESM-2 protein language models)",
        """
        import torch, esm
        alphabet = esm.Alphabet.from_architecture("ESM-1b")
        model = esm.model.esm2.ESM2(num_layers=1, embed_dim=32, attention_heads=2, alphabet=alphabet).eval()
        _, _, tokens = alphabet.get_batch_converter()([("p", "MKTAYIAK")])
        with torch.no_grad():
            logits = model(tokens)["logits"]
        assert tuple(logits.shape) == (1, 10, len(alphabet)), tuple(logits.shape)
        report(version=esm.__version__, detail="1-layer ESM-2 scored an 8-residue sequence (no weights)")
        """,
        "pip install 'spu-scaffold[protein]' (fair-esm)",
    ),
    EngineCheck(
        "transformers",
        "transformers (ESMFold in PyTorch)",
        """
        import transformers
        from transformers import EsmConfig, EsmForProteinFolding
        report(version=transformers.__version__, detail="EsmForProteinFolding imports")
        """,
        "pip install 'spu-scaffold[protein]' (transformers)",
    ),
    EngineCheck(
        "biopython",
        "Biopython",
        """
        import Bio
        from Bio.SeqUtils import molecular_weight
        mass = molecular_weight("GG", seq_type="protein")
        assert abs(mass - 132.12) < 0.05, f"Gly-Gly mass {mass:.2f} Da, expected 132.12"
        report(version=Bio.__version__, detail=f"Gly-Gly {mass:.2f} Da")
        """,
        "pip install 'spu-scaffold[protein]' (biopython)",
    ),
    EngineCheck(
        "mdtraj",
        "mdtraj (trajectory analysis)",
        """
        import numpy as np, mdtraj as md
        top = md.Topology()
        res = top.add_residue("ARG", top.add_chain())
        top.add_atom("A", md.element.carbon, res); top.add_atom("B", md.element.carbon, res)
        traj = md.Trajectory(np.array([[[0, 0, 0], [0.3, 0, 0]]], dtype=np.float32), top)
        d = float(md.compute_distances(traj, [[0, 1]])[0, 0])
        assert abs(d - 0.3) < 1e-6, f"distance {d} nm, expected 0.3"
        report(version=md.__version__, detail=f"distance {d:.3f} nm")
        """,
        "pip install 'spu-scaffold[md]' (mdtraj)",
    ),
    EngineCheck(
        "pdbfixer",
        "PDBFixer",
        """
        import importlib.metadata as md
        import pdbfixer
        report(version=md.version("pdbfixer"), detail="imports")
        """,
        "pip install 'spu-scaffold[md]' (pdbfixer)",
    ),
    EngineCheck(
        "trafilatura",
        "trafilatura (page text for web_fetch)",
        """
        import trafilatura, importlib.metadata as md
        para = "The melting point of the compound was measured three times by differential scanning calorimetry."
        html = f"<html><body><nav>menu</nav><article><h1>Results</h1><p>{para}</p><p>{para}</p></article></body></html>"
        text = trafilatura.extract(html) or ""
        assert "differential scanning calorimetry" in text, f"extracted {text[:80]!r}"
        report(version=md.version("trafilatura"), detail="main text extracted from a page")
        """,
        "pip install 'spu-scaffold[web]' (trafilatura and lxml_html_clean)",
    ),
    EngineCheck(
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


def check_names() -> list[str]:
    return ["gpu"] + [c.name for c in ENGINE_CHECKS] + ["dirs", "weights"]


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


def run_engine_check(check: EngineCheck, *, gpu: bool, timeout_s: float, required: bool) -> CheckResult:
    """Run one check in a fresh interpreter; a crash, hang or wrong number is a failure, never an exception."""
    code = _PRELUDE + textwrap.dedent(check.code)
    env = dict(os.environ, SPU_DOCTOR_GPU="1" if gpu else "0", PYTHONUNBUFFERED="1")
    result = CheckResult(check.name, check.what, "fail", required, "", check.fix)
    limit = check.timeout_s if check.timeout_s and check.timeout_s > timeout_s else timeout_s
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            check=False,
            capture_output=True,
            text=True,
            timeout=limit,
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        result.wall_s = round(time.monotonic() - started, 2)
        result.detail = f"timed out after {limit:g} s (import or computation hangs)"
        return result
    result.wall_s = round(time.monotonic() - started, 2)
    facts = None
    for line in proc.stdout.splitlines():
        if line.startswith(MARKER):
            facts = json.loads(line[len(MARKER) :])
    if proc.returncode < 0:
        result.detail = f"crashed with {_signal_name(proc.returncode)} ({_last_error_line(proc.stderr, '')})"
    elif proc.returncode != 0 or facts is None:
        message = _last_error_line(proc.stderr, proc.stdout)
        if "ModuleNotFoundError" in message or "ImportError" in message:
            result.detail = f"not installed or not importable: {message}"
        else:
            result.detail = message
    else:
        result.status = "ok"
        result.fix = None
        result.version = facts.pop("version", None)
        result.detail = facts.pop("detail", "")
        result.facts = facts
    if result.status == "fail" and not required:
        result.status = "warn"
    return result


def gpu_check(gpus: list[dict[str, str]]) -> CheckResult:
    if gpus:
        names = "; ".join(f"{g['name']} ({g['memory']}, driver {g['driver']})" for g in gpus)
        return CheckResult("gpu", "NVIDIA GPU (nvidia-smi)", "ok", False, names, facts={"gpus": gpus})
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
    from tools_server import settings

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
            "copy the checkpoints into SPU_WEIGHTS_DIR (docs/docker.md: build with "
            "--build-context weights=DIR to bake them into the image)",
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


def run_doctor(
    *,
    profile: str = "all",
    only: list[str] | None = None,
    timeout_s: float = 120.0,
    jobs: int | None = None,
    gpus: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """All checks; returns ``{"ok", "profile", "gpu", "checks": [...]}`` (``ok``: no required check failed)."""
    from tools_server import hardware

    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}")
    unknown = sorted(set(only or []) - set(check_names()))
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(check_names())}")
    found_gpus = hardware.gpus() if gpus is None else gpus
    has_gpu = bool(found_gpus)
    wanted = set(only or check_names())
    results: list[CheckResult] = []
    if "gpu" in wanted:
        results.append(gpu_check(found_gpus))
    engine_checks = [c for c in ENGINE_CHECKS if c.name in wanted]
    runnable = []
    for check in engine_checks:
        if check.gpu_only and not has_gpu:
            results.append(CheckResult(check.name, check.what, "skip", False, "no GPU", None))
            continue
        required = check.profile == "core" or (check.profile == "all" and profile == "all") or check.gpu_only
        runnable.append((check, required))
    workers = max(1, jobs or min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [
            pool.submit(run_engine_check, c, gpu=has_gpu, timeout_s=timeout_s, required=r)
            for c, r in runnable
        ]
        results += [f.result() for f in futures]
    if "dirs" in wanted:
        results.append(dirs_check())
    if "weights" in wanted:
        results.append(weights_check())
    order = {name: i for i, name in enumerate(check_names())}
    results.sort(key=lambda r: order[r.name])
    ok = not any(r.status == "fail" and r.required for r in results)
    return {
        "ok": ok,
        "profile": profile,
        "gpu": has_gpu,
        "python": sys.version.split()[0],
        "checks": [asdict(r) for r in results],
    }
