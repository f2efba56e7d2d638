"""What prompts say about a recording's kernel and GPU: facts of the recording itself, never of another
recording of the same kernel name, and a GPU's figures for the part a kernel runs on."""

from __future__ import annotations

from pathlib import Path

from kerntune.evaluate import ReplayEvaluator
from kerntune.evaluate.known_kernels import describe_kernel
from kerntune.hardware import device_facts

ROOT = Path(__file__).resolve().parents[1]
CONV_PARAMS = {"block_size_x": [16, 32], "block_size_y": [1, 2], "tile_size_x": [1, 2], "tile_size_y": [1, 2],
               "use_padding": [0, 1], "read_only": [0, 1]}


def test_a_convolution_without_use_shmem_gets_no_note_that_points_at_it_and_no_filter_it_does_not_hold() -> None:
    """Every recording named convolution_kernel was told "a 15x15 filter" and that padding "only matters with
    use_shmem=1", though Kernel Tuner's own example uses 17x17 and a recording without use_shmem always
    stages its input in shared memory."""
    known = describe_kernel("convolution_kernel", CONV_PARAMS)
    assert "15x15" not in known["description"] and "a filter held in constant memory" in known["description"]
    assert "use_shmem" not in known["params"]["use_padding"] and "use_shmem" not in known["params"]
    assert set(known["params"]) == set(CONV_PARAMS)
    sized = describe_kernel("convolution_kernel", {**CONV_PARAMS, "filter_width": [17], "filter_height": [17]})
    assert "a 17x17 filter" in sized["description"] and "289 multiply-adds" in sized["description"]


def test_the_shipped_convolution_recording_is_described_by_its_own_filter() -> None:
    ev = ReplayEvaluator.from_file(ROOT / "examples" / "spaces" / "convolution_A100.json.gz")
    text = ev.workload()["description"]
    assert "a 15x15 filter" in text and "Memory-bandwidth" not in text  # the kernel does 225 MACs a pixel
    notes = {p.name: p.description for p in ev.space.params}
    assert "only matters with use_shmem=1" in notes["use_padding"]


def test_gpu_figures_are_the_part_a_kernel_runs_on() -> None:
    """An MI250X die (what ROCm shows as one device) was given the two-die package's 220 CUs and 3277 GB/s;
    an H100 PCIe card the SXM part's 132 SMs and 3350 GB/s."""
    mi = device_facts("AMD Instinct MI250X")
    assert (mi["cus"], mi["bandwidth_gbs"], mi["memory_gb"]) == (110, 1638, 64)
    pcie = device_facts("NVIDIA H100 PCIe")
    assert (pcie["sms"], pcie["bandwidth_gbs"]) == (114, 2000)
    assert device_facts("NVIDIA H100 80GB HBM3")["sms"] == 132
    assert device_facts("NVIDIA A100-SXM4-40GB")["memory_gb"] == 40


def test_helion_hints_state_hardware_facts_not_where_one_gpus_optima_were() -> None:
    text = (ROOT / "kerntune" / "prompts" / "helion_hints.md").read_text()
    assert "usual winners" not in text
