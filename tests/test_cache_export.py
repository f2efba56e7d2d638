"""``kerntune cache export`` / ``cache list`` on a store that holds winners of several kernels,
devices and torch/triton stacks: an export is one table a program looks its shapes up in, so
it must never merge them silently (the ``DISPATCH`` literal got duplicate shape keys and the
last one won; ``load_dispatch`` reads neither kernel nor device).

The store is a real SQLite file written through ``Store.put_best`` with runs that name their
kernel, as ``kerntune tune`` and the decorator write them; the CLI runs in-process via ``main``.
"""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import pytest

from kerntune.cli import main
from kerntune.run.dispatch import load_dispatch
from kerntune.store import Store

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
STACK = "torch=2.8,triton=3.4"
MATMUL, SOFTMAX = "0a1b2c3d4e5f6a7b", "9f8e7d6c5b4a3f2e"


def _winner(st: Store, kernel_hash: str, name: str, shape: str, device: str, block: int,
            versions: str = STACK) -> None:
    run = st.create_run("tune", strategy="random", seed=0,
                        evaluator={"evaluator": "triton", "kernel_file": f"/src/{name}.py", "kernel_name": name})
    st.finish_run(run)
    st.put_best(kernel_hash, shape, device, versions, {"BLOCK": block, "num_warps": 4}, 0.5, run)
    time.sleep(0.01)  # iter_best orders by the time a winner was stored


def _store(path: Path) -> Path:
    with Store(path) as st:
        _winner(st, MATMUL, "matmul", "64x64x64", H100, 64)
        _winner(st, MATMUL, "matmul", "1024x1024x1024", H100, 128)
        _winner(st, SOFTMAX, "softmax", "64x64x64", H100, 16)  # the same shape key, another kernel
    return path


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as ended:
        main(args)
    out = capsys.readouterr()
    return int(ended.value.code or 0), out.out, out.err


def _dispatch(source: str) -> dict:
    """The DISPATCH literal of a ``--triton`` export, with every key it names (a dict would drop duplicates)."""
    node = next(n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "DISPATCH")
    keys = [ast.literal_eval(k) for k in node.keys]
    assert len(keys) == len(set(keys)), f"duplicate shape keys in DISPATCH: {keys}"
    return {k: ast.literal_eval(v.args[0]) for k, v in zip(keys, node.values)}


def test_export_refuses_to_merge_several_kernels_and_names_them(tmp_path: Path, capsys) -> None:
    db = str(_store(tmp_path / "k.db"))
    for fmt in ("--triton", "--json"):
        code, out, err = _cli(["cache", "export", fmt, "--store", db], capsys)
        assert code == 2 and not out, out
        line, = err.strip().splitlines()
        assert f"{MATMUL} (matmul)" in line and f"{SOFTMAX} (softmax)" in line and "--kernel" in line, line
    # one kernel, by its name, its hash or a prefix of it: that kernel's winners alone
    for pick in ("matmul", MATMUL, MATMUL[:6]):
        code, out, err = _cli(["cache", "export", "--triton", "--kernel", pick, "--store", db], capsys)
        assert code == 0, err
        assert _dispatch(out) == {(64, 64, 64): {"BLOCK": 64}, (1024, 1024, 1024): {"BLOCK": 128}}
    code, out, err = _cli(["cache", "export", "--json", "--kernel", "softmax", "--store", db], capsys)
    assert code == 0, err
    assert load_dispatch(json.loads(out)) == [((64, 64, 64), {"BLOCK": 16, "num_warps": 4}, 0.5)]


def test_export_refuses_to_merge_several_devices_and_keeps_the_newest_stack(tmp_path: Path, capsys) -> None:
    db = _store(tmp_path / "k.db")
    with Store(db) as st:
        _winner(st, MATMUL, "matmul", "64x64x64", A100, 32)  # the same kernel and shape on another GPU
    code, out, err = _cli(["cache", "export", "--json", "--kernel", MATMUL, "--store", str(db)], capsys)
    assert code == 2 and not out
    line, = err.strip().splitlines()
    assert repr(H100) in line and repr(A100) in line and "--device" in line, line
    code, out, err = _cli(["cache", "export", "--json", "--kernel", MATMUL, "--device", A100, "--store", str(db)],
                          capsys)
    assert code == 0, err
    assert [(s, c["BLOCK"]) for s, c, _ in load_dispatch(json.loads(out))] == [((64, 64, 64), 32)]
    # Kernel Tuner files are named by kernel and shape: two GPUs would overwrite each other's file
    code, out, err = _cli(["cache", "export", "--kernel-tuner", str(tmp_path / "kt"), "--store", str(db)], capsys)
    assert code == 2 and "--device" in err and not (tmp_path / "kt").exists()
    # a shape re-tuned under a newer torch/triton: the newest winner, said on stderr, not a duplicate key
    with Store(db) as st:
        _winner(st, MATMUL, "matmul", "64x64x64", H100, 256, versions="torch=2.9,triton=3.5")
    code, out, err = _cli(["cache", "export", "--triton", "--kernel", MATMUL, "--device", H100, "--store",
                           str(db)], capsys)
    assert code == 0, err
    assert _dispatch(out) == {(64, 64, 64): {"BLOCK": 256}, (1024, 1024, 1024): {"BLOCK": 128}}
    assert "older winner" in err


def test_export_of_one_kernel_on_one_device_needs_no_flags(tmp_path: Path, capsys) -> None:
    db = tmp_path / "k.db"
    with Store(db) as st:
        _winner(st, MATMUL, "matmul", "64x64x64", H100, 64)
        _winner(st, MATMUL, "matmul", "1024x1024x1024", H100, 128)
    code, out, err = _cli(["cache", "export", "--triton", "--store", str(db)], capsys)
    assert code == 0 and not err.strip(), err
    assert _dispatch(out) == {(64, 64, 64): {"BLOCK": 64}, (1024, 1024, 1024): {"BLOCK": 128}}


def test_cache_list_shows_each_kernels_name(tmp_path: Path, capsys) -> None:
    db = str(_store(tmp_path / "k.db"))
    code, out, err = _cli(["cache", "list", "--store", db], capsys)
    assert code == 0, err
    rows = [line for line in out.splitlines() if MATMUL in line or SOFTMAX in line]
    assert len(rows) == 3
    assert all("matmul" in r for r in rows if MATMUL in r) and all("softmax" in r for r in rows if SOFTMAX in r)
    code, out, err = _cli(["cache", "list", "--kernel", "softmax", "--store", db], capsys)
    assert code == 0 and "1 cached winners" in out and SOFTMAX in out and MATMUL not in out
