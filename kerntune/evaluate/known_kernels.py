"""Descriptions of the public benchmark kernels whose recordings kerntune
replays, so that prompts about a recording say what a user would say about
their own kernel: what it computes and what each parameter changes.

Recordings carry parameter names and times only; these texts come from the
kernels' public sources (Kernel Tuner's benchmark suite).
"""

from __future__ import annotations

from typing import Any

KNOWN: dict[str, dict[str, Any]] = {
    "convolution_kernel": {
        "description": "2D convolution (CUDA) of a single-precision image with a 15x15 filter held in constant"
                       " memory; each thread computes tile_size_x x tile_size_y output pixels. Memory-bandwidth"
                       " and cache bound: the input is re-read by neighbouring threads (reuse of a"
                       " (block+filter-1)^2 halo).",
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
    },
    "dedispersion_kernel": {
        "description": "Radio-astronomy brute-force dedispersion (CUDA): for every dispersion measure (DM) and"
                       " output sample, sum the input over 1536 frequency channels with a per-channel,"
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


def describe_kernel(kernel_name: str | None) -> dict[str, Any]:
    return KNOWN.get(kernel_name or "", {})
