"""Randomly initialised ANI-2x, AIMNet2 and MACE models built with each package's own classes, saved in
the formats their loaders read, placed in a temporary SPU_WEIGHTS_DIR and loaded back through
tools_server.mlip.models (nothing is ever downloaded). SevenNet-0's weights ship inside the sevenn wheel."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from tools_server.core.context import ToolContext


@pytest.fixture
def weights_dir(tmp_path, monkeypatch, spu_env):
    path = tmp_path / "weights"
    path.mkdir()
    monkeypatch.setenv("SPU_WEIGHTS_DIR", str(path))
    monkeypatch.delenv("SPU_WEIGHTS_DOWNLOAD", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return path


@pytest.fixture
def ctx():
    return ToolContext("mlip_run", "job", threads=2)


@pytest.fixture(scope="session")
def ani2x_state_dict(tmp_path_factory) -> Path:
    """ANI-2x's architecture (8 networks, 7 elements) as TorchANI assembles it, with random weights."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchani")
    from tools_server.mlip.models import random_ani2x

    model = random_ani2x()
    path = tmp_path_factory.mktemp("ani") / "ani2x_state_dict.pt"
    torch.save(model.state_dict(), path)
    return path


@pytest.fixture
def tiny_ani2x(weights_dir, ani2x_state_dict):
    target = weights_dir / "torchani" / "StateDicts" / "ani2x_state_dict.pt"
    target.parent.mkdir(parents=True)
    shutil.copy(ani2x_state_dict, target)
    return ani2x_state_dict


TINY_AIMNET2_YAML = """
class: aimnet.models.AIMNet2
kwargs:
    nfeature: 4
    d2features: true
    ncomb_v: 4
    hidden:
        - [16, 12]
        - [16, 12]
    aim_size: 8
    aev:
        rc_s: 5.0
        nshifts_s: 4
    outputs:
        energy_mlp:
            class: aimnet.modules.Output
            kwargs: {n_in: 8, n_out: 1, key_in: aim, key_out: energy,
                     mlp: {activation_fn: torch.nn.GELU, last_linear: true, hidden: [8]}}
        atomic_shift:
            class: aimnet.modules.AtomicShift
            kwargs: {key_in: energy, key_out: energy}
        atomic_sum:
            class: aimnet.modules.AtomicSum
            kwargs: {key_in: energy, key_out: energy}
        lrcoulomb:
            class: aimnet.modules.LRCoulomb
            kwargs: {rc: 4.6, key_in: charges, key_out: energy}
"""

#: Self-atomic energies (eV) baked into the tiny AIMNet2 by its exporter: H, C, N, O only.
TINY_AIMNET2_SAE = {1: -13.6, 6: -1029.0, 7: -1485.0, 8: -2042.0}


@pytest.fixture(scope="session")
def aimnet2_file(tmp_path_factory) -> Path:
    """A two-layer AIMNet2 with random weights, exported by AIMNet2's own `aimnet export` command."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("aimnet")
    import yaml
    from aimnet.config import build_module
    from aimnet.train.export_model import export_model

    work = tmp_path_factory.mktemp("aimnet2")
    (work / "model.yaml").write_text(textwrap.dedent(TINY_AIMNET2_YAML))
    (work / "sae.yaml").write_text("".join(f"{z}: {e}\n" for z, e in TINY_AIMNET2_SAE.items()))
    torch.manual_seed(0)
    module = build_module(yaml.safe_load(TINY_AIMNET2_YAML))
    torch.save(module.state_dict(), work / "raw.pt")
    out = work / "tiny.pt"
    export_model.main(
        [
            str(work / "raw.pt"),
            str(out),
            "--model",
            str(work / "model.yaml"),
            "--sae",
            str(work / "sae.yaml"),
        ],
        standalone_mode=False,
    )
    return out


@pytest.fixture
def tiny_aimnet2(weights_dir, aimnet2_file):
    (weights_dir / "aimnet2").mkdir()
    shutil.copy(aimnet2_file, weights_dir / "aimnet2" / "tiny_test.pt")
    return "tiny_test"


@pytest.fixture(scope="session")
def mace_file(tmp_path_factory) -> Path:
    """A two-interaction ScaleShiftMACE (MACE-OFF's class) for H C N O with random weights."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("mace")
    import numpy as np

    from tools_server.mlip.models import import_e3nn

    import_e3nn()
    from e3nn import o3
    from mace import modules

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        block = modules.interaction_classes["RealAgnosticResidualInteractionBlock"]
        torch.manual_seed(0)
        model = modules.ScaleShiftMACE(
            r_max=5.0, num_bessel=4, num_polynomial_cutoff=5, max_ell=2, interaction_cls=block,
            interaction_cls_first=block, num_interactions=2, num_elements=4,
            hidden_irreps=o3.Irreps("8x0e + 8x1o"), MLP_irreps=o3.Irreps("8x0e"),
            gate=torch.nn.functional.silu,
            atomic_energies=np.array([-13.6, -1029.0, -1485.0, -2042.0]), avg_num_neighbors=4.0,
            atomic_numbers=[1, 6, 7, 8], correlation=2, radial_type="bessel", atomic_inter_scale=1.0,
            atomic_inter_shift=0.0,
        )  # fmt: skip
    finally:
        torch.set_default_dtype(previous)
    path = tmp_path_factory.mktemp("mace") / "tiny.model"
    torch.save(model, path)
    return path


@pytest.fixture
def tiny_mace(weights_dir, mace_file):
    (weights_dir / "mace").mkdir()
    shutil.copy(mace_file, weights_dir / "mace" / "tiny_test.model")
    return "tiny_test"
