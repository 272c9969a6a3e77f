"""Where protein-model weights live and how they are loaded (never downloaded unless allowed).

Layout under ``SPU_WEIGHTS_DIR`` (see docs/weights.md)::

    esm/<model_name>.pt                         fair-esm checkpoint, e.g. esm2_t33_650M_UR50D.pt
    esm/<model_name>-contact-regression.pt      optional (contact head, unused here)
    esmfold/<name>/config.json + model.safetensors   transformers ``save_pretrained`` folder (esmfold_v1)

fair-esm checkpoints are also found in torch hub's cache (``$TORCH_HOME/hub/checkpoints``) and ESMFold in the
Hugging Face cache, offline. Setting ``SPU_WEIGHTS_DOWNLOAD=1`` lets the loaders fetch missing weights
into ``SPU_WEIGHTS_DIR``; tests never set it.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from tools_server.plugin import ToolError, download_allowed, weights_dir, weights_missing

DEFAULT_ESM2 = "esm2_t33_650M_UR50D"
ESM1V_MODELS = tuple(f"esm1v_t33_650M_UR90S_{i}" for i in range(1, 6))
DEFAULT_ESMFOLD = "esmfold_v1"
ESMFOLD_HUB_ID = "facebook/esmfold_v1"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,120}$")


def esm_dir() -> Path:
    return weights_dir() / "esm"


def esmfold_dir(name: str = DEFAULT_ESMFOLD) -> Path:
    return weights_dir() / "esmfold" / name


def _check_name(name: str) -> None:
    if not _NAME_RE.match(name):
        raise ToolError("invalid_input", f"{name!r} is not a model name (letters, digits, _ . - only).")


def find_esm_checkpoint(name: str) -> Path | None:
    """The checkpoint file for fair-esm model ``name``, or None."""
    _check_name(name)
    candidates = [esm_dir() / f"{name}.pt", weights_dir() / f"{name}.pt"]
    torch_home = os.environ.get("TORCH_HOME") or str(Path.home() / ".cache" / "torch")
    candidates.append(Path(torch_home) / "hub" / "checkpoints" / f"{name}.pt")
    return next((p for p in candidates if p.is_file()), None)


def available_esm1v() -> list[str]:
    return [n for n in ESM1V_MODELS if find_esm_checkpoint(n) is not None]


@lru_cache(maxsize=4)
def _load_esm_cached(path: str, mtime: float, name: str) -> tuple[Any, Any]:
    import esm.pretrained
    import torch

    # fair-esm checkpoints pickle argparse namespaces, so weights_only loading cannot read them; only files
    # the operator placed in the weights directory are loaded.
    model_data = torch.load(path, map_location="cpu", weights_only=False)
    regression = Path(path).with_name(Path(path).stem + "-contact-regression.pt")
    regression_data = (
        torch.load(str(regression), map_location="cpu", weights_only=False) if regression.is_file() else None
    )
    if regression_data is None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, alphabet = esm.pretrained.load_model_and_alphabet_core(name, model_data, None)
    else:
        model, alphabet = esm.pretrained.load_model_and_alphabet_core(name, model_data, regression_data)
    return model.eval(), alphabet


def check_esm(name: str) -> None:
    """Raise ``weights_missing`` when model ``name`` can be neither found nor downloaded (before the work is
    spread over processes that would each load it)."""
    if find_esm_checkpoint(name) is None and not download_allowed():
        raise weights_missing(f"ESM model {name}", esm_dir() / f"{name}.pt")


def load_esm(name: str) -> tuple[Any, Any]:
    """``(model, alphabet)`` for fair-esm model ``name`` in eval mode, on the CPU; cached per worker."""
    path = find_esm_checkpoint(name)
    if path is None:
        if not download_allowed():
            raise weights_missing(f"ESM model {name}", esm_dir() / f"{name}.pt")
        import esm.pretrained
        import torch

        esm_dir().mkdir(parents=True, exist_ok=True)
        torch.hub.set_dir(str(weights_dir() / "torch_hub"))
        model, alphabet = esm.pretrained.load_model_and_alphabet_hub(name)
        return model.eval(), alphabet
    return _load_esm_cached(str(path), path.stat().st_mtime, name)


def find_esmfold(name: str = DEFAULT_ESMFOLD) -> Path | None:
    _check_name(name)
    path = esmfold_dir(name)
    return path if (path / "config.json").is_file() else None


@lru_cache(maxsize=1)
def _load_esmfold_cached(path: str, mtime: float) -> Any:
    from transformers import EsmForProteinFolding

    return EsmForProteinFolding.from_pretrained(path, local_files_only=True).eval()


def load_esmfold(name: str = DEFAULT_ESMFOLD) -> Any:
    """transformers' ``EsmForProteinFolding`` from the weights folder (or the HF cache, offline)."""
    path = find_esmfold(name)
    if path is not None:
        return _load_esmfold_cached(str(path), (path / "config.json").stat().st_mtime)
    from transformers import EsmForProteinFolding

    if name == DEFAULT_ESMFOLD:
        try:
            return EsmForProteinFolding.from_pretrained(ESMFOLD_HUB_ID, local_files_only=True).eval()
        except OSError:
            pass
        if download_allowed():
            return EsmForProteinFolding.from_pretrained(
                ESMFOLD_HUB_ID, cache_dir=str(weights_dir() / "hf")
            ).eval()
    raise weights_missing(f"ESMFold ({name})", esmfold_dir(name) / "config.json")


def esmfold_config(name: str = DEFAULT_ESMFOLD) -> dict[str, Any] | None:
    """The saved config.json of an ESMFold folder, for the memory estimate before loading."""
    import json

    path = find_esmfold(name)
    if path is None:
        return None
    return json.loads((path / "config.json").read_text())


def save_random_esm2(path: Path, layers: int = 2, embed_dim: int = 32, heads: int = 4, seed: int = 0) -> Path:
    """Write a randomly initialised ESM-2 checkpoint in fair-esm's own format (``{"model", "cfg"}``) to
    ``path``: for tests and benchmarks on machines without the published weights (it predicts nothing).
    Put it at ``esm_dir() / "<name>.pt"`` and call the tools with ``model="<name>"``."""
    from argparse import Namespace

    import esm
    import torch

    torch.manual_seed(seed)
    alphabet = esm.data.Alphabet.from_architecture("ESM-1b")
    model = esm.model.esm2.ESM2(
        num_layers=layers, embed_dim=embed_dim, attention_heads=heads, alphabet=alphabet, token_dropout=True
    )
    cfg = Namespace(
        encoder_layers=layers, encoder_embed_dim=embed_dim, encoder_attention_heads=heads, token_dropout=True
    )
    state = {f"encoder.{k}": v for k, v in model.state_dict().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": state, "cfg": {"model": cfg}}, path)
    return path
