"""``spu doctor`` checks for the machine-learned potentials. Each builds the package's own model class
and checks a value known exactly: with the networks' readout zeroed, a model's energy is its per-element
reference energies summed. SevenNet-0, whose weights ship in its wheel, computes water. A model whose
weights are not on the machine makes its check a warning naming the file and folder (its tools answer
weights_missing)."""

from __future__ import annotations

from tools_server.plugin import DoctorCheck

_WATER = "[[0.0, 0.0, 0.1173], [0.0, 0.7572, -0.4692], [0.0, -0.7572, -0.4692]]"


def _weights(engine: str) -> str:
    """Check code: the default model's weights file, as a warning when it is missing (the engine works,
    but the tool answers weights_missing), naming the file and folder to fill."""
    return f"""
from tools_server.mlip.models import DEFAULT_MODEL, INFO, model_path
from tools_server.plugin import weights_dir
import os
_path = model_path({engine!r}, DEFAULT_MODEL[{engine!r}])
if _path.is_file():
    WEIGHTS = dict(weights_present=True, weights=str(_path))
else:
    _dl = os.environ.get("SPU_WEIGHTS_DOWNLOAD") == "1"
    WEIGHTS = dict(
        weights_present=False,
        warning=f"{{INFO[{engine!r}].label}} weights not found (looked for {{_path}}); mlip_run and "
        f"mlip_conformers with engine={engine} answer weights_missing"
        + (" unless the download succeeds" if _dl else ""),
        warning_fix=f"put {{_path.name}} in {{_path.parent}} (under SPU_WEIGHTS_DIR, now "
        f"{{weights_dir()}}; docs/weights.md), or set SPU_WEIGHTS_DOWNLOAD=1 on a machine "
        "with internet access",
    )
"""


CHECKS: tuple[DoctorCheck, ...] = (
    DoctorCheck(
        name="torchani",
        what="TorchANI (ANI-2x)",
        code=f"""
import importlib.metadata as md
import torch
from tools_server.mlip.models import random_ani2x
model = random_ani2x()
with torch.no_grad():
    for p in model.parameters():
        p.zero_()
    e = float(model((torch.tensor([[8, 1, 1]]), torch.tensor([{_WATER}]))).energies[0])
# zeroed networks: the wB97X/6-31G(d) atomic reference energies of O + 2 H
assert abs(e - -76.0411) < 1e-3, f"water with zeroed ANI-2x networks {{e:.4f}} Eh, expected -76.0411"
{_weights("ani2x")}
report(version=md.version("torchani"), detail=f"ANI-2x architecture: water {{e:.4f}} Eh from the atomic "
       f"references", **WEIGHTS)
""",
        fix="pip install 'spu-scaffold[mlip]' (torchani); weights: see docs/weights.md",
        timeout_s=300,
    ),
    DoctorCheck(
        name="aimnet",
        what="AIMNet2",
        code=f"""
import importlib.metadata as md
import torch, yaml
from aimnet.config import build_module
from aimnet.calculators import AIMNet2Calculator
Y = '''
class: aimnet.models.AIMNet2
kwargs:
  nfeature: 4
  d2features: true
  ncomb_v: 4
  hidden: [[16, 12], [16, 12]]
  aim_size: 8
  aev: {{rc_s: 5.0, nshifts_s: 4}}
  outputs:
    energy_mlp: {{class: aimnet.modules.Output, kwargs: {{n_in: 8, n_out: 1, key_in: aim, key_out: energy,
                 mlp: {{activation_fn: torch.nn.GELU, last_linear: true, hidden: [8]}}}}}}
    atomic_shift: {{class: aimnet.modules.AtomicShift, kwargs: {{key_in: energy, key_out: energy}}}}
    atomic_sum: {{class: aimnet.modules.AtomicSum, kwargs: {{key_in: energy, key_out: energy}}}}
'''
torch.manual_seed(0)
model = build_module(yaml.safe_load(Y))
with torch.no_grad():
    for p in model.outputs.energy_mlp.parameters():
        p.zero_()
    model.outputs.atomic_shift.double()
    model.outputs.atomic_shift.shifts.weight[1] = -13.6
    model.outputs.atomic_shift.shifts.weight[8] = -2042.0
model.cutoff = 5.0
calc = AIMNet2Calculator(model=model, device="cpu")
inputs = {{"coord": torch.tensor({_WATER}), "numbers": torch.tensor([8, 1, 1]), "charge": torch.tensor(0.0)}}
out = calc(inputs, forces=True)
e = float(out["energy"].detach())
assert abs(e - -2069.2) < 1e-3, f"water with a zeroed AIMNet2 readout {{e:.4f}} eV, expected -2069.2"
{_weights("aimnet2")}
report(version=md.version("aimnet"), detail=f"2-layer AIMNet2 with set atomic shifts: water {{e:.2f}} eV",
       **WEIGHTS)
""",
        fix="pip install 'spu-scaffold[mlip]' (aimnet)",
        timeout_s=300,
    ),
    DoctorCheck(
        name="mace",
        what="MACE (MACE-OFF)",
        code=f"""
import importlib.metadata as md
import numpy as np, torch
with torch.serialization.safe_globals([slice]):
    from e3nn import o3
from mace import modules
from mace.calculators import MACECalculator
from ase import Atoms
import tempfile, os
torch.set_default_dtype(torch.float64)
block = modules.interaction_classes["RealAgnosticResidualInteractionBlock"]
model = modules.ScaleShiftMACE(
    r_max=5.0, num_bessel=4, num_polynomial_cutoff=5, max_ell=1, interaction_cls=block,
    interaction_cls_first=block, num_interactions=1, num_elements=2, hidden_irreps=o3.Irreps("4x0e + 4x1o"),
    MLP_irreps=o3.Irreps("4x0e"), gate=torch.nn.functional.silu, atomic_energies=np.array([-13.6, -2042.0]),
    avg_num_neighbors=2.0, atomic_numbers=[1, 8], correlation=2, radial_type="bessel",
    atomic_inter_scale=0.0, atomic_inter_shift=0.0)
path = os.path.join(tempfile.mkdtemp(), "check.model")
torch.save(model, path)
atoms = Atoms(numbers=[8, 1, 1], positions={_WATER})
atoms.calc = MACECalculator(model_paths=path, device="cpu", default_dtype="float64")
e = float(atoms.get_potential_energy())
# interaction scale 0: the energy is the atomic reference energies E0(O) + 2 E0(H)
assert abs(e - -2069.2) < 1e-6, f"water from the E0 terms {{e:.6f}} eV, expected -2069.2"
{_weights("mace_off")}
report(version=md.version("mace-torch"), detail=f"ScaleShiftMACE saved and reloaded: water {{e:.2f}} eV",
       **WEIGHTS)
""",
        fix="pip install 'spu-scaffold[mlip]' (mace-torch with e3nn 0.4)",
        timeout_s=300,
    ),
    DoctorCheck(
        name="sevenn",
        what="SevenNet (SevenNet-0 weights ship with it)",
        code=f"""
import importlib.metadata as md
import torch
with torch.serialization.safe_globals([slice]):
    import e3nn.o3
from ase import Atoms
from sevenn.calculator import SevenNetCalculator
atoms = Atoms(numbers=[8, 1, 1], positions={_WATER})
atoms.calc = SevenNetCalculator(model="7net-0", device="cpu")
e = float(atoms.get_potential_energy())
# SevenNet-0 (11Jul2024) at this water geometry, computed with sevenn 0.10.4
assert abs(e - -14.0851) < 0.005, f"SevenNet-0 water energy {{e:.4f}} eV, expected -14.0851"
report(version=md.version("sevenn"), detail=f"SevenNet-0 water {{e:.4f}} eV")
""",
        fix="pip install 'spu-scaffold[mlip]' (sevenn<0.11)",
        timeout_s=300,
    ),
)
