"""Started by ``kerntune exec -- CMD`` (this folder heads CMD's PYTHONPATH): turns on kerntune's
retuning of ``triton.autotune`` kernels in every Python process of CMD (kerntune.retune)."""

try:
    import kerntune.retune as _retune

    _retune.enable_from_env()
except Exception as _exc:  # noqa: BLE001 - never stop the user's program from starting
    import sys

    print(f"kerntune exec: retuning is off ({type(_exc).__name__}: {_exc})", file=sys.stderr)
