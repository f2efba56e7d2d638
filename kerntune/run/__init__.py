"""The run driver: ``run_search`` and the features built on it.

Why a package: every way kerntune tunes (the CLI's ``tune`` and ``compare``, the Python API,
the decorator, Helion, Kernel Tuner, ``retune``) ends in one run of one strategy on one
evaluator; that run and what is built directly on it live here, apart from the strategies
(what to measure), the evaluators (how to measure) and the store (where it is kept).

- ``search``: ``run_search(evaluator, strategy, budget, seed, RunOptions(...))``, one run,
  every trial stored as it ends, a killed run resumed by replay; ``SearchResult``.
- ``llm_resume``: a resumed run's model calls answered from its stored exchanges.
- ``shapes``: many shapes of one kernel under one budget, nearest first (``tune --shapes``).
- ``dispatch``: the dispatch table (shape -> winner) those runs produce, as a file.
- ``warm_start``: past runs of the kernel on nearby shapes (winners, all their measurements).
- ``decorator_search``: ``@kerntune.autotune``'s search on a miss, launching in this process;
  the decorator itself (lookups, cache, launch) stays ``kerntune.decorator``.

Nothing is imported here: the decorator reads dispatch tables and keys its cache through this
package, and must not load the search code (strategies, numpy models) until a call misses.
"""
