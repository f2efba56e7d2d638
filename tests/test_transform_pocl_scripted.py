"""Code-level strategies end to end on a real OpenCL device — PoCL on the CPU — with a SCRIPTED model.

The model is scripted (tests/data/transform/scripted_*.yaml: canned replies picked by each
prompt's marker and text), so what is tested is kerntune, not a model: a naive matmul becomes a
tiled one with new tunable parameters and is accepted; a planted wrong rewrite is rejected as
incorrect; steps that are not tuning are rejected by validation.  Kernels really compile, run, are
checked against the original kernel's outputs and are timed through Kernel Tuner in the worker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pyopencl = pytest.importorskip("pyopencl")
kernel_tuner = pytest.importorskip("kernel_tuner")

try:
    _HAS_CL = bool(pyopencl.get_platforms())
except pyopencl.Error:  # no ICD loader or no platform
    _HAS_CL = False
pytestmark = pytest.mark.skipif(not _HAS_CL, reason="no OpenCL platform (install pocl-binary-distribution)")

from kerntune.evaluate.trial import Status  # noqa: E402
from kerntune.store import Store  # noqa: E402
from kerntune.transform import (AutonomousTuningStrategy, KernelTransformer, KerntuneStrategy,  # noqa: E402
                                OnePromptTuningStrategy)
from kerntune.transform.kernel import KernelSpec  # noqa: E402
from kerntune.transform.kt_backend import KernelTunerSession, WorkerFailed  # noqa: E402
from kerntune.transform.scripted import ScriptedTransformProvider  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "transform"
# Tests that need the tiled rewrite to come out faster time each config 20 times (about 2 ms each at
# N=128): PoCL runs on every core, and with 3 the test files running beside this one once made the
# 1.6x-faster rewrite read "not faster".  Its screening on a loaded CI machine once read 8% slower
# still; the acceptance is now decided on side-by-side turns (TransformContext.side_by_side), here 7 of
# them (ROUNDS).  Even so, beside the other test files on a 2-core machine the tiled rewrite (2.3x
# faster unloaded) has read 0.91x and 0.99x paired by round, also with PoCL on one compute unit: how
# much faster it is depends on what else the machine runs.  So the two tests that need it accepted run
# the transform again when, and only when, the verdict was "not faster" (at most ATTEMPTS times); a
# transform that never accepts it still fails them.
ROUNDS = 7
ATTEMPTS = 3
NAIVE = (DATA / "matmul_naive.cl").read_text()
ORIGINAL = {"block_size_x": [16], "block_size_y": [16]}
N = 128


def reference_product(n: int) -> np.ndarray:
    rng = np.random.default_rng(0)  # as tests/data/transform/matmul_args.py
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def not_faster(status: str, reason: str | None) -> bool:
    """A verdict that another run on a less loaded moment may reverse (see ATTEMPTS)."""
    return status == "rejected" and (reason or "").startswith("not faster")


def test_scripted_model_autonomous_tiles_naive_matmul_rejects_wrong_and_non_tuning_steps(tmp_path):
    for attempt in range(ATTEMPTS):
        provider = ScriptedTransformProvider(DATA / "scripted_autonomous.yaml")
        store = Store(tmp_path / f"kt{attempt}.db")
        kt = KernelTransformer(NAIVE, strategy=AutonomousTuningStrategy(max_replanning=1), llm=provider,
                               backend="opencl", problem_size=(N, N), args_generator=DATA / "matmul_args.py",
                               tune_params=ORIGINAL, iterations=20, budget=8, store=store, memory_mb=4096,
                               confirm_rounds=ROUNDS)
        result = kt.run()
        steps = {s.id: s for s in result.steps}
        if not not_faster(steps["s3"].status, steps["s3"].reason):
            break
        store.close()

    # steps that are not tuning: one by the rules (profiling), one by the model's validation
    assert steps["s1"].status == "invalid" and "profiling" in steps["s1"].reason
    assert steps["s2"].status == "invalid" and "renaming" in steps["s2"].reason

    # the tiled rewrite: new tunable parameters, names fixed, accepted as correct and faster
    tiled = steps["s3"]
    assert tiled.status == "accepted", (tiled.reason, tiled.notes)
    assert set(tiled.tune_params) == {"block_size_x", "block_size_y", "WPT", "TILE_K"}
    assert any("BLOCK_SIZE_Y renamed to block_size_y" in n for n in tiled.notes)
    assert any("TILE_SIZE" in n and "dropped" in n for n in tiled.notes)
    assert tiled.restrictions == ["block_size_y * WPT <= 16"] and tiled.statuses == {"ok": 6}
    assert result.accepted == ["s3"] and result.speedup > 1.0 and tiled.speedup > 1.0
    # judged side by side with the original (ROUNDS rounds in one worker), not on screening minutes apart
    assert any(n.startswith(f"side by side ({ROUNDS} rounds") for n in tiled.notes), tiled.notes
    assert result.speedup == pytest.approx(tiled.speedup)
    assert "__local float As" in result.kernel_source and "#define TILE_K" not in result.kernel_source
    assert result.grid_div == {"y": ["block_size_y", "WPT"]}

    # the planted wrong rewrite: rejected as incorrect after its first config
    wrong = steps["s4"]
    assert wrong.status == "rejected" and wrong.reason.startswith("incorrect")
    assert wrong.statuses == {"wrong_result": 1}

    # every trial is a kerntune Trial in the store: the original, the tiled space, the wrong rewrite
    runs = {r.label: r for r in store.list_runs()}
    assert {"transform original", "transform s3", "transform s4"} <= set(runs)
    assert [t.status for _, t, _ in store.trials(runs["transform s4"].id)] == [Status.WRONG_RESULT]
    assert len(store.trials(runs["transform s3"].id)) == 6
    store.close()

    # the accepted kernel, run on its own through Kernel Tuner, computes A @ B
    a, b, ab = reference_product(N)
    kw = result.kernel_tuner_kwargs()
    out = kernel_tuner.run_kernel(kw["kernel_name"], kw["kernel_source"], (N, N),
                                  [np.zeros((N, N), np.float32), a, b, np.int32(N)], result.best_config, lang="OpenCL",
                                  grid_div_y=kw["grid_div_y"], quiet=True)
    assert np.allclose(out[0], ab, rtol=1e-4, atol=1e-3)


def test_scripted_model_explicit_steps_from_yaml_through_the_cli(tmp_path):
    out, res = tmp_path / "matmul_tuned.cl", tmp_path / "result.json"
    script = DATA / "scripted_explicit.yaml"
    cmd = [sys.executable, "-m", "kerntune", "transform", str(DATA / "matmul_naive.cl"), "--strategy", "explicit",
           "--steps", str(DATA / "steps.yaml"), "--llm", f"cmd:{sys.executable} -m kerntune.transform.scripted {script}",
           "--backend", "opencl", "--problem-size", f"{N}x{N}", "--args-generator", str(DATA / "matmul_args.py"),
           "--params", json.dumps(ORIGINAL), "--budget", "8", "--iterations", "20", "--retime-rounds", str(ROUNDS),
           "-o", str(out), "--json", str(res)]
    for attempt in range(ATTEMPTS):
        proc = subprocess.run(cmd + ["--store", str(tmp_path / f"kt{attempt}.db")], capture_output=True, text=True,
                              timeout=300, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert proc.returncode == 0, proc.stderr[-3000:]
        data = json.loads(res.read_text())
        tiling = next(s for s in data["steps"] if s["id"] == "tiling")
        if not not_faster(tiling["status"], tiling["reason"]):
            break
    status = {s["id"]: (s["status"], s["reason"]) for s in data["steps"]}
    assert tiling["status"] == "accepted", (tiling["reason"], tiling["notes"])
    assert status["vectorize"] == ("skipped", "the model judged it not worth doing: the loads of B are already "
                                              "coalesced across work-items")
    assert status["vector_width"] == ("skipped", "depends on vectorize, which brought no gain")
    assert data["tune_params"]["TILE_K"] == [16]  # the step's fixed values
    assert data["speedup"] > 1.0 and out.read_text() == data["kernel_source"]
    assert "speedup" in proc.stdout and "[accepted" in proc.stdout


def test_scripted_model_one_prompt_with_model_written_inputs(tmp_path):
    inputs = ("def make_args(problem_size):\n    n = problem_size[0]\n    rng = np.random.default_rng(0)\n"
              "    a = rng.standard_normal((n, n)).astype(np.float32)\n"
              "    b = rng.standard_normal((n, n)).astype(np.float32)\n"
              "    return [np.zeros((n, n), np.float32), a, b, np.int32(n)]\n")
    rules = [{"kind": "inputs", "reply": {"code": inputs, "explanation": "C zero, A and B random, n"}},
             {"kind": "one-prompt", "reply": {"code": (DATA / "matmul_tiled.cl").read_text(),
                                              "tune_params": {"block_size_x": [16, 32], "block_size_y": [1],
                                                              "WPT": [4, 8], "TILE_K": [16]},
                                              "grid_div_y": ["block_size_y", "WPT"], "restrictions": ["WPT >= 4"]}}]
    provider = ScriptedTransformProvider(rules)
    result = KernelTransformer(NAIVE, strategy=OnePromptTuningStrategy(), llm=provider, problem_size=f"{N}x{N}",
                               tune_params=ORIGINAL, iterations=20, budget=4).run()
    assert result.args_source == "model-written generator"
    # What this test is about: the rewrite compiled, ran and was checked on the model-written inputs.
    # Whether it also beat the original depends on the cores PoCL got: with the embedded model's test
    # beside it on a 2-core machine it once read 0.97x in every side-by-side round (the old median
    # rule said the same); test_scripted_model_autonomous_... holds the speed claim.
    step = result.steps[0]
    assert step.status == "accepted" or step.reason.startswith("not faster"), (step.reason, step.notes)
    assert step.statuses.get("ok", 0) >= 1 and "wrong_result" not in step.statuses, step.statuses
    assert "float32[128x128], float32[128x128], float32[128x128], int32 scalar" in provider.prompts[-1]


def test_kerntune_strategy_object_inside_kernel_tuner_tune_kernel(tmp_path):
    a, b, _ = reference_product(64)
    store = Store(tmp_path / "kt.db")
    strategy = KerntuneStrategy("random", max_evals=3, store=store)
    results, env = kernel_tuner.tune_kernel("matmul", NAIVE, (64, 64), [np.zeros((64, 64), np.float32), a, b,
                                                                        np.int32(64)],
                                            {"block_size_x": [8, 16, 32], "block_size_y": [2, 4]},
                                            restrictions=["block_size_x * block_size_y <= 64"], lang="OpenCL",
                                            strategy=strategy, iterations=3, quiet=True)
    assert len(results) == 3 and all(r["block_size_x"] * r["block_size_y"] <= 64 for r in results)
    assert strategy.last is not None and len(strategy.last.history) == 3
    assert len(store.trials(strategy.last.run_id)) == 3 and "best_config" in env
    store.close()


def test_worker_survives_a_crash_and_a_hang_and_enforces_its_memory_limit():
    crashy = NAIVE.replace("C[y * n + x] = sum;", "C[y * n + x] = sum;\n"
                           "        if (CRASH && x == 0 && y == 0) { C[((long)1 << 40) + get_global_id(0)] = 1.0f; }\n"
                           "        while (HANG && C[0] < 1e30f) { C[0] = C[0] * 1.0f + 0.0f; }")
    base = {"block_size_x": 16, "block_size_y": 16}
    with KernelTunerSession("opencl", (32, 32), iterations=3, timeout_s=3, first_result_s=2, memory_mb=4096) as s:
        s.make_args(file=DATA / "matmul_args.py")
        assert [t.status for _, t in s.bench(KernelSpec("matmul", NAIVE), [base], save_reference=True)] == [Status.OK]
        spec = KernelSpec("matmul", crashy, {"block_size_x": [16], "block_size_y": [16], "CRASH": [0, 1],
                                             "HANG": [0, 1]})
        got = dict(s.bench(spec, [dict(base, CRASH=1, HANG=0), dict(base, CRASH=0, HANG=1),
                                  dict(base, CRASH=0, HANG=0)]))
        assert got[0].status is Status.RUNTIME_ERROR and "signal 11" in got[0].error
        assert got[1].status is Status.TIMEOUT and "no result within 3 s" in got[1].error
        assert got[2].status is Status.OK  # a fresh worker measured the rest of the batch
        assert s.restarts == 2
    with KernelTunerSession("opencl", (32, 32), memory_mb=1024) as s:
        with pytest.raises(WorkerFailed, match="out of memory"):
            s.make_args(code="def make_args(problem_size):\n    return [np.ones(2**31, dtype=np.float32)]\n")


C_SUM = r"""
#include <time.h>
float vsum(float* out, const float* a, const int n) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i];
    out[0] = s;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0.tv_sec) * 1e3f + (t1.tv_nsec - t0.tv_nsec) / 1e6f;  /* Kernel Tuner's C convention */
}
"""


@pytest.mark.skipif(not any(shutil.which(c) for c in ("g++", "gcc")), reason="no C compiler")
def test_scripted_model_one_prompt_on_the_c_backend():
    lanes = C_SUM.replace("float s = 0.0f;\n    for (int i = 0; i < n; i++) s += a[i];",
                          "float acc[LANES] = {0};\n    int i = 0;\n"
                          "    for (; i + LANES <= n; i += LANES)\n"
                          "        for (int l = 0; l < LANES; l++) acc[l] += a[i + l];\n"
                          "    float s = 0.0f;\n    for (int l = 0; l < LANES; l++) s += acc[l];\n"
                          "    for (; i < n; i++) s += a[i];")
    n = 1 << 20  # small integers: every partial sum is exact, in any order
    args = [np.zeros(1, np.float32), np.random.default_rng(0).integers(0, 4, n).astype(np.float32), np.int32(n)]
    rules = [{"kind": "one-prompt", "reply": {"code": lanes, "tune_params": {"LANES": [4, 8, 16]}}}]
    result = KernelTransformer(C_SUM, strategy="one-prompt", llm=ScriptedTransformProvider(rules), backend="c",
                               problem_size=(1,), args=args, iterations=5, budget=3, compiler_options=["-O2"]).run()
    assert result.kernel_name == "vsum" and result.steps[0].evaluations == 3
    assert result.steps[0].status == "accepted", result.steps[0].reason  # 4 to 8 independent sums beat one chain
