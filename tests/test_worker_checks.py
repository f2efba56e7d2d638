"""How the Triton evaluator's benchmark worker judges a config, on CPU launchers in real worker
processes: the reference of a kernel file without ``reference()`` when its default config fails or
hangs, exact integer outputs, a launcher that returns nothing, CUDA errors that leave the context
unusable, a compile worker's crash, compile workers that cannot start, and kernel files that import
torch late or never (a worker imports it only where the kernel file needs it)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kerntune.evaluate.trial import Status
from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator
from kerntune.evaluate.triton_backend.worker import classify, compare_outputs

# A kernel file without reference(): the default config (DEFAULT) fails or hangs in the benchmark
# worker; each launch there is logged (pid and mode), so the tests see what the processes did.
NO_REFERENCE = '''
import os, sys, time
from kerntune.space import Choice, Space
name = "no_reference"
space = Space([Choice("mode", options=("bad", "good", "good2", "hang"))], default={"mode": DEFAULT})
BENCH = "--compile-only" not in sys.argv
def make_inputs(shape):
    return ([1.0] * shape[0],)
def launch(config, inputs):
    if BENCH:
        with open(LOG, "a") as f:
            f.write(f"{os.getpid()} {config['mode']}\\n")
        if config["mode"] == "bad":
            raise ValueError("the default config cannot run here")
        if config["mode"] == "hang":
            time.sleep(3600)
    return [sum(inputs[0]) * (2 if config["mode"] == "good2" else 1)]
'''


def _no_reference_kernel(tmp_path: Path, default: str) -> tuple[Path, Path]:
    log = tmp_path / "launches.log"
    path = tmp_path / f"no_reference_{default}.py"
    path.write_text(f"LOG = {str(log)!r}\nDEFAULT = {default!r}\n" + NO_REFERENCE)
    return path, log


def _launches(log: Path) -> list[tuple[int, str]]:
    return [(int(p), m) for p, m in (ln.split() for ln in log.read_text().splitlines())] if log.exists() else []


def test_a_failing_default_config_is_no_reference_the_first_config_that_runs_is(tmp_path: Path, caplog) -> None:
    """The default's failure used to be every config's error (each paying the default's launch again);
    now each config is judged on its own launch, against the first config that ran, said once."""
    path, log = _no_reference_kernel(tmp_path, "bad")
    ev = TritonEvaluator(path, (100,), compile_workers=1, compile_timeout=20.0, bench_timeout=10.0, rep_ms=2,
                         memory_limit_mb=0)
    try:
        with caplog.at_level(logging.WARNING, logger="kerntune.evaluate"):
            trials = ev.evaluate([{"mode": "good"}, {"mode": "good2"}, {"mode": "bad"}, {"mode": "good"}])
    finally:
        ev.close()
    good, good2, bad, again = trials
    assert good.status is Status.OK and again.status is Status.OK, (good, again)
    assert good2.status is Status.WRONG_RESULT and "differs" in good2.error  # twice the first config's output
    assert bad.status is Status.RUNTIME_ERROR and "cannot run here" in bad.error
    # the default was launched once as the reference, once as its own config, and never again
    assert [m for _, m in _launches(log)].count("bad") == 2, _launches(log)
    said = [r for r in caplog.records if "has no reference()" in r.getMessage()]
    assert len(said) == 1 and "cannot run here" in said[0].getMessage()


def test_a_hanging_default_config_costs_one_timeout_not_every_config(tmp_path: Path) -> None:
    path, log = _no_reference_kernel(tmp_path, "hang")
    ev = TritonEvaluator(path, (100,), compile_workers=1, compile_timeout=20.0, bench_timeout=2.0, rep_ms=2,
                         memory_limit_mb=0)
    try:
        trials = ev.evaluate([{"mode": "good"}, {"mode": "good2"}, {"mode": "good"}])
    finally:
        ev.close()
    assert [t.status for t in trials] == [Status.OK, Status.WRONG_RESULT, Status.OK], trials
    assert [m for _, m in _launches(log)].count("hang") == 1  # the fresh worker skipped the default


def test_integer_and_bool_outputs_must_match_exactly() -> None:
    torch = pytest.importorskip("torch")
    ref = torch.arange(10000, dtype=torch.int32)
    wrong = compare_outputs(ref + 3, ref, torch)  # inside the float tolerance scaled by the magnitude
    assert wrong is not None and "10000 of 10000" in wrong
    one = ref.clone()
    one[7] += 1
    assert "1 of 10000" in (compare_outputs(one, ref, torch) or "")
    assert compare_outputs(ref.clone(), ref, torch) is None
    assert compare_outputs(ref.to(torch.int64), ref, torch) is None  # another integer width, same values
    flags = torch.tensor([True, False, True])
    assert compare_outputs(~flags, flags, torch) is not None and compare_outputs(flags.clone(), flags, torch) is None
    # floats keep their tolerance
    x = torch.linspace(0, 1000, 100)
    assert compare_outputs(x * (1 + 1e-6), x, torch) is None
    # a CPU launcher's plain integers too
    assert compare_outputs([10_000_003], [10_000_000], None) is not None
    assert compare_outputs([10_000_000], [10_000_000], None) is None
    assert compare_outputs([1.0001], [1.0], None) is None


def test_a_launcher_that_returns_nothing_fails_every_config_clearly(tmp_path: Path) -> None:
    """kernel_file: launch returns the output tensor(s).  One that writes a buffer and returns None
    used to pass every config, right or wrong (None against None)."""
    path = tmp_path / "returns_none.py"
    path.write_text('''
from kerntune.space import Choice, Space
name = "returns_none"
space = Space([Choice("mode", options=("right", "wrong"))], default={"mode": "right"})
def make_inputs(shape):
    return ([1.0] * shape[0], [0.0])
def launch(config, inputs):
    x, out = inputs
    out[0] = sum(x) * (1 if config["mode"] == "right" else 7)
''')
    assert compare_outputs(None, None, None) is not None
    assert compare_outputs((None, None), (None, None), None) is not None
    ev = TritonEvaluator(path, (100,), compile_workers=1, rep_ms=2, memory_limit_mb=0)
    try:
        trials = ev.evaluate([{"mode": "right"}, {"mode": "wrong"}])
    finally:
        ev.close()
    assert [t.status for t in trials] == [Status.WRONG_RESULT] * 2
    assert all("launch returned no output" in t.error for t in trials)


@pytest.mark.parametrize("text", ["Triton Error [CUDA]: misaligned address",
                                  "Triton Error [CUDA]: unspecified launch failure",
                                  "RuntimeError: CUDA error: device-side assert triggered",
                                  "an illegal memory access was encountered"])
def test_sticky_cuda_errors_are_fatal(text: str) -> None:
    from kerntune.evaluate.triton_backend.worker import is_fatal

    assert is_fatal(text)
    assert classify(RuntimeError(text))[0] == "runtime_error"


def test_a_refused_launch_or_a_plain_error_is_not_fatal() -> None:
    from kerntune.evaluate.triton_backend.worker import is_fatal

    assert not is_fatal("Triton Error [CUDA]: too many resources requested for launch")
    assert not is_fatal("ValueError: bad block size")


# Configs that fail in the benchmark worker with what Triton's launcher raises after a sticky error,
# or with a plain error while the CUDA context is gone (stood in for by a torch.cuda that says CUDA
# is in use and whose synchronize raises); and one that kills its compile worker (the compiler's crash).
CONTEXT = '''
import ctypes, os, sys
from kerntune.space import Choice, Space
name = "context"
space = Space([Choice("mode", options=("good", "triton_cuda", "poisoned", "compiler_crash"))],
              default={"mode": "good"})
BENCH = "--compile-only" not in sys.argv
def make_inputs(shape):
    return ([1.0] * shape[0],)
def reference(inputs):
    return [sum(inputs[0])]
def launch(config, inputs):
    mode = config["mode"]
    if not BENCH and mode == "compiler_crash":
        ctypes.string_at(0)
    if BENCH:
        with open(LOG, "a") as f:
            f.write(f"{os.getpid()} {mode}\\n")
        if mode == "triton_cuda":
            raise RuntimeError("Triton Error [CUDA]: unspecified launch failure")
        if mode == "poisoned":
            import torch
            def broken():
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            torch.cuda.is_available = lambda: True
            torch.cuda.is_initialized = lambda: True
            torch.cuda.synchronize = broken
            raise ValueError("a launch error that does not say CUDA")
    return [sum(inputs[0])]
'''


def test_a_context_left_unusable_gets_a_fresh_worker_and_a_compiler_crash_is_a_compile_error(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    log = tmp_path / "launches.log"
    path = tmp_path / "context.py"
    path.write_text(f"LOG = {str(log)!r}\n" + CONTEXT)
    ev = TritonEvaluator(path, (100,), compile_workers=1, compile_timeout=20.0, bench_timeout=10.0, rep_ms=2,
                         memory_limit_mb=0)
    try:
        configs = [{"mode": m} for m in ("good", "triton_cuda", "good", "poisoned", "good", "compiler_crash")]
        trials = ev.evaluate(configs)
    finally:
        ev.close()
    assert [t.status for t in trials[:5]] == [Status.OK, Status.RUNTIME_ERROR, Status.OK, Status.RUNTIME_ERROR,
                                              Status.OK], trials
    assert "[CUDA]" in trials[1].error
    assert "does not say CUDA" in trials[3].error and "illegal memory access" in trials[3].error
    pids = [p for p, _ in _launches(log)]
    modes = [m for _, m in _launches(log)]
    # the config after each failure ran in a new process, not in the one whose context died
    i1, i3 = modes.index("triton_cuda"), modes.index("poisoned")
    assert pids[i1 + 1] != pids[i1] and pids[i3 + 1] != pids[i3], _launches(log)
    assert trials[5].status is Status.COMPILE_ERROR and "signal 11" in trials[5].error


def test_a_config_that_hangs_after_a_good_default_reference_is_blamed_alone(tmp_path: Path, caplog) -> None:
    """The worker said when the default's launch began but not when it ended: a config hanging behind a
    good default read as "the default config hung" (a false warning, the config sent again for a second
    timeout, and every later worker told to skip the default: good2 became the reference, good failed)."""
    path, log = _no_reference_kernel(tmp_path, "good")
    ev = TritonEvaluator(path, (100,), compile_workers=1, compile_timeout=20.0, bench_timeout=2.0, rep_ms=2,
                         memory_limit_mb=0)
    try:
        with caplog.at_level(logging.WARNING, logger="kerntune.evaluate"):
            trials = ev.evaluate([{"mode": "hang"}, {"mode": "good2"}, {"mode": "good"}])
    finally:
        ev.close()
    assert [t.status for t in trials] == [Status.TIMEOUT, Status.WRONG_RESULT, Status.OK], trials
    assert ev._default_failed is None
    assert not [r for r in caplog.records if "has no reference()" in r.getMessage()]
    assert [m for _, m in _launches(log)].count("hang") == 1  # one timeout, not a retry


def test_a_compile_error_that_says_illegal_is_a_compile_error() -> None:
    compilation_error = type("CompilationError", (Exception,), {"__module__": "triton.compiler.errors"})
    assert classify(compilation_error("at 12:4: error: illegal use of tl.constexpr inside loop"))[0] == "compile_error"
    # CUDA's own illegal errors stay runtime errors, also where PyTorch's text mentions compiling
    for text in ("CUDA error: an illegal memory access was encountered\nCompile with `TORCH_USE_CUDA_DSA` "
                 "to enable device-side assertions.", "Triton Error [CUDA]: an illegal instruction was encountered",
                 "CUDA_ERROR_ILLEGAL_ADDRESS"):
        assert classify(RuntimeError(text))[0] == "runtime_error", text


# A plain-Python kernel file: its launches log whether torch is loaded in the process running them.
NO_TORCH = '''
import os, sys
from kerntune.space import Choice, Space
name = "no_torch"
space = Space([Choice("n", options=(1, 2))], default={"n": 1})
def make_inputs(shape):
    return ([1.0] * shape[0],)
def reference(inputs):
    return [sum(inputs[0])]
def launch(config, inputs):
    with open(LOG, "a") as f:
        f.write(f"{os.getpid()} {'torch' in sys.modules}\\n")
    return [sum(inputs[0])]
'''

# torch imported by make_inputs alone, whose output buffer (torch.empty) a config leaves unwritten; the
# right output is zeros, which fresh memory holds unless the worker fills it with NaN (as it does with torch).
LAZY_TORCH = '''
from kerntune.space import Choice, Space
name = "lazy_torch"
space = Space([Choice("write", options=(True, False))], default={"write": True})
def make_inputs(shape):
    import torch
    return (torch.empty(shape[0]),)
def reference(inputs):
    return inputs[0].new_zeros(inputs[0].shape)
def launch(config, inputs):
    out = inputs[0]
    if config["write"]:
        out.zero_()
    return out
'''


def test_workers_of_a_kernel_file_without_torch_never_import_it_and_one_importing_it_late_is_checked(
        tmp_path: Path) -> None:
    """Importing torch costs a worker 3-4 s: a kernel file that never needs it (plain Python) gets
    workers that never import it, in screening, re-timing or a runoff (whose timer imported it). One
    whose ``make_inputs`` imports it is still judged with torch: its ``torch.empty`` output starts as
    NaN, so a config leaving it unwritten fails."""
    pytest.importorskip("torch")
    log = tmp_path / "launches.log"
    path = tmp_path / "no_torch.py"
    path.write_text(f"LOG = {str(log)!r}\n" + NO_TORCH)
    ev = TritonEvaluator(path, (4,), compile_workers=1, rep_ms=2, memory_limit_mb=0)
    try:
        trials = ev.evaluate([{"n": 1}, {"n": 2}])
        assert [t.status for t in trials] == [Status.OK, Status.OK]
        assert [t.status for t in ev.retime([{"n": 1}, {"n": 2}], rep_ms=2, rounds=2)] == [Status.OK, Status.OK]
        assert ev.runoff([{"n": 1}, {"n": 2}], [t.time_ms for t in trials]) is not None  # its timer too
    finally:
        ev.close()
    seen = [line.split() for line in log.read_text().splitlines()]
    assert len({pid for pid, _ in seen}) >= 2 and {loaded for _, loaded in seen} == {"False"}, seen
    lazy = tmp_path / "lazy_torch.py"
    lazy.write_text(LAZY_TORCH)
    ev = TritonEvaluator(lazy, (1 << 18,), compile_workers=1, rep_ms=2, memory_limit_mb=0)
    try:
        trials = ev.evaluate([{"write": True}, {"write": False}])
    finally:
        ev.close()
    assert [t.status for t in trials] == [Status.OK, Status.WRONG_RESULT], trials


# A kernel file whose compile workers cannot start (their make_inputs raises) on device BROKEN ("all":
# on any), each start-up logged with its device; a compile takes COMPILE_S.
NO_COMPILE_START = '''
import os, sys, time
from kerntune.space import Choice, Space
name = "no_compile_start"
space = Space([Choice("n", options=tuple(range(16)))], default={"n": 0})
def make_inputs(shape):
    device = os.environ.get("CUDA_VISIBLE_DEVICES")
    if "--compile-only" in sys.argv:
        with open(LOG, "a") as f:
            f.write(f"{os.getpid()} {device}\\n")
        if BROKEN in ("all", device):
            raise RuntimeError("no device for the compiler here")
    return ([1.0] * shape[0],)
def reference(inputs):
    return [sum(inputs[0])]
def launch(config, inputs):
    if "--compile-only" in sys.argv:
        time.sleep(COMPILE_S)
    return [sum(inputs[0])]
'''


def test_compile_workers_that_fail_three_start_ups_in_a_row_fail_the_rest_at_once_and_retry_once_a_batch(
        tmp_path: Path) -> None:
    """Each config started a compile worker that died at start-up, seconds apiece: now after three start-ups
    failed in a row the batch's other configs fail with that error at once, and a later batch tries once."""
    log = tmp_path / "startups.log"
    path = tmp_path / "no_compile_start.py"
    path.write_text(f"LOG = {str(log)!r}\nBROKEN = 'all'\nCOMPILE_S = 0\n" + NO_COMPILE_START)
    ev = TritonEvaluator(path, (4,), compile_workers=1, rep_ms=2, memory_limit_mb=0)
    try:
        first = ev.evaluate([{"n": n} for n in range(10)])
        started = len(log.read_text().splitlines())
        later = ev.evaluate([{"n": n} for n in range(10, 14)])
    finally:
        ev.close()
    # 3 counted; a 4th where the worker started with the evaluator had died before its first task came
    assert started in (3, 4), started
    assert len(log.read_text().splitlines()) == started + 1
    for t in first + later:
        assert t.status is Status.RUNTIME_ERROR and "no device for the compiler here" in (t.error or ""), t


def test_a_compile_worker_that_cannot_start_beside_a_healthy_one_costs_three_configs_not_its_share(
        tmp_path: Path) -> None:
    """Two compile workers (one per fake GPU label), the second's start-ups all fail (as one out of memory
    while fifteen start at once): it takes no more configs after three tries, the healthy one compiles the
    rest (a compile takes 0.4 s, a start-up less). Each config it took used to start it again."""
    log = tmp_path / "startups.log"
    path = tmp_path / "one_broken.py"
    path.write_text(f"LOG = {str(log)!r}\nBROKEN = '1'\nCOMPILE_S = 0.4\n" + NO_COMPILE_START)
    ev = TritonEvaluator(path, (4,), compile_workers=2, rep_ms=2, memory_limit_mb=0, devices=["0", "1"])
    try:
        trials = ev.evaluate([{"n": n} for n in range(12)])
    finally:
        ev.close()
    failed = [t for t in trials if t.status is not Status.OK]
    assert len(failed) <= 3 and all("no device for the compiler here" in (t.error or "") for t in failed), trials
    starts = [line.split()[1] for line in log.read_text().splitlines()]
    assert starts.count("1") in (3, 4), starts  # 4: as in the test above


def test_a_triton_kernel_whose_launch_alone_imports_torch_is_judged_with_torch(tmp_path: Path) -> None:
    """A kernel file importing triton gets torch in its workers even where only its launch imports torch:
    the output its launch allocates (torch.empty) is NaN while a config is checked, so a config leaving
    half of it unwritten fails (without torch the worker poisoned nothing: the half held zeros, right)."""
    pytest.importorskip("triton")
    path = tmp_path / "launch_imports_torch.py"
    path.write_text('''
import triton
from kerntune.space import Choice, Space
name = "launch_imports_torch"
space = Space([Choice("full", options=(True, False))], default={"full": True})
def make_inputs(shape):
    return (shape[0],)
def reference(inputs):
    import torch
    return torch.zeros(inputs[0])
def launch(config, inputs):
    import torch
    n = inputs[0]
    out = torch.empty(n)
    out[: n if config["full"] else n // 2] = 0.0
    return out
''')
    ev = TritonEvaluator(path, (1 << 18,), compile_workers=1, rep_ms=2, memory_limit_mb=0)
    try:
        trials = ev.evaluate([{"full": True}, {"full": False}])
    finally:
        ev.close()
    assert [t.status for t in trials] == [Status.OK, Status.WRONG_RESULT], trials


def test_a_stream_left_while_a_compile_worker_starts_counts_no_failed_start_up(tmp_path: Path) -> None:
    """Leaving a stream kills a compile worker still starting (healthy, but slow): that is no start-up
    failure. Counted as one, three such batches left the worker one real failure from being retired."""
    path = tmp_path / "slow_start.py"
    path.write_text('''
import os, sys, time
from kerntune.space import Choice, Space
name = "slow_start"
space = Space([Choice("n", options=tuple(range(64)))], default={"n": 0})
def make_inputs(shape):
    if "--compile-only" in sys.argv and os.environ.get("CUDA_VISIBLE_DEVICES") == "0":
        time.sleep(30)
    return ([1.0] * shape[0],)
def reference(inputs):
    return [sum(inputs[0])]
def launch(config, inputs):
    return [sum(inputs[0])]
''')
    ev = TritonEvaluator(path, (4,), compile_workers=2, rep_ms=2, memory_limit_mb=0, devices=["0", "1"])
    try:
        for b in range(3):
            stream = ev.stream([{"n": 8 * b + k} for k in range(8)])
            assert next(stream)[1].status is Status.OK
            stream.close()
        assert ev._compile_fails == [0, 0]
    finally:
        ev.close()
