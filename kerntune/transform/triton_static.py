"""Static checks of a model-written Triton kernel file, made on its syntax tree without running it.

``variant_problems`` wants a file with ``space``, a ``@triton.jit`` kernel and ``launch(config, inputs)``,
and a ``launch`` that computes the result with the file's own kernel: it must launch one
(``kernel[grid](...)``), and neither it nor any module-level function it reaches (called, or passed on
by name) may use a library's compute function in its place, since the comparison would then be with
cuBLAS itself.  Spellings caught:

- any attribute named like such a function, whatever it is taken from: ``torch.matmul``,
  ``torch.linalg.matmul``, ``torch.Tensor.matmul``, ``a.matmul(b)``, ``a.__matmul__(b)``,
  ``torch.tensordot``, ``torch.inner``, ``torch.chain_matmul``, ``operator.matmul``, ``np.dot`` ...,
  called or only referred to (``map(torch.mm, ...)``);
- whole library namespaces: ``torch.nn``, ``torch.nn.functional`` (``F``), ``torch.linalg``, ``torch.ops``,
  ``torch._C``, ``torch.fft``, ``torch.special``, cuBLAS bindings;
- the ``@`` operator (and ``@=``);
- names bound at module level to any of these (``MM = torch.matmul``, ``from torch import matmul as MM``,
  ``import torch.nn.functional as F2``, ``mm = lambda a, b: a @ b``);
- ``getattr`` with a name that is not a constant (``getattr(torch, 'mat' + 'mul')``) or names one of them,
  and dynamic code (``eval``, ``exec``, ``compile``, ``__import__``, ``importlib``, ``globals()[...]``).

Allocation, views, strides, ``triton.cdiv``, device queries and elementwise torch calls are not
flagged.  What a syntax check cannot see is a computation spelled in elementwise operations
(``(a[:, :, None] * b[None]).sum(1)``); the output check still compares its result, and the timing
shows it for what it is.
"""

from __future__ import annotations

import ast

from kerntune.transform.replies import MAX_CODE_CHARS

#: Compute functions a launch must not use in place of its kernel (matched as attribute or imported name).
LIBRARY_FUNCTIONS = frozenset({
    "matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "addmv", "mv", "dot", "vdot", "inner", "outer",
    "ger", "tensordot", "einsum", "chain_matmul", "multi_dot", "linear", "bilinear", "__matmul__", "__rmatmul__",
    "__imatmul__", "_scaled_mm", "_int_mm", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "convolution", "softmax", "log_softmax", "_softmax", "layer_norm", "rms_norm",
    "group_norm", "batch_norm", "instance_norm", "scaled_dot_product_attention", "_scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention", "cross_entropy",
    "cublas", "gemm", "sgemm", "hgemm", "cublasLt",
})
#: Library namespaces whose every function counts (dotted prefixes after aliases are resolved).
LIBRARY_MODULES = ("torch.nn", "torch.linalg", "torch.ops", "torch._C", "torch.fft", "torch.special",
                   "torch.sparse", "torch.backends.cuda.matmul", "F", "cupy", "cublas", "scipy", "jax",
                   "triton.ops", "triton.language.extra.cuda.libdevice_matmul")
DYNAMIC = frozenset({"eval", "exec", "compile", "__import__", "globals", "locals", "vars"})
REQUIRED = ("space", "launch")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _is_library(dotted: str) -> bool:
    return any(dotted == m or dotted.startswith(m + ".") for m in LIBRARY_MODULES)


class _Module:
    """What the file's top level binds: functions, kernels, aliases of modules and of library functions."""

    def __init__(self, tree: ast.Module) -> None:
        self.defs: dict[str, ast.AST] = {}
        self.aliases: dict[str, str] = {}  # name -> the dotted thing it stands for
        self.tainted: dict[str, str] = {}  # name -> why it stands for a library computation
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(t, ast.Name):
                        self.defs[t.id] = node
            elif isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        self.jit = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)
                    and any("jit" in _dotted(d.func if isinstance(d, ast.Call) else d) for d in n.decorator_list)}
        for name, target in self.aliases.items():
            why = self.library(target)
            if why:
                self.tainted[name] = why
        for node in tree.body:  # MM = torch.matmul, mm = lambda a, b: a @ b, K = (torch.mm, 1)
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                why = next(iter(self.uses(node.value)), None)
                if why:
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                        for n in ast.walk(t):
                            if isinstance(n, ast.Name):
                                self.tainted[n.id] = why

    def resolve(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        target = self.aliases.get(head)
        return (target + ("." + rest if rest else "")) if target else dotted

    def library(self, dotted: str) -> str | None:
        full = self.resolve(dotted)
        if _is_library(full) or _is_library(dotted):
            return full
        if full.split(".")[-1] in LIBRARY_FUNCTIONS:
            return full
        return None

    def uses(self, node: ast.AST) -> list[str]:
        """Why ``node`` (an expression or a function) computes with a library instead of a kernel."""
        out: list[str] = []
        inner = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Attribute)}  # torch.nn in torch.nn.X
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute) and n.attr in LIBRARY_FUNCTIONS:
                out.append(f"uses {_dotted(n) or '.' + n.attr}")
            elif isinstance(n, ast.Attribute) and id(n) not in inner and _dotted(n):
                why = self.library(_dotted(n))
                if why and _is_library(why):
                    out.append(f"uses {why}")
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                if n.id in self.tainted:
                    out.append(f"uses {n.id} (= {self.tainted[n.id].removeprefix('uses ')})")
                elif n.id in DYNAMIC or self.resolve(n.id).startswith("importlib"):
                    out.append(f"uses {n.id} (dynamic code)")
            elif isinstance(n, (ast.BinOp, ast.AugAssign)) and isinstance(n.op, ast.MatMult):
                out.append("uses the @ operator")
            elif isinstance(n, ast.Call) and _dotted(n.func) in ("getattr", "builtins.getattr") and len(n.args) >= 2:
                name = n.args[1]
                if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                    out.append("uses getattr with a computed name")
                elif name.value in LIBRARY_FUNCTIONS or name.value in DYNAMIC:
                    out.append(f"uses getattr(..., {name.value!r})")
        return list(dict.fromkeys(out))


def variant_problems(code: str) -> list[str]:
    """Problems with a model-written kernel file, found without running it (empty: usable)."""
    if len(code) > MAX_CODE_CHARS:
        return [f"code: longer than {MAX_CODE_CHARS:,} characters"]
    # Python's parser and the walks below recurse: code nested thousands deep (a model looping on
    # "-" or "+ 1") raises RecursionError or MemoryError, which is the model's bad output, not ours
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [f"code: not valid Python: {exc.msg} (line {exc.lineno})"]
    except (RecursionError, MemoryError) as exc:
        return [f"code: not usable Python: nested too deeply to parse ({type(exc).__name__})"]
    except ValueError as exc:  # older Pythons: a NUL byte
        return [f"code: not valid Python: {exc}"]
    try:
        return _tree_problems(tree)
    except (RecursionError, MemoryError) as exc:
        return [f"code: not usable Python: nested too deeply to check ({type(exc).__name__})"]


def _tree_problems(tree: ast.Module) -> list[str]:
    mod = _Module(tree)
    problems = [f"code: the kernel file must define `{n}` at module level" for n in REQUIRED if n not in mod.defs]
    if not mod.jit:
        problems.append("code: no @triton.jit kernel")
    launch = mod.defs.get("launch")
    if not isinstance(launch, ast.FunctionDef):
        return problems
    if len(launch.args.args) < 2:
        problems.append("code: launch must take (config, inputs)")
    # launch and every module-level function it reaches by name (a helper would otherwise hide a call)
    seen: set[str] = set()
    todo = ["launch"]
    kernels_named = False
    grid_launch = False
    while todo:
        name = todo.pop()
        fn = mod.defs.get(name)
        if name in seen or fn is None or name in mod.jit:
            continue
        seen.add(name)
        where = "launch" if name == "launch" else f"{name} (reached from launch)"
        for why in mod.uses(fn):
            problems.append(f"code: {where} {why}: the kernel must compute the result itself")
        for n in ast.walk(fn):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                if n.id in mod.jit:
                    kernels_named = True
                elif n.id in mod.defs and n.id not in seen and isinstance(
                        mod.defs[n.id], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign)):
                    todo.append(n.id)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript):
                grid_launch = True
    if mod.jit and not (kernels_named and grid_launch):
        problems.append("code: launch does not launch the file's @triton.jit kernel (`kernel[grid](...)`)")
    return problems
