"""Kill a tuner with SIGKILL while its compile worker is in a long compile; are the compile worker,
its watchdog and its compiler children (ptxas) gone within seconds?

    python benchmarks/gpu_checks/orphan_check.py [--out FILE.json]

Before the watchdog (kerntune/evaluate/triton_backend/worker_life.py), a compile worker looked for its
tuner between tasks only and outlived it by the compile's whole length."""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TUNER = """
import sys
from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator
ev = TritonEvaluator(sys.argv[1], (4096, 4096, 4096), compile_workers=1, compile_timeout=900, bench_timeout=900)
ev.wait_ready()
print(" ".join(str(w.proc.pid) for w in ev.compilers), flush=True)
ev.evaluate([{"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 2, "num_stages": 5}])
"""


def group(pgid: int) -> list[tuple[int, str]]:
    """The live processes of process group ``pgid`` with their command names."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                out.append((int(entry.name), stat[stat.index("(") + 1: stat.rindex(")")]))
        except (OSError, ValueError, IndexError):
            pass
    return out


def busy(pid: int) -> dict:
    """The process's state letter and CPU seconds so far: a worker in a compile is running (R) and has
    spent about as many CPU seconds as the compile has lasted; an idle one sleeps (S) near zero."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return {"state": fields[0], "cpu_s": round((int(fields[11]) + int(fields[12])) / tick, 1),
            "children_cpu_s": round((int(fields[13]) + int(fields[14])) / tick, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compile-s", type=float, default=20.0, help="seconds into the compile before the kill")
    a = ap.parse_args()
    kernel = Path(__file__).with_name("slow_compile.py")
    tuner = subprocess.Popen([sys.executable, "-c", TUNER, str(kernel)], stdout=subprocess.PIPE, text=True)
    worker = int(tuner.stdout.readline().split()[0])
    t0 = time.monotonic()
    time.sleep(a.compile_s)
    before = group(worker)
    worker_busy = busy(worker)
    tuner.send_signal(signal.SIGKILL)
    tuner.wait()
    killed = time.monotonic()
    left = before
    while left and time.monotonic() - killed < 30:
        time.sleep(0.1)
        left = group(worker)
    result = {"compile_worker": worker, "seconds_into_compile": round(killed - t0, 1),
              "worker_at_kill": worker_busy, "group_before_kill": before, "group_left": left,
              "gone_after_s": round(time.monotonic() - killed, 2) if not left else None}
    for pid, _ in left:  # what the code under check left behind
        os.kill(pid, signal.SIGKILL)
    print(json.dumps(result))
    if a.out:
        a.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
