"""``kerntune tune FILE --shapes shapes.txt``: many shapes, one budget, one dispatch table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from rich.table import Table

from kerntune.cli.common import console, err_console, open_store, parse_options
from kerntune.errors import KerntuneError
from kerntune.run.shapes import ShapeResult, read_shapes, tune_shapes
from kerntune.strategies.options import own_options


def tune_shapes_cli(kernel: Path, shapes_file: Path, strategy: str, budget: Optional[int], seed: int,
                    store: Optional[str], compile_timeout: float, gpus: int | None, option: list[str],
                    llm: Any = None) -> None:
    """``llm``: an ``LLMClient`` for the strategies that take a model (each shape is a run of its own)."""
    from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator
    from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module

    shapes = read_shapes(shapes_file)
    if budget is None:
        raise KerntuneError("--shapes needs --budget: the total number of evaluations over all shapes")
    options = own_options(strategy, parse_options(option))
    # imported once, here: a file that fails to import is refused before the store (and .kerntune/) exists
    module = load_kernel_module(kernel)
    st = open_store(store)

    def report(r: ShapeResult) -> None:
        shape = "x".join(map(str, r.shape))
        warm = f", started from {', '.join(r.warm_from)}" if r.warm_from else ""
        best = f"{r.best_ms:.4g} ms" if r.best_ms is not None else "no config ran"
        err_console.print(f"{shape}: {best} after {r.evaluations}/{r.budget} evaluations "
                          f"(within 2% of it after {r.evals_to_best}){warm}")

    results = tune_shapes(lambda s: TritonEvaluator(kernel, s, compile_timeout=compile_timeout, gpus=gpus,
                                                            module=module),
                          shapes, strategy, budget, st, seed=seed, options=options, llm=llm, on_shape=report)
    table = Table(title=f"dispatch table: {len(results)} shapes, {sum(r.evaluations for r in results)} evaluations")
    for col in ("shape", "best ms", "evaluations", "within 2% after", "warm start from", "config"):
        table.add_column(col)
    for r in results:
        table.add_row("x".join(map(str, r.shape)), f"{r.best_ms:.4g}" if r.best_ms is not None else "-",
                      str(r.evaluations), str(r.evals_to_best), ", ".join(r.warm_from) or "-",
                      json.dumps(r.best_config))
    console.print(table)
    console.print(f"store {st.path}; export with `kerntune cache export --json` (or --triton, --kernel-tuner DIR)")
    st.close()
