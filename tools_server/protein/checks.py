"""The ``spu doctor`` checks of this domain: a tiny real computation per engine, compared with a known value.

torch: a 2x2 matrix product (on CUDA when a GPU is present); fair-esm: a one-layer ESM-2 built from
scratch scores a sequence (no weights); transformers: the ESMFold classes import; Biopython: a peptide's mass.
"""

from tools_server.plugin import DoctorCheck

CHECKS: tuple[DoctorCheck, ...] = (
    DoctorCheck(
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
    DoctorCheck(
        "torch-cuda",
        "PyTorch on the GPU",
        """
            import torch
            if not torch.cuda.is_available():
                built = torch.version.cuda
                raise SystemExit(f"torch {torch.__version__} sees no CUDA device (built for CUDA {built})")
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
    DoctorCheck(
        "fair-esm",
        "fair-esm (ESM-2 protein language models)",
        """
            import torch, esm
            alphabet = esm.Alphabet.from_architecture("ESM-1b")
            model = esm.model.esm2.ESM2(num_layers=1, embed_dim=32, attention_heads=2, alphabet=alphabet)
            model = model.eval()
            _, _, tokens = alphabet.get_batch_converter()([("p", "MKTAYIAK")])
            with torch.no_grad():
                logits = model(tokens)["logits"]
            assert tuple(logits.shape) == (1, 10, len(alphabet)), tuple(logits.shape)
            report(version=esm.__version__, detail="1-layer ESM-2 scored an 8-residue sequence (no weights)")
            """,
        "pip install 'spu-scaffold[protein]' (fair-esm)",
    ),
    DoctorCheck(
        "transformers",
        "transformers (ESMFold in PyTorch)",
        """
            import transformers
            from transformers import EsmConfig, EsmForProteinFolding
            report(version=transformers.__version__, detail="EsmForProteinFolding imports")
            """,
        "pip install 'spu-scaffold[protein]' (transformers)",
    ),
    DoctorCheck(
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
)
