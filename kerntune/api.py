"""The Python API: ``kerntune.tune(...)`` and ``kerntune.compare(...)``.

Why: a notebook or a script should not shell out to the CLI and parse its
tables.  These calls take what ``kerntune tune`` / ``kerntune compare`` take
and return typed results (dataclasses) instead of printing.  They are thin on
purpose: the search is :func:`kerntune.run.search.run_search` and the comparison
is :func:`kerntune.compare.harness.run_compare`, the very functions the CLI
calls, so a run started here is stored, resumed and reported exactly like
one started from the command line (same store, same run ids).
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from kerntune.budget_default import UNSET, Unset, default_evals
from kerntune.errors import KerntuneError, StoreError
from kerntune.store import Store
from kerntune.store.sqlite import new_run_id

PathLike = str | os.PathLike[str]
#: ``on_start(run_id, store_path)``: called once the run id exists, before any evaluation.
OnStart = Callable[[str, Path], None]


@dataclass
class TuneResult:
    """One search: the winner, its time, how many trials it took, and where it is stored."""

    run_id: str
    store: Path
    strategy: str
    seed: int
    winner: dict[str, Any] | None   # the best config found (None: no config ran successfully)
    time_ms: float | None           # its time (re-timed when ``retime`` confirmed it on real hardware)
    trials: int                     # evaluations made (stored trials of the run)
    stop_reason: str
    report: Path | None = None      # the HTML report, when one was written
    speedup: float | None = None    # over the default / the package's choice, when re-timed
    notes: list[str] = field(default_factory=list)


@dataclass
class StrategyScore:
    """One strategy of a comparison: its methodology score with the spread over repeats."""

    name: str
    score: float
    score_stderr: float | None            # None with one repeat
    score_ci95: tuple[float | None, float | None]
    best_over_opt: float                  # mean final best / recorded optimum
    best_over_opt_range: tuple[float, float]
    found_optimum: float                  # share of repeats that found the optimum
    evals_to_2pct: float | None
    evals_to_5pct: float | None
    repeats: int


@dataclass
class ComparisonResult:
    """Several strategies on one recorded space; ``details`` is the harness's full result
    (mean curves, LLM call counts), the same numbers ``compare --json`` writes."""

    run_id: str
    store: Path
    space: str
    budget: int
    repeats: int
    seed: int
    optimum_ms: float
    scores: dict[str, StrategyScore]
    report: Path | None = None
    details: Any = None

    @property
    def best(self) -> str:
        """The strategy with the highest score.  Raises where no score is defined (every successful
        config of the recording ties: NaN), rather than naming whichever strategy came first."""
        from kerntune.compare.metrics import UNDEFINED_SCORE, score_defined

        scored = [s for s in self.scores.values() if score_defined(s.score)]
        if not scored:
            raise KerntuneError(f"no strategy has a score: {UNDEFINED_SCORE}")
        return max(scored, key=lambda s: s.score).name


def _open_store(store: PathLike | None, resume: str | None = None) -> Store:
    """The store as the CLI opens it (see ``_store_path``)."""
    return Store(_store_path(store, resume))


def _store_path(store: PathLike | None, resume: str | None = None) -> Path:
    """Where the store is, checked without opening (or creating) it: ``KERNTUNE_STORE`` (an empty one
    meaning the default), a file this process may not write refused at once (SQLite fails only at the
    first write, mid-run), and for a resume a store that is not there refused instead of created empty."""
    path = Path(store) if store is not None else Path(os.environ.get("KERNTUNE_STORE") or ".kerntune/kerntune.db")
    if resume and not path.exists():
        raise StoreError(f"no store at {path} (resume continues a run stored there)")
    if path.is_file() and not os.access(path, os.W_OK):
        raise StoreError(f"cannot open store {path}: the store is read-only: check the permissions of {path}"
                         " and its directory (no write permission on the file)")
    return path


def _check_count(name: str, value: Any, low: int, high: int, unit: str = "", none: str = "") -> int | None:
    """A whole-number argument from ``low`` to ``high`` (``None`` too, where ``none`` says what it means).

    Why: ``budget=2.5``, ``budget="10"`` or ``repeats="2"`` ended in a TypeError deep inside a
    strategy or the metrics, after the store was opened; bool is an int to Python but never a
    count to a user.  Checked at the boundary, in one line that names the argument.
    """
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
        also = f", or None for {none}" if none else ""
        raise KerntuneError(f"{name} must be an integer from {low:,} to {high:,}{unit}{also}, got {value!r}")
    return int(value)


def _check_seconds(name: str, value: Any, high: float, optional: bool = True) -> float | None:
    """A positive, finite number of seconds (or milliseconds) at most ``high``; ``None`` where ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise KerntuneError(f"{name} must be a number above 0, got {value!r}")
    from kerntune.cli.common import check_number

    check_number(name, float(value), 0, high)
    return float(value)


def _check_path(name: str, value: Any, flags: bool = False) -> None:
    """An output path (``report``: also True / False) that can be written, checked before the run:
    ``report="/tmp"`` (a directory) raised IsADirectoryError only after the whole search had run."""
    if value is None or (flags and isinstance(value, bool)):
        return
    if not isinstance(value, (str, os.PathLike)):
        raise KerntuneError(f"{name} must be {'True, False or ' if flags else ''}a file path, got {value!r}")
    from kerntune.cli.common import check_output

    check_output(name, Path(value))


def _check_shape(shape: Any) -> tuple[int, ...] | None:
    """A kernel file's shape: ``"MxNxK"`` (read as ``--shape`` is) or a sequence of positive integers.

    Why: a tuple went through unchecked, so ``(2.5,)``, ``(-3,)`` or ``()`` ran a whole search at a
    shape ``--shape`` refuses (sizes must be positive whole numbers); checked before the store opens.
    """
    if shape is None:
        return None
    from kerntune.evaluate.triton_backend.kernel_file import parse_shape

    if isinstance(shape, str):
        return parse_shape(shape)
    if isinstance(shape, Sequence) and not isinstance(shape, (bytes, bytearray)) and len(shape) > 0 and all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) and d > 0 for d in shape):
        return tuple(int(d) for d in shape)
    raise KerntuneError(f"shape must be 'MxNxK' or a tuple of positive integers such as (4096, 4096), got {shape!r}")


def _check_gpus(gpus: Any) -> int | None:
    """How many visible GPUs get a benchmark worker, as ``--gpus`` takes it: a positive count, or
    ``"all"`` / None for every visible GPU (a count as text, ``"2"``, as the CLI reads it).

    Why: ``gpus="all"`` went straight to the evaluator and failed in a TypeError after the store was
    created; ``gpus=True`` ran on one GPU."""
    if gpus is None:
        return None
    value = gpus
    if isinstance(gpus, str):
        if gpus.strip().lower() == "all":
            return None
        try:
            value = int(gpus)
        except ValueError:
            value = gpus
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise KerntuneError(f"gpus must be a positive number of GPUs, or 'all' or None for every visible GPU,"
                            f" got {gpus!r}")
    return int(value)


def _check_resume_id(resume: Any) -> None:
    """``resume=""`` started a new run instead (as if no id were given); the CLI refuses it too."""
    if resume is not None and (not isinstance(resume, str) or not resume.strip()):
        raise KerntuneError(f"resume needs a run id (`kerntune store runs` lists them), got {resume!r}")


def _report(st: Store, run_id: str, report: bool | PathLike | None) -> Path | None:
    """The report written after a run (``report``: True the default path, a path, False or None none:
    None raised a TypeError after the whole run had been measured)."""
    if report is False or report is None:
        return None
    from kerntune.report import default_report_path, write_report

    target = default_report_path(st, run_id) if report is True else Path(report)
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(write_report(st, run_id, html=target).html)


def _evaluator(space: PathLike | None, kernel: PathLike | None, shape: tuple[int, ...] | None,
               compile_timeout: float, gpus: int | None, source: PathLike | None, device: str | None) -> Any:
    """A recorded space (replayed, no GPU) or a Triton kernel file at one shape (``_check_shape``'s)."""
    if space is None and kernel is None:
        raise KerntuneError("nothing to tune: give a recorded space (space=...) or a kernel file (kernel=..., shape=...)")
    if space is not None and kernel is not None:
        raise KerntuneError("give a recorded space (space=...) or a kernel file (kernel=..., shape=...), not both")
    if space is not None:
        from kerntune.evaluate import ReplayEvaluator
        from kerntune.evaluate.replay import replay_extras

        if not Path(space).exists():
            raise KerntuneError(f"file not found: {space}")
        kernel_source, device_info = replay_extras(source, device)
        return ReplayEvaluator.from_file(space, kernel_source=kernel_source, device_info=device_info)
    if source is not None or device is not None:
        raise KerntuneError("source and device describe a replayed space: use them with space=...")
    if shape is None:
        raise KerntuneError("a kernel file needs a shape, e.g. shape='4096x4096x4096'")
    from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

    return TritonEvaluator(Path(kernel), shape, compile_timeout=compile_timeout, gpus=gpus)  # type: ignore[arg-type]


def _client(spec: str | None, base_url: str | None, timeout: float, transcript: PathLike | None = None) -> Any:
    """The model's client; its ``spec``, which the run stores, names its paths absolute (a resume from
    another directory finds them)."""
    from kerntune.llm import LLMClient
    from kerntune.store.resume import absolute_spec

    client = LLMClient.from_spec(spec, base_url, timeout=timeout,
                                 **({"transcript": Path(transcript)} if transcript is not None else {}))
    client.spec = absolute_spec(spec) or ""
    return client


def tune(space: PathLike | None = None, *, kernel: PathLike | None = None, shape: str | tuple[int, ...] | None = None,
         strategy: str | None = None, budget: int | None | Unset = UNSET, seconds: float | None = None,
         target_ms: float | None = None, seed: int | None = None, store: PathLike | None = None, llm: str | None = None,
         llm_base_url: str | None = None, llm_timeout: float = 300.0, llm_transcript: PathLike | None = None,
         options: Mapping[str, Any] | None = None, retime: int = 16, compile_timeout: float = 60.0,
         gpus: int | str | None = None, source: PathLike | None = None, device: str | None = None,
         resume: str | None = None, report: bool | PathLike = True, on_start: OnStart | None = None,
         progress: Callable[[Any], None] | None = None) -> TuneResult:
    """Search one kernel's space with one strategy, like ``kerntune tune``.

    ``space`` is a recorded space (Kernel Tuner cache, T4 or kerntune table); or give
    ``kernel`` (a Triton kernel file) and ``shape``.  ``options`` are the strategy's
    ``-o`` options; ``llm`` a model spec (``replay:FILE``, ``openai:M``, ``local:``...).
    ``source`` / ``device`` describe a replayed space's kernel and GPU to a model, as
    ``--source`` / ``--device`` do.  ``strategy`` defaults to the CLI's default, ``seed`` to 0.
    ``resume`` continues a killed run by its id (with the same space or kernel); it keeps the
    run's own strategy, seed, budget, options and model (its ``llm_transcript`` appended to, its
    ``llm_base_url`` asked, unless another is given), and, like ``tune --resume``, refuses one given
    again that differs from the run's; a new run's ``llm_transcript`` must hold no model calls yet.
    ``budget`` defaults to 100 evaluations, or to no cap when ``seconds`` is given; ``budget=None`` is no
    cap.  ``shape`` is ``"MxNxK"`` or a tuple of positive integers; ``gpus`` a count, or ``"all"`` / None
    for every visible GPU.  Bad arguments raise one ``KerntuneError`` before the store is opened or
    anything is measured.
    """
    from kerntune.run.search import RunOptions, run_search
    from kerntune.strategies import DEFAULT_STRATEGY, LLM_STRATEGIES, MODEL_OPTIONAL, Budget, get_strategy
    from kerntune.strategies.base import MAX_EVALS, check_seed
    from kerntune.strategies.options import validate_options

    # Every argument's type and range first: one KerntuneError, before the store is opened.
    if strategy is not None and not isinstance(strategy, str):
        raise KerntuneError(f"strategy must be a strategy name such as 'gp', got {strategy!r}")
    if not isinstance(budget, Unset):
        budget = _check_count("budget", budget, 1, MAX_EVALS, " evaluations", none="no cap")
    seconds = _check_seconds("seconds", seconds, 1e9)
    target_ms = _check_seconds("target_ms", target_ms, float("inf"))
    if seed is not None:
        check_seed(seed)
    if options is not None and not (isinstance(options, Mapping) and all(isinstance(k, str) for k in options)):
        raise KerntuneError(f"options must be a dict of the strategy's options by name, e.g. {{'initial': 25}},"
                            f" got {options!r}")
    _check_count("retime", retime, 0, 1000, " leaders")
    _check_seconds("llm_timeout", llm_timeout, 86400, optional=False)
    _check_seconds("compile_timeout", compile_timeout, 86400, optional=False)
    _check_resume_id(resume)
    _check_path("report", report, flags=True)
    _check_path("llm_transcript", llm_transcript)
    dims, n_gpus = _check_shape(shape), _check_gpus(gpus)
    from kerntune.store.resume import keep_model_settings, resumed_base_url, resumed_model, resumed_transcript

    target = _store_path(store, resume)
    # A resume checks what is given against the stored run: its store is there, opening it creates nothing.
    # A new run's store is opened only after every check, so that a bad argument leaves none behind.
    st: Store | None = Store(target) if resume else None
    if st is not None and resume:  # "last" or a unique prefix, as the CLI and compare's harness take them
        resume = st.resolve_run_id(resume)
    try:
        if resume:  # the stored run's strategy, seed, budget and options, as `tune --resume` uses them
            strategy, seed, b, options = _resumed(st, resume, strategy, seed, budget, seconds, target_ms,
                                                  dict(options or {}))
            llm = resumed_model(st.get_run(resume), llm, bool(st.llm_exchanges(resume)), flag="llm")
            # the run's own transcript goes on where it stopped, as its model does; one given now wins
            llm_transcript = resumed_transcript(st.get_run(resume), llm_transcript)
            _check_path("llm_transcript", llm_transcript)
            llm_base_url = resumed_base_url(st.get_run(resume), llm_base_url, flag="llm_base_url")
        else:
            strategy, seed = strategy or DEFAULT_STRATEGY, seed if seed is not None else 0
            b = Budget(max_evals=default_evals(budget, seconds), max_seconds=seconds, target_ms=target_ms)
        get_strategy(strategy)
        opts = validate_options(strategy, dict(options or {}), with_model=bool(llm))
        check_seed(seed)
        client = None
        if strategy in LLM_STRATEGIES and not llm:
            raise KerntuneError(f"strategy {strategy} needs a model: pass llm='SPEC'")
        if llm and strategy in LLM_STRATEGIES | MODEL_OPTIONAL:
            if not resume:  # a new run's transcript holds no other run's calls
                from kerntune.run.llm_resume import check_new_transcript

                check_new_transcript(llm_transcript, llm, flag="llm_transcript")
            client = _client(llm, llm_base_url, llm_timeout, llm_transcript)
        evaluator = _evaluator(space, kernel, dims, compile_timeout, n_gpus, source, device)
        run_id = resume or new_run_id()
        try:
            if st is None:
                st = Store(target)
                if client is not None:  # kept with the run's model spec: resume=... appends to it, asks there
                    st.on_run_created = lambda rid, kind, parent: (
                        keep_model_settings(st, rid, client.transcript, llm_base_url) if rid == run_id else None)
            if resume:  # the same kernel or recording, and the same space, as `tune --resume` checks
                from kerntune.run.search import evaluator_identity
                from kerntune.store.resume import check_evaluator

                check_evaluator(st.get_run(resume), evaluator_identity(evaluator), evaluator.space.to_dict())
            if on_start is not None:
                on_start(run_id, st.path)
            shipped = evaluator.baseline()[0] if hasattr(evaluator, "baseline") else None
            run_options = RunOptions(store=st, run_id=run_id, progress=progress, llm=client,
                                     strategy_options=opts, warm_start=[shipped] if shipped else ())
            res = run_search(evaluator, strategy, b, seed, run_options)
            best, speedup, notes = res.best, None, list(res.notes)
            if best is not None and retime > 0 and getattr(evaluator, "can_retime", hasattr(evaluator, "retime")):
                from kerntune.evaluate.retime import confirm

                found = confirm(evaluator, res.history, n_leaders=retime, baseline=shipped or evaluator.space.default)
                best = found.winner or best
                # the winner's speedup over the baseline; none where the baseline stayed the winner (the
                # search's pick re-timed slower: ``found.pick``, its figure in the notes), as `tune` prints it
                speedup = found.speedup.median if found.speedup is not None and found.pick is None else None
                notes += found.notes  # what `tune` prints as notes: a failed re-time, no speedup
                from kerntune.run.winner import baseline_name, confirmed_winner, record_winner

                # kept with the run, as `tune` keeps it: the report names it, not the screening's fastest
                record_winner(st, res.run_id, confirmed_winner(
                    found, baseline_name(shipped)))
            if best is not None and kernel is not None:  # what the decorator and `tune` look up later
                dev, ident = evaluator.device(), evaluator.describe()
                from kerntune.run.winner import compiler_stack, store_winner

                kept = store_winner(st, ident["source_hash"], "x".join(map(str, ident["shape"])),
                                    dev.get("name", ""), compiler_stack(dev),
                                    best.config, best.time_ms, res.run_id, res.history)
                notes += [kept] if kept else []  # the table keeps another entry: said, as `tune` says it
        finally:
            evaluator.close()  # worker processes end even when the search raised
        from kerntune.space import jsonable

        return TuneResult(
            run_id=res.run_id or run_id, store=st.path, strategy=strategy, seed=seed,
            winner={k: jsonable(v) for k, v in best.config.items()} if best is not None else None,
            time_ms=best.time_ms if best is not None else None, trials=len(res.history),
            stop_reason=res.stop_reason, report=_report(st, run_id, report), speedup=speedup, notes=notes)
    finally:
        if st is not None:
            st.close()


def _resumed(st: Store, run_id: str, strategy: str | None, seed: int | None, budget: int | None | Unset,
             seconds: float | None, target_ms: float | None, options: dict[str, Any]) -> tuple[str, int, Any, dict]:
    """The stored run's strategy, seed, budget and options, after checking that any of them given
    again is the run's own, as ``tune --resume`` does (``kerntune.store.resume.resumed_settings``).

    Why: ``tune(resume=ID, strategy="gp", budget=50)`` went on with the run's random search and
    its budget without a word, where the CLI refuses a differing option in one line.
    """
    from kerntune.store.resume import check_kind, resumed_settings
    from kerntune.strategies import DEFAULT_STRATEGY, Budget

    run = st.get_run(run_id)
    check_kind(run, "tune")
    stored_max = ((run.options or {}).get("budget") or {}).get("max_evals")
    if budget is None and stored_max is not None:  # None given is "no cap", not "left out"
        raise StoreError(f"cannot resume {run_id}: it was started with budget {stored_max}, not None"
                         " (no cap) (leave budget out to keep the run's own, or start a new run)")
    given = {"max_evals": None if isinstance(budget, Unset) else budget, "max_seconds": seconds,
             "target_ms": target_ms}
    strategy, seed, stored_budget, stored = resumed_settings(run, strategy, seed, given, options, cli=False)
    b = Budget(**stored_budget) if stored_budget else Budget(max_evals=default_evals(budget, seconds),
                                                             max_seconds=seconds, target_ms=target_ms)
    return strategy or DEFAULT_STRATEGY, seed, b, stored


def _strategy_names(strategies: Any) -> list[str]:
    """``strategies`` as a list of names: a list or tuple of names, or one string, which is one name
    or several comma-separated (as ``--strategies`` takes them).

    Why: ``list("random")`` is its letters, so ``strategies="random"`` failed as "unknown strategy 'r'".
    """
    if isinstance(strategies, str):
        names = [s.strip() for s in strategies.split(",") if s.strip()]
    elif isinstance(strategies, Sequence) and not isinstance(strategies, (bytes, bytearray)) \
            and all(isinstance(s, str) for s in strategies):
        names = list(strategies)
    else:
        raise KerntuneError("strategies must be a strategy name, comma-separated names or a list of names,"
                            f" e.g. ['gp', 'random'], got {strategies!r}")
    if not names:
        raise KerntuneError("strategies is empty")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise KerntuneError(f"strategies names {dupes[0]} twice (each strategy runs once, with `repeats` seeds)")
    return names


def _per_strategy_options(options: Any) -> dict[str, dict[str, Any]]:
    """``compare``'s options: strategy name -> that strategy's options.

    Why: flat options (``{"initial": 25}``, ``tune``'s form) ended in "'int' object is not iterable".
    """
    if options is None:
        return {}
    example = "e.g. {'llm': {'initial': 25}}"
    if not isinstance(options, Mapping):
        raise KerntuneError(f"options must map a strategy name to its options, {example}, got {options!r}")
    for name, value in options.items():
        if not isinstance(name, str) or not isinstance(value, Mapping):
            raise KerntuneError(f"options must map a strategy name to its options, {example}; got {name!r}: {value!r}"
                                " (flat options are tune()'s form: nest them under the strategy's name)")
    return {k: dict(v) for k, v in options.items()}


def compare(space: PathLike | None = None, *, strategies: str | Sequence[str] | None = None,
            budget: int | None = None, repeats: int | None = None, seed: int | None = None,
            store: PathLike | None = None,
            llm: str | None = None, llm_base_url: str | None = None, llm_timeout: float = 300.0,
            options: Mapping[str, Mapping[str, Any]] | None = None, source: PathLike | None = None,
            device: str | None = None, resume: str | None = None, report: bool | PathLike = True,
            on_start: OnStart | None = None, progress: Callable[[str, int, int], None] | None = None) -> ComparisonResult:
    """Compare strategies on a recorded space, like ``kerntune compare``.

    ``strategies`` is a list of names, or one string (a name, or comma-separated names).
    ``options`` maps a strategy name to its options (``{"llm": {"initial": 25}}``).
    ``progress(label, done, total)`` is called after each repeat; ``resume`` continues a
    killed comparison by its id with its stored settings, and, like ``compare --resume``, refuses
    any given again that differs.  Defaults: ``("auto", "gp", "genetic", "random")``, budget 100,
    10 repeats, seed 0.  Bad arguments raise one ``KerntuneError`` before the store is opened or
    anything is measured.
    """
    from kerntune.compare.harness import run_compare
    from kerntune.strategies.base import MAX_EVALS, check_seed

    names = _strategy_names(strategies) if strategies is not None else None
    budget = _check_count("budget", budget, 1, MAX_EVALS, " evaluations per repeat", none="the default")
    repeats = _check_count("repeats", repeats, 1, 10_000, none="the default")
    per_strategy = _per_strategy_options(options)
    _check_seconds("llm_timeout", llm_timeout, 86400, optional=False)
    _check_resume_id(resume)
    _check_path("report", report, flags=True)
    if not resume:
        names = names or ["auto", "gp", "genetic", "random"]
        budget, repeats, seed = budget or 100, repeats or 10, seed if seed is not None else 0
        check_seed(seed, repeats)
    st = _open_store(store, resume)
    try:
        if resume:  # "last" or a unique prefix, as `compare --resume` takes them
            resume = st.resolve_run_id(resume)
        if resume:  # what is given again must be the comparison's own, as `compare --resume` checks
            from kerntune.store.resume import check_compare_same

            check_compare_same(st.get_run(resume), space, {"strategies": names, "budget": budget,
                                                           "repeats": repeats, "seed": seed}, per_strategy, prefix="")
        if on_start is not None:
            if resume:
                on_start(resume, st.path)
            else:
                st.on_run_created = lambda rid, kind, parent: (on_start(rid, st.path)
                                                               if kind == "compare" and parent is None else None)
        res = run_compare(str(space) if space is not None else None, names or [], budget or 0, repeats or 0, seed or 0,
                          st, resume=resume,
                          progress=progress, llm_spec=llm, llm_base_url=llm_base_url, llm_timeout=llm_timeout,
                          strategy_options=per_strategy,
                          kernel_source_path=str(source) if source is not None else None, device=device)
        scores = {name: StrategyScore(
            name=name, score=s.score, score_stderr=_finite(s.score_stderr),
            score_ci95=(_finite(s.score_ci95[0]), _finite(s.score_ci95[1])), best_over_opt=s.best_over_opt,
            best_over_opt_range=s.best_over_opt_spread, found_optimum=s.found_optimum,
            evals_to_2pct=s.evals_to_2pct, evals_to_5pct=s.evals_to_5pct, repeats=s.repeats)
            for name, s in res.strategies.items()}
        return ComparisonResult(run_id=res.run_id, store=st.path, space=res.space, budget=res.budget,
                                repeats=res.repeats, seed=res.seed, optimum_ms=res.optimum_ms, scores=scores,
                                report=_report(st, res.run_id, report), details=res)
    finally:
        st.on_run_created = None
        st.close()


def _finite(x: float) -> float | None:
    import math

    return float(x) if math.isfinite(x) else None
