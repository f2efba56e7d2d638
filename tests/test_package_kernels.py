"""Kernels that live in installed packages: catching the package's own launch, replaying it with other
configs, spaces from autotune lists and heuristics, and `kerntune tune` on such a kernel end to end.

Real Triton kernels run under Triton's interpreter (TRITON_INTERPRET=1, set before triton is imported)
on the CPU; tests/data/fake_package stands in for a package: an autotuned kernel and a kernel whose
launcher picks BLOCK_SIZE and num_warps by a size rule, as liger-kernel's launchers do.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))

from fake_package import ops  # noqa: E402

from kerntune.errors import KerntuneError  # noqa: E402
from kerntune.evaluate.triton_backend.capture import autotuner, capture, constexpr_names, jit_function  # noqa: E402
from kerntune.evaluate.triton_backend.derive_space import space_from_configs, space_from_knobs  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1":  # imported under a real GPU session: not what these tests are for
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported", allow_module_level=True)


def _env() -> dict[str, str]:
    """A kerntune subprocess's environment: the interpreter, the fake package and this checkout."""
    return dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join(
        [str(DATA), str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]))


def _tune_exhaustive(tmp_path: Path, kernel_file: str, shape: str, retime: int = 2,
                     budget: int = 100) -> subprocess.CompletedProcess:
    """`kerntune tune FILE` over the whole space into ``tmp_path/t.db``; fails the test if it fails.
    ``retime`` 0: no baseline, runoff or re-timing after the search (seconds of interpreted launches),
    for a test that checks the trials alone.  A ``budget`` below the space's size: the package's own
    pick (tried first) and the space's first configs in its order."""
    cmd = [sys.executable, "-m", "kerntune", "tune", str(DATA / kernel_file), "--shape", shape,
           "--strategy", "exhaustive", "--budget", str(budget), "--store", str(tmp_path / "t.db"), "--no-report",
           "--retime", str(retime), "--gpus", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _run_space(tmp_path: Path) -> Any:
    """The space ``_tune_exhaustive``'s run searched, as its store holds it."""
    import json
    import sqlite3

    from kerntune.space import space_from_dict

    with sqlite3.connect(tmp_path / "t.db") as con:
        return space_from_dict(json.loads(con.execute("SELECT space_json FROM runs").fetchone()[0]))


def _trial_rows(tmp_path: Path) -> list[tuple[dict, str]]:
    """(config, status) of every trial ``_tune_exhaustive`` stored."""
    import json
    import sqlite3

    with sqlite3.connect(tmp_path / "t.db") as con:
        return [(json.loads(c), st) for c, st in con.execute("SELECT config_json, status FROM trials")]


def _kerntune_exec(store: Path, *options: str) -> list[str]:
    """The `kerntune exec` prefix (the in-place switch) with its store and options."""
    return [sys.executable, "-m", "kerntune", "exec", "--store", str(store), *options, "--"]


def _program_output(tmp_path: Path, program: str, prefix: Sequence[str] = (), env: dict | None = None) -> dict:
    """Run ``program`` (behind ``prefix``, e.g. `kerntune exec`) in ``tmp_path``; the JSON of its last line.
    Fails the test if it fails."""
    import json

    prog = tmp_path / "prog.py"
    prog.write_text(program)
    proc = subprocess.run([*prefix, sys.executable, str(prog)], capture_output=True, text=True,
                          env=env or _env(), timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _switch_off_with(kt: Sequence[str], tmp_path: Path, **bad: str) -> str:
    """`kerntune exec` (``kt``) with the ``bad`` settings in the environment, over a program that only
    says whether the switch turned on (exit status 1: off; a program that launches a kernel would run
    it untuned for seconds before failing the same way): what the switch said on stderr.  Fails the
    test if the switch turned on."""
    asks = "import sys, kerntune.retune as r; sys.exit(r._original_run is None)"
    proc = subprocess.run([*kt, sys.executable, "-c", asks], capture_output=True, text=True, env={**_env(), **bad},
                          timeout=600, cwd=tmp_path)
    assert proc.returncode != 0, proc.stderr[-3000:]
    return proc.stderr


def test_capture_of_an_autotuned_launch_replays_with_other_configs() -> None:
    x = torch.randn(1000)
    launch = capture(ops.scale_kernel, lambda: ops.scale(x))
    assert launch.config["BLOCK"] in (32, 64, 128, 256) and launch.config["num_warps"] in (2, 4)
    assert launch.outputs == ["y_ptr"] and launch.calls == 1
    y = launch.args["y_ptr"]
    assert torch.allclose(y, 2 * x)
    y.zero_()
    launch.run({"BLOCK": 16, "num_warps": 1})  # a config outside the package's list
    assert torch.allclose(y, 2 * x)
    with pytest.raises(KerntuneError, match="neither an argument"):
        launch.run({"BLOCKS": 32})


def test_capture_picks_the_launch_asked_for_and_finds_in_place_outputs() -> None:
    x = torch.randn(500)
    first = capture(ops.scale_kernel, lambda: ops.scale_inplace_twice(x.clone()), which=0)
    last = capture(ops.scale_kernel, lambda: ops.scale_inplace_twice(x.clone()))
    assert first.calls == last.calls == 2
    assert first.args["alpha"] == 0.5 and first.outputs == ["y_ptr"]
    assert last.args["alpha"] == 3.0 and last.outputs == ["y_ptr"]  # the second launch writes into x (its y_ptr)
    with pytest.raises(KerntuneError, match="not launched"):
        capture(ops.row_sum_kernel, lambda: ops.scale(x))


def test_capture_sees_a_launch_behind_a_launch_cache() -> None:
    """flag-gems puts a launch cache (``libentry``) in front of its autotuned kernels: once a size is
    cached, the package's call launches the compiled kernel without ``JITFunction.run``, where the
    capture listens; the capture empties such caches first (seen on an H200: "not launched")."""
    from kerntune.evaluate.triton_backend.capture import clear_launch_caches

    x = torch.randn(300)
    ops.cached_scale(x)  # the cache holds this size now, as after a program's first step
    launch = capture(ops.cached_scale_kernel, lambda: ops.cached_scale(x))
    assert launch.config["BLOCK"] in (64, 128) and launch.outputs == ["y_ptr"]
    y = launch.args["y_ptr"]
    y.zero_()
    launch.run({"BLOCK": 32})
    assert torch.allclose(y, 2 * x)
    assert ops.cached_scale_kernel.kernel_cache[0] and clear_launch_caches(ops.cached_scale_kernel) == 1
    assert not ops.cached_scale_kernel.kernel_cache[0]


def test_a_compile_workers_capture_leaves_no_launch_cache_entry_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compile worker's capture records the launch without running it; a launch cache would store
    that no-op launch (libentry stores what ``run`` returned, None there) and launch it on the next
    call of the package, so the capture empties the caches again afterwards."""
    from kerntune.evaluate.triton_backend import capture as cap

    x = torch.randn(200)
    ops.cached_scale(x)
    monkeypatch.setattr(cap, "COMPILE_ONLY", True)
    launch = cap.capture(ops.cached_scale_kernel, lambda: ops.cached_scale(x))
    assert launch.args["n"] == 200
    assert not ops.cached_scale_kernel.kernel_cache[0]


def test_workers_fix_the_other_autotuners_of_a_call_and_keep_the_tuned_one() -> None:
    """In a worker, only the tuned kernel's list autotunes; the call's other kernels take their first config."""
    from kerntune.evaluate.triton_backend.capture import autotune_seconds, other_autotuners_fixed

    def call(n: int) -> None:
        ops.row_sum(torch.randn(4, 64))
        ops.scale(torch.randn(n))

    before = len(ops.scale_kernel.cache)
    with other_autotuners_fixed(ops.row_sum_kernel):  # scale_kernel is another kernel of the call
        call(1234)
    assert len(ops.scale_kernel.cache) == before  # it benchmarked nothing: no pick was cached
    with other_autotuners_fixed(ops.scale_kernel):  # the tuned kernel itself autotunes as shipped
        call(1235)
    assert len(ops.scale_kernel.cache) == before + 1
    assert ops.scale_kernel.configs and len(ops.scale_kernel.configs) == 8  # the list is restored
    own = autotune_seconds(ops.scale_kernel, lambda: call(1236))
    assert own is not None and own > 0
    assert autotune_seconds(ops.row_sum_kernel, lambda: call(1237)) is None


def test_kernel_introspection() -> None:
    assert jit_function(ops.scale_kernel).arg_names == ["x_ptr", "y_ptr", "n", "alpha", "BLOCK"]
    assert constexpr_names(jit_function(ops.scale_kernel)) == ["BLOCK"]
    assert autotuner(ops.scale_kernel) is ops.scale_kernel and autotuner(ops.row_sum_kernel) is None
    with pytest.raises(KerntuneError, match="not a Triton kernel"):
        jit_function(ops.settings)


def test_space_from_an_autotune_list_widened_or_kept() -> None:
    configs = autotuner(ops.scale_kernel).configs
    wide = space_from_configs(configs, name="scale")
    assert wide.by_name["BLOCK"].values() == (16, 32, 64, 128, 256, 512)
    assert wide.by_name["num_warps"].values() == (1, 2, 4, 8)
    assert wide.by_name["num_stages"].values() == (2, 3, 4)  # every listed config has 3 stages
    assert wide.default["BLOCK"] == 32 and wide.count() == 6 * 4 * 3
    kept = space_from_configs(configs, widen=False)
    assert kept.names == ["BLOCK", "num_warps"] and kept.count() == 8
    assert kept.is_valid({"BLOCK": 128, "num_warps": 4}) and not kept.is_valid({"BLOCK": 512, "num_warps": 4})
    few = space_from_configs(configs[:3], widen=False)  # (32, 2), (32, 4), (64, 2)
    assert few.count() == 3 and not few.is_valid({"BLOCK": 64, "num_warps": 4})
    assert kept.fixed == {"num_ctas": 1, "num_stages": 3}  # type: ignore[attr-defined]


def test_space_from_knobs_keeps_the_package_rule_as_default() -> None:
    block, warps = ops.settings(3000)
    s = space_from_knobs({"BLOCK_SIZE": [1024, 2048], "num_warps": [2, 4]}, {"BLOCK_SIZE": block, "num_warps": warps})
    assert s.default == {"BLOCK_SIZE": 4096, "num_warps": 8}  # the rule's values join the options
    assert s.by_name["BLOCK_SIZE"].values() == (1024, 2048, 4096)


def test_a_kernel_file_that_imports_a_package_kernel_loads_as_a_target() -> None:
    from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module, module_space

    target = load_kernel_module(DATA / "row_sum_where_it_lives.py")
    space = module_space(target, (64, 200))
    assert space.default == {"BLOCK_SIZE": 256, "num_warps": 4}
    inputs = target.make_inputs((64, 200))
    assert target.baseline() == {"BLOCK_SIZE": 256, "num_warps": 4, "num_stages": 3}  # Triton's default named
    ref = target.reference(inputs)[0].clone()
    assert torch.allclose(ref, inputs[0].sum(dim=1), atol=1e-4)
    assert torch.allclose(target.launch({"BLOCK_SIZE": 512, "num_warps": 2}, inputs)[0], ref, atol=1e-4)
    # a block shorter than the row leaves part of it out: a wrong result the check must catch
    assert not torch.allclose(target.launch({"BLOCK_SIZE": 128, "num_warps": 2}, inputs)[0], ref, atol=1e-4)
    with pytest.raises(KerntuneError, match="pass --shape"):
        module_space(target)


def test_launch_knobs_join_the_list_and_a_partial_write_fails_the_check() -> None:
    """An autotuned kernel whose launcher fixes CHUNK and BLOCK outside its list: both join the widened
    list as knobs, starting at the launcher's values.  The caught launch's output is poisoned before a
    check, so CHUNK=128 (half the caught grid's coverage) cannot pass on the values the package's own
    launch left in the buffer."""
    from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module, module_space
    from kerntune.evaluate.triton_backend.worker import compare_outputs

    target = load_kernel_module(DATA / "chunk_scale_where_it_lives.py")
    space = module_space(target, (1000,))
    assert space.by_name["CHUNK"].values() == (128, 256, 512) and space.by_name["BLOCK"].values() == (32, 64, 128)
    assert space.default["CHUNK"] == 256 and space.default["BLOCK"] == 64 and "num_warps" in space.names
    inputs = target.make_inputs((1000,))  # the caught launch's tensors: x_ptr, y_ptr
    x = inputs[0]
    assert target.launch_state.write_only == ["y_ptr"] and target.launch_state.outputs == ["y_ptr"]
    ref = tuple(t.clone() for t in target.reference(inputs))
    for chunk, wrong in ((128, True), (512, False)):
        target.before_check(inputs)
        out = target.launch({"CHUNK": chunk, "BLOCK": 32, "num_warps": 1}, inputs)
        assert (compare_outputs(out, ref, torch) is not None) == wrong
        assert torch.allclose(ref[0], 2 * x)
    assert x.isfinite().all()  # only the output was poisoned, never an input
    list_only = dict(os.environ, KERNTUNE_LIST_ONLY="1")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "environ", list_only)
        kept = load_kernel_module(DATA / "chunk_scale_where_it_lives.py").space_for((1000,))
    assert kept.names == ["num_warps"]  # the shipped list alone: no launch knobs


def test_tune_a_package_kernel_where_it_lives_end_to_end(tmp_path: Path) -> None:
    """`kerntune tune FILE` on the package kernel: worker processes catch the launch, the too-short
    blocks come back wrong_result, the package's own choice is the baseline of the speedup.  Four rows:
    the checks need the row length alone, and fewer rows make every interpreted launch cheaper."""
    proc = _tune_exhaustive(tmp_path, "row_sum_where_it_lives.py", "4x200")
    assert 'baseline: {"BLOCK_SIZE": 256, "num_warps": 4}' in proc.stderr
    # On the CPU interpreter the re-time is noise: the pick either shows its speedup over the package's
    # choice or, timed slower beyond noise, leaves that choice the winner.  Both name it as the baseline.
    assert "best:" in proc.stdout
    assert ("speedup over the package's own choice" in proc.stdout
            or "slower beyond noise: the baseline stays the winner" in proc.stderr), proc.stdout + proc.stderr
    rows = _trial_rows(tmp_path)
    status = {c["BLOCK_SIZE"]: s for c, s in rows}
    assert len(rows) == 4 * 2 + 0  # every config of the space (blocks x warps 2, 4), the baseline among them
    assert status[64] == status[128] == "wrong_result" and status[256] == status[512] == "ok"


RETUNE_PROGRAM = """
import json, threading, torch
from fake_package import ops
torch.manual_seed(0)
xs = [torch.randn(n) for n in (100, 300, 100)]
outs = [ops.scale(xs[0])]
# the n=300 key launched from another thread, as autograd's backward thread launches a training step's kernels
t = threading.Thread(target=lambda: outs.append(ops.scale(xs[1])))
t.start(); t.join()
outs.append(ops.scale(xs[2]))
import kerntune.retune as r
print(json.dumps({"sums": [float(o.double().sum()) for o in outs], "tuned": r.STATS.tuned,
                  "ok": len(outs) == 3 and all(bool(torch.allclose(o, 2 * x)) for o, x in zip(outs, xs)),
                  "loaded": r.STATS.loaded, "measured": r.STATS.measured,
                  "enabled": r._original_run is not None}))
"""


def test_retune_switch_tunes_each_key_once_in_any_thread_and_a_later_process_only_loads(tmp_path: Path) -> None:
    """`kerntune exec --budget 0.5 -- python PROGRAM`: the package's autotuned kernel is tuned by kerntune
    with half its list per key, the winners stored; a second process loads them and measures nothing; the
    outputs equal those of the program run without the switch.  One key is launched from another thread,
    as a training step's backward kernels launch from autograd's: the switch's store must answer there
    too, tuning and loading (a SQLite connection serves only the thread that opened it)."""
    def run(*prefix: str) -> dict:
        return _program_output(tmp_path, RETUNE_PROGRAM, prefix)

    kt = _kerntune_exec(tmp_path / "retune.db", "--budget", "0.5")
    plain, first, second = run(), run(*kt), run(*kt)
    # the default: every config of the list, as triton.autotune measures
    whole = run(*_kerntune_exec(tmp_path / "whole.db"))
    # (plus the runoff: a screen of at most 16, at most 6 leaders in 2-6 rounds a key, kerntune.retune_runoff,
    # and its tie-break's 3)
    assert 2 * 8 <= whole["measured"] <= 2 * (8 + 16 + 36 + 18) and whole["sums"] == pytest.approx(plain["sums"], rel=1e-6)
    assert not plain["enabled"] and plain["measured"] == 0
    assert first["enabled"] and len(first["tuned"]) == 2 and first["loaded"] == []  # keys n=100 and n=300
    assert 2 * 4 <= first["measured"] <= 2 * (4 + 16 + 36 + 18)  # half of the 8-config list per key, and the runoff
    assert second["tuned"] == [] and len(second["loaded"]) == 2 and second["measured"] == 0
    assert first["sums"] == pytest.approx(plain["sums"], rel=1e-6) and second["sums"] == first["sums"]
    assert plain["ok"] and first["ok"] and second["ok"] and whole["ok"]


def test_tune_with_launch_knobs_end_to_end_rejects_the_partial_grid(tmp_path: Path) -> None:
    """`kerntune tune` through the worker processes: every config with CHUNK=128 (half the caught grid's
    coverage) comes back wrong_result, every other one ok.  Ten of the space's 81 configs: the package's
    pick and every CHUNK x BLOCK at one warp count and stage count (which the interpreter ignores)."""
    _tune_exhaustive(tmp_path, "chunk_scale_where_it_lives.py", "1000", retime=0, budget=10)
    rows = _trial_rows(tmp_path)
    assert _run_space(tmp_path).count() == 3 * 3 * 3 * 3  # CHUNK x BLOCK x warps (1, 2 widened) x stages (3 widened)
    assert len(rows) == 10 and {(c["CHUNK"], c["BLOCK"]) for c, _ in rows} == {
        (chunk, block) for chunk in (128, 256, 512) for block in (32, 64, 128)}
    assert all((s == "wrong_result") == (c["CHUNK"] == 128) for c, s in rows)
    assert all(s == "ok" for c, s in rows if c["CHUNK"] != 128)


def test_a_compile_worker_lets_the_package_call_launch_its_other_kernels() -> None:
    """Compile workers compile kernels without launching them, except while a package's call builds
    the inputs: liger's fused MoE reads a tile count its routing kernels computed (``.item()``) to size
    the tuned GEMM's grid, and compiled only they would leave it at what the empty buffer held."""
    from triton.runtime.jit import JITFunction

    from kerntune.evaluate.triton_backend import capture, worker

    def kernel(x_ptr, BLOCK: triton.language.constexpr):  # never compiled: its run is replaced
        pass

    k = JITFunction(kernel)
    k.run = lambda *args, grid, warmup, **kwargs: warmup  # type: ignore[method-assign]
    own, flag, kept = vars(JITFunction).get("__getitem__"), capture.COMPILE_ONLY, worker._launching_getitem
    try:
        with worker.package_kernels_launch():  # outside a compile worker: launches run as ever
            assert k[(1,)](None, BLOCK=4) is False
        worker._compile_only()
        assert k[(1,)](None, BLOCK=4) is True  # compiled, not launched
        with worker.package_kernels_launch():
            assert k[(1,)](None, BLOCK=4) is False
        assert k[(1,)](None, BLOCK=4) is True
    finally:
        capture.COMPILE_ONLY, worker._launching_getitem = flag, kept
        if own is None:
            del JITFunction.__getitem__
        else:
            JITFunction.__getitem__ = own
    assert k[(1,)](None, BLOCK=4) is False


def test_capture_of_a_descriptor_kernel_replays_its_pre_hook_with_each_config() -> None:
    """A kernel taking host TensorDescriptors whose list's pre_hook sets their block shapes: the tensors
    behind the descriptors are the launch's inputs and outputs, and every replay (another config, then
    the package's own again) runs the hook first, so the tiles and the descriptors agree."""
    x = torch.randn(64, 48)
    launch = capture(ops.desc_scale_kernel, lambda: ops.desc_scale(x))
    assert launch.pre_hook is ops._tile_descriptors
    assert [k for k, _ in launch.tensors()] == ["x_desc.base", "y_desc.base"]
    assert launch.outputs == ["y_desc.base"] and launch.write_only == ["y_desc.base"]
    y = launch.tensor("y_desc.base")
    own = launch.config["BLOCK_M"]
    for cfg in ({"BLOCK_M": 32, "BLOCK_N": 8}, {"BLOCK_M": 4, "BLOCK_N": 16}, None):
        y.fill_(float("nan"))
        launch.run(cfg)
        assert launch.args["x_desc"].block_shape == ([cfg["BLOCK_M"], cfg["BLOCK_N"]] if cfg else [own, 16])
        assert torch.equal(launch.output_values()[0], 3 * x)


def test_a_list_whose_configs_carry_different_pre_hooks_is_refused() -> None:
    from kerntune.evaluate.triton_backend.capture import list_pre_hook

    def zero(name):  # one factory, a new closure per config: the same hook
        return lambda nargs: nargs[name].zero_()

    tuner = autotuner(ops.desc_scale_kernel)
    saved = tuner.configs
    try:
        tuner.configs = [triton.Config({"BLOCK_M": m, "BLOCK_N": 16}, pre_hook=zero("y")) for m in (8, 16)]
        assert list_pre_hook(ops.desc_scale_kernel) is tuner.configs[0].pre_hook
        tuner.configs[1].pre_hook = zero("x")  # the same code, another closed-over value
        with pytest.raises(KerntuneError, match="different pre_hooks"):
            list_pre_hook(ops.desc_scale_kernel)
        for other in (lambda nargs: None, None):
            tuner.configs = [triton.Config({"BLOCK_M": 8, "BLOCK_N": 16}, pre_hook=ops._tile_descriptors),
                             triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}, pre_hook=other)]
            with pytest.raises(KerntuneError, match="different pre_hooks"):
                list_pre_hook(ops.desc_scale_kernel)
    finally:
        tuner.configs = saved
    assert list_pre_hook(ops.scale_kernel) is None


def test_tune_a_descriptor_kernel_end_to_end(tmp_path: Path) -> None:
    """`kerntune tune` on the descriptor kernel: compile workers and the benchmark worker run the list's
    pre_hook before each config, so every tile of the widened list computes the package's output.  The
    kernel file sets the list's configs to 1 warp and 1 stage, which the interpreter ignores: widened,
    48 configs, all 12 tiles among them (the shipped 4 warps and 3 stages made 108, 100 of them run)."""
    _tune_exhaustive(tmp_path, "desc_scale_where_it_lives.py", "32x48", retime=0)  # BLOCK_N 32 ends past the edge
    rows = _trial_rows(tmp_path)
    tiles = {(c["BLOCK_M"], c["BLOCK_N"]) for c, _ in rows}
    assert len(tiles) >= 6 and (4, 8) in tiles and (32, 32) in tiles  # the list widened a step each way
    assert all(s == "ok" for _, s in rows), [r for r in rows if r[1] != "ok"][:3]


DESC_RETUNE_PROGRAM = """
import json, torch
from fake_package import ops
torch.manual_seed(0)
xs = [torch.randn(64, 48), torch.randn(40, 32)]
outs = [ops.desc_scale(x) for x in xs]
import kerntune.retune as r
print(json.dumps({"exact": [bool(torch.equal(o, 3 * x)) for o, x in zip(outs, xs)], "tuned": r.STATS.tuned,
                  "loaded": r.STATS.loaded, "measured": r.STATS.measured}))
"""


def test_retune_switch_runs_the_lists_pre_hook_for_a_descriptor_kernel(tmp_path: Path) -> None:
    """The in-place switch on a kernel whose list's pre_hook sets its TensorDescriptors' block shapes:
    kerntune's configs carry the hook when they are compiled, timed, and launched afterwards (also
    when a later process loads them from the store), so every output is the kernel's exact result."""
    kt = _kerntune_exec(tmp_path / "r.db")
    first, second = (_program_output(tmp_path, DESC_RETUNE_PROGRAM, kt) for _ in range(2))
    # both configs, at two keys (rows 64, 40), and the runoff's re-timings where the two are close
    assert first["measured"] >= 2 * 2 and len(first["tuned"]) == 2
    assert second["measured"] == 0 and len(second["loaded"]) == 2
    assert first["exact"] == second["exact"] == [True, True]


def test_capture_of_a_launch_on_tensors_that_require_grad() -> None:
    """A training call passes weights that require gradients (leaf tensors); the capture's own
    resets and NaN poisoning of them must not trip autograd's in-place check."""
    x = torch.randn(1000, requires_grad=True)
    launch = capture(ops.scale_kernel, lambda: ops.scale(x))
    assert launch.outputs == ["y_ptr"] and x.requires_grad
    assert torch.allclose(launch.args["y_ptr"], 2 * x.detach())


def _desc_scale_adapter(**extra: Any) -> Any:
    """An adapter over the fake package's descriptor kernel and its own entry point."""
    from kerntune.adapters.target import Adapter

    return Adapter(name="fake.desc_scale", kernel="fake_package.ops:desc_scale_kernel", package="fake",
                   shape_doc="rows x cols", shapes=[(64, 48)], make_inputs=lambda s: (torch.randn(s),),
                   call=lambda inputs: ops.desc_scale(*inputs), **extra)


def test_a_preset_package_choice_keeps_the_lists_pre_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    """``KERNTUNE_PACKAGE_CHOICE`` hands the package's autotuner one known config instead of its list
    (benchmarks/real_kernels); for a descriptor kernel that config must carry the list's pre_hook, or
    the package's launch runs with its placeholder block shapes (on a GPU: a compile error)."""
    import json

    from kerntune.adapters.target import PackageTarget

    adapter = _desc_scale_adapter()
    monkeypatch.setenv("KERNTUNE_PACKAGE_CHOICE", json.dumps({"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4}))
    target = PackageTarget(adapter)
    x, y = target.make_inputs((64, 48))
    launch = target.launch_state
    assert launch.config["BLOCK_M"] == 16 and launch.args["x_desc"].block_shape == [16, 16]
    assert torch.equal(y, 3 * x)
    assert len(autotuner(ops.desc_scale_kernel).configs) == 2  # the package's list again afterwards


def test_the_capture_compares_fp8_tensors_by_their_bits() -> None:
    """A scaled FP8 GEMM's operands are one-byte floats, for which torch has no ``nan_to_num`` or
    ``equal``: the capture's output detection compares them bit for bit, NaN poisoning included."""
    from kerntune.evaluate.triton_backend.capture import _same

    a = torch.randn(64).to(torch.float8_e4m3fn)
    b = a.clone()
    assert _same(a, b)
    b[3] = 0.5 if float(a[3]) != 0.5 else 1.0
    assert not _same(a, b)
    nan = torch.full((64,), float("nan")).to(torch.float8_e4m3fn)
    assert _same(nan, nan.clone()) and not _same(a, nan)


def test_an_adapters_pre_hook_sets_the_descriptors_of_a_kernel_without_a_list() -> None:
    """A descriptor kernel launched without an autotune list (liger's MLP backward dGU: its launcher
    builds the descriptors at its own tiles): the adapter's ``pre_hook`` sets their block shapes from
    each config's tiles, so other tiles compute the package's output."""
    from kerntune.adapters.target import PackageTarget

    adapter = _desc_scale_adapter(knobs={"BLOCK_M": [4, 8, 16, 32], "BLOCK_N": [8, 16]},
                                  resolve=lambda: ops.desc_scale_kernel.fn, pre_hook=ops._tile_descriptors)
    target = PackageTarget(adapter)
    assert target.kernel is ops.desc_scale_kernel.fn  # no list: the adapter's hook is the one
    x, y = target.make_inputs((64, 48))
    assert target.launch_state.pre_hook is ops._tile_descriptors
    for cfg in ({"BLOCK_M": 32, "BLOCK_N": 8}, {"BLOCK_M": 4, "BLOCK_N": 16}):
        y.fill_(float("nan"))
        (out,) = target.launch(cfg, None)
        assert target.launch_state.args["x_desc"].block_shape == [cfg["BLOCK_M"], cfg["BLOCK_N"]]
        assert torch.equal(out, 3 * x)


def test_an_in_place_output_that_aliases_an_input_is_never_poisoned() -> None:
    """dU written over U while dG reads U (liger's MLP backward): dU is rewritten whole, but poisoning
    it poisons U, so it is not write-only (the check would see NaN in dG for every config)."""
    g, u = torch.randn(200), torch.randn(200)
    launch = capture(ops.grad_like_kernel, lambda: ops.grad_like_inplace(g.clone(), u.clone()))
    assert set(launch.outputs) == {"g_ptr", "u_ptr", "dg_ptr", "du_ptr"}
    assert launch.write_only == []


RETUNE_RUNOFF_PROGRAM = """
import json, torch
from fake_package import ops
x = torch.randn(1000)
y = ops.scale(x)
import kerntune.retune as r
s = r.STATS.searches[0]
print(json.dumps({"ok": bool(torch.allclose(y, 2 * x)), "measured": r.STATS.measured,
                  "runoff": s.get("runoff"), "config": s["config"]}))
"""


def test_retune_runoff_retimes_the_leaders_in_interleaved_rounds(tmp_path: Path) -> None:
    """``KERNTUNE_AUTOTUNE_RUNOFF=3`` (the cut off): after the whole 8-config list, its 3 fastest are timed again in
    5 interleaved rounds and one of them is the winner; a bad setting stops the switch at once."""
    import json

    kt = _kerntune_exec(tmp_path / "r.db")
    out = _program_output(tmp_path, RETUNE_RUNOFF_PROGRAM, kt,
                          {**_env(), "KERNTUNE_AUTOTUNE_RUNOFF": "3", "KERNTUNE_AUTOTUNE_CUT": "0"})
    assert out["ok"] and out["measured"] == 8 + 3 * 5
    rounds = out["runoff"]
    assert len(rounds) == 3 and all(len(v) == 5 for v in rounds.values())
    assert out["config"] in [json.loads(k) for k in rounds]
    assert "KERNTUNE_AUTOTUNE_RUNOFF" in _switch_off_with(kt, tmp_path, KERNTUNE_AUTOTUNE_RUNOFF="two")


RETUNE_CUT_PROGRAM = """
import json, torch
from fake_package import ops
x = torch.randn(2048)  # 16 programs of 128: WORK's time ratios as at 4096, each launch half as long
y = ops.scale_work(x)
import kerntune.retune as r
s = r.STATS.searches[0]
print(json.dumps({"ok": bool(torch.allclose(y, 2 * x)), "measured": r.STATS.measured, "cut": s["cut"],
                  "runoff": s.get("runoff"), "runoff_screen": s.get("runoff_screen"),
                  "runoff_tie": s.get("runoff_tie"), "config": s["config"]}))
"""


def test_retune_cuts_configs_already_slower_and_runs_off_the_close_ones(tmp_path: Path) -> None:
    """The defaults: a config whose first launches take over 1.25x the best so far gets no timing
    window (the list's WORK 64 takes 5-8 times WORK 1's time under the interpreter), and the
    configs within 50% of the fastest (at most 16) get one interleaved round, those within 25% of its
    leader (at most 6), if any, are timed again, their launches interleaved, in 2 to 6 rounds, the
    winner one of them.  ``kerntune exec --cut 0 --runoff 0`` (``KERNTUNE_AUTOTUNE_CUT=0``,
    ``KERNTUNE_AUTOTUNE_RUNOFF=0``) times every config once, fully; a bad setting stops the switch at once."""
    import json

    from kerntune.evaluate.runoff import AUTO_ROUNDS

    kt = _kerntune_exec(tmp_path / "r.db")
    out = _program_output(tmp_path, RETUNE_CUT_PROGRAM, kt)
    assert out["ok"] and out["config"]["WORK"] == 1
    assert out["cut"] >= 2, out  # WORK 64 at both warp counts (5-8x WORK 1's time here), at least
    leaders = out["runoff"] or {}
    # at most 6 leaders, 2 to 6 rounds (a contender out leaves None behind); never a config 7x slower
    n_rounds = {len(v) for v in leaders.values()}
    assert len(leaders) in (0, 2, 3, 4, 5, 6) and len(n_rounds) <= 1, out
    assert all(json.loads(k)["WORK"] < 64 and AUTO_ROUNDS[0] <= len(v) <= AUTO_ROUNDS[1] for k, v in leaders.items()), out
    if leaders:  # the winner ran to the end
        assert out["config"] in [json.loads(k) for k, v in leaders.items() if v[-1] is not None]
    tie = sum(len(v) for v in (out["runoff_tie"] or {}).values())  # the tie-break's windows, if one ran
    screen = out["runoff_screen"] or {}  # one round of every config within 1.5x: never WORK 64
    assert all(json.loads(k)["WORK"] < 64 for k in screen) and set(leaders) <= set(screen), out
    assert out["measured"] == 8 + len(screen) + sum(x is not None for v in leaders.values() for x in v) + tie
    off = _program_output(tmp_path, RETUNE_CUT_PROGRAM, _kerntune_exec(tmp_path / "off.db", "--cut", "0", "--runoff", "0"))
    assert off["cut"] == 0 and off["runoff"] is None and off["measured"] == 8
    assert "KERNTUNE_AUTOTUNE_CUT" in _switch_off_with(kt, tmp_path, KERNTUNE_AUTOTUNE_CUT="0.9")


RETUNE_OVERLAP_PROGRAM = """
import json, torch
import kerntune.retune_timing as rt

order = []

def arriving(self, t_configs, on_ready=None, on_idle=None):
    # compiles that land one by one, in list order, with idle moments between them (as forked
    # children deliver them on a GPU host); the interpreter compiles nothing itself
    for i, _ in enumerate(t_configs):
        order.append(("ready", i))
        if on_ready is not None:
            on_ready(i)
        if on_idle is not None and i % 3 == 2:
            order.append(("idle", on_idle()))
    return [(None, 0.0) for _ in t_configs]

rt.ListEvaluator._compile = arriving
from fake_package import ops
x = torch.randn(2048)  # 16 programs of 128: WORK's time ratios as at 4096, each launch half as long
y = ops.scale_work(x)
import kerntune.retune as r
s = r.STATS.searches[0]
print(json.dumps({"ok": bool(torch.allclose(y, 2 * x)), "measured": r.STATS.measured, "cut": s["cut"],
                  "overlapped": s["overlapped"], "idle_windows": sum(1 for k, v in order if k == "idle" and v),
                  "runoff": s.get("runoff"), "runoff_screen": s.get("runoff_screen"),
                  "runoff_tie": s.get("runoff_tie"), "config": s["config"]}))
"""


def test_retune_overlap_times_compiled_configs_fastest_first_while_others_compile(tmp_path: Path) -> None:
    """With the overlap on (the default), each config compiled while the rest of the list still compiles
    gets its two launches at once, and an idle moment goes to the window of the fastest config so far;
    the cut and the winner are those of the plain path (scripted arrivals, the real interpreter's kernel)."""
    out = _program_output(tmp_path, RETUNE_OVERLAP_PROGRAM, _kerntune_exec(tmp_path / "r.db"))
    assert out["ok"] and out["config"]["WORK"] == 1, out
    assert out["overlapped"] == 8 and out["idle_windows"] >= 1, out
    assert out["cut"] >= 2, out  # WORK 64 at both warp counts, whatever the order it arrived in
    tie = sum(len(v) for v in (out["runoff_tie"] or {}).values())  # the tie-break's windows, if one ran
    assert out["measured"] == 8 + len(out["runoff_screen"] or {}) + sum(
        x is not None for v in (out["runoff"] or {}).values() for x in v) + tie, out
    off = _program_output(tmp_path, RETUNE_OVERLAP_PROGRAM, _kerntune_exec(tmp_path / "off.db", "--overlap", "0"))
    assert off["overlapped"] == 0 and off["idle_windows"] == 0 and off["config"]["WORK"] == 1, off
