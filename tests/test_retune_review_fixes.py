"""Review fixes of the in-place switch (kerntune.retune, `kerntune exec`, `kerntune cache export`):

* a stored winner holds the whole config, the knobs every listed config shares included (they are no
  parameter of the space), so that `kerntune cache export --triton` rebuilds the config that was tuned;
* ``triton.Config.ir_override`` is a launch option: kept in the space, the launches, the store key and
  the export;
* the store key of a list does not depend on the order its pruner returns it in;
* `kerntune exec --strategy llm` (a strategy that needs a model, which exec cannot give) stops in exec;
* a helper interpreter of exec's command without kerntune or Triton says nothing on its stderr.

Real Triton kernels under Triton's interpreter (TRITON_INTERPRET=1) on the CPU, in subprocesses behind
`kerntune exec`, real SQLite stores, as tests/test_retune_prune.py runs the switch.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Each kernel copies x*2 to y.  ``pair`` is one source under two lists that differ only in their
# ir_override files (the interpreter compiles nothing: launches drop the option, as they drop num_warps).
# ``ordered``'s pruner returns its configs reversed for one of the two keys, and for the other one when
# REVERSE=1 (as ``list(set(configs))`` gives another order in another process).
PROGRAM = """
import json, os, time, torch, triton, triton.language as tl
from triton import Config as C

def _cpu_bench(fn, quantiles):
    t0 = time.perf_counter(); fn(); ms = (time.perf_counter() - t0) * 1000
    return [ms, ms, ms]

def shared(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)

def staged(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)

def irs(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)

def some_ir(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)

def pair(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)

def ordered(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)

def prune(configs, named_args, **kwargs):
    flip = (named_args["n"] == 200) != (os.environ.get("REVERSE") == "1")
    return list(reversed(configs)) if flip else list(configs)

def tune(fn, configs, **kw):
    return triton.autotune(configs=configs, key=["n"], do_bench=_cpu_bench, **kw)(triton.jit(fn))

kernels = {
    "shared": tune(shared, [C({"BLOCK": 64}, num_warps=4), C({"BLOCK": 64}, num_warps=4, maxnreg=128)]),
    "staged": tune(staged, [C({"BLOCK": 32}, num_warps=8, num_stages=2), C({"BLOCK": 64}, num_warps=8, num_stages=2)]),
    "irs": tune(irs, [C({"BLOCK": 64}, ir_override="a.ttgir"), C({"BLOCK": 64}, ir_override="b.ttgir")]),
    "some_ir": tune(some_ir, [C({"BLOCK": 32}), C({"BLOCK": 64}, ir_override="d.ttgir")]),
    "pair_a": tune(pair, [C({"BLOCK": 32}, ir_override="a.ttgir"), C({"BLOCK": 64}, ir_override="a.ttgir")]),
    "pair_b": tune(pair, [C({"BLOCK": 32}, ir_override="b.ttgir"), C({"BLOCK": 64}, ir_override="b.ttgir")]),
    "ordered": tune(ordered, [C({"BLOCK": 32}), C({"BLOCK": 64})], prune_configs_by={"early_config_prune": prune}),
}
launches = {}
for name, k in kernels.items():  # every launch's (BLOCK, ir_override): timed, compiled or the pick's
    def recording(*a, _run=k.fn.run, _name=name, **kw):
        launches.setdefault(_name, []).append([kw.get("BLOCK"), kw.get("ir_override")])
        return _run(*a, **kw)
    k.fn.run = recording

out = {"right": True}
for name, k in kernels.items():
    for n in ((100, 200) if name == "ordered" else (100,)):
        x = torch.arange(n, dtype=torch.float32); y = torch.zeros(n)
        k[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
        out["right"] = out["right"] and bool(torch.equal(y, 2 * x))
    b = k.best_config
    out[name] = {"best": {**b.kwargs, "num_warps": b.num_warps, "num_stages": b.num_stages, "maxnreg": b.maxnreg,
                          "ir_override": getattr(b, "ir_override", None)},
                 "hashes": sorted({s.kernel_hash for s in k.__dict__.get("_kerntune_states", {}).values()}),
                 "states": len(k.__dict__.get("_kerntune_states", {}))}
import kerntune.retune as r
out["tuned"], out["loaded"], out["measured"] = r.STATS.tuned, r.STATS.loaded, r.STATS.measured
out["launches"], out["fell_back"] = launches, r.STATS.fell_back
print(json.dumps(out))
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNTUNE_AUTOTUNE")}
    env.update(TRITON_INTERPRET="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


def _run(tmp: Path, store: Path, reverse: str = "0") -> dict[str, Any]:
    """PROGRAM behind `kerntune exec` with ``store``; the JSON of its last line."""
    prog = tmp / "prog.py"
    prog.write_text(PROGRAM)
    proc = subprocess.run([sys.executable, "-m", "kerntune", "exec", "--store", str(store), "--", sys.executable,
                           str(prog)], capture_output=True, text=True, env=_env(REVERSE=reverse), timeout=600,
                          cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _export(store: Path, kernel: str) -> list[str]:
    """The config lines of `kerntune cache export --triton` for one kernel (its name); its error's line
    where it failed (the tests say what they expect of it)."""
    proc = subprocess.run([sys.executable, "-m", "kerntune", "cache", "export", "--triton", "--store", str(store),
                           "--kernel", kernel], capture_output=True, text=True, env=_env(), timeout=600)
    if proc.returncode != 0:
        return [proc.stderr.strip()]
    return [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("triton.Config(")]


def _tuned(out: dict[str, Any], name: str) -> list[str]:
    return [label for label in out["tuned"] if label.split(" ")[0] == name]


def _loaded(out: dict[str, Any], name: str) -> list[str]:
    return [label for label in out["loaded"] if label.split(" ")[0] == name]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A first process that tunes every kernel, a second (REVERSE=1) on the same store, the exports, and
    a third on a copy of the store whose winners were rewritten the old way (the space's knobs alone)."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    tmp = tmp_path_factory.mktemp("review")
    store = tmp / "kt.db"
    first = _run(tmp, store)
    second = _run(tmp, store, reverse="1")
    exports = {name: _export(store, name) for name in ("shared", "staged", "irs")}
    old = tmp / "old.db"
    old.write_bytes(store.read_bytes())
    space_knobs = {"shared": ("maxnreg",), "staged": ("BLOCK",)}  # what a winner stored the old way held
    con = sqlite3.connect(old)
    with con:
        for name, knobs in space_knobs.items():
            for h in first[name]["hashes"]:
                for (cfg,) in con.execute("SELECT config_json FROM best_configs WHERE kernel_hash=?", (h,)).fetchall():
                    kept = {k: v for k, v in json.loads(cfg).items() if k in knobs}
                    con.execute("UPDATE best_configs SET config_json=? WHERE kernel_hash=?", (json.dumps(kept), h))
    con.close()
    third = _run(tmp, old)
    return {"first": first, "second": second, "exports": exports, "third": third}


def test_stored_winner_keeps_the_knobs_every_config_shares_and_the_export_rebuilds_the_tuned_config(
        runs: dict[str, Any]) -> None:
    """Before, only the space's parameters were stored: the export of [BLOCK 64 w4, BLOCK 64 w4 maxnreg 128]
    read ``triton.Config({}, maxnreg=128)`` (no BLOCK: unusable), and of [BLOCK 32 w8 s2, BLOCK 64 w8 s2]
    ``triton.Config({'BLOCK': 64})`` (Triton's 4 warps, 3 stages: another config than the one tuned)."""
    first, second, exports = runs["first"], runs["second"], runs["exports"]
    assert first["right"] and _tuned(first, "shared") and _tuned(first, "staged"), first
    assert exports["shared"] and all(line.startswith("triton.Config({'BLOCK': 64}") and "num_warps=4" in line
                                     for line in exports["shared"]), exports["shared"]
    assert exports["staged"] and all("'BLOCK': " in line and "num_warps=8" in line and "num_stages=2" in line
                                     for line in exports["staged"]), exports["staged"]
    # the whole config in the store still loads, to the tuned config
    assert _loaded(second, "shared") and not _tuned(second, "shared") and second["right"], second
    assert second["shared"]["best"]["BLOCK"] == 64 and second["shared"]["best"]["num_warps"] == 4, second
    assert second["staged"]["best"]["num_warps"] == 8 and second["staged"]["best"]["num_stages"] == 2, second


def test_a_winner_stored_without_the_shared_knobs_still_loads(runs: dict[str, Any]) -> None:
    """A store written before the whole config was kept holds the space's knobs alone: it is loaded as
    it was, not tuned again, and launched with the list's shared knobs."""
    third = runs["third"]
    assert third["right"] and not third["fell_back"], third
    for name in ("shared", "staged"):
        assert _loaded(third, name) and not _tuned(third, name), third
    assert third["shared"]["best"]["BLOCK"] == 64 and third["shared"]["best"]["num_warps"] == 4, third
    assert third["staged"]["best"]["num_warps"] == 8 and third["staged"]["best"]["num_stages"] == 2, third


def test_ir_override_configs_are_tuned_launched_and_exported_with_their_ir_file(runs: dict[str, Any]) -> None:
    """Before, ``ir_override`` was dropped: a list differing only in it was taken as one config (the first,
    never timed against the other), and where some configs set it the rebuilt launch lost it (compiled
    from the source instead of the package's IR file); the export had no ``ir_override``."""
    first, exports = runs["first"], runs["exports"]
    assert first["right"] and not first["fell_back"], first
    irs = first["launches"]["irs"]
    assert _tuned(first, "irs") and {ir for _, ir in irs} == {"a.ttgir", "b.ttgir"}, irs
    assert first["irs"]["best"]["ir_override"] in ("a.ttgir", "b.ttgir"), first["irs"]
    some = first["launches"]["some_ir"]
    assert _tuned(first, "some_ir") and {b for b, _ in some} == {32, 64}, some
    assert all(ir == ("d.ttgir" if block == 64 else None) for block, ir in some), some
    assert exports["irs"] and all(line.startswith("triton.Config({'BLOCK': 64}")
                                  and ("ir_override='a.ttgir'" in line or "ir_override='b.ttgir'" in line)
                                  for line in exports["irs"]), exports["irs"]


def test_lists_differing_only_in_ir_override_have_their_own_store_entries(runs: dict[str, Any]) -> None:
    """One source under [BLOCK 32, 64] with a.ttgir and with b.ttgir: before, both lists had one store key
    and the second loaded the first's winner (launched without its own IR file)."""
    first = runs["first"]
    assert first["pair_a"]["hashes"] != first["pair_b"]["hashes"], first
    assert len(_tuned(first, "pair")) == 2 and not _loaded(first, "pair"), first
    assert {ir for _, ir in first["launches"]["pair_b"]} == {"b.ttgir"}, first["launches"]["pair_b"]


def test_the_store_key_does_not_depend_on_the_order_the_pruner_returns(runs: dict[str, Any]) -> None:
    """A pruner returning ``list(set(configs))`` gives its configs in another order in another process:
    the list was hashed in order, so every start tuned the kernel again.  Here the order flips between
    the two keys and between the processes: one state, and the second process loads both winners."""
    first, second = runs["first"], runs["second"]
    assert len(_tuned(first, "ordered")) == 2 and first["ordered"]["states"] == 1, first
    assert len(_loaded(second, "ordered")) == 2 and not _tuned(second, "ordered"), second
    assert second["ordered"]["states"] == 1 and second["right"], second


@pytest.mark.parametrize("strategy", ["llm", "llm-seeded"])
def test_exec_refuses_a_strategy_that_needs_a_model_before_starting_the_program(tmp_path: Path,
                                                                                strategy: str) -> None:
    """Before, `kerntune exec --strategy llm` started the program, whose switch turned itself off at the
    first search ("pass --llm SPEC", an option exec does not have)."""
    prog = tmp_path / "prog.py"
    prog.write_text("print('ran')\n")
    proc = subprocess.run([sys.executable, "-m", "kerntune", "exec", "--store", str(tmp_path / "kt.db"),
                           "--strategy", strategy, "--", sys.executable, str(prog)], capture_output=True, text=True,
                          env=_env(), timeout=600, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--strategy" in lines[0] and "needs a model" in lines[0], proc.stderr
    assert "bayes" in lines[0] and "exhaustive" in lines[0], lines  # the strategies that work


def test_enable_refuses_a_strategy_that_needs_a_model(tmp_path: Path) -> None:
    """``KERNTUNE_AUTOTUNE_STRATEGY=llm-seeded``: before, the switch went on and failed at the first search;
    now it stays off with one line at start-up."""
    pytest.importorskip("triton")
    code = "import kerntune.retune as r; print(r._original_run is None)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env=_env(KERNTUNE_AUTOTUNE="1", KERNTUNE_AUTOTUNE_STRATEGY="llm-seeded"))
    assert proc.returncode == 0 and proc.stdout.strip() == "True", (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "retuning is off" in lines[0] and "needs a model" in lines[0], proc.stderr


def test_exec_says_nothing_in_helper_interpreters_without_kerntune_or_triton(tmp_path: Path) -> None:
    """`kerntune exec -- bash -c 'python3 ...; python3 ...'`: each interpreter without kerntune (or without
    Triton) printed "retuning is off (ModuleNotFoundError: No module named 'kerntune')" ("... 'triton'"),
    though it has no kernel to retune.  A fresh virtualenv's interpreter (no packages) three times: seeing
    exec's site folder only (no kerntune); with kerntune but not its numpy (a real failure: still said);
    with kerntune and numpy but no Triton."""
    import importlib.util

    numpy = importlib.util.find_spec("numpy")
    if numpy is None or numpy.origin is None:
        pytest.skip("needs numpy")
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=600)
    py = bare / "bin" / "python"
    numpy_only = tmp_path / "numpy_only"  # numpy (and its wheel's libraries) without the rest of the venv
    numpy_only.mkdir()
    for folder in Path(numpy.origin).parents[1].glob("numpy*"):
        if folder.is_dir() and not folder.name.endswith("-info"):
            (numpy_only / folder.name).symlink_to(folder)
    script = (f'S="${{PYTHONPATH%%{os.pathsep}*}}"; PYTHONPATH="$S" "{py}" -c "print(1)"; '
              f'PYTHONPATH="$S{os.pathsep}{ROOT}" "{py}" -c "print(2)"; '
              f'PYTHONPATH="$S{os.pathsep}{ROOT}{os.pathsep}{numpy_only}" "{py}" -c "print(3)"')
    proc = subprocess.run([sys.executable, "-m", "kerntune", "exec", "--store", str(tmp_path / "kt.db"), "--", "bash",
                           "-c", script], capture_output=True, text=True, env=_env(), timeout=600, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.split() == ["1", "2", "3"], (proc.stdout, proc.stderr)
    assert proc.stderr.splitlines() == ["kerntune exec: retuning is off (ModuleNotFoundError: No module named "
                                        "'numpy')"], proc.stderr
