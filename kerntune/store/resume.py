"""What a resumed run must share with the run it continues.

Resume replays a deterministic search and answers the configs the store already
holds from the store.  That is only right when the search is the same: against
another recording it silently mixed two recordings in one run (exit 0), with other
parameters it crashed, with other options it took another path.  These checks run
before anything is measured and refuse with one line that says what differs.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any, Mapping

from kerntune.errors import StoreError
from kerntune.store.sqlite import RunRecord, Store

#: Identity keys that name *what* is measured; paths, Ray addresses and test delays may change.  Each is
#: compared where both runs have it (``kernel_source_hash``: a replay's --source, where the evaluator keeps one).
_IDENTITY_KEYS = ("evaluator", "kernel_name", "shape", "source_hash", "recording_hash", "problem_size")

#: The kind of a ``tune --shapes`` parent run in the store; its children are ``tune`` runs.  Kept here,
#: beneath the run layer, so that the store and the report name it without importing ``run.shapes``.
SHAPES_PARENT_KIND = "shapes"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def check_kind(run: RunRecord, kind: str) -> None:
    """A tune cannot continue a comparison and the other way round."""
    if run.kind == kind == "tune" and run.parent_id is not None:
        # one shape of a `tune --shapes` run: resumed alone it would leave its parent's budget and table
        raise StoreError(f"run {run.id} is one shape of the --shapes run {run.parent_id}: continue that with"
                         f" `kerntune tune --resume {run.parent_id}`")
    if run.kind == kind:
        return
    if run.kind == "compare-child":
        raise StoreError(f"run {run.id} is one repeat of comparison {run.parent_id}: continue that with"
                         f" `kerntune compare --resume {run.parent_id}`")
    command = "tune" if run.kind == SHAPES_PARENT_KIND else run.kind  # a `tune --shapes` run's parent
    raise StoreError(f"run {run.id} is a {run.kind} run, not a {kind} run: continue it with"
                     f" `kerntune {command} --resume {run.id}`")


def check_same(run_id: str, what: str, stored: Any, given: Any) -> None:
    """Refuse a resume where an option given now differs from the one the run was started with."""
    if given is not None and stored != given:
        was = f"with {what} {_short(stored)}, not" if stored is not None else f"without {what}, not with"
        raise StoreError(f"cannot resume {run_id}: it was started {was} {_short(given)}"
                         f" (leave {what} out to keep the run's own, or start a new run)")


def check_evaluator(run: RunRecord, identity: Mapping[str, Any], space: Mapping[str, Any] | None) -> None:
    """The same kernel (or recording) and the same space as the stored run."""
    stored = run.evaluator or {}
    for key in _IDENTITY_KEYS:
        if key in stored and key in identity and stored[key] != identity[key]:
            raise StoreError(f"cannot resume {run.id}: it measured {key} {_short(stored[key])}, this one is"
                             f" {_short(identity[key])} (resume against the same kernel or recording)")
    for key, what in (("device_info", "the device (--device)"), ("kernel_source_chars", "the kernel source (--source)")):
        # What a replay shows a model besides the recording: another one takes the search off its stored path.
        # Both absent from an older store's run (none was kept) and from this one read as "none given".
        if stored.get(key) != identity.get(key):
            was = f"with {what} {_short(stored[key])}" if stored.get(key) is not None else f"without {what}"
            now = f"this one has {_short(identity[key])}" if identity.get(key) is not None else "this one has none"
            raise StoreError(f"cannot resume {run.id}: it was started {was}, {now} (give the run's own again)")
    if "kernel_source_hash" in stored and stored["kernel_source_hash"] != identity.get("kernel_source_hash"):
        raise StoreError(f"cannot resume {run.id}: it was started with another kernel source (--source) of the same"
                         " length (give the run's own again)")
    if "recording_hash" not in stored and stored.get("source") and identity.get("source") \
            and stored["source"] != identity["source"]:
        raise StoreError(f"cannot resume {run.id}: it replayed {stored['source']}, not {identity['source']}")
    if run.space is not None and space is not None and run.space != json.loads(json.dumps(dict(space))):
        raise StoreError(f"cannot resume {run.id}: its search space differs from this one"
                         " (other parameters, values or constraints)")


#: Device names that say nothing (an evaluator's default, a failed GPU query): never compared.
_UNKNOWN_DEVICES = ("", "unknown", "unknown gpu")


def _known_device(name: Any) -> bool:
    return isinstance(name, str) and name.strip().lower() not in _UNKNOWN_DEVICES


def check_device(store: Store, run: RunRecord, device: Any) -> None:
    """The same GPU as the stored run, where both names are known.  Why: a run resumed on another
    GPU answered its stored configs with the first GPU's timings and measured the rest on this one,
    one winner from two GPUs without a word.  (A replay's device is its recording's, checked with it.)
    The run's device is read here: ``RunRecord`` does not carry it (this module is the store's own).
    A ``tune --shapes`` parent measures nothing itself: its device is that of its shapes' runs (a
    resume between two shapes made the next shapes' runs on another GPU, one table from two GPUs)."""
    if run.kind == SHAPES_PARENT_KIND:
        rows = store._read("SELECT device FROM runs WHERE parent_id=? ORDER BY created, id", (run.id,))
    else:
        rows = store._read("SELECT device FROM runs WHERE id=?", (run.id,))
    stored = next((r["device"] for r in rows if _known_device(r["device"])), None)
    if _known_device(stored) and _known_device(device) and stored != device:
        raise StoreError(f"cannot resume {run.id}: it measured on {stored}, this one measures on {device}"
                         " (resume it on that GPU, or start a new run)")


def asks_a_model(run: RunRecord) -> bool:
    """Whether a strategy of the run (a ``tune`` run's, or any of a comparison's) would ask a model given one."""
    from kerntune.strategies import ALIASES, LLM_STRATEGIES, MODEL_OPTIONAL

    names = (run.options or {}).get("strategies") if run.kind == "compare" else [run.strategy]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return True  # the store does not say: as if it did
    return any(ALIASES.get(n, n) in LLM_STRATEGIES | MODEL_OPTIONAL for n in names)


def resumed_model(run: RunRecord, given: str | None, asked_a_model: bool, flag: str = "--llm") -> str | None:
    """The model spec a resumed ``tune`` run asks: the one given now, which must be the run's own, or
    the run's own when none is given.  Without it a run that asked a model went on without one and
    left its stored path (the store then held more trials than the budget).  A run stored before the
    spec was kept says only whether it asked one (``asked_a_model``: it has stored exchanges).

    A run stored as started without one (``"llm": null``) refuses a model given now where one of its
    strategies would ask it: the resumed trials would be model-guided while the run says no model was
    asked, and its scores would average both kinds.  ``$KERNTUNE_LLM`` gives one unasked, hence the hint."""
    from kerntune.llm.secrets import MASK, redact

    options = run.options or {}
    stored = options.get("llm")
    if "llm" in options and stored is None and given is not None and asks_a_model(run):
        env = " (unset $KERNTUNE_LLM if it comes from there)" if flag == "--llm" else ""
        raise StoreError(f"cannot resume {run.id}: it was started without a model, not with {flag}"
                         f" {_short(redact(given))}; resume it without {flag}{env}, or start a new run to use one")
    if stored is None or MASK in stored:
        if given is None and (stored is not None or asked_a_model):
            raise StoreError(f"cannot resume {run.id}: it asked a model whose spec the store does not keep"
                             f" in full; give {flag} again")
        return given
    # compared with their paths absolute: a run stores its spec so (absolute_spec), typed relative here
    check_same(run.id, flag, absolute_spec(stored), absolute_spec(given))
    return given if given is not None else stored


def absolute_spec(spec: str | None) -> str | None:
    """A model spec with the paths it names made absolute (``files:DIR``, ``replay:FILE``, also in a
    ``replay:FILE|SPEC`` chain, ``local:PATH``), as a run stores it.  Why: stored as typed, a resume
    from another directory resolved a relative one there: ``files:`` waited on a folder nobody
    answered, ``replay:`` found no transcript."""
    if not spec:
        return spec
    kind, sep, arg = spec.partition(":")
    if kind == "files" and sep:
        return f"files:{Path(arg or 'llm-exchanges').resolve()}"  # the folder FilesProvider takes for none
    if kind == "replay" and sep and arg:
        path, bar, then = arg.partition("|")
        return f"replay:{Path(path).resolve() if path else path}{bar}{absolute_spec(then) if bar else ''}"
    if kind == "local" and sep and arg:
        return f"local:{Path(arg).expanduser().resolve()}"
    return spec


#: The key of a ``tune`` run's stored options that keeps its ``--llm-transcript`` (an absolute path),
#: beside the model's spec (``"llm"``).
TRANSCRIPT = "llm_transcript"
#: The key that keeps its ``--llm-base-url`` (``kept_base_url``: never a password or a key).
BASE_URL = "llm_base_url"


def keep_model_settings(store: Store, run_id: str, transcript: str | Path | None,
                        base_url: str | None = None) -> None:
    """Keep the run's transcript path and model base URL with its model settings, right after the run
    is created.  Why: ``tune --resume`` kept the spec but wrote the transcript only when
    ``--llm-transcript`` was typed again, so the README's kill-and-resume transcript lacked every later
    answer and replayed another search; without ``--llm-base-url`` typed again it asked the provider's
    default endpoint, not the run's.  (``Store`` has no call that updates a run's options: this module
    is the store's own.)"""
    if transcript is None and not base_url:
        return
    options = dict(store.get_run(run_id).options or {})
    if transcript is not None:
        options[TRANSCRIPT] = str(Path(transcript).resolve())
    if base_url:
        options[BASE_URL] = kept_base_url(base_url)
    store._write("UPDATE runs SET options_json=? WHERE id=?", (json.dumps(options), run_id))


def kept_base_url(url: str | None) -> str | None:
    """A base URL as the store keeps it: a user name and password, or a query (which may carry a key),
    replaced by the mask, and any known secret redacted.  A resume then asks for it again
    (``resumed_base_url``) rather than store a credential."""
    from kerntune.llm.secrets import MASK, redact

    if not url:
        return None
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.username is not None or parts.password is not None:
            parts = parts._replace(netloc=f"{MASK}@{parts.netloc.rpartition('@')[2]}")
        if parts.query:
            parts = parts._replace(query=MASK)
        url = urllib.parse.urlunsplit(parts)
    except ValueError:  # not a URL urllib can read (a bad port, an unclosed IPv6 bracket): kept by none
        return MASK
    return redact(url)


def resumed_base_url(run: RunRecord, given: str | None, flag: str = "--llm-base-url") -> str | None:
    """The base URL a resumed run's model is asked at: the one given now, else the run's own (None:
    the provider's default, as the run had).  One stored with its credentials masked is refused."""
    from kerntune.llm.secrets import MASK

    if given is not None:
        return given
    stored = (run.options or {}).get(BASE_URL)
    if not isinstance(stored, str) or not stored:
        return None
    if MASK in stored:
        raise StoreError(f"cannot resume {run.id}: its model's base URL held credentials, which the store does"
                         f" not keep; give {flag} again")
    return stored


def resumed_transcript(run: RunRecord, given: str | Path | None) -> Path | None:
    """The transcript a resumed run appends to: the one given now, else the run's own (None: none)."""
    if given is not None:
        return Path(given)
    stored = (run.options or {}).get(TRANSCRIPT)
    return Path(stored) if isinstance(stored, str) and stored else None


def check_compare_same(run: RunRecord, space: Any, given: Mapping[str, Any],
                       per_strategy: Mapping[str, Mapping[str, Any]], prefix: str = "--") -> None:
    """Anything given again on a comparison's resume (``space``; ``strategies``, ``budget``, ``repeats``,
    ``seed`` in ``given``, None where left out; per-strategy options) must be what it was started with.
    ``prefix``: how the names read to the caller (``--budget`` on the command line, ``budget`` in Python)."""
    check_kind(run, "compare")
    opts = run.options or {}
    if space is not None and Path(opts.get("space", "")).resolve() != Path(space).resolve():
        check_same(run.id, f"{prefix}space", opts.get("space"), str(space))
    for key, value in given.items():
        check_same(run.id, f"{prefix}{key}", opts.get(key), value)
    stored = opts.get("strategy_options") or {}
    for strat, options in per_strategy.items():
        for name, value in options.items():
            what = f"-o {strat}.{name}" if prefix else f"options[{strat!r}][{name!r}]"
            check_same(run.id, what, (stored.get(strat) or {}).get(name), value)


#: A stored budget's fields and how a caller names them: on the command line, in Python.
_BUDGET_NAMES = {"max_evals": ("--budget", "budget"), "max_seconds": ("--seconds", "seconds"),
                 "target_ms": ("--target-ms", "target_ms")}


def plain(value: Any) -> Any:
    """A value as the store keeps it (JSON: a tuple reads back as a list), to compare with a stored one."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return value


def resumed_settings(run: RunRecord, strategy: str | None, seed: int | None, budget: Mapping[str, Any],
                     options: Mapping[str, Any], cli: bool = True) -> tuple[str | None, int, dict, dict]:
    """A ``tune`` run's strategy, seed, stored budget and options, after checking that each given again
    (``budget``: ``max_evals`` / ``max_seconds`` / ``target_ms``, None where left out) is the run's own.
    ``tune --resume`` and ``kerntune.tune(resume=...)`` both use it; ``cli`` names the settings as the
    command line does (``--budget``, ``-o name``), else as the Python arguments (``budget``, ``options``).
    The callers have checked that the run is a ``tune`` run (``check_kind``) before anything else."""
    prefix = "--" if cli else ""
    check_same(run.id, f"{prefix}strategy", run.strategy, strategy)
    check_same(run.id, f"{prefix}seed", run.seed, seed)
    stored_budget = (run.options or {}).get("budget") or {}
    for key, value in budget.items():
        check_same(run.id, _BUDGET_NAMES[key][0 if cli else 1], stored_budget.get(key), value)
    # llm, llm_transcript, llm_base_url: the model's (resumed_model, resumed_transcript, resumed_base_url);
    # resume_path: what run_search keeps of the run's path (none is a strategy option)
    stored = {k: v for k, v in (run.options or {}).items()
              if k not in ("budget", "llm", TRANSCRIPT, BASE_URL, "resume_path")}
    for name, value in options.items():
        check_same(run.id, f"-o {name}" if cli else f"options[{name!r}]", stored.get(name), plain(value))
    return run.strategy, run.seed if run.seed is not None else 0, stored_budget, stored
