"""The Triton backend of ``kerntune transform``: variants are kernel files, measured by ``kerntune tune``'s evaluator.

``TritonSession`` owns one problem: the user's kernel file (imported here, as ``kerntune tune`` does: it is
the user's code) and a shape.  A model-written variant is never imported in this process:

- its text is checked statically (``triton_static.variant_problems``: Python syntax via ``ast``, the names a
  kernel file needs, a ``launch`` that launches the file's kernel and uses no library call in its place);
- it is written to ``WORKDIR/variants/STEP.py`` with a harness file beside it (``triton_harness``) that
  takes the variant's ``space``/``launch`` and the original's inputs and reference;
- ``check`` runs ``triton_check`` under a memory limit and a time limit: a judge process that never
  imports the variant takes the original's reference, a runner process it starts imports the harness,
  returns the space as data and the default config's outputs, and the judge compares them; the whole
  process group is killed when the check ends, however it ends (``kerntune.procs``), and by the judge
  itself once this process is gone (a SIGKILLed tuner);
- ``evaluator`` is the ``TritonEvaluator`` of ``kerntune tune`` on the harness, with a stand-in module
  (``module=``) so the evaluator does not import the variant here either: compile and benchmark
  workers (memory limit, compile and benchmark time limits) are the only places it runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

from kerntune.space import Space, space_from_dict
from kerntune.transform.kt_backend import default_memory_mb
from kerntune.procs import end_group, exited
from kerntune.transform.triton_static import variant_problems  # noqa: F401 - re-exported
from kerntune.transform.worker import LIMITS_ENV

def _read_until_exit(proc: subprocess.Popen, timeout: float) -> bytes | None:
    """``proc``'s stdout until EOF and its exit, without reaping it (``kerntune.procs``); None past ``timeout`` s."""
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()  # type: ignore[union-attr]
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks) if exited(proc, max(deadline - time.monotonic(), 0.0)) else None


@dataclass
class TritonVariant:
    """One kernel file kerntune measures: its text, where it lies, its harness and its space (as data)."""

    label: str
    code: str
    path: Path
    harness: Path
    space: dict[str, Any] = field(default_factory=dict)

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.code.encode()).hexdigest()[:16]


class TritonSession:
    """A Triton kernel file and a shape, with the workers that check and tune its rewrites.

    ``timeout_s`` bounds a check (import, default config, comparison) and each config's compile and
    benchmark; ``memory_mb`` is every worker's heap limit (None: half the machine, 0: none);
    ``rep_ms`` shortens the timing window (tests; None: the evaluator's protocol).
    """

    lang = "Triton"
    backend = "triton"

    def __init__(self, kernel_file: str | Path, shape: Sequence[int], *, workdir: str | Path,
                 timeout_s: float = 120.0, memory_mb: int | None = None, rep_ms: int | None = None) -> None:
        from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module, module_space

        self.original_path = Path(kernel_file).resolve()
        self.shape = tuple(int(s) for s in shape)
        self.problem_size = self.shape
        self.module = load_kernel_module(self.original_path)  # the user's own file, as `kerntune tune` does
        self.original_space = module_space(self.module, self.shape)
        self.name = str(getattr(self.module, "name", None) or self.original_path.stem)
        self.description = str(getattr(self.module, "description", "") or "")
        self.dir = Path(workdir).resolve()
        (self.dir / "variants").mkdir(parents=True, exist_ok=True)
        self.timeout_s, self.rep_ms = timeout_s, rep_ms
        self.memory_mb = default_memory_mb() if memory_mb is None else memory_mb
        self.device_name = "CPU (Triton interpreter, TRITON_INTERPRET=1)" if os.environ.get(
            "TRITON_INTERPRET") == "1" else "unknown GPU"
        self.max_threads = None
        self.checks = 0
        self.worker_seconds = 0.0

    # -- files ---------------------------------------------------------------------------------------
    def write_variant(self, label: str, code: str) -> TritonVariant:
        """The variant's kernel file and its harness, under ``variants/``."""
        safe = re.sub(r"[^A-Za-z0-9_]", "_", label)
        path, n = self.dir / "variants" / f"step_{safe}.py", 1
        while path.exists():  # two labels of one spelling ("a.b", "a_b"): an accepted file is never replaced
            n += 1
            safe = f"{re.sub(r'[^A-Za-z0-9_]', '_', label)}_{n}"
            path = self.dir / "variants" / f"step_{safe}.py"
        path.write_text(code)
        harness = self.write_harness(f"step_{safe}_harness.py", [path], [label])
        return TritonVariant(label, code, path, harness)

    def original_variant(self) -> TritonVariant:
        code = self.original_path.read_text()
        path = self.dir / "variants" / "original.py"
        path.write_text(code)
        return TritonVariant("original", code, path, self.write_harness("original_harness.py", [path], ["original"]),
                            self.original_space.to_dict())

    def write_harness(self, name: str, variants: Sequence[Path], labels: Sequence[str]) -> Path:
        """A kernel file (``kerntune tune`` takes it as it is) binding variants to the original's inputs."""
        path = self.dir / "variants" / name
        rel = [os.path.relpath(v, path.parent) for v in variants]
        path.write_text(
            f'"""kerntune transform harness: {", ".join(labels)} checked against the original kernel file\n'
            f'{self.original_path} (its inputs and reference).  Tune it with `kerntune tune {path.name} --shape'
            f' {"x".join(map(str, self.shape))}`."""\n\n'
            "from kerntune.transform.triton_harness import bind\n\n"
            f"bind(globals(), {str(self.original_path)!r}, {rel!r}, {list(labels)!r},"
            f" {list(self.shape)!r})\n")
        return path

    # -- checking and measuring ----------------------------------------------------------------------
    def check(self, variant: TritonVariant) -> dict[str, Any]:
        """Import the variant's harness in a limited subprocess; its space and its default config's verdict."""
        env = dict(os.environ, **{LIMITS_ENV: json.dumps({"memory_mb": self.memory_mb, "memory_kind": "data"})})
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["KERNTUNE_WORKER_PARENT"] = str(os.getpid())  # the judge ends its group once this process is gone
        log = self.dir / "variants" / f"{variant.path.stem}.check.log"
        t0 = time.perf_counter()
        self.checks += 1
        limit = self.timeout_s + 60  # + the imports of two processes
        runner_s = self.timeout_s + 30  # the judge's wait for the runner (its imports, the variant's, a launch)
        with open(log, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "kerntune.transform.triton_check", str(self.original_path),
                                     str(variant.harness), "x".join(map(str, self.shape)), f"{runner_s:g}"],
                                    stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=err, cwd=self.dir, env=env, start_new_session=True)
            try:
                out = _read_until_exit(proc, limit)
            finally:
                end_group(proc, timeout=0)  # the check's processes and whatever the variant started
                self.worker_seconds += time.perf_counter() - t0
        if out is None:
            return {"ok": False, "stage": "timeout", "error": f"no answer within {limit:g} s; worker killed"}
        lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.strip()]
        try:
            result = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            code = proc.returncode
            sig = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            result = {"ok": False, "stage": "crash", "error": f"the check worker died ({sig})"}
        if not isinstance(result, dict):
            result = {"ok": False, "stage": "crash", "error": "the check worker answered nonsense"}
        if result.get("stage") == "crash":  # the log says why
            tail = log.read_bytes()[-600:].decode(errors="replace").strip().replace("\n", " | ")
            result["error"] = f"{result.get('error')}: {tail}"
        if result.get("space"):
            variant.space = result["space"]
        return result

    def space_of(self, variant: TritonVariant) -> Space:
        return space_from_dict(variant.space)

    def stand_in(self, variant: TritonVariant, space: Space) -> SimpleNamespace:
        """What the evaluator needs of the kernel file in this process: the checked space as data and the
        original's own names and rates (the harness takes them from the original too)."""
        ns = SimpleNamespace(space=space, name=self.name, description=self.description,
                             __name__=variant.path.stem, source_hash=lambda: variant.hash)
        for fn in ("flops", "bytes_moved"):
            if callable(getattr(self.module, fn, None)):
                setattr(ns, fn, getattr(self.module, fn))
        return ns

    def evaluator(self, variant: TritonVariant, space: Space, retime_only: bool = False) -> Any:
        """``kerntune tune``'s Triton evaluator on the variant's harness; ``retime_only``: its compile
        workers start only if a config is ever sent to them (side-by-side rounds only re-time)."""
        from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

        return TritonEvaluator(variant.harness, self.shape, compile_timeout=self.timeout_s,
                               bench_timeout=self.timeout_s, rep_ms=self.rep_ms,
                               memory_limit_mb=self.memory_mb, module=self.stand_in(variant, space),
                               lazy_compilers=retime_only)

    def close(self) -> None:
        """Nothing runs between calls: every check and every evaluator ends its own workers."""
