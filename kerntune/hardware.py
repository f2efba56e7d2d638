"""Facts about GPUs for prompts, when an evaluator can only name its device.

A recording knows the device name and nothing else; the model tunes better
knowing SM count, bandwidth and on-chip memory.  Values are vendor
datasheet figures; a live evaluator reports its own and overrides these.
"""

from __future__ import annotations

from typing import Any

# name fragment -> facts (first match wins, so longer names come first)
KNOWN_GPUS: list[tuple[str, dict[str, Any]]] = [
    ("H200", {"peak_fp16_tflops": 989, "peak_fp32_tflops": 67, "vendor": "NVIDIA", "arch": "Hopper (sm_90)", "sms": 132, "memory_gb": 141, "bandwidth_gbs": 4800,
              "smem_per_sm_kb": 228, "max_smem_per_block_kb": 227, "registers_per_sm": 65536,
              "max_threads_per_sm": 2048, "l2_mb": 50}),
    # the PCIe and NVL cards before the SXM part (first match wins): fewer SMs, less bandwidth
    ("H100 PCIe", {"peak_fp16_tflops": 756, "peak_fp32_tflops": 51, "vendor": "NVIDIA", "arch": "Hopper (sm_90)",
                   "sms": 114, "memory_gb": 80, "bandwidth_gbs": 2000, "smem_per_sm_kb": 228,
                   "max_smem_per_block_kb": 227, "registers_per_sm": 65536, "max_threads_per_sm": 2048, "l2_mb": 50}),
    ("H100 NVL", {"peak_fp16_tflops": 835, "peak_fp32_tflops": 60, "vendor": "NVIDIA", "arch": "Hopper (sm_90)",
                  "sms": 132, "memory_gb": 94, "bandwidth_gbs": 3900, "smem_per_sm_kb": 228,
                  "max_smem_per_block_kb": 227, "registers_per_sm": 65536, "max_threads_per_sm": 2048, "l2_mb": 50}),
    ("H100", {"peak_fp16_tflops": 989, "peak_fp32_tflops": 67, "vendor": "NVIDIA", "arch": "Hopper (sm_90)", "sms": 132, "memory_gb": 80, "bandwidth_gbs": 3350,
              "smem_per_sm_kb": 228, "max_smem_per_block_kb": 227, "registers_per_sm": 65536,
              "max_threads_per_sm": 2048, "l2_mb": 50}),
    ("A100-PCIE-40GB", {"peak_fp16_tflops": 312, "peak_fp32_tflops": 19.5, "vendor": "NVIDIA", "arch": "Ampere (sm_80)", "sms": 108, "memory_gb": 40,
                        "bandwidth_gbs": 1555, "smem_per_sm_kb": 164, "max_smem_per_block_kb": 163,
                        "registers_per_sm": 65536, "max_threads_per_sm": 2048, "l2_mb": 40}),
    ("A100-SXM4-40GB", {"peak_fp16_tflops": 312, "peak_fp32_tflops": 19.5, "vendor": "NVIDIA", "arch": "Ampere (sm_80)",
                        "sms": 108, "memory_gb": 40, "bandwidth_gbs": 1555, "smem_per_sm_kb": 164,
                        "max_smem_per_block_kb": 163, "registers_per_sm": 65536, "max_threads_per_sm": 2048,
                        "l2_mb": 40}),
    ("A100", {"peak_fp16_tflops": 312, "peak_fp32_tflops": 19.5, "vendor": "NVIDIA", "arch": "Ampere (sm_80)", "sms": 108, "memory_gb": 80, "bandwidth_gbs": 2039,
              "smem_per_sm_kb": 164, "max_smem_per_block_kb": 163, "registers_per_sm": 65536,
              "max_threads_per_sm": 2048, "l2_mb": 40}),
    ("L40S", {"peak_fp16_tflops": 362, "peak_fp32_tflops": 91.6, "vendor": "NVIDIA", "arch": "Ada (sm_89)", "sms": 142, "memory_gb": 48, "bandwidth_gbs": 864,
              "smem_per_sm_kb": 100, "max_smem_per_block_kb": 99, "registers_per_sm": 65536,
              "max_threads_per_sm": 1536, "l2_mb": 96}),
    ("B200", {"peak_fp16_tflops": 2250, "vendor": "NVIDIA", "arch": "Blackwell (sm_100)", "sms": 148, "memory_gb": 180,
              "bandwidth_gbs": 8000, "smem_per_sm_kb": 228, "max_smem_per_block_kb": 227,
              "registers_per_sm": 65536, "max_threads_per_sm": 2048, "l2_mb": 126}),
    ("MI325X", {"peak_fp16_tflops": 1307, "peak_fp32_tflops": 81.7, "vendor": "AMD", "arch": "CDNA3 (gfx942)", "cus": 304, "memory_gb": 256,
                "bandwidth_gbs": 6000, "lds_per_cu_kb": 64, "registers_per_cu": 131072, "wavefront": 64,
                "l2_mb": 4, "infinity_cache_mb": 256}),
    ("MI300X", {"peak_fp16_tflops": 1307, "peak_fp32_tflops": 81.7, "vendor": "AMD", "arch": "CDNA3 (gfx942)", "cus": 304, "memory_gb": 192,
                "bandwidth_gbs": 5300, "lds_per_cu_kb": 64, "registers_per_cu": 131072, "wavefront": 64,
                "l2_mb": 4, "infinity_cache_mb": 256}),
    # one of the package's two dies (GCDs): each is a device of its own to ROCm, named "MI250X", and a
    # kernel runs on one (the package's figures, 220 CUs and 3277 GB/s, are twice these)
    ("MI250X", {"peak_fp16_tflops": 191.5, "peak_fp32_tflops": 23.9, "vendor": "AMD", "arch": "CDNA2 (gfx90a)",
                "cus": 110, "memory_gb": 64, "bandwidth_gbs": 1638, "lds_per_cu_kb": 64, "registers_per_cu": 131072,
                "wavefront": 64, "l2_mb": 8}),
    ("MI210", {"peak_fp16_tflops": 181, "peak_fp32_tflops": 22.6, "vendor": "AMD", "arch": "CDNA2 (gfx90a)", "cus": 104, "memory_gb": 64,
               "bandwidth_gbs": 1638, "lds_per_cu_kb": 64, "registers_per_cu": 131072, "wavefront": 64, "l2_mb": 8}),
]


def device_facts(name: str, reported: dict[str, Any] | None = None) -> dict[str, Any]:
    facts: dict[str, Any] = {"name": name}
    for fragment, known in KNOWN_GPUS:
        if fragment.lower() in (name or "").lower():
            facts.update(known)
            break
    facts.update({k: v for k, v in (reported or {}).items() if v is not None})
    return facts


def describe_device(facts: dict[str, Any]) -> str:
    labels = {
        "name": "Device", "arch": "Architecture", "sms": "Streaming multiprocessors (SMs)",
        "cus": "Compute units", "memory_gb": "Memory (GB)", "bandwidth_gbs": "Memory bandwidth (GB/s)",
        "smem_per_sm_kb": "Shared memory per SM (KB)", "max_smem_per_block_kb": "Max shared memory per block (KB)",
        "lds_per_cu_kb": "LDS per CU (KB)", "registers_per_sm": "32-bit registers per SM",
        "registers_per_cu": "32-bit registers per CU", "max_threads_per_sm": "Max threads per SM",
        "l2_mb": "L2 cache (MB)", "wavefront": "Wavefront size", "peak_fp16_tflops": "Dense fp16 tensor peak (TFLOP/s)",
        "peak_fp32_tflops": "fp32 peak without tensor cores (TFLOP/s)",
        "infinity_cache_mb": "Infinity Cache (MB)", "description": "Description",
    }
    return "\n".join(f"- {labels.get(k, k)}: {v}" for k, v in facts.items() if k != "vendor")
