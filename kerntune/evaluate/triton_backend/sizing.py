"""Which GPUs a Triton evaluator uses and how many workers it starts: the visible devices (without
importing torch in the parent), compile workers per core and per GPU, and the cap that keeps every
compile worker's inputs on the GPU; the GPU's name and properties (asked once per process)."""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import subprocess
import sys
from typing import Any, Sequence

from kerntune.errors import KerntuneError


def visible_devices() -> list[str]:
    """The GPUs this process may use, as values for a worker's ``CUDA_VISIBLE_DEVICES``.

    An existing ``CUDA_VISIBLE_DEVICES`` (a user's choice, or Ray's for an actor that
    holds one GPU) is obeyed entry by entry (indices or UUIDs); otherwise ``nvidia-smi -L``
    counts the GPUs, without importing torch in the parent.  Empty: no NVIDIA GPU found,
    and the caller keeps one benchmark worker with the environment as it is.
    """
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        out = []
        for entry in (e.strip() for e in env.split(",")):
            if not entry or entry.startswith("-"):  # CUDA ignores everything after an invalid entry
                break
            out.append(entry)
        return out
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, _ in enumerate(line for line in listing.splitlines() if line.startswith("GPU "))]


def default_compile_workers(n_devices: int) -> int:
    """Every core that no benchmark worker needs, at most 16 per GPU (each compile worker
    holds a CUDA context on one of the GPUs): 15 on a 16-core box with one GPU, 30 on 32
    cores with two, so that compilation keeps up as the benchmark stage scales."""
    try:
        cores = len(os.sched_getaffinity(0))  # a container's or Ray actor's CPU set, not the host's
    except AttributeError:
        cores = os.cpu_count() or 2
    return max(1, min(16 * n_devices, cores - n_devices))


def gpu_memory_mb(devices: Sequence[str | None] = ()) -> int | None:
    """The least free memory among ``devices`` (``CUDA_VISIBLE_DEVICES`` labels; all GPUs when none
    is labelled) in MiB, from ``nvidia-smi`` (no CUDA in this process), or None where it cannot be
    read.  Free, not total: memory that other processes hold is not there for the workers.  (Under
    MIG, nvidia-smi reports the whole GPU: the cap is then too generous.)"""
    labels = [d for d in devices if d]
    cmd = ["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits"]
    if labels:
        cmd += ["-i", ",".join(labels)]
    try:
        text = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
        sizes = [int(float(line)) for line in text.split() if line.strip()]
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return min(sizes) if sizes else None


def memory_capped_workers(cap: int, n_devices: int, input_bytes: float | None, gpu_mb: int | None) -> int:
    """Compile workers whose inputs fit on the GPUs.  Every compile worker builds the kernel's
    inputs on a GPU (Triton specialises on them), and a package's op allocates its outputs and
    temporaries beside them: counted as twice the kernel's ``bytes_moved`` (its inputs and
    outputs), within 60% of each GPU's free memory (the benchmark worker keeps a copy of the inputs too).  Seen on an H100:
    sixteen workers of a KL-divergence loss over 8192 x 128,256 bf16 logits (4.2 GB of inputs
    each) ran it out of memory and no worker started."""
    if not input_bytes or not gpu_mb:
        return cap
    per_gpu = int(0.6 * gpu_mb * 2**20 // (2 * input_bytes))
    return max(1, min(cap, per_gpu * n_devices - n_devices))


def input_bytes(module: Any, shape: tuple[int, ...]) -> float | None:
    """The kernel's ``bytes_moved(shape)`` where it declares one (a measure of its inputs' size)."""
    fn = getattr(module, "bytes_moved", None)
    try:
        return float(fn(shape)) if callable(fn) else None
    except Exception:  # noqa: BLE001 - an estimate only
        return None


def bounded_count(space: Any, cap: int) -> int:
    """How many valid configs ``space`` holds, counting no further than ``cap`` (so at most
    ``cap``, and at least 1)."""
    return max(1, sum(1 for _ in itertools.islice(space.enumerate(), cap)))


def pick_devices(gpus: int | None) -> list[str | None]:
    """The first ``gpus`` visible GPUs (all when None); one unlabelled worker without GPUs."""
    found = visible_devices()
    if gpus is not None:
        if gpus < 1:
            raise KerntuneError(f"--gpus must be at least 1, got {gpus}")
        if gpus > max(len(found), 1):
            raise KerntuneError(f"--gpus {gpus}: only {len(found)} GPU(s) visible"
                                + (" (CUDA_VISIBLE_DEVICES)" if "CUDA_VISIBLE_DEVICES" in os.environ else ""))
        found = found[:gpus]
    return list(found) or [None]


#: What ``probe_device`` found, per (Python, CUDA_VISIBLE_DEVICES, PYTHONPATH): a GPU's name and properties
#: do not change while this process lives.
_PROBED: dict[tuple[str, str | None, str | None], dict[str, Any]] = {}
_PROBE = ("import json, torch; p = torch.cuda.get_device_properties(0); print(json.dumps({'name': p.name,"
          " 'sms': p.multi_processor_count, 'memory_gb': round(p.total_memory / 2**30, 1),"
          " 'max_smem_per_block_kb': getattr(p, 'shared_memory_per_block_optin', 0) // 1024,"
          " 'registers_per_sm': getattr(p, 'regs_per_multiprocessor', None),"
          " 'l2_mb': getattr(p, 'L2_cache_size', 0) // 2**20, 'torch': torch.__version__,"
          " 'triton': __import__('triton').__version__}))")


def no_gpu_driver() -> bool:
    """True where no GPU can answer a probe: on Linux, no NVIDIA driver library loads (torch opens the
    same ``libcuda.so.1``) and no AMD GPU node (``/dev/kfd``) exists.  Why: the probe's child imports
    torch (2-3 s of CPU) only to find no GPU, at every run on a machine without one.  Elsewhere (or with
    a driver) the child is asked as before."""
    if not sys.platform.startswith("linux") or os.path.exists("/dev/kfd"):
        return False
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return True
    return False


def probe_device(env: dict[str, str]) -> dict[str, Any]:
    """The first visible GPU's name, properties and torch/Triton versions under ``env``, asked of a child
    process (this one must not initialise CUDA: its compile workers' start-ups and a caller's own
    processes come after it); {"name": "unknown GPU"} where the child finds none.

    Asked once per process and environment.  Why: every evaluator asked again, one more process
    importing torch (and creating a CUDA context) per evaluator, and a ``transform`` or ``--shapes``
    run builds one per step or shape.  A query that timed out is not kept (a busy GPU may answer later)."""
    key = (sys.executable, env.get("CUDA_VISIBLE_DEVICES"), env.get("PYTHONPATH"))
    if key in _PROBED:
        return dict(_PROBED[key])
    if no_gpu_driver():
        _PROBED[key] = {"name": "unknown GPU"}
        return dict(_PROBED[key])
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, env=env)
    except subprocess.SubprocessError:
        return {"name": "unknown GPU"}
    try:
        found = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        found = {"name": "unknown GPU"}
    _PROBED[key] = found
    return dict(found)
