"""Units of the Triton transform backend: static checks of model-written files, the combined
variant space, backend selection, the step library, and the limited check worker's verdicts on
files that do not load, hide a callable constraint, or hang (no model, no tuning)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kerntune.space import Choice, Space
from kerntune.transform.backend import backend_of
from kerntune.transform.steps import triton_steps
from kerntune.transform.triton_backend import TritonSession, variant_problems
from kerntune.transform.triton_harness import combined_space

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "triton_transform"
GOOD = (DATA / "rewrite_tiles.py").read_text()


def test_variant_problems_static_checks():
    assert variant_problems(GOOD) == []
    assert variant_problems("def launch(:\n")[0].startswith("code: not valid Python")
    no_space = GOOD.replace("space = Space(", "spaces = Space(")
    assert "code: the kernel file must define `space` at module level" in variant_problems(no_space)
    assert "code: no @triton.jit kernel" in variant_problems(GOOD.replace("@triton.jit", ""))
    cheat = GOOD.replace("    return c\n", "    return torch.matmul(a, b)\n", 1)
    assert any("launch uses torch.matmul" in p for p in variant_problems(cheat))
    assert any("@ operator" in p for p in variant_problems(GOOD.replace("    return c\n", "    return a @ b\n", 1)))
    # a helper that launch calls is checked too (the library call cannot hide one level down)
    hidden = GOOD.replace("    return c\n", "    return _helper(a, b)\n", 1) + "\n\ndef _helper(x, y):\n    return torch.matmul(x, y)\n"
    assert any("_helper (reached from launch) uses torch.matmul" in p for p in variant_problems(hidden))
    # the original's reference may use torch.matmul: only launch and what it calls are checked
    assert variant_problems(GOOD.replace("(a.float() @ b.float())", "torch.matmul(a.float(), b.float())")) == []


def test_combined_space_keeps_each_variants_values_and_constraints():
    a = Space([Choice("BLOCK", options=(16,)), Choice("num_warps", options=(4,))])
    b = Space([Choice("BLOCK", options=(16, 32)), Choice("SPLIT_K", options=(1, 2)), Choice("num_warps", options=(4, 8))],
              constraints=["BLOCK * SPLIT_K <= 32"], default={"BLOCK": 32, "SPLIT_K": 1, "num_warps": 8})
    c = combined_space([a, b], ["original", "split"])
    valid = list(c.enumerate())
    assert sum(cfg["variant"] == 0 for cfg in valid) == 1  # pinned: no duplicates of the original
    assert sum(cfg["variant"] == 1 for cfg in valid) == b.count() == 6
    assert all(cfg["BLOCK"] * cfg["SPLIT_K"] <= 32 for cfg in valid if cfg["variant"] == 1)
    assert c.default["variant"] == 0 and c.default["BLOCK"] == 16
    assert "0=original, 1=split" in c.by_name["variant"].description


def test_backend_selection_and_triton_step_library():
    assert backend_of("examples/triton/matmul.py") == "triton" and backend_of("k.cl") == "kernel_tuner"
    steps = triton_steps()
    assert [s.id for s in steps] == ["tiles", "persistent", "tma", "split_k", "pipelining", "epilogue",
                                     "attention_tiling"]
    for s in steps:  # generic instructions with the kernel placed by the template
        text, placed = s.render("KERNEL")
        assert placed and "KERNEL" in text and "4096" not in text


@pytest.mark.skipif(pytest.importorskip("triton") is None, reason="no triton")
def test_check_worker_rejects_unloadable_callable_constraint_and_hanging_files(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    session = TritonSession(DATA / "matmul_small.py", (32, 32, 32), workdir=tmp_path, timeout_s=1, memory_mb=4096)

    raises = session.write_variant("raises", GOOD.replace("name = ", "undefined_name\nname = ", 1))
    v = session.check(raises)
    assert not v["ok"] and v["stage"] == "load" and "NameError" in v["error"]

    callable_rule = session.write_variant("callable", GOOD.replace(
        'name="matmul_small_tiles")', 'name="matmul_small_tiles", constraints=[lambda c: True])'))
    v = session.check(callable_rule)
    assert not v["ok"] and v["stage"] == "space" and "expression strings" in v["error"]

    hangs = session.write_variant("hangs", GOOD.replace("def launch(config, inputs):\n",
                                                        "def launch(config, inputs):\n    while True: pass\n"))
    session.timeout_s = -59.0  # the check's own limit is timeout_s + 60 s (imports): 1 s here
    v = session.check(hangs)
    assert not v["ok"] and v["stage"] == "timeout" and "worker killed" in v["error"]
