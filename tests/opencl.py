"""Whether an OpenCL platform is there, for the transform tests that run kernels on PoCL."""

from __future__ import annotations


def has_opencl() -> bool:
    """pyopencl imports and lists a platform (PoCL's ICD on CI)."""
    try:
        import pyopencl

        return bool(pyopencl.get_platforms())
    except Exception:  # noqa: BLE001 - no module, no ICD loader, no platform
        return False
