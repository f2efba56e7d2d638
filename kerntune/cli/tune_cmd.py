"""``kerntune tune``: one strategy on one evaluator (a recorded space for now)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from kerntune.cli.common import (LLM_BASE_URL_HELP, check_number, check_output, check_store_exists,
                                  check_store_writable, console, err_console, open_store, other_device_note,
                                  parse_options, print_unwrapped, store_flag)
from kerntune.cli.progress import RunLog
from kerntune.cli.report_cmd import write_after_run
from kerntune.store.resume import (absolute_spec, keep_model_settings, resumed_base_url, resumed_model,
                                   resumed_transcript)
from kerntune.errors import KerntuneError
from kerntune.evaluate import ReplayEvaluator
from kerntune.hardware import device_facts
from kerntune.run.search import RunOptions, run_search
from kerntune.space import jsonable
from kerntune.llm import LLMClient
from kerntune.strategies import DEFAULT_STRATEGY, LLM_STRATEGIES, MODEL_OPTIONAL, Budget, BudgetExhausted, get_strategy
from kerntune.budget_default import UNSET, default_evals, describe_budget
from kerntune.strategies.base import check_seed
from kerntune.strategies.options import own_options, validate_options


def tune(
    kernel: Optional[Path] = typer.Argument(None, help="A Triton kernel file (see examples/triton/matmul.py)"),
    shape: Optional[str] = typer.Option(None, "--shape", help="Problem shape for a kernel file, e.g. 4096x4096x4096"),
    shapes: Optional[Path] = typer.Option(None, "--shapes", help="A file of shapes, one per line: tune them all "
                                          "under one --budget, nearest-first, into one dispatch table (a killed"
                                          " run continues with --resume RUN_ID)"),
    replay: Optional[Path] = typer.Option(None, "--replay", help="Recorded space to tune against instead (Kernel Tuner cache, T4, KTT results, kerntune table)"),
    source: Optional[Path] = typer.Option(None, "--source", help="With --replay: the kernel's source file, shown to the model as a real run would"),
    device: Optional[str] = typer.Option(None, "--device", help="With --replay: the GPU, as a name (e.g. 'AMD Instinct MI250X') or a JSON/text file describing it"),
    compile_timeout: float = typer.Option(60.0, "--compile-timeout", help="Seconds before a config's compile is killed"),
    gpus: str = typer.Option("all", "--gpus", help="GPUs that benchmark: N or all visible (one worker each); with"
                             " --ray-address, the number of actors (default: every GPU of the cluster)"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Evaluate on Ray actors: auto (this"
                                              " machine's cluster), ray://HOST:PORT, or local (a private one); a kernel given by adapter name"
                                              " (liger.rms_norm) needs its package installed on every node"),
    retime: Optional[int] = typer.Option(None, "--retime", help="Leaders (those within 1.5x of the fastest) that a"
                                         " GPU run's runoff settles the winner among, launches interleaved; the winner"
                                         " is then re-timed beside the default config in interleaved rounds (0:"
                                         " neither; default 16, a --shapes run's resume: the run's own)"),
    strategy: Optional[str] = typer.Option(None, "--strategy", help="Strategy name (default auto; `kerntune"
                                           " options` lists each one's -o options)"),
    budget: Optional[int] = typer.Option(None, "--budget", help="Maximum evaluations (default 100; no cap when --seconds alone is given, except with --shapes)"),
    seconds: Optional[float] = typer.Option(None, "--seconds", help="Maximum tuning seconds on the evaluator's clock"),
    target_ms: Optional[float] = typer.Option(None, "--target-ms", help="Stop once a config is at least this fast"),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the search (default 0)"),
    store: Optional[str] = typer.Option(None, "--store", help="SQLite store (default $KERNTUNE_STORE, else .kerntune/kerntune.db)"),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue a killed run by its id (a --shapes run"
                                          " too: finished shapes are not tuned again)"),
    llm: Optional[str] = typer.Option(None, "--llm", envvar="KERNTUNE_LLM", help="Model for auto (optional), llm and llm-seeded: a spec such as replay:FILE, files:DIR, openai:MODEL, local: (README, \"Which model\")"),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL",
                                               help=LLM_BASE_URL_HELP),
    llm_timeout: float = typer.Option(300.0, "--llm-timeout", help="Seconds to wait for one model answer"),
    llm_transcript: Optional[Path] = typer.Option(None, "--llm-transcript",
                                                  help="Append every model exchange to this JSONL file (replayable;"
                                                  " --resume appends to the run's own)"),
    option: list[str] = typer.Option([], "--option", "-o", help="Strategy option NAME=JSON, e.g. -o initial=25 (or STRATEGY.NAME, as compare takes it)"),
    report: Optional[Path] = typer.Option(None, "--report", help="Write the HTML report here (default: next to the store, reports/RUN_ID.html)"),
    no_report: bool = typer.Option(False, "--no-report", help="Write no report"),
) -> None:
    """Search a kernel's space with one strategy, storing every trial; print the winner."""
    given_strategy = strategy
    given_model = {"--llm": llm, "--llm-base-url": llm_base_url, "--llm-transcript": llm_transcript}
    for flag, value, low, high in (("--compile-timeout", compile_timeout, 0, 86400), ("--seconds", seconds, 0, 1e9),
                                   ("--target-ms", target_ms, 0, float("inf")), ("--llm-timeout", llm_timeout, 0, 86400)):
        check_number(flag, value, low, high)
    if retime is not None and not 0 <= retime <= 1000:
        raise KerntuneError(f"--retime must be 0 to 1000 leaders, got {retime}")
    if resume is not None and not resume.strip():
        raise KerntuneError("--resume needs a run id (`kerntune store runs` lists them)")
    check_output("--report", report, (".html", ".htm"))
    check_output("--llm-transcript", llm_transcript)
    if shapes is not None:  # many shapes under one budget: a run of its own kind (kerntune.cli.shapes_cmd)
        from kerntune.cli.shapes_cmd import shapes_command

        shapes_command(kernel, shape, shapes, replay, source, device, ray_address, report, seconds, target_ms,
                       strategy, budget, seed, store, resume, None, compile_timeout, gpus, retime, option, llm,
                       llm_base_url, llm_timeout, llm_transcript, given_model)
        return
    if kernel is None and replay is None and not resume:
        raise KerntuneError("nothing to tune: give a kernel file (with --shape), --replay RECORDING, or --resume RUN_ID")
    given_options = parse_options(option)
    st = None
    if resume:  # its checks need the stored run; a mistyped --store is said, not created empty before "no run" is
        check_store_exists(store)
        st = open_store(store)  # there already: opening it creates nothing (as compare --resume does)
        resume = st.resolve_run_id(resume)  # `last` or a unique prefix of the id, as every command that reads a run
        from kerntune.cli.shapes_cmd import is_shapes_run, shapes_command

        if is_shapes_run(st, resume):  # a `tune --shapes` run: continued as one
            shapes_command(kernel, shape, shapes, replay, source, device, ray_address, report, seconds, target_ms,
                           strategy, budget, seed, store, resume, st, compile_timeout, gpus, retime, option, llm,
                           llm_base_url, llm_timeout, llm_transcript, given_model)
            return
        if kernel is None and replay is None:
            kernel, shape, replay = _stored_target(st, resume, shape, ray_address)
        elif shape is not None and kernel is not None:
            _same_shape(st, resume, shape)
    else:  # what needs no stored run is checked before the store is created (opened after the evaluator)
        strategy = strategy or DEFAULT_STRATEGY
        seed, options = seed if seed is not None else 0, own_options(strategy, given_options)
        get_strategy(strategy)
        validate_options(strategy, options, with_model=_asks_model(strategy, llm))
        check_seed(seed)
        _check_needs_model(strategy, llm)
        if _asks_model(strategy, llm):  # a new run's transcript holds no other run's calls
            from kerntune.run.llm_resume import check_new_transcript

            check_new_transcript(llm_transcript, llm)
        check_store_writable(store)
        b = Budget(max_evals=default_evals(UNSET if budget is None else budget, seconds), max_seconds=seconds,
                   target_ms=target_ms)
    if (source is not None or device is not None) and replay is None:
        raise KerntuneError("--source and --device describe a replayed space: use them with --replay")
    n_gpus = _parse_gpus(gpus)
    if replay is not None and kernel is None:
        _refuse_kernel_only_flags(compile_timeout, gpus, retime, ray_address)
    retime = 16 if retime is None else retime  # not typed (None: a --shapes run's resume keeps its own)
    evaluator = _evaluator(kernel, shape, replay, compile_timeout, n_gpus, ray_address, source, device)
    try:  # the workers end now if a check below refuses (a bad model spec, a store that cannot be opened)
        from kerntune.run.search import evaluator_identity

        evaluator_identity(evaluator)  # what the store keeps of it (a kernel file's flops(shape) ...): refused here
        if resume:
            given_options = own_options(strategy or st.get_run(resume).strategy or DEFAULT_STRATEGY, given_options)
            strategy, seed, b, options = _resumed(st, resume, evaluator, strategy, seed,
                                                  Budget(max_evals=budget, max_seconds=seconds, target_ms=target_ms),
                                                  (budget, seconds, target_ms), given_options)
            llm = resumed_model(st.get_run(resume), llm, bool(st.llm_exchanges(resume)))
            # the run's own transcript goes on where it stopped, as its model does; one typed now wins
            llm_transcript = resumed_transcript(st.get_run(resume), llm_transcript)
            check_output("--llm-transcript", llm_transcript)
            llm_base_url = resumed_base_url(st.get_run(resume), llm_base_url)  # its own endpoint, unless given
        client = _model_client(strategy, llm, llm_base_url, llm_transcript, llm_timeout)
        get_strategy(strategy)
        validate_options(strategy, options, with_model=client is not None)
        check_seed(seed)  # refused here, not after a run id was printed for a run that never starts
        if st is None:
            st = open_store(store)  # only now: a refused command leaves no store (nor .kerntune/) behind
    except BaseException:
        evaluator.close()
        raise

    seen: dict = {}  # the search's last context: what a Ctrl-C reports

    def progress(ctx) -> None:  # noqa: ANN001 - SearchContext
        seen["ctx"] = ctx
        if kernel is not None:
            _give_up_on_one_failure(ctx)
        if ctx.evaluations % 25 == 0:
            best = f"{ctx.best.time_ms:.4g} ms" if ctx.best else "none yet"
            if log.plain:
                log.line(f"progress: {ctx.evaluations} evaluations, best {best}, {log.elapsed():.0f} s")
            else:
                err_console.print(f"[dim]{ctx.evaluations} evaluations, best {best}[/dim]")

    # The run id first (a killed run is resumed by it), then progress: plain stdout lines when piped.
    _note_unused_model(strategy, given_model)
    _note_other_device(evaluator)
    log = RunLog()
    headline = (f"strategy: {strategy}{' (the default)' if given_strategy is None and not resume else ''}"
                f"{f' with the model {client.chosen or llm}' if client is not None else (' without a model' if strategy in MODEL_OPTIONAL else '')}; "
                f"budget: {describe_budget(b.max_evals, b.max_seconds, b.target_ms) or 'none (the whole space)'}")

    def announce(run_id: str, kind: str, parent_id: Optional[str]) -> None:
        """Print the run id (then the strategy line) once the store holds the run.  Printed before a
        package's baseline (minutes), a kill or Ctrl-C there left an id and a --resume hint for a run
        the store never had."""
        if kind == "tune" and parent_id is None and log.announced is None:
            log.run_id(run_id, st.path)
            log.line(headline)

    def created(run_id: str, kind: str, parent_id: Optional[str]) -> None:
        """A new run keeps its transcript and base URL with its model's spec, so that ``--resume`` appends
        to it and asks the same endpoint."""
        if kind == "tune" and parent_id is None:
            keep_model_settings(st, run_id, getattr(client, "transcript", None),
                                llm_base_url if client is not None else None)
        announce(run_id, kind, parent_id)

    if resume:
        announce(resume, "tune", None)
    else:
        st.on_run_created = created

    def status(message: str) -> None:
        if log.plain:
            log.line(f"progress: {message}, {log.elapsed():.0f} s")
        else:
            err_console.print(f"[dim]{message}[/dim]")

    try:
        # A package kernel: its own choice is measured first, so the search starts from it and can only
        # improve on it.  Inside the try: it runs the package's own autotuning, and a Ctrl-C there must end
        # the workers too.
        shipped = evaluator.baseline()[0] if hasattr(evaluator, "baseline") else None
        run_options = RunOptions(store=st, run_id=resume, progress=progress, llm=client, strategy_options=options,
                                 warm_start=[shipped] if shipped else (),
                                 on_note=lambda note: err_console.print(f"[yellow]note:[/yellow] {note}"),
                                 on_status=status)
        res = run_search(evaluator, strategy, b, seed, run_options)
        best = res.best
        if best is not None and retime > 0 and getattr(evaluator, "can_retime", hasattr(evaluator, "retime")):
            best = _confirm(evaluator, res.history, retime, st, res.run_id) or best
    except BaseException as exc:  # an error or Ctrl-C: the workers end now, not at interpreter exit
        evaluator.close()
        if isinstance(exc, KeyboardInterrupt):
            ctx = seen.get("ctx")
            best = f" (best {ctx.best.time_ms:.4g} ms)" if ctx is not None and ctx.best is not None else ""
            if log.announced is None:  # no run stored: there is nothing to resume
                err_console.print("interrupted before the run started: nothing was stored", markup=False,
                                  highlight=False)
            else:
                err_console.print(f"interrupted after {ctx.evaluations if ctx is not None else 0} evaluations{best};"
                                  f" continue with: kerntune tune --resume {log.announced}{store_flag(store)}",
                                  markup=False, highlight=False)
        raise
    if best is None and kernel is not None:  # a recording of failures replays as one: a finished run
        console.print(f"no successful config in {len(res.history)} evaluations ({res.stop_reason})")
        errors = {_last_line(t) for t in res.history}
        console.print(f"run id: {res.run_id} (store {st.path})")
        evaluator.close()
        st.close()
        raise KerntuneError("nothing ran" + (f"; every config failed with: {next(iter(errors))}" if len(errors) == 1
                                             else f" ({len(errors)} different errors: `kerntune store export"
                                             f" {res.run_id} --csv FILE` lists them)"))
    if best is None:
        console.print(f"no successful config in {len(res.history)} evaluations ({res.stop_reason})")
    else:
        cfg = json.dumps({k: jsonable(v) for k, v in best.config.items()})
        console.print(f"best: {best.time_ms:.6g} ms after {len(res.history)} evaluations ({res.stop_reason})")
        print_unwrapped(f"config: {cfg}")
        for line in _rates(best, evaluator):
            console.print(line)
        if kernel is not None:
            dev = evaluator.device()
            ident = evaluator.describe()
            from kerntune.run.winner import compiler_stack, store_winner

            kept = store_winner(st, ident["source_hash"], "x".join(map(str, ident["shape"])), dev.get("name", ""),
                                compiler_stack(dev), best.config, best.time_ms,
                                res.run_id, res.history)
            if kept:  # the table holds another entry: said, not left for `cache export` to reveal
                err_console.print(f"[yellow]note:[/yellow] {escape(kept)}")
    console.print(f"run id: {res.run_id} (store {st.path})")
    evaluator.close()
    if not no_report and res.run_id is not None:
        write_after_run(st, res.run_id, report)
    st.close()


def _asks_model(strategy: str, llm: Optional[str]) -> bool:
    """Whether the run gets a model client: a spec is given and the strategy asks one."""
    return bool(llm) and strategy in LLM_STRATEGIES | MODEL_OPTIONAL


def _check_needs_model(strategy: str, llm: Optional[str]) -> None:
    """llm and llm-seeded do not start without a model (said before an evaluator starts)."""
    if strategy in LLM_STRATEGIES and not llm:
        raise KerntuneError(f"strategy {strategy} needs a model: pass --llm SPEC")


def _model_client(strategy: str, llm: Optional[str], base_url: Optional[str], transcript: Optional[Path],
                  timeout: float) -> Optional[LLMClient]:
    """The model a strategy asks (llm, llm-seeded: required; auto: when one is given), else None.  Its
    ``spec``, which the run stores, names its paths absolute: a resume from elsewhere finds them."""
    _check_needs_model(strategy, llm)
    if _asks_model(strategy, llm):
        client = LLMClient.from_spec(llm, base_url, transcript=transcript, timeout=timeout)
        client.spec = absolute_spec(llm) or ""
        return client
    return None


def _note_unused_model(strategy: str, given: dict) -> None:
    """``--llm``, ``--llm-base-url`` or ``--llm-transcript`` typed with a strategy that asks no model
    is said in one note (as compare says it); a value that came from $KERNTUNE_LLM is not."""
    from kerntune.strategies import ALIASES

    if ALIASES.get(strategy, strategy) in LLM_STRATEGIES | MODEL_OPTIONAL:
        return
    flags = [f"{flag} {value}" for flag, value in given.items() if value is not None and _typed(flag)]
    if flags:
        err_console.print(f"[yellow]note:[/yellow] {escape(' and '.join(flags))} {'is' if len(flags) == 1 else 'are'}"
                          f" not used by strategy {escape(strategy)}: it asks no model (auto, llm and llm-seeded do)")


def _note_other_device(evaluator) -> None:  # noqa: ANN001 - Evaluator
    """One note where --device names a known GPU other than the one the replayed recording names."""
    if not isinstance(evaluator, ReplayEvaluator) or not evaluator.device_info:
        return
    note = other_device_note(evaluator.recording.meta.get("device_name"), evaluator.device_info,
                             "the % of peak figures and a model's prompts")
    if note:
        err_console.print(f"[yellow]note:[/yellow] {escape(note)}")


def _refuse_kernel_only_flags(compile_timeout: float, gpus: str, retime: Optional[int],
                              ray_address: Optional[str]) -> None:
    """``--compile-timeout``, ``--gpus`` (without ``--ray-address``, where it is the number of actors that
    replay) and ``--retime`` above 0 with ``--replay``: they act on a kernel file only, and were accepted
    and ignored (the same output, no word), where ``--shape`` is refused.  Only a value the user typed:
    the defaults are no request, nor is ``--retime 0`` (a replay re-times nothing anyway)."""
    flags = []
    if _typed_value("compile_timeout", compile_timeout, 60.0):
        flags.append(f"--compile-timeout {compile_timeout:g}")
    if not ray_address and _typed_value("gpus", gpus, "all"):
        flags.append(f"--gpus {gpus}")
    if retime is not None and retime > 0:
        flags.append(f"--retime {retime}")
    if flags:
        named = " and ".join([", ".join(flags[:-1]), flags[-1]] if len(flags) > 1 else flags)
        raise KerntuneError(f"{named} {'acts' if len(flags) == 1 else 'act'} on a kernel file only:"
                            " a --replay recording is not compiled, measured or re-timed"
                            + (" (with --ray-address, --gpus is the number of Ray actors)"
                               if any(f.startswith("--gpus") for f in flags) else ""))


def _typed_value(name: str, value: object, default: object) -> bool:
    """Whether the parameter ``name`` was given on the command line (without a click context, as a
    direct call: whether it differs from its default)."""
    try:  # typer >= 0.16 carries its own copy of click
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - older typer
        from click import get_current_context
    ctx = get_current_context(silent=True)
    source = ctx.get_parameter_source(name) if ctx is not None else None
    return value != default if source is None else source.name == "COMMANDLINE"


def _typed(flag: str) -> bool:
    """Whether ``flag`` was given on the command line (not by its environment variable)."""
    try:  # typer >= 0.16 carries its own copy of click
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - older typer
        from click import get_current_context
    ctx = get_current_context(silent=True)
    source = ctx.get_parameter_source(flag.lstrip("-").replace("-", "_")) if ctx is not None else None
    return source is None or source.name == "COMMANDLINE"


#: A kernel file whose first this-many configs all fail with one and the same error is not tuned on:
#: the cause is the machine (no GPU, a missing package), not the configs.
GIVE_UP_AFTER = 8


def _give_up_on_one_failure(ctx) -> None:  # noqa: ANN001 - SearchContext
    """Stop a search whose first ``GIVE_UP_AFTER`` trials failed, all with the same error."""
    hist = ctx.history
    if len(hist) < GIVE_UP_AFTER or any(t.ok for t in hist):
        return
    errors = {(t.status.value, (t.error or "").strip()) for t in hist[:GIVE_UP_AFTER]}
    # Only errors raised by the code (a compile or a launch); a timeout or an invalid config reads the
    # same for every config without saying anything about the machine.
    if len(errors) == 1 and next(iter(errors))[0] in ("runtime_error", "compile_error") and next(iter(errors))[1]:
        status, error = next(iter(errors))
        last = _last_line(hist[0])
        no_gpu = ("not compiled with cuda", "no cuda gpus are available", "found no nvidia driver",
                  "cuda driver initialization failed", "0 active drivers")
        hint = " (no CUDA GPU here: tune a recording with --replay, or run on a GPU machine)" \
            if any(m in error.lower() for m in no_gpu) else ""
        raise BudgetExhausted(f"stopped: the first {GIVE_UP_AFTER} configs all failed the same way,"
                              f" {status}: {last}{hint}")


def _last_line(t) -> str:  # noqa: ANN001 - Trial
    """A failed trial's error as one line (its last: Python's exception line), else its status."""
    error = (t.error or "").strip()
    return error.splitlines()[-1] if error else t.status.value


def _same_shape(st, run_id: str, shape: str) -> None:  # noqa: ANN001
    """``--shape`` typed again on a resume must be the run's (compared as shapes: 64,64,64 is 64x64x64)."""
    from kerntune.evaluate.triton_backend.kernel_file import parse_shape

    stored = (st.get_run(run_id).evaluator or {}).get("shape")
    if stored is not None and list(parse_shape(shape)) != list(stored):
        raise KerntuneError(f"cannot resume {run_id}: it was started with --shape {'x'.join(map(str, stored))},"
                            f" not {shape}")


def _stored_target(st, run_id: str, shape: Optional[str],  # noqa: ANN001
                   ray_address: Optional[str]) -> tuple[Optional[Path], Optional[str], Optional[Path]]:
    """``tune --resume ID`` alone: the kernel file (or package adapter) and shape, or the recording,
    the run was started on."""
    from kerntune.evaluate.triton_backend.kernel_file import is_adapter_spec
    from kerntune.store.resume import check_kind

    run = st.get_run(run_id)
    check_kind(run, "tune")
    ev = run.evaluator or {}
    if ev.get("ray") and not ray_address:
        raise KerntuneError(f"cannot resume {run_id} alone: it ran on Ray actors ({ev['ray'].get('address')});"
                            " give --ray-address again (and the kernel file or recording)")
    if ev.get("kernel_file"):
        stored_shape = "x".join(map(str, ev.get("shape") or []))
        if shape is not None:
            _same_shape(st, run_id, shape)
        path = Path(ev["kernel_file"])
        if not (path.is_file() or is_adapter_spec(ev["kernel_file"])):
            raise KerntuneError(f"cannot resume {run_id}: its kernel file {path} is gone (give the kernel file again)")
        return path, stored_shape, None
    if ev.get("source"):
        path = Path(ev["source"])
        if not path.is_absolute():
            raise KerntuneError(f"cannot resume {run_id} alone: it names its recording by a relative path ({path});"
                                " give --replay FILE again")
        if not path.is_file():
            raise KerntuneError(f"cannot resume {run_id}: its recording {path} is gone (give --replay FILE again)")
        if ev.get("kernel_source_chars") or ev.get("device_info"):
            raise KerntuneError(f"cannot resume {run_id} alone: it was started with --source or --device; give"
                                f" --replay {path} and them again")
        return None, shape, path  # a --shape typed here is refused with the recording (_evaluator)
    raise KerntuneError(f"cannot resume {run_id} alone: the store does not say what it measured (give the kernel"
                        " file and --shape, or --replay FILE, again)")


def _resumed(st, run_id: str, evaluator, strategy: str | None, seed: int | None, budget: Budget,  # noqa: ANN001
             given_budget: tuple, options: dict) -> tuple[str, int, Budget, dict]:
    """The stored run's strategy, seed, budget and options, after checking that what was given
    now (kernel or recording, space, and any option typed again) matches what it was started with."""
    from kerntune.run.search import evaluator_identity
    from kerntune.store.resume import check_evaluator, check_kind, resumed_settings

    run = st.get_run(run_id)
    check_kind(run, "tune")
    check_evaluator(run, evaluator_identity(evaluator), evaluator.space.to_dict())
    strategy, seed, stored_budget, stored = resumed_settings(
        run, strategy, seed, dict(zip(("max_evals", "max_seconds", "target_ms"), given_budget)), options)
    return strategy or DEFAULT_STRATEGY, seed, Budget(**stored_budget) if stored_budget else budget, stored


def _confirm(evaluator, history, n: int, st=None, run_id: Optional[str] = None):  # noqa: ANN001, ANN202
    """Re-time the leaders beside the space's default, print what that found, and keep the winner in the
    run's summary (``kerntune.run.winner.WINNER``): the report names it, not the screening's fastest,
    which the runoff may have rejected.  Returns the winner's trial (None: no re-timed winner)."""
    from kerntune.evaluate.retime import confirm
    from kerntune.run.winner import baseline_name, confirmed_winner, record_winner

    shipped, info = evaluator.baseline() if hasattr(evaluator, "baseline") else (None, {})
    what = baseline_name(shipped)
    if shipped is not None:
        err_console.print(f"baseline: {json.dumps(shipped)} (launched by the package's own code"
                          + (f"; its first call took {info['autotune_s']:.1f} s" if info.get("autotune_s") else "")
                          + ")")
    found = confirm(evaluator, history, n_leaders=n, baseline=shipped or evaluator.space.default)
    if found.runoff is not None:
        r = found.runoff
        err_console.print(f"runoff: {len(r.get('screen') or {})} leaders screened, {len(r.get('rounds') or {})} "
                          f"contenders in up to {max((len(v) for v in (r.get('rounds') or {}).values()), default=0)}"
                          f" interleaved rounds of {r.get('cycles')} cycles"
                          + (f", {len(r['tie_windows'])} decided by windows" if r.get("tie_windows") else ""))
    for t in found.retimed:
        if t.ok:
            lo, hi = t.extra.get("ci_ms", (t.time_ms, t.time_ms))
            err_console.print(f"re-timed: {t.time_ms:.4g} ms [{lo:.4g}, {hi:.4g}] over {len(t.times_ms)} rounds"
                              f"{f' ({what})' if t is found.baseline else ''}")
    for note in found.notes:
        err_console.print(f"[yellow]note:[/yellow] {note}")
    if found.speedup is not None and found.pick is None:  # else the note gives the pick's figure: the baseline won
        s = found.speedup
        console.print(f"speedup over {what}: {s.median:.3f}x [{s.lo:.3f}, {s.hi:.3f}] "
                      f"({found.verdict}, {s.n} paired rounds)")
    if st is not None:
        record_winner(st, run_id, confirmed_winner(found, what))
    return found.winner


def _parse_gpus(text: str) -> int | None:
    """``all`` -> None (every visible GPU), else a positive count."""
    if text.strip().lower() == "all":
        return None
    try:
        n = int(text)
    except ValueError:
        raise KerntuneError(f"--gpus {text!r}: expected a number or 'all'") from None
    if n < 1:
        raise KerntuneError(f"--gpus must be at least 1, got {n}")
    return n


def _evaluator(kernel: Optional[Path], shape: Optional[str], replay: Optional[Path], compile_timeout: float,
               gpus: int | None = None, ray_address: str | None = None, source: Optional[Path] = None,
               device: Optional[str] = None):
    if kernel is not None and replay is not None:
        raise KerntuneError("give a kernel file (with --shape) or --replay RECORDING, not both")
    if replay is not None:
        if shape is not None:
            raise KerntuneError("--shape is for a kernel file; a recording's shape is the one it was recorded at")
        if not replay.exists():
            raise KerntuneError(f"file not found: {replay}")
        from kerntune.evaluate.replay import replay_extras

        kernel_source, device_info = replay_extras(source, device)  # a --device file that is not there: refused
        if ray_address:
            from kerntune.evaluate.ray_backend import RayEvaluator, ReplayFactory

            return RayEvaluator(ReplayFactory.of(replay), ray_address, num_actors=gpus)
        return ReplayEvaluator.from_file(replay, kernel_source=kernel_source, device_info=device_info)
    assert kernel is not None
    if kernel.is_file() and kernel.name.endswith((".json", ".json.gz", ".csv", ".csv.gz", ".t4")):
        # a recording given where the kernel goes is the likely slip
        raise KerntuneError(f"{kernel} is a recorded space, not a kernel: tune it with --replay {kernel}")
    if shape is None:
        raise KerntuneError("a kernel file needs --shape, e.g. --shape 4096x4096x4096")
    from kerntune.evaluate.triton_backend.kernel_file import parse_shape

    if ray_address:
        from kerntune.evaluate.ray_backend import RayEvaluator, TritonFactory

        return RayEvaluator(TritonFactory.of(kernel, parse_shape(shape), compile_timeout), ray_address,
                            num_actors=gpus)
    from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

    return TritonEvaluator(kernel, parse_shape(shape), compile_timeout=compile_timeout, gpus=gpus)


def _rates(best, evaluator) -> list[str]:  # noqa: ANN001 - Trial, Evaluator
    out = []
    facts = device_facts(evaluator.device().get("name", ""), evaluator.device())
    if "TFLOP/s" in best.extra:
        peak = facts.get("peak_fp16_tflops")
        share = f", {best.extra['TFLOP/s'] / peak:.0%} of the {peak} TFLOP/s fp16 peak" if peak else ""
        out.append(f"throughput: {best.extra['TFLOP/s']:.1f} TFLOP/s{share}")
    if "GB/s" in best.extra:
        bw = facts.get("bandwidth_gbs")
        share = f", {best.extra['GB/s'] / bw:.0%} of the {bw} GB/s memory bandwidth" if bw else ""
        out.append(f"bandwidth: {best.extra['GB/s']:.0f} GB/s{share}")
    recording = getattr(evaluator, "recording", None)
    if recording is not None and recording.ok_times and best.time_ms:
        # a replay knows the answer: say how far the search got, as compare does
        opt = recording.optimum.time_ms
        out.append(f"the recording's optimum: {opt:.6g} ms (this config {best.time_ms / opt:.3f}x of it)")
    return out
