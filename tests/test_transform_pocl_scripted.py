"""Code-level strategies end to end on a real OpenCL device — PoCL on the CPU — with a SCRIPTED model.

The model is scripted (tests/data/transform/scripted_*.yaml: canned replies picked by each
prompt's marker and text), so what is tested is kerntune, not a model: a naive matmul becomes a
tiled one with new tunable parameters, correct on every config and judged side by side with the
original (accepted or not as the machine's timings say); a planted wrong rewrite is rejected as
incorrect; steps that are not tuning are rejected by validation.  Kernels really compile, run, are
checked against the original kernel's outputs and are timed through Kernel Tuner in the worker.
"""

from __future__ import annotations

import inspect
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
from kerntune.transform.kt_backend import KernelTunerSession, WorkerFailed  # noqa: E402
from kerntune.transform.scripted import ScriptedTransformProvider  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "transform"
# Whether the tiled rewrite comes out faster is the machine's verdict, not kerntune's: on the 2-core
# machines this suite runs on it has read 1.5-2.3x faster, 0.91-0.99x beside other test files, and, on a
# later machine with nothing else running, 0.95x and 0.81x paired by round (its screening equal to the
# naive kernel's). So these tests check what kerntune does with the rewrite (validated, renamed, checked
# for correctness on every config, judged side by side with the original over ROUNDS turns) and that its
# verdict follows the measured paired ratio and the threshold, whichever way the machine decides; the
# acceptance rule itself is tested with fixed times in tests/test_transform_units.py (a speed target
# does not belong in a unit test).
ROUNDS = 7
NAIVE = (DATA / "matmul_naive.cl").read_text()
# percent: the transformer's default, also passed to the CLI test so both verdicts are read against it
THRESHOLD = inspect.signature(KernelTransformer).parameters["performance_threshold"].default
ORIGINAL = {"block_size_x": [16], "block_size_y": [16]}
N = 128


def reference_product(n: int) -> np.ndarray:
    rng = np.random.default_rng(0)  # as tests/data/transform/matmul_args.py
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def judged_on_speed_alone(status: str, reason: str | None, speedup: float | None) -> bool:
    """A correct rewrite's verdict follows its paired speedup: accepted only when its median clears the
    threshold (and its interval lies above 1x, which the reason shows), else rejected as "not faster" (never
    for another reason)."""
    clears = speedup is not None and speedup >= 1 / (1 - THRESHOLD / 100)
    return clears if status == "accepted" else (status == "rejected" and (reason or "").startswith("not faster"))


def test_scripted_model_autonomous_tiles_naive_matmul_rejects_wrong_and_non_tuning_steps(tmp_path):
    provider = ScriptedTransformProvider(DATA / "scripted_autonomous.yaml")
    store = Store(tmp_path / "kt.db")
    kt = KernelTransformer(NAIVE, strategy=AutonomousTuningStrategy(max_replanning=1), llm=provider,
                           backend="opencl", problem_size=(N, N), args_generator=DATA / "matmul_args.py",
                           tune_params=ORIGINAL, iterations=20, budget=8, store=store, memory_mb=4096,
                           confirm_rounds=ROUNDS)
    result = kt.run()
    steps = {s.id: s for s in result.steps}

    # steps that are not tuning: one by the rules (profiling), one by the model's validation
    assert steps["s1"].status == "invalid" and "profiling" in steps["s1"].reason
    assert steps["s2"].status == "invalid" and "renaming" in steps["s2"].reason

    # the tiled rewrite: new tunable parameters, names fixed, correct on all 6 configs, judged side by side
    # with the original (ROUNDS rounds in one worker), and its verdict the paired ratio's
    tiled = steps["s3"]
    assert set(tiled.tune_params) == {"block_size_x", "block_size_y", "WPT", "TILE_K"}
    assert any("BLOCK_SIZE_Y renamed to block_size_y" in n for n in tiled.notes)
    assert any("TILE_SIZE" in n and "dropped" in n for n in tiled.notes)
    assert tiled.restrictions == ["block_size_y * WPT <= 16"] and tiled.statuses == {"ok": 6}
    assert any(n.startswith(f"side by side ({ROUNDS} rounds") for n in tiled.notes), tiled.notes
    assert judged_on_speed_alone(tiled.status, tiled.reason, tiled.speedup), (tiled.status, tiled.reason, tiled.speedup)
    if tiled.status == "accepted":
        assert result.accepted == ["s3"] and result.speedup == pytest.approx(tiled.speedup) and tiled.speedup > 1.0
        assert "__local float As" in result.kernel_source and "#define TILE_K" not in result.kernel_source
        assert result.grid_div == {"y": ["block_size_y", "WPT"]}
    else:  # the original stays the result
        assert result.accepted == [] and result.speedup == 1.0 and "__local" not in result.kernel_source

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

    # the result's kernel (the tiled one if accepted, else the original), run on its own through Kernel Tuner, computes A @ B
    a, b, ab = reference_product(N)
    kw = result.kernel_tuner_kwargs()
    out = kernel_tuner.run_kernel(kw["kernel_name"], kw["kernel_source"], (N, N),
                                  [np.zeros((N, N), np.float32), a, b, np.int32(N)], result.best_config, lang="OpenCL",
                                  grid_div_y=kw.get("grid_div_y"), quiet=True)
    assert np.allclose(out[0], ab, rtol=1e-4, atol=1e-3)


def test_scripted_model_explicit_steps_from_yaml_through_the_cli(tmp_path):
    out, res = tmp_path / "matmul_tuned.cl", tmp_path / "result.json"
    script = DATA / "scripted_explicit.yaml"
    cmd = [sys.executable, "-m", "kerntune", "transform", str(DATA / "matmul_naive.cl"), "--strategy", "explicit",
           "--steps", str(DATA / "steps.yaml"), "--llm", f"cmd:{sys.executable} -m kerntune.transform.scripted {script}",
           "--backend", "opencl", "--problem-size", f"{N}x{N}", "--args-generator", str(DATA / "matmul_args.py"),
           "--params", json.dumps(ORIGINAL), "--budget", "8", "--iterations", "20", "--retime-rounds", str(ROUNDS),
           "--performance-threshold", str(THRESHOLD),
           "-o", str(out), "--json", str(res)]
    proc = subprocess.run(cmd + ["--store", str(tmp_path / "kt.db")], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(res.read_text())
    tiling = next(s for s in data["steps"] if s["id"] == "tiling")
    status = {s["id"]: (s["status"], s["reason"]) for s in data["steps"]}
    assert judged_on_speed_alone(tiling["status"], tiling["reason"], tiling["speedup"]), tiling
    assert status["vectorize"] == ("skipped", "the model judged it not worth doing: the loads of B are already "
                                              "coalesced across work-items")
    assert status["vector_width"] == ("skipped", "depends on vectorize, which brought no gain")
    assert out.read_text() == data["kernel_source"] and "speedup" in proc.stdout
    if tiling["status"] == "accepted":
        assert data["tune_params"]["TILE_K"] == [16]  # the step's fixed values
        assert data["speedup"] > 1.0 and "[accepted" in proc.stdout
    else:
        assert data["accepted"] == [] and "TILE_K" not in data["tune_params"] and "not faster" in proc.stdout


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
    # rule said the same); test_scripted_model_autonomous_... checks that the verdict follows the paired ratio.
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


def test_worker_enforces_its_memory_limit():
    """A generator allocating past the worker's heap limit fails as out of memory (the worker's crash and hang
    are tests/test_transform_kt_worker.py's, in the session that times a hang in a warm worker)."""
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
