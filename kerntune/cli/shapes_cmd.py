"""``kerntune tune FILE --shapes shapes.txt``: many shapes, one budget, one dispatch table.

The run is a parent run in the store (``kerntune.run.shapes.create_parent``) whose id is printed
first, as ``tune`` prints its run's: ``kerntune tune --resume ID`` continues a killed one
(``resume_shapes_cli``), and Ctrl-C or SIGTERM says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from rich.table import Table

from kerntune.cli.common import check_store_exists, console, err_console, open_store, parse_options, store_flag
from kerntune.cli.progress import RunLog
from kerntune.errors import KerntuneError
from kerntune.run.dispatch import Shape
from kerntune.run.shapes import DEFAULT_RETIME, ShapeResult, create_parent, read_shape_lines, tune_shapes
from kerntune.run.winner import baseline_name
from kerntune.store import Store
from kerntune.store.resume import SHAPES_PARENT_KIND, check_kind
from kerntune.strategies.options import own_options

#: Builds the model client of a strategy from a spec, a base URL and a transcript path (None: no model).
ModelFactory = Callable[[str, Optional[str], Optional[str], Optional[Path]], Any]


def shapes_command(kernel: Optional[Path], shape: Optional[str], shapes: Optional[Path], replay: Optional[Path],
                   source: Optional[Path], device: Optional[str], ray_address: Optional[str],
                   report: Optional[Path], seconds: Optional[float], target_ms: Optional[float],
                   strategy: Optional[str], budget: Optional[int], seed: Optional[int], store: Optional[str],
                   resume: Optional[str], st: Optional[Store], compile_timeout: float, gpus: str,
                   retime: Optional[int],
                   option: list[str], llm: Optional[str], llm_base_url: Optional[str], llm_timeout: float,
                   llm_transcript: Optional[Path], given_model: dict) -> None:
    """``tune FILE --shapes FILE``, or ``tune --resume ID`` of such a run (``st``: the store, open where
    the resume path found the run in it).  What a shapes run cannot use is refused, as the single
    shape refuses it: --source and --device describe a replayed space (they were accepted and ignored).
    ``retime``: None where --retime was not typed (a new run takes ``DEFAULT_RETIME``, a resume its own)."""
    if seconds is not None or target_ms is not None:
        raise KerntuneError("--shapes takes --budget (evaluations over all shapes, default 100), not --seconds"
                            " or --target-ms")
    for flag, value in (("--ray-address", ray_address), ("--report", report)):
        if value is not None:  # each shape is a run of its own on this machine, with no report of its own
            raise KerntuneError(f"--shapes does not take {flag}")
    if source is not None or device is not None:
        raise KerntuneError("--source and --device describe a replayed space: use them with --replay")
    typed = [flag for flag, value in (("--shape", shape), ("--replay", replay)) if value is not None]
    if typed and resume and shapes is None:  # `tune --resume ID --shape ...`: --shapes was not typed
        raise KerntuneError(f"run {resume} is a --shapes run: it takes no {' or '.join(typed)}")
    if typed:
        raise KerntuneError("--shapes needs a kernel file and no --shape or --replay")
    from kerntune.cli.tune_cmd import _asks_model, _model_client, _note_unused_model, _parse_gpus
    from kerntune.evaluate.triton_backend.kernel_file import is_adapter_spec
    from kerntune.strategies import DEFAULT_STRATEGY, get_strategy
    from kerntune.strategies.base import check_seed
    from kerntune.strategies.options import validate_options

    if kernel is not None and not kernel.is_file() and not is_adapter_spec(kernel):
        raise KerntuneError(f"kernel file not found: {kernel.resolve()}")
    if resume:  # a killed `tune --shapes` run: its stored settings, checked against what is typed again
        if st is None:
            check_store_exists(store)
            st = open_store(store)
            resume = st.resolve_run_id(resume)
        if not is_shapes_run(st, resume):
            check_kind(st.get_run(resume), "tune")  # one of a --shapes run's shapes (or a comparison's): says whose
            raise KerntuneError(f"run {resume} is not a --shapes run: continue it without --shapes")
        resume_shapes_cli(st, store, resume, kernel, shapes, strategy, budget, seed, option, llm, llm_transcript,
                          lambda strat, spec, url, transcript: _model_client(strat, spec, url, transcript,
                                                                             llm_timeout),
                          compile_timeout, _parse_gpus(gpus), retime, llm_base_url)
        return
    strategy, budget, seed = strategy or DEFAULT_STRATEGY, budget if budget is not None else 100, seed or 0
    if kernel is None:
        raise KerntuneError("--shapes needs a kernel file and no --shape or --replay")
    get_strategy(strategy)  # the options, seed and kernel file too: tune_shapes_cli opens (creates) the store
    validate_options(strategy, own_options(strategy, parse_options(option)), with_model=_asks_model(strategy, llm))
    check_seed(seed)
    _note_unused_model(strategy, given_model)
    if _asks_model(strategy, llm):  # a new run's transcript holds no other run's calls
        from kerntune.run.llm_resume import check_new_transcript

        check_new_transcript(llm_transcript, llm)
    client = _model_client(strategy, llm, llm_base_url, llm_transcript, llm_timeout)
    tune_shapes_cli(kernel, shapes, strategy, budget, seed, store, compile_timeout, _parse_gpus(gpus), option,
                    llm=client, retime=DEFAULT_RETIME if retime is None else retime,
                    llm_base_url=llm_base_url if client is not None else None)


def tune_shapes_cli(kernel: Path, shapes_file: Path, strategy: str, budget: int, seed: int,
                    store: Optional[str], compile_timeout: float, gpus: int | None, option: list[str],
                    llm: Any = None, retime: int = DEFAULT_RETIME, llm_base_url: Optional[str] = None) -> None:
    """A new ``--shapes`` run: one parent run, each shape's run its child.  ``llm``: an ``LLMClient`` for
    the strategies that take a model, ``llm_base_url`` its endpoint (kept with the run for a resume)."""
    from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module

    lines = read_shape_lines(shapes_file)
    if budget < len(lines):
        raise KerntuneError(f"a budget of {budget} evaluations cannot cover {len(lines)} shapes")
    options = own_options(strategy, parse_options(option))
    # imported once, here: a file that fails to import is refused before the store (and .kerntune/) exists
    module = load_kernel_module(kernel)
    check_shapes(module, lines, shapes_file)  # every shape, before the store or any evaluator
    path, ident = _identity(kernel, module)
    st = open_store(store)
    shapes = [s for s, _ in lines]
    parent = create_parent(st, path, ident, shapes, strategy, seed, budget, options, llm,
                           shapes_file=str(shapes_file.resolve()), retime=retime, base_url=llm_base_url)
    _run(st, store, parent, path, module, shapes, strategy, budget, seed, options, llm, compile_timeout, gpus, retime)


def resume_shapes_cli(st: Store, store: Optional[str], run_id: str, kernel: Optional[Path],
                      shapes_file: Optional[Path], strategy: Optional[str], budget: Optional[int],
                      seed: Optional[int], option: list[str], llm: Optional[str], llm_transcript: Optional[Path],
                      make_model: ModelFactory, compile_timeout: float, gpus: int | None,
                      retime: Optional[int] = None, llm_base_url: Optional[str] = None) -> None:
    """``tune --resume ID`` of a ``tune --shapes`` run: the shapes whose run finished are read back, an
    interrupted shape's run is resumed from its stored trials, the rest are tuned, under the stored
    budget.  What is typed again (kernel, ``--shapes``, ``--strategy``, ``--seed``, ``--budget``, ``-o``,
    ``--retime``, ``--llm``) must be the run's own, as a single shape's resume checks it; ``retime`` None:
    the run's own (a run stored before it was kept: ``DEFAULT_RETIME``); ``llm_base_url`` None: the run's own."""
    from kerntune.evaluate.triton_backend.kernel_file import is_adapter_spec, load_kernel_module
    from kerntune.store.resume import check_same, plain, resumed_base_url, resumed_model, resumed_transcript

    run = st.get_run(run_id)
    opts = run.options or {}
    stored_path = str(opts.get("kernel_file") or "")
    if not stored_path or not isinstance(opts.get("shapes"), list):
        raise KerntuneError(f"cannot resume {run_id}: the store does not say what it tuned (start a new run)")
    check_same(run_id, "--strategy", run.strategy, strategy)
    check_same(run_id, "--seed", run.seed, seed)
    check_same(run_id, "--budget", opts.get("budget"), budget)
    if "retime" in opts:  # kept since --retime was stored: one table must not mix re-timed and screening winners
        check_same(run_id, "--retime", opts["retime"], retime)
    retime = retime if retime is not None else int(opts.get("retime", DEFAULT_RETIME))
    stored_options = opts.get("strategy_options") or {}
    for name, value in own_options(run.strategy or "", parse_options(option)).items():
        check_same(run_id, f"-o {name}", stored_options.get(name), plain(value))
    if kernel is not None and _kernel_path(kernel) != stored_path:
        raise KerntuneError(f"cannot resume {run_id}: it tuned {stored_path}, not {kernel} (resume against the"
                            " same kernel, or start a new run)")
    if not (Path(stored_path).is_file() or is_adapter_spec(stored_path)):
        raise KerntuneError(f"cannot resume {run_id}: its kernel file {stored_path} is gone")
    shapes: list[Shape] = [tuple(int(x) for x in s) for s in opts["shapes"]]
    lines = [(s, 0) for s in shapes]
    if shapes_file is not None:
        given = read_shape_lines(shapes_file)
        if {s for s, _ in given} != set(shapes):
            raise KerntuneError(f"cannot resume {run_id}: it was started with the shapes "
                                f"{', '.join('x'.join(map(str, s)) for s in shapes)}, not those of {shapes_file}"
                                " (leave --shapes out to keep the run's own, or start a new run)")
        lines = given
    module = load_kernel_module(stored_path)
    path, ident = _identity(Path(stored_path), module)
    if ident.get("source_hash") != (run.evaluator or {}).get("source_hash"):
        raise KerntuneError(f"cannot resume {run_id}: its kernel {stored_path} changed since it was started"
                            " (resume against the same kernel, or start a new run)")
    check_shapes(module, lines, shapes_file or "the run's shapes")
    asked = any(st.llm_exchanges(child.id) for child in st.child_runs(run_id))
    spec = resumed_model(run, llm, asked)
    client = make_model(run.strategy or "", spec, resumed_base_url(run, llm_base_url),
                        resumed_transcript(run, llm_transcript))
    _run(st, store, run_id, path, module, shapes, run.strategy or "", int(opts["budget"]),
         run.seed if run.seed is not None else 0, dict(stored_options), client, compile_timeout, gpus, retime)


def is_shapes_run(st: Store, run_id: str) -> bool:
    """Whether ``run_id`` is the parent run of a ``tune --shapes`` run (``tune --resume`` continues it)."""
    return st.get_run(run_id).kind == SHAPES_PARENT_KIND


def check_shapes(module: Any, lines: Sequence[tuple[Shape, int]], shapes_file: Path | str) -> None:
    """Every shape through the kernel file's ``flops``, ``bytes_moved`` and ``space_for``, before anything is
    measured.  Why: a shape the file rejects was found only at its turn, after the shapes before it were
    tuned.  The message names the shapes file's line (0: a stored run's shape, no line)."""
    from kerntune.evaluate.triton_backend.kernel_file import describe, module_space

    for shape, line in lines:
        try:
            describe(module, shape)
            module_space(module, shape)
        except KerntuneError as exc:
            text = "x".join(map(str, shape))
            where = f"{shapes_file}:{line}" if line else str(shapes_file)
            raise KerntuneError(f"{where}: {str(exc).replace(f'--shape {text}', f'shape {text}')}") from None


def _kernel_path(kernel: Path | str) -> str:
    """A kernel file as the store keeps it (absolute), or a package adapter's spec as it is."""
    from kerntune.evaluate.triton_backend.kernel_file import is_adapter_spec

    return str(kernel) if is_adapter_spec(kernel) else str(Path(kernel).resolve())


def _identity(kernel: Path, module: Any) -> tuple[str, dict[str, Any]]:
    """The kernel's path and what the parent run keeps of it (the shapes' runs keep the rest)."""
    from kerntune.evaluate.triton_backend.kernel_file import source_hash

    path = _kernel_path(kernel)
    return path, {"evaluator": "triton", "kernel_file": path,
                  "kernel_name": getattr(module, "name", None) or Path(path).stem,
                  "source_hash": source_hash(path, module)}


def _run(st: Store, store: Optional[str], parent: str, path: str, module: Any, shapes: list[Shape], strategy: str,
         budget: int, seed: int, options: dict[str, Any], llm: Any, compile_timeout: float, gpus: int | None,
         retime: int) -> None:
    """Tune the parent's shapes (its id first), print each shape's result and the dispatch table; on
    Ctrl-C or SIGTERM, how far it got and the command that continues it."""
    from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

    log = RunLog()
    log.run_id(parent, st.path)
    log.line(f"strategy: {strategy}; budget: {budget} evaluations over {len(shapes)} shapes"
             + (f" with the model {getattr(llm, 'chosen', None) or llm.spec}" if llm is not None else ""))
    done: list[ShapeResult] = []

    def report(r: ShapeResult) -> None:
        done.append(r)
        err_console.print(_line(r), markup=False, highlight=False)
        for note in r.notes:
            err_console.print(f"note: {note}", markup=False, highlight=False)

    try:
        results = tune_shapes(lambda s: TritonEvaluator(path, s, compile_timeout=compile_timeout, gpus=gpus,
                                                        module=module),
                              shapes, strategy, budget, st, seed=seed, options=options, llm=llm, on_shape=report,
                              parent_id=parent, retime=retime)
    except KeyboardInterrupt:  # stored as interrupted: say how far it got and how to go on
        evaluations = sum(len(st.trials(c.id)) for c in st.child_runs(parent))
        err_console.print(f"interrupted after {evaluations} evaluations ({len(done)} of {len(shapes)} shapes"
                          f" done); continue with: kerntune tune --resume {parent}{store_flag(store)}",
                          markup=False, highlight=False)
        raise
    console.print(winners_table(results))
    console.print(f"run id: {parent} (store {st.path})")
    if all(r.best_config is None for r in results):
        st.close()
        errors = {r.failure for r in results}
        raise KerntuneError("nothing ran in any shape" + (f"; {next(iter(errors))}" if len(errors) == 1 else
                                                          " (each shape's most common error is above)"))
    console.print(f"store {st.path}; export with `kerntune cache export --json` (or --triton, --kernel-tuner DIR)")
    st.close()


def winners_table(results: list[ShapeResult]) -> Table:
    """The run's winners, one row a shape.  A shape whose winner the dispatch table did not take (it
    kept a faster entry of another run; the shape's note says which) is marked ``*`` and the table is
    then not titled the dispatch table: it was, while ``cache export`` wrote the other entry."""
    kept = [i for i, r in enumerate(results) if r.best_config is not None and not r.in_table]
    title = "dispatch table" if not kept else f"this run's winners ({len(kept)} not in the dispatch table: *)"
    table = Table(title=f"{title}: {len(results)} shapes, {sum(r.evaluations for r in results)} evaluations")
    for col in ("shape", "best ms", "evaluations", "within 2% after", "warm start from", "config"):
        table.add_column(col)
    for i, r in enumerate(results):
        config = "-" if r.best_config is None else json.dumps(r.best_config) + (" *" if i in kept else "")
        table.add_row("x".join(map(str, r.shape)), f"{r.best_ms:.4g}" if r.best_ms is not None else "-",
                      str(r.evaluations), _or_dash(r.evals_to_best), ", ".join(r.warm_from) or "-", config)
    return table


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _line(r: ShapeResult) -> str:
    """One shape's result as it is printed when the shape is done."""
    shape = "x".join(map(str, r.shape))
    earlier = " (tuned before the resume)" if r.earlier else ""
    if r.best_ms is None:
        return f"{shape}: no config ran in {r.evaluations}/{r.budget} evaluations; {r.failure}{earlier}"
    warm = f", started from {', '.join(r.warm_from)}" if r.warm_from else ""
    retimed = " (re-timed)" if r.retimed else ""
    over = baseline_name(r.baseline)
    speedup = (f"; {r.speedup[0]:.3f}x [{r.speedup[1]:.3f}, {r.speedup[2]:.3f}] over {over}"
               if r.speedup else "")
    return (f"{shape}: {r.best_ms:.4g} ms{retimed} after {r.evaluations}/{r.budget} evaluations (within 2% of it"
            f" after {_or_dash(r.evals_to_best)}){warm}{speedup}{earlier}")
