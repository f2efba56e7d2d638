"""The static check of a model-written Triton file: ``launch`` must launch the file's own kernel and use
no library computation in its place, whatever the spelling (reviewer's list), while ordinary launches
(allocation, views, strides, ``triton.cdiv``, device queries) pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from kerntune.transform.triton_backend import variant_problems

ROOT = Path(__file__).resolve().parent.parent
GOOD = (ROOT / "tests" / "data" / "triton_transform" / "rewrite_tiles.py").read_text()
LAUNCH = "    _matmul_kernel[grid]("


def with_body(line: str, before: str = "") -> str:
    """GOOD with ``line`` inserted into launch just before the kernel's launch, ``before`` at module level."""
    assert LAUNCH in GOOD
    code = GOOD.replace(LAUNCH, f"    {line}\n{LAUNCH}", 1)
    return code.replace("\ndef launch(config, inputs):", f"\n{before}\ndef launch(config, inputs):", 1)


@pytest.mark.parametrize("line,before", [
    ("c.copy_(a.matmul(b))", ""),
    ("c.copy_(torch.linalg.matmul(a, b))", ""),
    ("c.copy_(torch.Tensor.matmul(a, b))", ""),
    ("c.copy_(a.__matmul__(b))", ""),
    ("c.copy_(torch.tensordot(a, b, dims=1))", ""),
    ("c.copy_(torch.inner(a, b.t()))", ""),
    ("c.copy_(torch.chain_matmul(a, b))", ""),
    ("c.copy_(MM(a, b))", "MM = torch.matmul\n"),
    ("c.copy_(mm(a, b))", "from torch import matmul as mm\n"),
    ("c.copy_(G.linear(a, b.t()))", "import torch.nn.functional as G\n"),
    ("c.copy_(getattr(torch, 'mat' + 'mul')(a, b))", ""),
    ("c.copy_(getattr(a, 'matmul')(b))", ""),
    ("c.copy_(list(map(torch.mm, [a], [b]))[0])", ""),
    ("c.copy_(eval('torch.mm')(a, b))", ""),
    ("c.copy_(_mul(a, b))", "_mul = lambda x, y: x @ y\n"),
    ("c @= b", ""),
])
def test_library_compute_in_launch_is_refused_whatever_the_spelling(line, before):
    problems = variant_problems(with_body(line, before))
    assert any("the kernel must compute the result itself" in p for p in problems), problems


def test_launch_must_launch_the_files_kernel():
    no_launch = GOOD.replace(LAUNCH, "    return c\n" + LAUNCH, 1)
    no_launch = no_launch.replace("_matmul_kernel[grid](", "_matmul_kernel(", 1)
    assert any("does not launch the file's @triton.jit kernel" in p for p in variant_problems(no_launch))
    # a launch that only zeroes its output and never names the kernel
    zeroes = GOOD.replace("def launch(config, inputs):\n", "def launch(config, inputs):\n    inputs[2].zero_()\n"
                          "    return inputs[2]\n\n\ndef _unused(config, inputs):\n", 1)
    assert any("does not launch" in p for p in variant_problems(zeroes))


def test_ordinary_launches_pass():
    assert variant_problems(GOOD) == []
    ok = with_body("d = torch.empty_like(c); n_sm = torch.cuda.get_device_properties(0).multi_processor_count"
                   " if torch.cuda.is_available() else 4; at = a.t().contiguous().view(-1); s = b.stride(0)"
                   "; g2 = triton.cdiv(m, 16)")
    assert variant_problems(ok) == []
    # a helper that picks the kernel and launches it, and a split-K style reduction after the kernel
    helper = GOOD.replace(LAUNCH, "    return _go(grid, a, b, c, m, n, k, config)\n\n\n"
                          "def _go(grid, a, b, c, m, n, k, config):\n" + LAUNCH, 1)
    assert variant_problems(helper) == []
    assert variant_problems(with_body("part = torch.zeros((2, m, n), device=a.device); c.copy_(part.sum(0))")) == []
