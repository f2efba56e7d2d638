"""Fixes of the Kernel Tuner transform path, on real parts: Kernel Tuner's C backend (gcc) in the transform
worker, with SCRIPTED models (canned replies, ``kerntune.transform.scripted``).

1. a tuner killed with SIGKILL left its worker (a session of its own) running a hung kernel for ever;
2. the original kernel's own configs were never checked against each other: a wrong one became the baseline;
3. a rewrite that hung when re-timed side by side was accepted on its screening times;
4. a string-valued tunable of the original (``"ACC_T": ["float", "double"]``) lost its values in every rewrite;
5. near-duplicate merging fused distinct parameters the code uses both of (WPT and WPT_X).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("kernel_tuner")

from processes import alive  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
needs_cc = pytest.mark.skipif(not any(shutil.which(c) for c in ("g++", "gcc")), reason="no C compiler")


# -- 1. the worker ends with a killed tuner ------------------------------------------------------------------
SPINNER = r"""
#include <stdio.h>
float work(float* out, const float* a, const int n) {
    FILE* f = fopen("spinning", "w");  /* in the worker's folder: the test waits for it */
    if (f) fclose(f);
    volatile int spin = 1;
    while (spin) { }
    return 1.0f;
}
"""
TUNER = r"""
import sys
import numpy as np
from kerntune.transform.kernel import KernelSpec
from kerntune.transform.kt_backend import KernelTunerSession
s = KernelTunerSession("c", (1,), iterations=1, timeout_s=60, memory_mb=4096, workdir=sys.argv[1])
s.set_args([np.zeros(1, np.float32), np.ones(64, np.float32), np.int32(64)])
s._ensure()
open(sys.argv[2], "w").write(str(s._worker.proc.pid))
list(s.bench(KernelSpec("work", sys.stdin.read()), [{"block_size_x": 256}], save_reference=True))
"""


@needs_cc
def test_worker_running_a_hung_kernel_ends_when_the_tuner_is_killed(tmp_path):
    """The worker runs in a session of its own (its group is ended with it), so no signal sent to the tuner
    reaches it: a tuner killed with SIGKILL left it, reparented to init, spinning in the kernel for ever.
    Now a watchdog (``kerntune.procs.watch_group``) ends its group within a second of the tuner's death."""
    work, pidfile = tmp_path / "w", tmp_path / "worker.pid"
    tuner = subprocess.Popen([sys.executable, "-c", TUNER, str(work), str(pidfile)], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
                             env=dict(os.environ, PYTHONPATH=str(ROOT)), start_new_session=True)
    tuner.stdin.write(SPINNER.encode())
    tuner.stdin.close()
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not (work / "spinning").exists() and tuner.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (work / "spinning").exists(), tuner.stderr.read().decode()[-2000:] if tuner.poll() is not None else ""
        worker = int(pidfile.read_text())
        assert alive(worker)
        tuner.send_signal(signal.SIGKILL)  # nothing of the tuner's own clean-up runs
        tuner.wait(10)
        deadline = time.monotonic() + 5
        while alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(worker), "the worker outlived the tuner killed with SIGKILL, spinning in its kernel"
    finally:
        if tuner.poll() is None:
            tuner.kill()
            tuner.wait(10)
        if worker is not None and alive(worker):  # the test's own clean-up where the worker survived
            try:
                os.killpg(worker, signal.SIGKILL)
            except ProcessLookupError:
                pass


# -- kernels whose time does not depend on the machine: they spin on the clock --------------------------------
CLOCK = r"""
#include <stdio.h>
#include <time.h>
static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
"""
# the original: 2 ms, then the sum of a into out[0]
ORIGINAL_2MS = CLOCK + r"""
float work(float* out, const float* a, const int n) {
    double t0 = now_ms();
    while (now_ms() - t0 < 2.0) { }
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i];
    out[0] = s;
    return 1.0f;
}
"""


def spin_args(n: int = 4096) -> list:
    """Small integers: every partial sum is exact, in any order and in float or double."""
    return [np.zeros(1, np.float32), np.random.default_rng(0).integers(0, 4, n).astype(np.float32), np.int32(n)]


def one_prompt(code: str, params: dict):
    from kerntune.transform.scripted import ScriptedTransformProvider

    return ScriptedTransformProvider([{"kind": "one-prompt", "reply": {"code": code, "tune_params": params}},
                                      {"kind": "restrictions", "reply": {"restrictions": []}}])


# -- 2. the original's configs are checked against its first ------------------------------------------------
# STRIDE 2 runs 1 ms instead of 2 and sums every other element only: the fastest config, and wrong.
STRIDED = CLOCK + r"""
float work(float* out, const float* a, const int n) {
    double t0 = now_ms();
    while (now_ms() - t0 < 2.0 / STRIDE) { }
    float s = 0.0f;
    for (int i = 0; i < n; i += STRIDE) s += a[i];
    out[0] = s;
    return 1.0f;
}
"""


@needs_cc
def test_a_wrong_config_of_the_original_is_not_its_baseline_and_the_disagreement_is_said():
    """The original kernel's own configs were never compared (with no reference yet, every one was 'ok'):
    the fastest, a wrong one, became the baseline and the reported best configuration, and every correct
    rewrite was then rejected against it with a race hint.  Now each config after the first is compared
    with the first's output (the reference, as documented), the baseline is the fastest that agrees, and
    one line says so."""
    from kerntune.evaluate.trial import Status
    from kerntune.transform.context import TransformContext
    from kerntune.transform.kernel import KernelSpec
    from kerntune.transform.kt_backend import KernelTunerSession

    events: list[str] = []
    spec = KernelSpec("work", STRIDED, {"STRIDE": [1, 2]})
    with KernelTunerSession("c", (1,), iterations=3, memory_mb=4096) as s:
        s.set_args(spin_args())
        ctx = TransformContext(spec, s, llm=None, budget=10, on_event=events.append)
        state = ctx.measure_original()
        (_, again), = s.bench(spec, [{"STRIDE": 2}], save_reference=True)  # a later batch of the original
    assert state.config == {"STRIDE": 1}, (state.config, events)
    line = next((e for e in events if e.startswith("the original kernel's configs disagree")), None)
    assert line is not None, events
    assert '1 of 2 differ from the first, {"STRIDE": 1}, whose output is the reference' in line, line
    assert 'the fastest of the 1 that agree with it (differing: {"STRIDE": 2}: argument 0:' in line, line
    assert again.status is Status.WRONG_RESULT and "first config that ran" in again.error, again


# -- 3. a rewrite that hangs side by side is rejected ---------------------------------------------------------
# 0.5 ms, but from the third load of its build on it spins for ever: Kernel Tuner loads a build twice per run
# (its warm-up, then the run), so its screening (one run) passes and its first side-by-side turn hangs.  The
# loads are counted in a file in the worker's folder.
HANGS_LATER = CLOCK + r"""
static int hang = -1;
float work(float* out, const float* a, const int n) {
    if (hang < 0) {
        int k = 0;
        FILE* f = fopen("loads.txt", "r");
        if (f) { if (fscanf(f, "%d", &k) != 1) k = 0; fclose(f); }
        f = fopen("loads.txt", "w");
        if (f) { fprintf(f, "%d", k + 1); fclose(f); }
        hang = k >= 2;
    }
    volatile int spin = hang;
    while (spin) { }
    double t0 = now_ms();
    while (now_ms() - t0 < 0.5 * UNUSED) { }
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i];
    out[0] = s;
    return 1.0f;
}
"""


@needs_cc
def test_scripted_rewrite_that_hangs_when_re_timed_side_by_side_is_rejected(tmp_path):
    """Screened at 0.5 ms against 2 ms, it timed out in its first side-by-side turn, and the step was
    accepted on its screening times ('side-by-side re-time failed (timeout of the rewrite ...): judged on
    screening times'): a rewrite that deadlocks now and then became the result.  Its own timeout now
    rejects it; the original's or the current kernel's still fall back to the screening times."""
    from kerntune.transform import KernelTransformer

    result = KernelTransformer(ORIGINAL_2MS, strategy="one-prompt", llm=one_prompt(HANGS_LATER, {"UNUSED": [1]}),
                               backend="c", kernel_name="work", problem_size=(1,), args=spin_args(), iterations=3,
                               budget=1, timeout_s=2, memory_mb=4096, workdir=tmp_path).run()
    step = result.steps[0]
    assert int((tmp_path / "loads.txt").read_text()) == 3  # screened (2 loads), then hung in its first turn
    assert step.status == "rejected", (step.status, step.reason, step.notes)
    assert step.reason.startswith("hangs when re-run side by side (round 1, rewrite): no result within 2 s"), \
        step.reason
    assert result.accepted == [] and result.speedup == 1.0


# -- 4. string-valued tunables ----------------------------------------------------------------------------------
ACC = r"""
float work(float* out, const float* a, const int n) {
    ACC_T s = 0;
    for (int i = 0; i < n; i++) s += a[i];
    out[0] = (float)s;
    return 1.0f;
}
"""
ACC_LANES = r"""
float work(float* out, const float* a, const int n) {
    ACC_T acc[LANES] = {0};
    for (int i = 0; i < n; i++) acc[i % LANES] += a[i];
    ACC_T s = 0;
    for (int l = 0; l < LANES; l++) s += acc[l];
    out[0] = (float)s;
    return 1.0f;
}
"""


@needs_cc
def test_scripted_rewrite_of_an_original_with_a_string_tunable_keeps_its_values_and_is_measured():
    """Kernel Tuner allows ``"ACC_T": ["float", "double"]``; the rewrite's earlier parameters went through
    the numeric cleaning of the model's values, ACC_T was left with none, and every rewrite was rejected
    ('unusable space: parameter 'ACC_T' has no values').  The model restates it, as the prompt asks for
    every parameter the code uses: its strings were refused by the reply's schema as well."""
    from kerntune.transform import KernelTransformer

    result = KernelTransformer(ACC, strategy="one-prompt", backend="c", kernel_name="work", problem_size=(1,),
                               llm=one_prompt(ACC_LANES, {"LANES": [2, 4], "ACC_T": ["float", "double"]}),
                               tune_params={"ACC_T": ["float", "double"]}, args=spin_args(), iterations=1, budget=4,
                               confirm_rounds=0, memory_mb=4096).run()
    step = result.steps[0]
    assert step.tune_params == {"LANES": [2, 4], "ACC_T": ["float", "double"]}, (step.reason, step.notes)
    assert step.statuses == {"ok": 4}, (step.statuses, step.reason)
    assert step.status == "accepted" or step.reason.startswith("not faster"), step.reason


def test_earlier_and_fixed_string_values_are_kept_and_new_parameters_stay_numeric():
    """Only the model's values for its new parameters are cleaned to numbers; the kernel's earlier values
    and a step's fixed ones are Kernel Tuner's, kept as they are."""
    from kerntune.transform.replies import execute_problems, fix_params

    code = "float work(float* out) { ACC_T s = 0; for (int l = 0; l < LANES; l++) s += l; out[0] = s; return 1.0f; }"
    fx = fix_params(code, {"LANES": [2, 4]}, previous={"ACC_T": ["float", "double"]})
    assert fx.tune_params == {"LANES": [2, 4], "ACC_T": ["float", "double"]}, fx.notes
    fx = fix_params(code, {"LANES": [2, 4]}, fixed={"ACC_T": ["double"]}, previous={"ACC_T": ["float", "double"]})
    assert fx.tune_params == {"LANES": [2, 4], "ACC_T": ["double"]}, fx.notes
    fx = fix_params(code, {"LANES": [2, 4], "ACC_T": ["float", "double"]}, previous={"ACC_T": ["float", "double"]})
    assert fx.tune_params == {"LANES": [2, 4], "ACC_T": ["float", "double"]}, fx.notes
    answer = {"code": code, "tune_params": {"LANES": [2, 4], "ACC_T": ["float", "double"]}}
    assert execute_problems(answer, "work", "C", {}, {"ACC_T": ["float", "double"]}) == []
    new = execute_problems(dict(answer, tune_params={"LANES": ["2", "4"]}), "work", "C", {}, {"ACC_T": ["float"]})
    assert new and "tune_params.LANES" in new[0], new  # a new parameter's value is a number


@pytest.mark.parametrize("values, why", [("[null]", "value None is None"), ("[true, false]", "is a boolean"),
                                         ("[[1, 2]]", "value [1, 2] is a list")])
def test_steps_and_the_transformer_refuse_values_kernel_tuner_cannot_use(tmp_path, values, why):
    """Values that are no number or one-line string were dropped silently from the rewrite's space (a
    boolean became 0 or 1); now they are refused up front, the parameter and the value named: a container
    by ``load_steps`` (no backend takes it; a Triton constexpr may be a boolean or None), the rest by the
    Kernel Tuner transformer, for the original's parameters and for a step's.  Strings are values."""
    from kerntune.errors import KerntuneError
    from kerntune.transform import ExplicitTuningStrategy, KernelTransformer, load_steps

    def transformer(**kw):
        return KernelTransformer(ACC, llm=one_prompt(ACC, {}), backend="c", **kw)

    path = tmp_path / "steps.yaml"
    path.write_text("- {id: acc, prompt: 'Accumulate in ACC_T', tune_params: {ACC_T: [float, double]}}\n"
                    f"- {{id: bad, prompt: 'Anything', tune_params: {{X: {values}}}}}\n")
    if values.startswith("[["):
        with pytest.raises(KerntuneError, match=rf"step bad: tune_params: parameter 'X': .*{re.escape(why)}"):
            load_steps(path)
    else:
        steps = load_steps(path)
        with pytest.raises(KerntuneError, match=rf"step bad: tune_params: parameter 'X': .*{re.escape(why)}"):
            transformer(strategy=ExplicitTuningStrategy(steps), tune_params={"ACC_T": ["float"]})
    with pytest.raises(KerntuneError, match=rf"^tune_params: parameter 'X': .*{re.escape(why)}"):
        transformer(strategy="one-prompt", tune_params={"ACC_T": ["float"], "X": json.loads(values)})
    path.write_text("- {id: acc, prompt: 'Accumulate in ACC_T', tune_params: {ACC_T: [float, double]}}\n")
    steps = load_steps(path)
    assert steps[0].tune_params == {"ACC_T": ["float", "double"]}
    transformer(strategy=ExplicitTuningStrategy(steps), tune_params={"ACC_T": ["float", "double"]})


# -- 5. near-duplicate names the code uses both are two parameters --------------------------------------------
def test_distinct_parameters_the_code_uses_both_are_not_merged():
    """WPT and WPT_X (TILE and TILE_X, WG and WGS) were one parameter under two names: the model's
    ``acc[WPT][WPT_X]`` became ``acc[WPT][WPT]`` and WPT's earlier values were replaced."""
    from kerntune.transform.replies import fix_params

    code = ("__kernel void k(__global float* c) { float acc[WPT][WPT_X]; __local float t[TILE][TILE_X];"
            " int g = WG * WGS; c[0] = acc[0][0] + t[0][0] + g; }")
    fx = fix_params(code, {"WPT_X": [2, 4], "TILE": [8], "TILE_X": [16, 32], "WGS": [1, 2]},
                    previous={"WPT": [1, 2, 4], "WG": [64]})
    assert fx.code == code and not fx.renames, fx.notes
    assert fx.tune_params == {"WPT_X": [2, 4], "TILE": [8], "TILE_X": [16, 32], "WGS": [1, 2], "WPT": [1, 2, 4],
                              "WG": [64]}, fx.tune_params
    assert not any("renamed" in n for n in fx.notes), fx.notes


def test_one_parameter_under_two_names_is_still_merged():
    """What the merging is for: a name the code never uses (the declaration under another spelling), or two
    spellings that differ only in case and underscores."""
    from kerntune.transform.replies import fix_params

    fx = fix_params("__kernel void k(__global float* c) { c[TILE] = 0; }", {"TILES": [8, 16]}, previous={"TILE": [4]})
    assert fx.tune_params == {"TILE": [8, 16]} and fx.renames == {"TILES": "TILE"}, (fx.tune_params, fx.notes)
    code = "__kernel void k(__global float* c) { c[BLOCK_SIZE_Y] = block_size_y; }"
    fx = fix_params(code, {"BLOCK_SIZE_Y": [1, 4]})
    assert fx.tune_params == {"block_size_y": [1, 4]} and "BLOCK_SIZE_Y" not in fx.code, fx.notes


def test_only_the_rewrites_own_timeout_rejects_it_the_other_kernels_fall_back_to_screening():
    """The fallback to the screening times stays for what says nothing about the rewrite: the original's or
    the current kernel's turn timing out, or the session failing (no trial)."""
    from kerntune.evaluate.trial import Status, Trial
    from kerntune.transform.judging import RoundFailure

    def timeout(entrant: str) -> RoundFailure:
        return RoundFailure(entrant, 2, Trial({"X": 1}, Status.TIMEOUT, error="no result within 2 s; worker killed"))

    assert timeout("candidate").rejection() == ("hangs when re-run side by side (round 3, rewrite): no result within"
                                                " 2 s; worker killed (it ran within the time limit while screened)")
    assert timeout("original").rejection() is None and timeout("current").rejection() is None
    assert "timeout of the original kernel in round 3" in timeout("original").fallback_note()
    assert RoundFailure("candidate", 0, None, "the worker died").rejection() is None
