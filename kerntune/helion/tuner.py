"""kerntune as Helion's autotuner: ``@helion.kernel(autotuner_fn=kerntune.helion.autotuner(...))``.

Helion calls ``autotuner_fn(bound_kernel, args, **kwargs)`` and then ``.autotune()`` on
what it returns.  The object returned here is a subclass of Helion's own
``PopulationBasedSearch``, so everything that makes a measurement count in Helion is
Helion's: the baseline run and the accuracy check against it, the parallel precompile
in forked processes with its compile timeout, the benchmark subprocess, ``do_bench``
timings, the re-benchmark of the finalists, the autotune log and the cache layer.  Only
the choice of *which* configs to measure is kerntune's: the ConfigSpec's flat fragments
become a kerntune Space (``kerntune.helion.space``), a kerntune strategy runs on it through
:class:`HelionEvaluator`, and its ``final_top_k`` best distinct configs are re-timed by
Helion before the winner is returned: by default Helion's ``rebenchmark`` with its own
defaults (each finalist alone in the benchmark subprocess, about 200 ms each: the ending the
H100 head-to-head in ``benchmarks/results/helion_h100`` was measured with); with
``helion_final=True`` by the ending Helion's own searches have (``_finalize``:
``final_rebenchmark_best``, each finalist timed by ``do_bench`` at a 5 s target, one after
another), which costs about 5 s a finalist more.

Helion is imported only when a kernel is tuned, so ``import kerntune.helion`` works
without it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kerntune.helion.evaluator import HelionEvaluator, _nothing_passed
from kerntune.helion.space import Frag, HelionLayout, build_space, helion_hints
from kerntune.space import Config, jsonable

#: Helion's supported release: see README's "Helion" section for why 1.5.x is not.
HELION_VERSION = "1.4.0"


# -- reading Helion's ConfigGeneration ---------------------------------------------------------
def _frag_of(fragment: Any, key: str, slot: int, sequence: bool, default: Any, size_hint: int | None = None) -> Frag:
    from helion.autotuner import config_fragment as cf

    common = {"key": key, "slot": slot, "sequence": sequence, "default": default, "size_hint": size_hint}
    if isinstance(fragment, cf.ListOf):
        inner = _frag_of(fragment.inner, key, 0, False, None)
        return Frag(kind="list", length=int(fragment.length), inner=inner, **common)
    if isinstance(fragment, cf.PermutationFragment):
        return Frag(kind="perm", length=int(fragment.length), **common)
    if isinstance(fragment, cf.NumThreadsFragment):
        high = int(fragment.high)
        return Frag(kind="enum", choices=(0, *(2**k for k in range(high.bit_length()))), **common)
    if isinstance(fragment, cf.PowerOfTwoFragment):
        return Frag(kind="pow2", low=int(fragment.low), high=int(fragment.high),
                    block_size=fragment.category() == cf.Category.BLOCK_SIZE, **common)
    if isinstance(fragment, cf.BaseIntegerFragment):
        return Frag(kind="int", low=int(fragment.low), high=int(fragment.high), **common)
    if isinstance(fragment, cf.EnumFragment):
        choices = fragment.search_choices if fragment.search_choices is not None else fragment.choices
        return Frag(kind="enum", choices=tuple(choices), **common)
    if isinstance(fragment, cf.BooleanFragment):
        return Frag(kind="bool", **common)
    # A fragment kind kerntune does not know (a newer Helion, e.g. a CuTe-only one): keep Helion's default.
    return Frag(kind="const", **common)


def describe_fragments(config_gen: Any) -> list[Frag]:
    """Read ``config_gen.flat_spec`` into :class:`Frag` descriptions, one per flat slot."""
    spec = config_gen.config_spec
    acf = getattr(config_gen, "_advanced_controls_files", None)
    layout = spec.flat_key_layout(advanced_controls_files=acf)
    fields = spec._flat_fields()
    default_flat = config_gen.default_flat()
    overridden = set(getattr(config_gen, "overridden_flat_indices", ()) or ())
    frags: list[Frag] = []
    index = 0
    for key, count, is_sequence in layout:
        items: list[Any] = []
        if is_sequence:
            try:
                items = list(fields.get(key, []))
            except TypeError:
                items = []
        for slot in range(count):
            fragment = config_gen.flat_spec[index]
            hint = getattr(items[slot], "size_hint", None) if slot < len(items) else None
            frag = _frag_of(fragment, key, slot, is_sequence, default_flat[index],
                            int(hint) if isinstance(hint, int) else None)
            if index in overridden:  # autotune_config_overrides freeze this slot
                frag = Frag(key=key, kind="const", slot=slot, sequence=is_sequence, default=default_flat[index])
            frags.append(frag)
            index += 1
    if index != len(config_gen.flat_spec):
        raise RuntimeError(f"flat_key_layout covers {index} slots, flat_spec has {len(config_gen.flat_spec)}")
    return frags


# -- prompts ---------------------------------------------------------------------------------------
def device_facts() -> dict[str, Any]:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:  # pragma: no cover - Helion needs Triton
        triton_version = None
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"name": p.name, "sms": p.multi_processor_count, "memory_gb": round(p.total_memory / 2**30, 1),
            "max_smem_per_block_kb": getattr(p, "shared_memory_per_block_optin", 0) // 1024,
            "registers_per_sm": getattr(p, "regs_per_multiprocessor", None),
            "l2_mb": getattr(p, "L2_cache_size", 0) // 2**20, "torch": torch.__version__, "triton": triton_version}


def helion_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("helion")
    except PackageNotFoundError:
        return "unknown"


def _workload(search: Any, layout: HelionLayout) -> dict[str, Any]:
    """What the prompt says about the job.  Nothing run-dependent (budget, clock) goes in, so the
    prompt built from a dumped Space on another machine is the prompt of the run."""
    import torch

    kernel = getattr(search.kernel, "kernel", None)
    name = getattr(kernel, "name", "") or getattr(getattr(kernel, "fn", None), "__name__", "helion_kernel")
    try:
        source = kernel.kernel_source() if kernel is not None else ""
    except (OSError, TypeError, AttributeError):
        source = ""
    tensors = [a for a in search.args if isinstance(a, torch.Tensor)]
    shapes = ", ".join("x".join(map(str, t.shape)) for t in tensors)
    return {
        "kernel_name": name,
        "problem_size": shapes,
        "dtypes": ", ".join(sorted({str(t.dtype).replace("torch.", "") for t in tensors})),
        "description": f"a Helion {helion_version()} kernel (compiled to Triton); the configuration is Helion's "
                       "ConfigSpec, one parameter per list element",
        "source": source,
        "hints": helion_hints(layout, getattr(search.settings, "autotune_compile_timeout", None)),
    }


def _search_class() -> type:
    from helion.autotuner.base_search import PopulationBasedSearch

    class KerntuneSearch(PopulationBasedSearch):
        """Helion's PopulationBasedSearch whose configs are chosen by a kerntune strategy."""

        def __init__(self, kernel: Any, args: Sequence[object], *, strategy: str = "bayes", llm: Any = None,
                     max_evals: int | None = None, seconds: float | None = None, seed: int = 0,
                     options: Mapping[str, Any] | None = None, store: Any = None, final_top_k: int = 4,
                     max_block_numel: int | None = 2**22, use_helion_seeds: bool = True,
                     on_result: Callable[[Any], None] | None = None, helion_seed: int | None = None,
                     helion_final: bool = False) -> None:
            super().__init__(kernel, args)
            self.kt_strategy = strategy
            self.kt_llm = llm
            self.kt_max_evals = max_evals
            self.kt_seconds = seconds
            self.kt_seed = seed
            self.kt_helion_seed = helion_seed  # Helion's autotune_random_seed when autotuner_fn was called
            self.kt_options = dict(options or {})
            self.kt_store = store
            self.kt_final_top_k = final_top_k
            self.kt_max_block_numel = max_block_numel
            self.kt_use_helion_seeds = use_helion_seeds
            self.kt_on_result = on_result
            self.kt_helion_final = helion_final
            self.kerntune_result: Any = None
            self.layout: HelionLayout | None = None
            self.evaluator: HelionEvaluator | None = None
            self._kt_seed_pairs: list[Any] | None = None

        def kerntune_layout(self) -> HelionLayout:
            if self.layout is None:
                kernel = getattr(self.kernel, "kernel", None)
                name = getattr(kernel, "name", "") or "helion_kernel"
                # Helion measures its seeds whatever their tile size: the block-size bound is raised
                # to cover them, or kerntune would drop a seed Helion accepts.
                seeds = [flat for flat, _ in self._helion_seed_pairs()] if self.kt_use_helion_seeds else []
                self.layout = build_space(describe_fragments(self.config_gen), name=name,
                                          max_block_numel=self.kt_max_block_numel, seeds=seeds)
            return self.layout

        def _helion_seed_pairs(self) -> list[Any]:
            """Helion's (flat, config) pairs of its user and compiler seeds, read once (Helion logs
            each seed it cannot transfer)."""
            if self._kt_seed_pairs is None:
                pairs: list[Any] = []
                try:
                    pairs += self.config_gen.user_seed_flat_config_pairs(self._autotune_seed_configs(), self.log)
                    pairs += self.config_gen.seed_flat_config_pairs(self.log)
                except Exception:  # a seed Helion cannot transfer is Helion's to report, not ours
                    pass
                self._kt_seed_pairs = pairs
            return self._kt_seed_pairs

        def _seed_configs(self, layout: HelionLayout) -> list[Config]:
            """Helion's user seeds (``autotune_seed_configs``) and compiler heuristics' seeds: the
            configs Helion's own searches measure first.  One left out is logged with the reason."""
            out = []
            for flat, config in self._helion_seed_pairs():
                try:
                    cfg = layout.space.normalize(layout.from_flat(flat))
                    errors = [str(e) for e in layout.space.validate(cfg)]
                except Exception as exc:  # noqa: BLE001 - reported, the seed is left out
                    errors = [str(exc)]
                if errors:
                    self.log(f"kerntune: Helion seed left out ({'; '.join(errors)}): {config}")
                else:
                    out.append(cfg)
            return out

        def _final_rebenchmark_top_k_default(self) -> int:
            """Helion's final verification re-times ``final_top_k`` configs (its default 8; its
            HELION_AUTOTUNE_FINAL_REBENCHMARK_TOP_K still overrides it, as for Helion's own searches)."""
            return self.kt_final_top_k

        def _helion_seconds_left(self) -> float | None:
            """What is left of Helion's ``autotune_budget_seconds`` (counted from Helion's start)."""
            budget = getattr(self.settings, "autotune_budget_seconds", None)
            start = getattr(self, "_autotune_budget_start", None)
            if budget is None or start is None:
                return None
            return max(budget - (time.perf_counter() - start), 1e-3)

        def _autotune(self) -> Any:
            from kerntune.llm import LLMClient
            from kerntune.run.search import RunOptions, run_search
            from kerntune.strategies import Budget

            layout = self.kerntune_layout()
            limits = [s for s in (self.kt_seconds, self._helion_seconds_left()) if s is not None]
            budget_s = min(limits) if limits else None  # Helion's own budget bounds the search too
            evaluator = HelionEvaluator(self, layout, _workload(self, layout), keep=self.kt_final_top_k)
            self.evaluator = evaluator
            llm = self.kt_llm
            if isinstance(llm, str):
                llm = LLMClient.from_spec(llm)
            max_evals = self.kt_max_evals
            if max_evals is None and self.kt_seconds is None:
                max_evals = 150
            budget = Budget(max_evals=max_evals, max_seconds=budget_s)
            # Helion's best-of-K runs its trials with autotune_random_seed = base + i: each trial
            # searches with the kerntune seed moved by as much, not the same path K times.
            seed = self.kt_seed
            now = getattr(self.settings, "autotune_random_seed", None)
            if isinstance(self.kt_helion_seed, int) and isinstance(now, int) and now >= self.kt_helion_seed:
                seed += now - self.kt_helion_seed
            for note in layout.notes:
                self.log(f"kerntune: {note}")
            warm = self._seed_configs(layout) if self.kt_use_helion_seeds else []
            self.log(f"kerntune: {self.kt_strategy} over {len(layout.space.params)} parameters "
                     f"(budget {budget.to_dict()}, seed {seed}, {len(warm)} Helion seed config(s))")
            if budget_s is not None:
                evaluator.deadline = time.perf_counter() + budget_s
            run_options = RunOptions(store=self.kt_store, strategy_options=self.kt_options, llm=llm, warm_start=warm)
            result = run_search(evaluator, self.kt_strategy, budget, seed, run_options)
            self.kerntune_result = result
            if not evaluator.members:
                raise RuntimeError(_nothing_passed(result.history))
            if self.kt_helion_final:
                # Helion's own ending (final_rebenchmark_best, as its searches end): the best distinct
                # configs re-timed one by one with do_bench at Helion's final target (5 s each by
                # default), skipped once Helion's autotune_budget_seconds is spent.
                self.population = list(evaluator.members)
                config = self._finalize()
            else:
                # Helion's rebenchmark with its defaults: each finalist alone in the benchmark
                # subprocess for about 200 ms (not interleaved: Helion 1.4.0's isolated path).
                finalists = list(evaluator.members[: max(self.kt_final_top_k, 1)])
                if len(finalists) > 1:
                    self.rebenchmark(finalists, desc="kerntune final re-benchmark")
                self.population = finalists  # Helion's ``best`` is the population's fastest
                config = self.best.config
            self.log(f"kerntune: best {self.best.perf:.4f} ms after {len(result.history)} configs "
                     f"({result.stop_reason})")
            if self.kt_on_result is not None:
                self.kt_on_result(self)
            return config

    return KerntuneSearch


def autotuner(strategy: str = "bayes", llm: Any = None, *, max_evals: int | None = None,
              seconds: float | None = None, seed: int = 0, options: Mapping[str, Any] | None = None,
              store: Any = None, final_top_k: int = 4, max_block_numel: int | None = 2**22,
              use_helion_seeds: bool = True, cache: bool = False, helion_final: bool = False,
              on_result: Callable[[Any], None] | None = None) -> Callable[..., Any]:
    """An ``autotuner_fn`` for ``@helion.kernel``: kerntune chooses the configs, Helion measures them.

    ``strategy`` is any kerntune strategy (``bayes``, ``pattern``, ``genetic``, ``llm``,
    ``llm-seeded`` …) with ``options`` (as ``-o NAME=VALUE``); ``llm`` an ``--llm`` spec or
    an ``LLMClient`` for the LLM strategies.  The budget is ``max_evals`` configs and/or
    ``seconds`` of wall clock for the search (150 configs when neither is given; Helion's
    ``autotune_budget_seconds`` bounds it too); the best ``final_top_k`` distinct configs are
    then re-timed by Helion's ``rebenchmark`` (each alone, about 200 ms), or with
    ``helion_final=True`` by the final verification Helion's own searches end with (about 5 s a
    finalist).  ``store`` (a
    kerntune Store) keeps every trial.  ``cache=True`` wraps the search in Helion's configured
    autotune cache (``autotune_cache`` setting), as Helion's default autotuner is; its
    best-of-K trials search with ``seed`` + the trial's offset of ``autotune_random_seed``.
    ``on_result`` is called with the finished search object (its ``kerntune_result``,
    ``layout`` and ``evaluator``).
    """

    def autotuner_fn(bound_kernel: Any, args: Sequence[object], **kwargs: Any) -> Any:
        cls = _search_class()
        helion_seed = getattr(bound_kernel.settings, "autotune_random_seed", None)

        def make() -> Any:
            return cls(bound_kernel, args, strategy=strategy, llm=llm, max_evals=max_evals, seconds=seconds,
                       seed=seed, options=options, store=store, final_top_k=final_top_k,
                       max_block_numel=max_block_numel, use_helion_seeds=use_helion_seeds, on_result=on_result,
                       helion_seed=helion_seed, helion_final=helion_final)

        if not cache:
            return make()
        from helion.autotuner import cache_classes

        cache_cls = cache_classes[bound_kernel.settings.autotune_cache]
        return cache_cls(make(), autotuner_factory=make)

    return autotuner_fn


def dump_space(bound_kernel: Any, args: Sequence[object], max_block_numel: int | None = 2**22) -> dict[str, Any]:
    """The kerntune Space, layout, workload and device of a bound Helion kernel, as JSON-able data
    (what the two-phase embedded-model runs build their prompt from), plus the Helion seed configs."""
    cls = _search_class()
    search = cls(bound_kernel, args, max_block_numel=max_block_numel)
    layout = search.kerntune_layout()
    return {"space": layout.space.to_dict(), "layout": layout.to_dict(),
            "workload": _workload(search, layout), "device": device_facts(),
            "seeds": [{k: jsonable(v) for k, v in c.items()} for c in search._seed_configs(layout)]}


__all__ = [
    "HELION_VERSION",
    "HelionEvaluator",
    "autotuner",
    "describe_fragments",
    "device_facts",
    "dump_space",
    "helion_hints",
    "helion_version",
]
