"""``kerntune transform``: a code-level strategy rewrites a kernel; every rewrite is tuned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from kerntune.cli.common import (LLM_BASE_URL_HELP, check_output, console, err_console, open_store, parse_options,
                                 write_output)
from kerntune.errors import KerntuneError


def _json_arg(text: Optional[str], what: str) -> dict:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KerntuneError(f"{what}: not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise KerntuneError(f"{what}: expected a JSON object")
    return value


def write_result(result: Any, output: Optional[Path], json_out: Optional[Path]) -> None:
    """The best kernel to ``-o`` and the whole result to ``--json``, each written atomically (after every
    accepted step too: a killed run used to lose every rewrite it had accepted)."""
    from kerntune.transform.triton_rounds import write_atomically

    if output is not None:
        write_output("-o", output, lambda: write_atomically(output, result.kernel_source))
    if json_out is not None:
        write_output("--json", json_out, lambda: write_atomically(json_out, json.dumps(result.to_dict(), indent=1)
                                                                  + "\n"))


def transform(
    kernel: Path = typer.Argument(..., help="Kernel source file (.cl for OpenCL, .cu for CUDA, .c for C) or a "
                                  "Triton kernel file (.py, the format `kerntune tune` takes)"),
    shape: Optional[str] = typer.Option(None, "--shape", help="Triton kernel file: the problem shape, e.g. 4096x4096x4096"),
    strategy: str = typer.Option("autonomous", "--strategy", help="one-prompt, autonomous or explicit"),
    steps: Optional[Path] = typer.Option(None, "--steps", help="YAML tuning steps for --strategy explicit "
                                         "(default: the built-in library)"),
    llm: Optional[str] = typer.Option(None, "--llm", envvar="KERNTUNE_LLM", help="Model spec (see README)"),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL",
                                               help=LLM_BASE_URL_HELP),
    llm_timeout: float = typer.Option(300.0, "--llm-timeout", help="Seconds to wait for one model answer"),
    llm_transcript: Optional[Path] = typer.Option(None, "--llm-transcript", help="Append every exchange to this JSONL"),
    backend: Optional[str] = typer.Option(None, "--backend", help="Kernel Tuner kernels: opencl (the default), cuda"
                                          " (or cupy, nvcuda, pycuda) or c"),
    kernel_name: Optional[str] = typer.Option(None, "--kernel-name", help="Kernel Tuner kernels: the kernel to tune "
                                              "(default: the first)"),
    problem_size: Optional[str] = typer.Option(None, "--problem-size", help="Kernel Tuner kernels: the launch size, "
                                               "e.g. 256x256"),
    args_generator: Optional[Path] = typer.Option(None, "--args-generator", help="Kernel Tuner kernels: a Python "
                                                  "file with make_args(problem_size) -> list (default: the model "
                                                  "writes one)"),
    params: Optional[str] = typer.Option(None, "--params", help='Kernel Tuner kernels: the original kernel\'s '
                                         'tune_params as JSON, '
                                         'e.g. \'{"block_size_x": [16], "block_size_y": [16]}\''),
    grid_div: Optional[str] = typer.Option(None, "--grid-div", help='Kernel Tuner kernels: the original '
                                           'kernel\'s grid divisors as JSON, '
                                           'e.g. \'{"y": ["block_size_y", "WPT"]}\''),
    search: Optional[str] = typer.Option(None, "--search", help="kerntune strategy that tunes each rewrite "
                                         "(default: exhaustive for Kernel Tuner kernels, auto for Triton files)"),
    budget: int = typer.Option(40, "--budget", help="Evaluations per rewrite"),
    seconds: Optional[float] = typer.Option(None, "--seconds", help="Tuning seconds per rewrite"),
    performance_threshold: float = typer.Option(0.5, "--performance-threshold",
                                                help="Percent faster a rewrite must be to be accepted"),
    iterations: Optional[int] = typer.Option(None, "--iterations", help="Kernel Tuner kernels: kernel runs timed per"
                                             " config (default 7)"),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds per config (compile, check, time)"),
    memory_mb: Optional[int] = typer.Option(None, "--memory-mb", help="Worker memory limit in MiB (0: none; "
                                            "default half the machine)"),
    strategy_option: list[str] = typer.Option([], "--strategy-option", "-O", help="NAME=JSON, e.g. -O max_replanning=1"),
    seed: int = typer.Option(0, "--seed", help="Seed of the search that tunes each rewrite"),
    store: Optional[str] = typer.Option(None, "--store", help="SQLite store for every trial"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the best kernel's source here"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the whole result (steps included) as JSON"),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="Triton: where variants, harnesses and the "
                                           "combined file go (default a fresh .kerntune/transform/NAME-TIME-XXXX; "
                                           "one holding another run's files gets a fresh subfolder)"),
    fix_rounds: int = typer.Option(1, "--fix-rounds", min=0, help="Triton: times a rewrite rejected as wrong, "
                                   "unloadable or crashing goes back to the model with the reason"),
    retime_rounds: Optional[int] = typer.Option(None, "--retime-rounds", help="Rounds re-timing kernels side by "
                                                "side (0: none). Kernel Tuner: every correct rewrite against the "
                                                "current and original kernels, default 6 (more when "
                                                "inconclusive); Triton: the same, then the winner against "
                                                "the original at the end, default the protocol's"),
    rep_ms: Optional[int] = typer.Option(None, "--rep-ms", help="Triton: timing window per config in ms "
                                         "(default the protocol's)"),
) -> None:
    """Rewrite a kernel with a language model (one-prompt, autonomous or explicit steps), tuning every
    rewrite through Kernel Tuner and keeping it only when it is correct and faster."""
    from kerntune.llm import LLMClient
    from kerntune.strategies import get_strategy
    from kerntune.transform import ExplicitTuningStrategy, KernelTransformer, load_steps, make_strategy
    from kerntune.transform.backend import backend_of
    from kerntune.transform.context import MIN_VERDICT_ROUNDS
    from kerntune.transform.steps import triton_steps

    if not kernel.is_file():
        raise KerntuneError(f"kernel file not found: {kernel}")
    check_output("-o", output)  # before any measurement: an unwritable path once failed after the whole run
    check_output("--json", json_out)
    if backend_of(kernel) == "triton":  # Kernel Tuner's options would be ignored silently on a Triton file
        given = [flag for flag, value in (("--backend", backend), ("--kernel-name", kernel_name),
                                          ("--args-generator", args_generator), ("--params", params),
                                          ("--grid-div", grid_div), ("--iterations", iterations)) if value is not None]
        if given:
            raise KerntuneError(f"{' and '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to Kernel Tuner kernels"
                                " (.cu/.cl/.c), not to a Triton file")
    if not llm:
        raise KerntuneError("kerntune transform needs a model: pass --llm SPEC (e.g. local:, openai:MODEL)")
    if budget < 1:
        raise KerntuneError(f"--budget must be at least 1, got {budget}")
    get_strategy(search or ("auto" if backend_of(kernel) == "triton" else "exhaustive"))  # before any measurement
    opts = parse_options(strategy_option, flag="option")
    if steps is not None:
        if strategy.replace("_", "-") != "explicit":
            raise KerntuneError("--steps goes with --strategy explicit")
        strat = ExplicitTuningStrategy(load_steps(steps))
    elif backend_of(kernel) == "triton" and strategy.strip().lower() == "explicit" and not opts:
        strat = ExplicitTuningStrategy(triton_steps())  # the Triton step library
    else:
        strat = make_strategy(strategy, **opts)
    from kerntune.run.llm_resume import check_new_transcript

    check_new_transcript(llm_transcript, llm)  # a transform is a new run: its transcript holds no other's calls
    client = LLMClient.from_spec(llm, llm_base_url, transcript=llm_transcript, timeout=llm_timeout)
    events = lambda msg: err_console.print(f"[dim]{escape(msg)}[/dim]", highlight=False)  # noqa: E731
    if backend_of(kernel) == "triton":
        _triton(kernel, shape, problem_size, strat, client, search or "auto", budget, seconds, performance_threshold,
                timeout, memory_mb, rep_ms, retime_rounds, store, seed, workdir, output, json_out, events, fix_rounds)
        return
    if problem_size is None:
        raise KerntuneError("a Kernel Tuner kernel needs --problem-size, e.g. 256x256")
    st = open_store(store)
    try:
        kt = KernelTransformer(kernel.read_text(), strategy=strat, llm=client, backend=backend or "opencl",
                               problem_size=problem_size, kernel_name=kernel_name, args_generator=args_generator,
                               tune_params=_json_arg(params, "--params"), grid_div=_json_arg(grid_div, "--grid-div"),
                               search=search or "exhaustive", budget=budget, budget_seconds=seconds,
                               performance_threshold=performance_threshold,
                               iterations=7 if iterations is None else iterations, timeout_s=timeout,
                               memory_mb=memory_mb, store=st, seed=seed,
                               confirm_rounds=MIN_VERDICT_ROUNDS if retime_rounds is None else retime_rounds,
                               on_event=events, checkpoint=(lambda r: write_result(r, output, json_out))
                               if output is not None or json_out is not None else None)
        result = kt.run()
    finally:
        st.close()
    console.print(result.summary(), markup=False, highlight=False, soft_wrap=True)
    write_result(result, output, json_out)
    if output is not None:
        console.print(f"kernel: {output}")
    if json_out is not None:
        console.print(f"result: {json_out}")


def _triton(kernel: Path, shape: Optional[str], problem_size: Optional[str], strat, client, search: str,  # noqa: ANN001
            budget: int, seconds: Optional[float], threshold: float, timeout: float, memory_mb: Optional[int],
            rep_ms: Optional[int], retime_rounds: Optional[int], store: Optional[str], seed: int,
            workdir: Optional[Path], output: Optional[Path], json_out: Optional[Path], events,  # noqa: ANN001
            fix_rounds: int = 1) -> None:
    """A Triton kernel file: variants are kernel files, checked and tuned as `kerntune tune` tunes one."""
    from kerntune.evaluate.triton_backend.kernel_file import parse_shape
    from kerntune.transform.triton_context import TritonTransformer

    if shape is None and problem_size is None:
        raise KerntuneError("a Triton kernel file needs --shape, e.g. --shape 4096x4096x4096")
    st = open_store(store)
    try:
        tt = TritonTransformer(kernel, parse_shape(shape or problem_size or ""), strategy=strat, llm=client,
                               search=search, budget=budget, budget_seconds=seconds, performance_threshold=threshold,
                               timeout_s=timeout, memory_mb=memory_mb, rep_ms=rep_ms, retime_rounds=retime_rounds,
                               store=st, seed=seed, workdir=workdir, on_event=events, fix_rounds=fix_rounds,
                               checkpoint=(lambda r: write_result(r, output, json_out)) if output is not None
                               or json_out is not None else None)
        result = tt.run()  # writes -o and --json after every accepted step and at the end
    finally:
        st.close()
    console.print(result.summary(), markup=False, highlight=False, soft_wrap=True)
    if output is not None:
        console.print(f"kernel file: {output}")
    if json_out is not None:
        console.print(f"result: {json_out}")
