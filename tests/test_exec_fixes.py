"""`kerntune exec` as a transparent prefix, and where its winners live: the program takes kerntune's
place (a signal reaches it, its exit status is the caller's, a death by signal included), the store is
one absolute path whatever directory the program moves to, an empty ``KERNTUNE_STORE=`` means the
default, ``KERNTUNE_AUTOTUNE=1`` works for a program that imports ``kerntune.retune``, and a winner
picked by a smaller search than the one asked for now is searched again instead of served for good.

Real Triton kernels under Triton's interpreter (TRITON_INTERPRET=1) on the CPU, in subprocesses, real
SQLite stores, as tests/test_retune_prune.py runs the switch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("torch")
pytest.importorskip("triton")

if os.environ.get("TRITON_INTERPRET") != "1":  # imported under a real GPU session: not what these tests are for
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]

# One autotuned kernel over an eight-config list; CHDIR moves the program to a fresh folder first (as
# Hydra does for each run), IMPORT imports kerntune.retune before triton.autotune runs.
PROGRAM = """
import json, os, time
if os.environ.get("IMPORT") == "1":
    import kerntune.retune
if os.environ.get("CHDIR"):
    os.makedirs(os.environ["CHDIR"], exist_ok=True)
    os.chdir(os.environ["CHDIR"])
import torch, triton, triton.language as tl

def _cpu_bench(fn, quantiles):
    t0 = time.perf_counter(); fn(); ms = (time.perf_counter() - t0) * 1000
    return [ms, ms, ms]

@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 32, 64, 128) for w in (2, 4)],
                 key=["n"], do_bench=_cpu_bench)
@triton.jit
def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

x = torch.arange(256, dtype=torch.float32)
y = torch.zeros_like(x)
double[lambda m: (triton.cdiv(256, m["BLOCK"]),)](x, y, 256)
import kerntune.retune as r
print(json.dumps({"correct": bool(torch.equal(y, x * 2)), "tuned": len(r.STATS.tuned),
                  "loaded": len(r.STATS.loaded), "evaluations": [s["evaluations"] for s in r.STATS.searches]}))
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNTUNE_")}
    env.update(TRITON_INTERPRET="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


def _program(tmp_path: Path, options: list[str] | None, env: dict[str, str]) -> dict:
    """PROGRAM behind `kerntune exec OPTIONS` (or alone when ``options`` is None); its last line's JSON."""
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    head = [sys.executable, "-m", "kerntune", "exec", *options, "--"] if options is not None else []
    proc = subprocess.run([*head, sys.executable, str(prog)], capture_output=True, text=True, env=env,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "retuning is off" not in proc.stderr and "left to triton" not in proc.stderr, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_default_store_stays_put_and_a_winner_of_a_smaller_search_is_searched_again(tmp_path: Path) -> None:
    """Three fixes on one store, each run of the program in a fresh folder it moves to first (as Hydra does):

    * the default store was relative: such a program re-tuned every run and left a store in each folder;
    * ``KERNTUNE_STORE=`` (empty, the first run's) opened "." (a directory) and turned kerntune off for
      every kernel: it means the default store;
    * a winner was loaded for good: once ``--budget 2`` had picked among half the list, every later run
      with the default (the whole list) served that pick without measuring."""
    def run(n: int, options: list[str], **env: str) -> dict:
        return _program(tmp_path, options, _env(CHDIR=str(tmp_path / f"run{n}"), **env))

    half = run(1, ["--budget", "2"], KERNTUNE_STORE="")
    assert half["correct"] and half["tuned"] == 1 and half["evaluations"] == [2], half
    assert (tmp_path / ".kerntune" / "kerntune.db").exists()
    whole = run(2, [])
    assert whole["correct"] and whole["tuned"] == 1 and whole["evaluations"] == [8], whole
    again = run(3, [])  # the whole list's winner, from the store of the folder kerntune started in: loaded
    assert again["tuned"] == 0 and again["loaded"] == 1, again
    smaller = run(4, ["--budget", "2"])  # a wider search's winner serves it
    assert smaller["tuned"] == 0 and smaller["loaded"] == 1, smaller
    assert not list(tmp_path.glob("run*/.kerntune")), list(tmp_path.glob("run*/.kerntune"))


def test_kerntune_autotune_1_works_for_a_program_that_imports_kerntune_retune(tmp_path: Path) -> None:
    """The README offers ``KERNTUNE_AUTOTUNE=1`` beside `kerntune exec`; importing the module did nothing."""
    out = _program(tmp_path, None, _env(KERNTUNE_AUTOTUNE="1", IMPORT="1",
                                        KERNTUNE_STORE=str(tmp_path / "kt.db")))
    assert out["correct"] and out["tuned"] == 1, out
    assert (tmp_path / "kt.db").exists()


def test_a_death_by_signal_is_the_callers_exit_status(tmp_path: Path) -> None:
    """A SIGKILL of the program came back as exit status 247 (a plain failure), not as a signal."""
    proc = subprocess.run([sys.executable, "-m", "kerntune", "exec", "--store", str(tmp_path / "kt.db"), "--",
                           sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
                          env=_env(), timeout=600, cwd=tmp_path)
    assert proc.returncode == -signal.SIGKILL, proc.returncode


def test_a_sigterm_reaches_the_program_and_its_handler_runs_to_the_end(tmp_path: Path) -> None:
    """A SIGTERM (from ``timeout``, a scheduler) killed kerntune and left the program running, orphaned,
    its handler never called."""
    done = tmp_path / "checkpoint"
    prog = tmp_path / "term.py"
    prog.write_text(f"""
import signal, sys, time
def on_term(*_):
    time.sleep(0.5)  # a checkpoint that takes a while
    open({str(done)!r}, "w").write("saved")
    sys.exit(4)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
time.sleep(60)
""")
    proc = subprocess.Popen([sys.executable, "-m", "kerntune", "exec", "--store", str(tmp_path / "kt.db"), "--",
                             sys.executable, str(prog)], stdout=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 4 and done.read_text() == "saved", code
