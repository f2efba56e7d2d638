"""Which backend measures a kernel's rewrites, and what a backend gives the shared context.

Two plug-ins sit behind ``TransformContext`` (``context.py``), which holds what is common: the
model calls and their repair round, step records, the history shown to the model, the search of a
variant's space with a kerntune strategy and the acceptance rule (correct for every config measured,
faster by the threshold).

- Kernel Tuner (``kt_backend.KernelTunerSession``): OpenCL, CUDA and C sources; the model answers
  code plus ``tune_params`` as JSON, Kernel Tuner compiles and times in a limited worker.
- Triton (``triton_backend.TritonSession`` with ``triton_context.TritonTransformContext``): a ``.py``
  kernel file in ``kerntune tune``'s format; the model answers a whole kernel file (its ``space`` is
  part of it), checked in a limited subprocess and tuned by ``kerntune tune``'s evaluator.

A backend's session offers what ``TransformSession`` lists; its context subclass overrides the
prompts (``TEMPLATES``), ``measure_original``, ``fields``, ``rewrite``, ``variant_space`` and
``variant_evaluator``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

#: file suffix -> backend; anything else is a Kernel Tuner source with ``--backend`` naming its language
SUFFIXES = {".py": "triton"}


def backend_of(path: str | Path) -> str:
    """``triton`` for a Python kernel file, else ``kernel_tuner`` (the language comes from ``--backend``)."""
    return SUFFIXES.get(Path(path).suffix.lower(), "kernel_tuner")


@runtime_checkable
class TransformSession(Protocol):
    """What the shared context reads of a backend's session."""

    lang: str                     # shown to the model and in records ("OpenCL", "CUDA", "C", "Triton")
    device_name: str
    problem_size: Sequence[int]   # the launch size (Kernel Tuner) or the problem shape (Triton)
    max_threads: Any              # the device's thread limit where the backend knows it, else None

    def close(self) -> None: ...
