"""Write the kernel source that a real run would show the model, for each held-out recording, into
DIR/<space>.{py,cu} (``--source`` of ``kerntune tune --replay``): the package's own Triton kernel for
the H100 and H200 recordings (from the pinned packages installed by ``make install``, the `packages` extra),
Kernel Tuner's convolution kernel for the RTX 2080 Ti recording (from the autotuning_methodology 1.1.0
sdist, which pip downloads here with its hash checked).

    python benchmarks/heldout/sources.py DIR
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

ADAPTERS = {  # recording name -> kerntune adapter
    "fla.chunk_o_4x4096x32x128": "fla.chunk_o",
    "fla.recompute_w_u_1x16384x16x128": "fla.recompute_w_u",
    "liger.mlp_swiglu_8192x4096x14336": "liger.mlp_swiglu",
    "liger.moe_down_4096x128x8x2048x768": "liger.moe_down",
    "torchao.fp8_blockwise_mm_4096x18432x7168": "torchao.fp8_blockwise_mm",
    # the H200 recordings (benchmarks/results/heldout/spaces_h200)
    "liger.moe_up_swiglu_4096x8x2x4096x14336": "liger.moe_up_swiglu",
    "fla.l2norm_4x4096x32x128": "fla.l2norm",
    "liger.cross_entropy_8192x128256": "liger.cross_entropy",
    "liger.mlp_swiglu_bwd_dGU_8192x4096x14336": "liger.mlp_swiglu_bwd_dGU",
    # three more on the H200, recorded 2026-11-29
    "fla.chunk_h_4x4096x32x128": "fla.chunk_h",
    "fla.kkt_solve_4x4096x32x128": "fla.kkt_solve",
    "liger.mlp_swiglu_bwd_dI_8192x4096x14336": "liger.mlp_swiglu_bwd_dI",
}
SDIST = "autotuning_methodology-1.1.0.tar.gz"
SDIST_SHA256 = "e3fffd803d6f323942fed6cb3b5744fea51b5e6f1490ec82031cfee7dee08e52"
CONVOLUTION = "autotuning_methodology-1.1.0/tests/autotuning_methodology/integration/mockfiles/convolution.cu"


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    from kerntune.adapters import load
    from kerntune.evaluate.triton_backend.capture import kernel_source

    for name, spec in ADAPTERS.items():
        (out / f"{name}.py").write_text(kernel_source(load(spec).kernel))
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        "autotuning_methodology==1.1.0", "-d", tmp], check=True)
        sdist = Path(tmp) / SDIST
        if hashlib.sha256(sdist.read_bytes()).hexdigest() != SDIST_SHA256:
            raise SystemExit(f"{SDIST}: unexpected sha256")
        with tarfile.open(sdist) as tar:
            (out / "convolution_RTX2080Ti.cu").write_bytes(tar.extractfile(CONVOLUTION).read())
    print("\n".join(sorted(p.name for p in out.iterdir())))


if __name__ == "__main__":
    main()
