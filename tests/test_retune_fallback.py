"""The in-place switch (kerntune.retune) never turns a working program into a crash: when kerntune's own
search fails for an autotuner (a store it cannot open, a list whose configs do not all name the same
knobs, which ``triton.autotune`` accepts), the launch falls through to Triton's own tuning, with one
line on stderr per (kernel, reason), and that autotuner is not tried again.  Errors of the package's
own code (its pruner), which Triton's own path raises too, still reach the program unchanged.

Real Triton kernels under Triton's interpreter (TRITON_INTERPRET=1) on the CPU, in subprocesses (the
interpreter must be chosen before triton is imported), with a wall-clock ``do_bench`` for Triton's own
tuning (Triton's default needs a GPU driver).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """
import json, sys, time, torch, triton, triton.language as tl

def _cpu_bench(fn, quantiles):
    t0 = time.perf_counter(); fn(); ms = (time.perf_counter() - t0) * 1000
    return [ms, ms, ms]

import kerntune.retune as kr
kr.enable(store=sys.argv[1])
calls = []
real_winner = kr._winner
def counting(tuner, *a, **k):
    calls.append(tuner.base_fn.__name__)
    return real_winner(tuner, *a, **k)
kr._winner = counting

def mixed(x, y, n, BLOCK: tl.constexpr, UNROLL: tl.constexpr = 1):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)

def plain(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)

def pruned(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)

def refuse(configs, named_args, **kwargs):
    raise ValueError("the package's pruner refuses")

# configs that do not all name the same knobs: triton.autotune takes the list, kerntune's space cannot
mixed = triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=4),
                                 triton.Config({"BLOCK": 64, "UNROLL": 2}, num_warps=4)],
                        key=["n"], do_bench=_cpu_bench)(triton.jit(mixed))
plain = triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=4), triton.Config({"BLOCK": 64}, num_warps=4)],
                        key=["n"], do_bench=_cpu_bench)(triton.jit(plain))
pruned = triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=4), triton.Config({"BLOCK": 64}, num_warps=4)],
                         key=["n"], prune_configs_by={"early_config_prune": refuse},
                         do_bench=_cpu_bench)(triton.jit(pruned))
out = {}
for name, k in (("plain", plain), ("mixed", mixed)):
    right = True
    for n in (100, 200, 300):  # three keys: each one a tuning of its own
        x = torch.arange(n, dtype=torch.float32); y = torch.zeros(n)
        k[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
        right = right and bool(torch.equal(y, 2 * x))
    out[name] = {"correct": right, "best": k.best_config.kwargs.get("BLOCK")}
x = torch.arange(100, dtype=torch.float32); y = torch.zeros(100)
try:
    pruned[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, y, 100)
    out["pruned"] = "ran"
except ValueError as exc:
    out["pruned"] = str(exc)
out["calls"], out["tuned"], out["fell_back"] = calls, kr.STATS.tuned, kr.STATS.fell_back
print(json.dumps(out))
"""


def _run(tmp_path: Path, store: Path) -> tuple[dict, str]:
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(ROOT)) if p))
    proc = subprocess.run([sys.executable, str(prog), str(store)], capture_output=True, text=True, env=env,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("kerntune retune:")]


def test_a_list_kerntune_cannot_read_falls_back_to_tritons_tuning_once(tmp_path: Path) -> None:
    """The mixed list: kerntune's space refuses it ("disagree on their knobs"); every launch is right,
    Triton tuned it, one warning, and kerntune was asked once (not at each of the three keys).  The
    plain list beside it is still tuned by kerntune; the pruner's own error reaches the program."""
    out, err = _run(tmp_path, tmp_path / "kt.db")
    assert out["mixed"]["correct"] and out["mixed"]["best"] in (32, 64), out
    assert out["plain"]["correct"] and len(out["tuned"]) == 3, out
    assert out["calls"].count("mixed") == 1 and out["calls"].count("plain") == 3, out
    warned = _warnings(err)
    assert len(warned) == 1 and "mixed" in warned[0] and "disagree on their knobs" in warned[0], err
    assert len(out["fell_back"]) == 1, out
    # the package's pruner fails under Triton's own path too: its error, not a fallback
    assert out["pruned"] == "the package's pruner refuses", out
    assert "pruned" not in out["calls"] and not any("pruned" in w for w in warned), (out, err)


def test_a_store_that_cannot_be_opened_falls_back_to_tritons_tuning(tmp_path: Path) -> None:
    """A store under a regular file (as a read-only working directory with the default relative path):
    every kernel still runs, right, under Triton's tuning; one warning per kernel, kerntune asked once
    per kernel."""
    (tmp_path / "file").write_text("")
    out, err = _run(tmp_path, tmp_path / "file" / "kt.db")
    assert out["mixed"]["correct"] and out["plain"]["correct"], out
    assert out["tuned"] == [] and sorted(out["calls"]) == ["mixed", "plain"], out
    warned = _warnings(err)
    assert len(warned) == 2 and all("left to triton.autotune" in w for w in warned), err
    assert any(w.startswith("kerntune retune: plain:") and "store" in w.lower() for w in warned), err
    assert out["pruned"] == "the package's pruner refuses", out


CAPPED = """
import json, sys, time, torch, triton, triton.language as tl
import kerntune.retune as kr
kr.enable(store=sys.argv[1])
hooked = []

def capped(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)

# maxnreg on one config only (as packages cap registers on their largest tiles); its pre_hook must
# still run whenever kerntune launches that config
capped = triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=4),
                                  triton.Config({"BLOCK": 64}, num_warps=4, maxnreg=128,
                                                pre_hook=lambda nargs: hooked.append(nargs["BLOCK"]))],
                         key=["n"])(triton.jit(capped))
right = True
for n in (100, 200):
    x = torch.arange(n, dtype=torch.float32); y = torch.zeros(n)
    capped[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
    right = right and bool(torch.equal(y, 2 * x))
print(json.dumps({"correct": right, "tuned": len(kr.STATS.tuned), "fell_back": len(kr.STATS.fell_back),
                  "hooked": sorted(set(hooked))}))
"""


def test_a_list_that_caps_registers_on_some_configs_only_is_tuned_by_kerntune(tmp_path: Path) -> None:
    """Before, a list whose configs set maxnreg on some and not others was refused ("disagree on their
    knobs") and left to Triton; now kerntune tunes it, each config keeps its own pre_hook, and nothing
    falls back."""
    prog = tmp_path / "capped.py"
    prog.write_text(CAPPED)
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(ROOT)) if p))
    proc = subprocess.run([sys.executable, str(prog), str(tmp_path / "kt.db")], capture_output=True, text=True,
                          env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["correct"] and out["tuned"] == 2 and out["fell_back"] == 0, (out, proc.stderr[-2000:])
    assert out["hooked"] == [64], out  # the capped config was measured, with its own hook
    assert not _warnings(proc.stderr), proc.stderr
