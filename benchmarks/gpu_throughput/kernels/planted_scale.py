"""y = 2 * x over a large fp32 vector, with three planted bad configs (issue 5,
acceptance 3): PLANT="oob" writes far out of bounds (illegal address: the
worker dies), "slow_compile" unrolls a huge loop (the compile is killed at
--compile-timeout), "wrong" computes 3 * x.  All three sit on the otherwise
best-looking block size, so a tuner that misclassifies them picks a bad winner.

The kernel is planted_faults.py's (issue 10 added three more faults to it); this
file keeps issue 5's space of three faults, which its recorded results name.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from planted_faults import bytes_moved, launch, make_inputs, reference  # noqa: E402,F401

from kerntune.space import Choice, Space  # noqa: E402

name = "planted_scale"
description = "y = 2x, fp32, memory-bound; shape = N"

space = Space(
    [
        Choice("BLOCK", options=(256, 512, 1024, 2048, 4096)),
        Choice("num_warps", options=(2, 4, 8)),
        Choice("PLANT", options=("none", "oob", "slow_compile", "wrong")),
    ],
    constraints=["PLANT == 'none' or (BLOCK == 1024 and num_warps == 4)"],
    default={"BLOCK": 1024, "num_warps": 4, "PLANT": "none"},
)
