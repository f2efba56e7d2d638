"""GPU check of the compile workers' watchdog: examples/triton/matmul.py's kernel without its register
rule, so that a 256x256 tile on 2 warps may be asked for (on an H100 such a compile took 160-172 s,
most of it in ptxas). ``orphan_check.py`` kills the tuner while a compile worker is in that compile."""
import importlib.util
from pathlib import Path

from kerntune.space import Choice, Space

_spec = importlib.util.spec_from_file_location(
    "kt_matmul_example", Path(__file__).resolve().parents[2] / "examples" / "triton" / "matmul.py")
_mm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mm)

name = "slow_compile"
space = Space([Choice("BLOCK_M", options=(128, 256)), Choice("BLOCK_N", options=(128, 256)),
               Choice("BLOCK_K", options=(64, 128)), Choice("GROUP_M", options=(8,)),
               Choice("num_warps", options=(2, 8)), Choice("num_stages", options=(3, 5))],
              default={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3},
              name="slow_compile")
make_inputs, launch, reference = _mm.make_inputs, _mm.launch, _mm.reference
