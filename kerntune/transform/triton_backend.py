"""The Triton backend of ``kerntune transform``: variants are kernel files, measured by ``kerntune tune``'s evaluator.

``TritonSession`` owns one problem: the user's kernel file (imported here, as ``kerntune tune`` does: it is
the user's code) and a shape.  A model-written variant is never imported in this process:

- its text is checked statically (``variant_problems``: Python syntax via ``ast``, the names a kernel file
  needs, no library call standing in for the kernel in ``launch``);
- it is written to ``WORKDIR/variants/STEP.py`` with a harness file beside it (``triton_harness``) that
  takes the variant's ``space``/``launch`` and the original's inputs and reference;
- ``check`` imports the harness in a subprocess under a memory limit and a time limit (its process group
  is killed past it), which returns the space as data and runs the default config once against the
  original's reference;
- ``evaluator`` is the ``TritonEvaluator`` of ``kerntune tune`` on the harness, with a stand-in module
  (``module=``) so the evaluator does not import the variant here either: compile and benchmark
  workers (memory limit, compile and benchmark time limits) are the only places it runs.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

from kerntune.errors import KerntuneError
from kerntune.space import Space, space_from_dict
from kerntune.transform.kt_backend import default_memory_mb
from kerntune.transform.replies import MAX_CODE_CHARS
from kerntune.transform.worker import LIMITS_ENV

#: Calls that would replace the kernel by a library in ``launch`` (the comparison would be with cuBLAS itself).
#: (``torch.cuda.*`` is left out: device queries such as the SM count are what a persistent launcher needs.)
LIBRARY_CALLS = re.compile(r"^(torch\.(matmul|mm|bmm|addmm|baddbmm|einsum|softmax|layer_norm|_scaled_dot|"
                           r"nn\.functional\.|ops\.)|F\.|cublas|scaled_dot_product_attention)")
REQUIRED = ("space", "launch")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def variant_problems(code: str) -> list[str]:
    """Problems with a model-written kernel file, found without running it (empty: usable)."""
    if len(code) > MAX_CODE_CHARS:
        return [f"code: longer than {MAX_CODE_CHARS:,} characters"]
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [f"code: not valid Python: {exc.msg} (line {exc.lineno})"]
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(t, ast.Name):
                    names[t.id] = node
    problems = [f"code: the kernel file must define `{n}` at module level" for n in REQUIRED if n not in names]
    jit = [n for n in tree.body if isinstance(n, ast.FunctionDef)
           and any("jit" in _dotted(d.func if isinstance(d, ast.Call) else d) for d in n.decorator_list)]
    if not jit:
        problems.append("code: no @triton.jit kernel")
    launch = names.get("launch")
    if isinstance(launch, ast.FunctionDef):
        if len(launch.args.args) < 2:
            problems.append("code: launch must take (config, inputs)")
        # launch and every module-level function it reaches by name (a helper that calls the
        # library would otherwise hide it)
        seen: set[str] = set()
        todo = ["launch"]
        while todo:
            name = todo.pop()
            fn = names.get(name)
            if name in seen or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn in jit:
                continue
            seen.add(name)
            where = "launch" if name == "launch" else f"{name} (called from launch)"
            for node in ast.walk(fn):
                if isinstance(node, ast.Call):
                    called = _dotted(node.func)
                    if LIBRARY_CALLS.match(called):
                        problems.append(f"code: {where} calls {called}: the kernel must compute the result itself")
                    elif called in names:
                        todo.append(called)
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                    problems.append(f"code: {where} uses the @ operator: the kernel must compute the result itself")
    return problems


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
        log = self.dir / "variants" / f"{variant.path.stem}.check.log"
        t0 = time.perf_counter()
        self.checks += 1
        with open(log, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "kerntune.transform.triton_harness", str(variant.harness),
                                     "x".join(map(str, self.shape))], stdout=subprocess.PIPE, stderr=err,
                                    cwd=self.dir, env=env, start_new_session=True)
            try:
                out, _ = proc.communicate(timeout=self.timeout_s + 60)  # + the worker's imports
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                self.worker_seconds += time.perf_counter() - t0
                return {"ok": False, "stage": "timeout", "error": f"no answer within {self.timeout_s + 60:g} s;"
                        " worker killed"}
        self.worker_seconds += time.perf_counter() - t0
        lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.strip()]
        try:
            result = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            tail = log.read_bytes()[-600:].decode(errors="replace").strip().replace("\n", " | ")
            sig = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
            return {"ok": False, "stage": "crash", "error": f"the check worker died ({sig}): {tail}"}
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

    def evaluator(self, variant: TritonVariant, space: Space) -> Any:
        """``kerntune tune``'s Triton evaluator on the variant's harness."""
        from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

        return TritonEvaluator(variant.harness, self.shape, compile_timeout=self.timeout_s,
                               bench_timeout=self.timeout_s, rep_ms=self.rep_ms,
                               memory_limit_mb=self.memory_mb, module=self.stand_in(variant, space))

    def close(self) -> None:
        """Nothing runs between calls: every check and every evaluator ends its own workers."""
