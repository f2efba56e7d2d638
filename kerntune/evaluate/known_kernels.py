"""Descriptions of the public benchmark kernels whose recordings kerntune
replays, so that prompts about a recording say what a user would say about
their own kernel: what it computes and what each parameter changes.

Recordings carry parameter names and times only; these texts come from the
kernels' public sources (Kernel Tuner's benchmark suite).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

KNOWN: dict[str, dict[str, Any]] = {
    "convolution_kernel": {
        # {filter}: the recording's own filter size where it holds one (filter_height/_width params);
        # the kernel's arithmetic, not a verdict on what bounds it (that depends on the GPU and tiles).
        "description": "2D convolution (CUDA/HIP) of a single-precision image with {filter} held in constant"
                       " memory; each thread computes tile_size_x x tile_size_y output pixels, each output"
                       " pixel {macs} multiply-adds; neighbouring threads read overlapping input (a"
                       " (block+filter-1)^2 halo per block).",
        "params": {
            "block_size_x": "threads per block in x (output columns)",
            "block_size_y": "threads per block in y (output rows)",
            "tile_size_x": "output pixels per thread in x",
            "tile_size_y": "output pixels per thread in y",
            "read_only": "1 = load the input through the read-only data cache (__ldg)",
            "use_padding": "1 = pad shared-memory rows to avoid bank conflicts (only matters with use_shmem=1)",
            "use_shmem": "1 = stage the input tile plus halo in shared memory before computing",
            "use_cmem": "1 = filter in constant memory",
            "filter_height": "filter rows", "filter_width": "filter columns",
        },
        # a note that names another parameter, for recordings without it (where the kernel always
        # stages its input in shared memory, padding always matters)
        "without": {"use_padding": ("use_shmem", "1 = pad shared-memory rows to avoid bank conflicts")},
    },
    "dedispersion_kernel": {
        "description": "Radio-astronomy brute-force dedispersion (CUDA/HIP): for every dispersion measure (DM)"
                       " and output sample, sum the input over the frequency channels with a per-channel,"
                       " per-DM delay. problem_size = [samples, DMs, beams]. Memory-bound with irregular,"
                       " delayed reads; each thread computes tile_size_x samples x tile_size_y DMs.",
        "params": {
            "block_size_x": "threads per block along output samples",
            "block_size_y": "threads per block along dispersion measures",
            "block_size_z": "threads per block along beams",
            "tile_size_x": "output samples per thread",
            "tile_size_y": "dispersion measures per thread",
            "tile_stride_x": "1 = a thread's samples are strided by the block width, 0 = consecutive",
            "tile_stride_y": "1 = a thread's DMs are strided by the block height, 0 = consecutive",
            "loop_unroll_factor_channel": "unroll factor of the channel loop (0 = left to the compiler)",
        },
    },
}


def describe_kernel(kernel_name: str | None, values: Mapping[str, Sequence[Any]] | None = None) -> dict[str, Any]:
    """The description and parameter notes of a known kernel, fitted to the recording's parameters
    (``values``: each recorded parameter's values).  Why fitted: these kernels are recorded on many
    GPUs and problem instances under one name, so a fact of one instance (its filter size) is said
    only where the recording holds it, and a note is given only for a parameter the recording has,
    never one that points at a parameter it lacks."""
    known = KNOWN.get(kernel_name or "")
    if not known:
        return {}
    names = set(values) if values is not None else set(known["params"])
    params = {k: v for k, v in known["params"].items() if k in names}
    for name, (needs, instead) in known.get("without", {}).items():
        if name in params and needs not in names:
            params[name] = instead
    description = known["description"]
    if "{filter}" in description:
        fh, fw = (_single((values or {}).get(k)) for k in ("filter_height", "filter_width"))
        sized = isinstance(fh, int) and isinstance(fw, int)
        description = description.format(filter=f"a {fh}x{fw} filter" if sized else "a filter",
                                         macs=fh * fw if sized else "filter_height x filter_width")
    return {"description": description, "params": params}


def _single(values: Sequence[Any] | None) -> Any:
    """The one value a parameter was recorded with, else None."""
    vals = list(values or ())
    return vals[0] if len(vals) == 1 else None
