"""Finding and running Tensile, and recording how long it took.

Tensile's CSV holds kernel times, not how long tuning took (code generation and
compilation dominate), so every run kerntune starts writes ``kerntune_run.json``
into Tensile's output folder: the command, the wall time and the exit code.
TR is computed from these.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from kerntune.tensile.config import TensileConfig, TensileError

#: Where a launcher is looked for under $TENSILE_PATH, in order (a TensileLite build folder holds
#: Tensile.sh; a Tensile or hipBLASLt checkout Tensile/bin/Tensile or tensilelite/Tensile/bin/Tensile).
LAUNCHERS = ("Tensile.sh", "Tensile/bin/Tensile", "tensilelite/Tensile/bin/Tensile", "bin/Tensile")


def find_tensile() -> list[str]:
    """The command that starts Tensile, or an error that says how to point kerntune at it."""
    root = os.environ.get("TENSILE_PATH")
    if root:
        for rel in LAUNCHERS:
            cand = Path(root) / rel
            if cand.is_file() and os.access(cand, os.X_OK):
                return [str(cand)]
        raise TensileError(f"TENSILE_PATH={root} holds no executable Tensile launcher (looked for "
                           f"{', '.join(LAUNCHERS)}): point TENSILE_PATH at a Tensile/TensileLite checkout or "
                           "build folder")
    for name in ("Tensile.sh", "Tensile"):
        found = shutil.which(name)
        if found:
            return [found]
    raise TensileError("Tensile not found: set TENSILE_PATH to a Tensile/TensileLite checkout or build folder "
                       "(holding Tensile.sh or Tensile/bin/Tensile), or put Tensile.sh on PATH")


@dataclass
class RunRecord:
    config: str
    out: str
    command: list[str]
    started: str
    wall_s: float
    returncode: int
    kernels: int


def run_tensile(config: Path, out: Path, prebuilt_client: Path | None = None, quiet: bool = False) -> RunRecord:
    """Run Tensile on ``config`` into ``out`` and write ``out/kerntune_run.json``; a non-zero exit
    is an error naming the log (Tensile's output goes to the terminal, or to ``out/tensile.log``)."""
    kernels = TensileConfig.load(config).kernel_count()  # refuse legacy or broken configs before starting Tensile
    cmd = find_tensile() + [str(config), str(out)]
    if prebuilt_client is not None:
        cmd.append(f"--prebuilt-client={prebuilt_client}")
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    if quiet:
        with (out / "tensile.log").open("w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    else:
        rc = subprocess.run(cmd).returncode
    record = RunRecord(str(config), str(out), cmd, started, time.perf_counter() - t0, rc, kernels)
    (out / "kerntune_run.json").write_text(json.dumps(asdict(record), indent=1) + "\n")
    if rc != 0:
        log = f" (log: {out / 'tensile.log'})" if quiet else ""
        raise TensileError(f"Tensile exited with {rc} on {config}{log}")
    return record
