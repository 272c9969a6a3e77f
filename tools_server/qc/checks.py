"""The ``spu doctor`` checks of this domain: a tiny real computation per engine, compared with a known value.

tblite and xtb-python: GFN2-xTB energy of water at its experimental geometry, -5.0704 Eh (both engines
give -5.070371 Eh; they agree to 5e-9 Eh). PySCF: RHF/STO-3G of H2 at 0.74 Å, -1.11676 Eh (Szabo & Ostlund,
table 3.6, at 1.4 bohr). gpu4pyscf and cupy (GPU only): the same H2 RHF on the GPU; a reduction on the GPU.
"""

from tools_server.plugin import DoctorCheck

CHECKS: tuple[DoctorCheck, ...] = (
    DoctorCheck(
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
    DoctorCheck(
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
    DoctorCheck(
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
    DoctorCheck(
        "cupy",
        "CuPy (CUDA arrays for gpu4pyscf)",
        """
            import cupy
            total = int(cupy.arange(10).sum())
            assert total == 45, f"sum(0..9) on the GPU is {total}, expected 45"
            rt = cupy.cuda.runtime.runtimeGetVersion()
            runtime = f"{rt // 1000}.{rt % 1000 // 10}"
            report(version=cupy.__version__, detail=f"CUDA runtime {runtime}; reduction ok")
            """,
        "pip install cupy-cuda12x (must match the CUDA major version of the driver)",
        gpu_only=True,
        timeout_s=300,
    ),
    DoctorCheck(
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
)
