"""Started by ``kerntune exec -- CMD`` (this folder heads CMD's PYTHONPATH): turns on kerntune's
retuning of ``triton.autotune`` kernels in every Python process of CMD (kerntune.retune), then runs
the ``sitecustomize`` this one shadows (the next on ``sys.path`` past this folder: the user's, a
virtualenv's, a distribution's), as Python would have without ``kerntune exec``."""

try:
    import kerntune.retune  # noqa: F401 - its import turns the switch on (KERNTUNE_AUTOTUNE=1), or says why not
except Exception as _exc:  # noqa: BLE001 - never stop the user's program from starting
    import sys

    # An interpreter of CMD without kerntune or Triton (a system python3 a shell script starts) has no
    # triton.autotune kernel to retune: a line on its stderr would be noise.  Other failures say why.
    if not (isinstance(_exc, ModuleNotFoundError) and _exc.name in ("kerntune", "triton")):
        print(f"kerntune exec: retuning is off ({type(_exc).__name__}: {_exc})", file=sys.stderr)


def _say_on() -> None:
    """One line on stderr from a Python process of the command whose switch turned on, unless a Python
    process that started it said it: the request (``KERNTUNE_EXEC_ANNOUNCE``, which ``kerntune exec``
    sets) is dropped from its environment, so its children (DataLoader workers, torchrun's ranks) stay
    quiet.  Why: a program that sets its own PYTHONPATH, or runs ``python -E``/``-I``, never reaches
    this file, and ran untuned with nothing said; the line's absence now says it."""
    import os
    import sys

    retune = sys.modules.get("kerntune.retune")
    if not os.environ.get("KERNTUNE_EXEC_ANNOUNCE") or getattr(retune, "_original_run", None) is None:
        return  # not asked, or the switch is off here (a helper interpreter: a later process may say it)
    os.environ.pop("KERNTUNE_EXEC_ANNOUNCE", None)
    store = os.environ.get("KERNTUNE_STORE") or ".kerntune/kerntune.db"
    print(f"kerntune exec: retuning triton.autotune kernels (winners in {store})", file=sys.stderr, flush=True)


try:
    _say_on()
except Exception:  # noqa: BLE001 - a line not said never stops the program
    pass


def _chain() -> None:
    """Execute the next ``sitecustomize`` on ``sys.path`` past this file's folder, in place of this
    module (``sys.modules["sitecustomize"]`` becomes it, as a plain start-up would have it).  Its
    errors reach ``site``, which reports them as it reports any ``sitecustomize``'s."""
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))

    def real(entry: str) -> str:
        return os.path.realpath(entry or os.getcwd()) if isinstance(entry, str) else ""

    paths = [p for p in sys.path if isinstance(p, str)]
    ours = [i for i, p in enumerate(paths) if real(p) == here]
    rest = [p for p in paths[ours[0] + 1:] if real(p) != here] if ours else paths
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or (spec.origin and os.path.realpath(spec.origin)
                                               == os.path.realpath(os.path.abspath(__file__))):
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_chain()
