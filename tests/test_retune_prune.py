"""`kerntune exec` (kerntune.retune) honours a ``triton.autotune`` kernel's ``prune_configs_by`` as
Triton's own ``Autotuner.run`` does: the configs its ``early_config_prune`` drops for a call, or that
its ``perf_model`` leaves out of the ``top_k``, are never timed, stored or launched for that call.

Real Triton kernels under Triton's interpreter (TRITON_INTERPRET=1) on the CPU, in subprocesses run
behind `kerntune exec`, as tests/test_package_kernels.py runs the switch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("torch")
pytest.importorskip("triton")

if os.environ.get("TRITON_INTERPRET") != "1":  # imported under a real GPU session: not what these tests are for
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported", allow_module_level=True)

# SKIP=1 handles only the first 64 elements (fast, and wrong beyond them); the package's pruner drops it
# when n > 64 (unless PRUNE=0: the package before it had a pruner).  k3's list keeps two configs after
# pruning (a search over them), k2's one (nothing to search); kp's perf model ranks SKIP=1 last and its
# top_k of 2 leaves it out (kp's list differs from k3's: the same source over the same list searched
# would share k3's stored winner).
PROGRAM = """
import json, os, time, torch, triton, triton.language as tl

def _cpu_bench(fn, quantiles):
    t0 = time.perf_counter(); fn(); ms = (time.perf_counter() - t0) * 1000
    return [ms, ms, ms]

def prune(configs, named_args, **kwargs):
    if os.environ.get("PRUNE") == "0":
        return configs
    return [c for c in configs if not (c.kwargs["SKIP"] == 1 and named_args["n"] > 64)]

def model(**meta):
    return 1.0 + meta["SKIP"]

def body(x_ptr, y_ptr, n: tl.constexpr, SKIP: tl.constexpr, BLOCK: tl.constexpr):
    if SKIP == 1:
        offs = tl.arange(0, 64)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
    else:
        for start in range(0, n, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

three = [triton.Config({"SKIP": s, "BLOCK": b}, num_warps=4) for s, b in ((0, 32), (0, 64), (1, 64))]
k3 = triton.autotune(configs=three, key=["n"], prune_configs_by={"early_config_prune": prune},
                     do_bench=_cpu_bench)(triton.jit(body))
k2 = triton.autotune(configs=three[1:], key=["n"], prune_configs_by={"early_config_prune": prune},
                     do_bench=_cpu_bench)(triton.jit(body))
kp = triton.autotune(configs=[triton.Config({"SKIP": s, "BLOCK": b}, num_warps=4) for s, b in ((0, 32), (0, 128), (1, 64))],
                     key=["n"], prune_configs_by={"perf_model": model, "top_k": 2},
                     do_bench=_cpu_bench)(triton.jit(body))

x = torch.arange(2048, dtype=torch.float32)
out = {}
for name, k in (("k3", k3), ("k2", k2), ("kp", kp)):
    y = torch.zeros_like(x)
    k[(1,)](x, y, x.numel())  # tunes (every config timed writes y) or loads
    y.zero_()
    k[(1,)](x, y, x.numel())  # the pick alone
    out[name] = {"correct": bool(torch.equal(y, x * 2)), "SKIP": k.best_config.kwargs["SKIP"]}
import kerntune.retune as r
out["tuned"], out["loaded"], out["measured"] = r.STATS.tuned, r.STATS.loaded, r.STATS.measured
out["lists"] = [s["list"] for s in r.STATS.searches]
print(json.dumps(out))
"""


def _run(tmp_path: Path, store: Path, prune: str = "1") -> dict:
    """PROGRAM behind `kerntune exec` with ``store``; the JSON of its last line."""
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = dict(os.environ, TRITON_INTERPRET="1", PRUNE=prune,
               PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "kerntune", "exec", "--store", str(store), "--", sys.executable,
                           str(prog)], capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_retune_honours_the_autotuners_pruning_and_never_launches_a_pruned_config(tmp_path: Path) -> None:
    """With n = 2048 the pruner drops SKIP=1 (fastest, and wrong beyond 64 elements): kerntune searches
    only what it keeps (two configs of k3; k2's one is taken without a search; kp's perf model keeps its
    top 2), the output is right, and a second process loads the winner and is right too.  A store whose
    winner is SKIP=1 (tuned when the package had no pruner, PRUNE=0) is not launched once the pruner
    drops it."""
    first = _run(tmp_path, tmp_path / "r.db")
    assert all(first[k] == {"correct": True, "SKIP": 0} for k in ("k3", "k2", "kp")), first
    assert len(first["tuned"]) == 2 and first["lists"] == [2, 2], first  # k3 and kp, over two configs each
    second = _run(tmp_path, tmp_path / "r.db")
    assert all(second[k] == {"correct": True, "SKIP": 0} for k in ("k3", "k2", "kp")), second
    assert second["tuned"] == [] and len(second["loaded"]) == 2 and second["measured"] == 0, second

    # the package without its pruner: kerntune (as Triton) takes the fast, wrong config and stores it
    unpruned = _run(tmp_path, tmp_path / "old.db", prune="0")
    assert unpruned["k3"] == {"correct": False, "SKIP": 1}, unpruned
    later = _run(tmp_path, tmp_path / "old.db")  # the pruner back: the stored SKIP=1 is not launched
    assert later["k3"] == {"correct": True, "SKIP": 0} and later["k2"] == {"correct": True, "SKIP": 0}, later
