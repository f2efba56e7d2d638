"""The Triton evaluator's output check and compile workers, on CPU launchers in real worker processes
(and plain-torch or recorded Triton objects where no process is needed): a config that leaves its output
unwritten, tolerances by dtype, a ``reference()`` that returns no output, compile-only mode under
``triton.heuristics``/``triton.autotune`` wrappers."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kerntune.evaluate.trial import Status
from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator
from kerntune.evaluate.triton_backend.worker import compare_outputs

torch = pytest.importorskip("torch")

# Every mode returns (2 * x, a count of idx's values); the right ones write them in different ways,
# the wrong ones leave part of an output they allocated themselves unwritten.  OWN: the file has a
# reference(); without one the default config ("full") gives the reference.
UNWRITTEN = '''
import torch
from kerntune.space import Choice, Space
name = "unwritten"
RIGHT = ("full", "in_place", "into_input", "count_into_input", "count_own_zeros")
WRONG = ("half", "none", "count_half")
space = Space([Choice("mode", options=RIGHT + WRONG)], default={"mode": "full"})
def make_inputs(shape):
    torch.manual_seed(0)
    n = shape[0]
    # x, idx, a zeroed buffer counts are added into, a buffer outputs are written into
    return (torch.randn(n), torch.randint(0, 16, (n,)), torch.zeros(16, dtype=torch.int64), torch.empty(n))
def _counts(idx):
    return torch.bincount(idx, minlength=16)
if OWN:
    def reference(inputs):
        x, idx, _, _ = inputs
        return (x * 2, _counts(idx))
def launch(config, inputs):
    x, idx, zeroed, buf = inputs
    mode, n = config["mode"], x.numel()
    y = torch.empty_like(x)
    c = torch.empty(16, dtype=torch.int64)
    c.copy_(_counts(idx))
    if mode in ("full", "count_into_input", "count_own_zeros", "count_half"):
        y.copy_(x * 2)
    elif mode == "half":               # a grid that covers half the output
        y[: n // 2].copy_(x[: n // 2] * 2)
    elif mode == "in_place":           # the output is the input, doubled in place
        y = x.mul_(2)
    elif mode == "into_input":         # the output is a buffer make_inputs made
        y = torch.mul(x, 2, out=buf)
    if mode == "count_into_input":     # atomics into the zeroed buffer of make_inputs
        c = zeroed.index_add_(0, idx, torch.ones_like(idx))
    elif mode == "count_own_zeros":    # atomics into a buffer the launch zeroes itself
        c = torch.empty(16, dtype=torch.int64).zero_().index_add_(0, idx, torch.ones_like(idx))
    elif mode == "count_half":
        c = torch.empty(16, dtype=torch.int64)
        c[:8].copy_(_counts(idx)[:8])
    return (y, c)
'''
RIGHT = ("full", "in_place", "into_input", "count_into_input", "count_own_zeros")
WRONG = ("half", "none", "count_half")


@pytest.mark.parametrize("own", [True, False], ids=["own_reference", "default_is_reference"])
def test_a_config_that_leaves_its_output_unwritten_fails_and_right_ones_pass(tmp_path: Path, own: bool) -> None:
    """The reference's output, cloned and dropped, went back to the allocator, and the next config's
    ``torch.empty`` got that memory with the right values in it: a config writing half its output, or
    none of it, passed (on an H200 too, and was the fastest).  Memory a checked launch allocates is NaN
    (floats) or the largest value (integers) now; memory of make_inputs (in-place kernels, a buffer
    counts are added into) is not touched, so right kernels still pass."""
    path = tmp_path / "unwritten.py"
    path.write_text(f"OWN = {own!r}\n" + UNWRITTEN)
    ev = TritonEvaluator(path, (4096,), compile_workers=1, compile_timeout=60.0, bench_timeout=60.0, rep_ms=2,
                         memory_limit_mb=0)
    try:
        modes = ["full", *WRONG, *RIGHT[1:], "full", "none"]
        trials = ev.evaluate([{"mode": m} for m in modes])
    finally:
        ev.close()
    got = {(m, t.status, t.error) for m, t in zip(modes, trials)}
    assert all(t.status is Status.OK for m, t in zip(modes, trials) if m in RIGHT), got
    assert all(t.status is Status.WRONG_RESULT for m, t in zip(modes, trials) if m in WRONG), got
    errors = {m: t.error for m, t in zip(modes, trials)}
    assert "NaN" in errors["half"] and "NaN" in errors["none"], errors
    assert "integers: exact match needed" in errors["count_half"], errors


def test_unwritten_memory_is_poisoned_only_inside_the_check_and_settings_come_back() -> None:
    from kerntune.evaluate.triton_backend.worker import unwritten_poisoned

    x = torch.ones(4)
    with unwritten_poisoned(torch):
        assert torch.isnan(torch.empty_like(x)).all()
        assert (torch.empty(3, dtype=torch.int32) == torch.iinfo(torch.int32).max).all()
        assert (torch.zeros(3, dtype=torch.int32) == 0).all() and (x == 1).all()  # made before: untouched
    assert not torch.are_deterministic_algorithms_enabled()
    import torch.utils.deterministic as det

    was = det.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)  # a kernel file that asked for strict determinism keeps it
    try:
        with unwritten_poisoned(torch):
            assert not torch.is_deterministic_algorithms_warn_only_enabled()
        assert torch.are_deterministic_algorithms_enabled() and det.fill_uninitialized_memory == was
    finally:
        torch.use_deterministic_algorithms(False)
    import types

    for without in (None, types.SimpleNamespace()):  # no torch, or one without these settings: nothing to do
        with unwritten_poisoned(without):
            assert torch.empty(1000).numel() == 1000


def test_poisoning_unwritten_memory_loads_no_inductor() -> None:
    """``torch.use_deterministic_algorithms`` imports ``torch._inductor.config`` (about 900 modules, 3 s
    of CPU) to set a flag no Triton launch reads: every benchmark worker paid it at its first check.
    In a fresh interpreter the poisoned block still poisons and restores, and leaves Inductor unloaded."""
    import subprocess
    import sys

    program = ("import sys, torch\n"
               "from kerntune.evaluate.triton_backend.output_check import unwritten_poisoned\n"
               "with unwritten_poisoned(torch):\n"
               "    assert torch.isnan(torch.empty(8)).all() and torch.are_deterministic_algorithms_enabled()\n"
               "assert not torch.are_deterministic_algorithms_enabled()\n"
               "print('torch._inductor.config' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def test_float64_outputs_are_held_to_a_float64_tolerance() -> None:
    """float64 fell to the loose (1e-3, 1e-3) default: an error of 1e-5 relative passed."""
    ref = torch.linspace(1, 2, 1000, dtype=torch.float64)
    assert compare_outputs(ref * (1 + 1e-5), ref, torch) is not None
    assert compare_outputs(ref * (1 + 1e-10), ref, torch) is None
    assert compare_outputs(ref + 1e-12 * torch.randn(1000, dtype=torch.float64), ref, torch) is None
    # a float32 kernel checked against a float64 reference() keeps the default it had
    assert compare_outputs((ref * (1 + 1e-5)).float(), ref, torch) is None
    assert compare_outputs(ref.float() * (1 + 1e-5), ref.float(), torch) is None  # float32's own, unchanged


def test_complex_outputs_are_compared_with_their_imaginary_part() -> None:
    """.float() dropped the imaginary part: a conjugated (or imaginary-less) output passed."""
    ref = torch.complex(torch.linspace(1, 2, 64), torch.linspace(-3, 3, 64))
    assert compare_outputs(ref.conj(), ref, torch) is not None
    assert compare_outputs(ref.real.to(torch.complex64), ref, torch) is not None
    assert compare_outputs(ref.clone(), ref, torch) is None
    assert compare_outputs(ref.conj().conj(), ref, torch) is None  # a conjugate view, resolved
    wide = ref.to(torch.complex128)
    assert compare_outputs(wide * (1 + 1e-5), wide, torch) is not None
    assert compare_outputs(wide * (1 + 1e-11), wide, torch) is None
    poisoned = ref.clone()
    poisoned[5] = complex(math.nan, 0.0)
    assert "NaN" in (compare_outputs(poisoned, ref, torch) or "")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_a_small_output_that_is_all_zeros_or_half_missing_fails(dtype: str) -> None:
    """atol is scaled by max(1, max|ref|), never below its value at 1: a softmax over 4096 columns (each
    about 2e-4) in fp16 or bf16 passed as all zeros, or with half of each row missing (the whole-output
    check fails them now; float32 and float64's own atol already did)."""
    dt = getattr(torch, dtype)
    torch.manual_seed(0)
    ref = torch.softmax(torch.randn(8, 4096), dim=1).to(dt)
    half = ref.clone()
    half[:, 2048:] = 0
    for wrong in (torch.zeros_like(ref), half):
        msg = compare_outputs(wrong, ref, torch)
        assert msg is not None and "differs from the reference" in msg, msg
        if dtype in ("float16", "bfloat16"):
            assert "relative error of the whole output" in msg, msg
    assert compare_outputs(ref.clone(), ref, torch) is None
    # plain lists of a CPU launcher too
    small = [1e-4, 2e-4, 3e-4]
    assert "relative error" in (compare_outputs([0.0, 0.0, 0.0], small, None) or "")
    assert compare_outputs([1e-4, 2e-4, 3.0001e-4], small, None) is None


def test_right_fp16_outputs_with_cancellation_still_pass() -> None:
    """The atol floor stays: near-zero elements of a right fp16 kernel (cancellation) differ from the
    reference by more than rtol, and the whole-output check never fails an output within tolerance."""
    torch.manual_seed(0)
    a, b = torch.randn(64, 512), torch.randn(512, 64)
    ref = (a @ b).half()
    out = (a.half().float() @ b.half().float()).half()  # fp16 inputs: errors around 1e-2 absolute
    assert compare_outputs(out, ref, torch) is None
    small = torch.randn(1000) * 1e-3  # a small output, a right kernel's fp16 rounding on it
    assert compare_outputs(small.half().float(), small, torch) is None
    assert compare_outputs(torch.zeros(4), torch.zeros(4), torch) is None  # an all-zeros reference


REFERENCE_RETURNS = '''
from kerntune.space import Choice, Space
name = "reference_returns"
space = Space([Choice("w", options=(1, 2, 3))], default={"w": 1})
def make_inputs(shape):
    return ([1.0] * shape[0],)
def launch(config, inputs):
    return [sum(inputs[0])]
def reference(inputs):
    return RETURNS
'''


@pytest.mark.parametrize("returns, kind", [("None", "NoneType"), ("'hello'", "str"), ("{'out': [4.0]}", "dict")])
def test_a_reference_that_returns_no_output_says_so_for_every_config(tmp_path: Path, returns: str,
                                                                      kind: str) -> None:
    """It read "launch returned no output" (a wrong_result of each config, the config blamed)."""
    path = tmp_path / "reference_returns.py"
    path.write_text(f"RETURNS = {returns}\n" + REFERENCE_RETURNS)
    ev = TritonEvaluator(path, (4,), compile_workers=1, rep_ms=2, memory_limit_mb=0)
    try:
        trials = ev.evaluate([{"w": 1}, {"w": 2}, {"w": 3}])
    finally:
        ev.close()
    for t in trials:
        assert t.status is Status.RUNTIME_ERROR, t
        assert f"reference() returned {kind}, not the output tensor(s)" in (t.error or ""), t.error
        assert "launch returned no output" not in t.error


def _never_compiled(x_ptr, BLOCK):  # a Triton kernel's source for JITFunction; its run is replaced
    pass


def test_compile_only_makes_heuristics_and_autotune_launches_warmups(monkeypatch) -> None:
    """Only ``JITFunction.__getitem__`` forced ``warmup=True``: a ``triton.heuristics`` or ``triton.autotune``
    wrapper's own ``__getitem__`` passed ``warmup=False`` to the JITFunction, and compile workers launched
    those kernels on the GPU the benchmark worker was timing."""
    import triton
    from triton.runtime.jit import JITFunction

    from kerntune.evaluate.triton_backend import capture, worker

    seen: list[bool] = []

    def recorded(self, *args, grid, warmup, **kwargs):  # stands for Triton's compile (and launch)
        seen.append(warmup)

    monkeypatch.setattr(JITFunction, "run", recorded)
    monkeypatch.setattr(capture, "COMPILE_ONLY", False)
    monkeypatch.setattr(worker, "_launching_getitem", None)
    monkeypatch.setattr(worker, "_launching_run", None, raising=False)
    own_getitem = vars(JITFunction).get("__getitem__")
    k = JITFunction(_never_compiled)
    wrapped = [k, triton.heuristics({"BLOCK": lambda args: 4})(k),
               triton.autotune(configs=[triton.Config({"BLOCK": 4})], key=[])(k)]
    try:
        for kernel in wrapped:
            kernel[(1,)](None)
        assert seen == [False] * 3  # a benchmark worker: every launch runs
        seen.clear()
        worker._compile_only()
        for kernel in wrapped:
            kernel[(1,)](None)
        assert seen == [True] * 3, seen  # compiled, none launched
        seen.clear()
        with worker.package_kernels_launch():  # a package's call building the inputs: its kernels run
            for kernel in wrapped:
                kernel[(1,)](None)
        assert seen == [False] * 3, seen
        seen.clear()
        wrapped[1][(1,)](None)
        assert seen == [True]
    finally:
        if own_getitem is not None:
            JITFunction.__getitem__ = own_getitem
        elif "__getitem__" in vars(JITFunction):  # _compile_only's: KernelInterface's again
            del JITFunction.__getitem__


# A Triton kernel file for the GPU test: a heuristics-wrapped doubling kernel whose 'half' configs launch half
# the grid into a torch.empty output, and an atomic count into a buffer the launch (or make_inputs) zeroed.
GPU_KERNEL = '''
import sys
import torch
import triton
import triton.language as tl
from kerntune.space import Choice, Space
name = "gpu_unwritten"
space = Space([Choice("mode", options=("full", "half", "atomic_input")), Choice("BLOCK", options=(1024, 256))],
              default={"mode": "full", "BLOCK": 1024})
COMPILE = "--compile-only" in sys.argv
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def dbl(x, y, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(y + o, tl.load(x + o) * 2)
    else:
        tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)
@triton.jit
def count(idx, c, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(c + tl.load(idx + o, mask=o < n, other=0), 1, mask=o < n)
def make_inputs(shape):
    torch.manual_seed(0)
    n = shape[0]
    return (torch.randn(n, device="cuda"), torch.randint(0, 64, (n,), device="cuda", dtype=torch.int32),
            torch.zeros(64, device="cuda", dtype=torch.int32))
def reference(inputs):
    x, idx, _ = inputs
    return (x * 2, torch.bincount(idx, minlength=64).to(torch.int32))
def launch(config, inputs):
    x, idx, zeroed = inputs
    n, block = x.numel(), config["BLOCK"]
    y = torch.zeros_like(x) if COMPILE else torch.empty_like(x)
    dbl[(triton.cdiv(n, block) // (2 if config["mode"] == "half" else 1),)](x, y, n, BLOCK=block)
    if COMPILE:
        torch.cuda.synchronize()
        if bool(y.any()):
            with open(LOG, "a") as f:
                f.write(f"launched in a compile worker: {config}\\n")
    c = zeroed if config["mode"] == "atomic_input" else torch.zeros(64, device="cuda", dtype=torch.int32)
    count[(triton.cdiv(n, 1024),)](idx, c, n, BLOCK=1024)
    return (y, c)
'''


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (Triton kernels, the caching allocator)")
def test_gpu_a_triton_kernel_launching_half_its_grid_fails_and_compile_workers_launch_nothing(tmp_path: Path) -> None:
    """On an H200 a kernel launching half its grid passed (and was the fastest): its torch.empty output got
    the reference's freed block back.  And compile workers launched triton.heuristics-wrapped kernels."""
    log = tmp_path / "compile_launches.log"
    path = tmp_path / "gpu_unwritten.py"
    path.write_text(f"LOG = {str(log)!r}\n" + GPU_KERNEL)
    configs = [{"mode": m, "BLOCK": b} for m in ("full", "half", "atomic_input") for b in (1024, 256)]
    ev = TritonEvaluator(path, (1 << 20,), compile_workers=1, compile_timeout=120.0, bench_timeout=120.0, rep_ms=5,
                         gpus=1)
    try:
        trials = ev.evaluate(configs)
    finally:
        ev.close()
    got = [(c, t.status, t.error) for c, t in zip(configs, trials)]
    for c, t in zip(configs, trials):
        if c["mode"] == "half":
            assert t.status is Status.WRONG_RESULT and "NaN" in (t.error or ""), got
        else:
            assert t.status is Status.OK, got
    assert not log.exists(), log.read_text()


# A bool mask written into a buffer make_inputs leaves uninitialised, right everywhere True (x >= 0 with x
# from rand); "half" writes half of it.  "update" reads and updates an all-True mask given as data
# (torch.ones) in place: right, and must stay right.
MASKS = '''
import torch
from kerntune.space import Choice, Space
name = "masks"
space = Space([Choice("mode", options=("full", "half", "chunks"))], default={"mode": "full"})
def make_inputs(shape):
    torch.manual_seed(0)
    n = shape[0]
    return (torch.rand(n), torch.empty(n, dtype=torch.bool), torch.ones(n, dtype=torch.bool))
def launch(config, inputs):
    x, mask, alive = inputs
    n = x.numel()
    if config["mode"] == "half":         # a grid that covers half the mask
        mask[: n // 2] = x[: n // 2] >= 0
    else:
        for a in range(0, n, n // 4 if config["mode"] == "chunks" else n):
            mask[a:a + n // 4 if config["mode"] == "chunks" else n] = x[a:a + n // 4 if config["mode"] == "chunks" else n] >= 0
    alive &= x < 2                       # an in-place update of data that is all True
    return (mask, alive)
'''


def _modes_checked(path: Path, text: str, modes: list[str]) -> list:
    """The kernel file ``text`` (written to ``path``; shape 4096) evaluated at each ``mode``: its trials."""
    path.write_text(text)
    ev = TritonEvaluator(path, (4096,), compile_workers=1, compile_timeout=60.0, bench_timeout=60.0, rep_ms=2,
                         memory_limit_mb=0)
    try:
        return ev.evaluate([{"mode": m} for m in modes])
    finally:
        ev.close()


def test_a_bool_output_buffer_left_partly_unwritten_fails_though_its_fill_is_the_right_value(tmp_path: Path) -> None:
    """Uninitialised bool (and integer) memory is filled with True (the largest value) while a config is
    checked, not NaN: a mask that is rightly all True passed with half of it never written.  Now such a
    buffer of make_inputs is zeroed and the config launched again; an all-True mask the kernel reads and
    updates in place (data, not an unwritten output) is left alone, and right configs pass."""
    modes = ["full", "half", "chunks", "half"]
    trials = _modes_checked(tmp_path / "masks.py", MASKS, modes)
    got = [(m, t.status, t.error) for m, t in zip(modes, trials)]
    assert [t.status for t in trials] == [Status.OK, Status.WRONG_RESULT, Status.OK, Status.WRONG_RESULT], got
    assert "left unwritten" in trials[1].error and "2048 of 4096" in trials[1].error, got


# The same masks, allocated by launch() itself (torch.empty there, torch.empty_like and new_empty too), and
# an integer count beside them: make_inputs cannot zero these beforehand.
MASKS_IN_LAUNCH = '''
import torch
from kerntune.space import Choice, Space
name = "masks_in_launch"
space = Space([Choice("mode", options=("full", "half", "chunks", "half_counts"))], default={"mode": "full"})
def make_inputs(shape):
    torch.manual_seed(0)
    return (torch.rand(shape[0]),)
def launch(config, inputs):
    (x,) = inputs
    n = x.numel()
    mask = torch.empty(n, dtype=torch.bool)
    also = x.new_empty(n, dtype=torch.bool)
    counts = torch.empty_like(x, dtype=torch.int64)  # right value: the largest int64, the fill's own
    hi = n // 2 if config["mode"] == "half" else n
    step = n // 4 if config["mode"] == "chunks" else n
    for a in range(0, hi, step):
        mask[a:min(a + step, hi)] = x[a:min(a + step, hi)] >= 0
    also[:] = x < 2
    top = n // 2 if config["mode"] == "half_counts" else n
    counts[:top] = torch.iinfo(torch.int64).max
    return (mask, also, counts)
'''


def test_a_bool_or_integer_output_launch_allocates_left_partly_unwritten_fails(tmp_path: Path) -> None:
    """Outputs ``launch()`` allocates itself start at True or the largest integer while a config is checked:
    a mask rightly all True (or a count rightly at the maximum) passed with half of it never written, since
    only make_inputs' buffers were zeroed for the second launch.  Now those allocations start zeroed in it."""
    modes = ["full", "half", "chunks", "half_counts"]
    trials = _modes_checked(tmp_path / "masks_in_launch.py", MASKS_IN_LAUNCH, modes)
    got = [(m, t.status, t.error) for m, t in zip(modes, trials)]
    assert [t.status for t in trials] == [Status.OK, Status.WRONG_RESULT, Status.OK, Status.WRONG_RESULT], got
    assert "left unwritten" in trials[1].error and "2048 of 4096" in trials[1].error, got
