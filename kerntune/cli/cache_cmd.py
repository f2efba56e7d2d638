"""``kerntune cache``: the persistent tuning cache (winners per kernel, problem, device)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from kerntune.cli.common import (STORE_HELP, check_folder, check_output, console, err_console, make_folder, open_store,
                                 write_output)
from kerntune.errors import KerntuneError
from kerntune.store import Store

app = typer.Typer(help="The persistent tuning cache: list winners, export them for plain Triton.")

_LAUNCH_KEYS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "ir_override")  # triton.Config's keywords


def _triton_config(cfg: dict[str, Any]) -> str:
    """``triton.Config(...)`` source: launch options as keywords, the rest as meta-parameters."""
    meta = {k: v for k, v in cfg.items() if k not in _LAUNCH_KEYS}
    launch = "".join(f", {k}={cfg[k]!r}" for k in _LAUNCH_KEYS if cfg.get(k) is not None)  # None: unset
    return f"triton.Config({meta!r}{launch})"


def triton_configs(entries: list[dict[str, Any]]) -> str:
    """Python source of a ``triton.Config`` list, one per cached winner (fastest first, no duplicates)."""
    lines = ["import triton", "", "# exported by `kerntune cache export --triton`", "configs = ["]
    seen: set[str] = set()
    for e in sorted(entries, key=lambda e: e["time_ms"]):
        text = _triton_config(e["config"])
        if text in seen:
            continue
        seen.add(text)
        lines.append(f"    {text},  # {e['problem_key']} on {e['device']}: {e['time_ms']:.4f} ms")
    lines.append("]")
    shaped = [e for e in entries if all(p.isdigit() for p in e["problem_key"].split("x"))]
    if shaped:
        # A key-based lookup: the dispatch table, and the nearest shape's config for unseen shapes
        # (sum of |log2| differences, as kerntune's decorator does).
        lines += ["", "import math", "", "DISPATCH = {"]
        for e in sorted(shaped, key=lambda e: e["problem_key"]):
            shape = tuple(int(p) for p in e["problem_key"].split("x"))
            lines.append(f"    {shape!r}: {_triton_config(e['config'])},  # {e['time_ms']:.4f} ms on {e['device']}")
        # A size of 0 (an MoE expert given no tokens) counts as 1, as kerntune's shape_distance has it (log2(0)
        # was a math domain error), and a shape of another length is refused (zip matched it on a prefix).
        lines += ["}", "", "", "def config_for(*shape):",
                  '    """The tuned config of this shape, else of the nearest tuned shape (of as many sizes) on log2',
                  '    sizes; a ValueError for a shape with another number of sizes than the tuned ones."""',
                  "    if shape in DISPATCH:", "        return DISPATCH[shape]",
                  "    same = [s for s in DISPATCH if len(s) == len(shape)]",
                  "    if not same:",
                  "        raise ValueError(f'config_for{shape}: {len(shape)} sizes, no tuned shape has as many')",
                  "    return DISPATCH[min(same, key=lambda s: sum(abs(math.log2(max(a, 1)) - math.log2(max(b, 1))) "
                  "for a, b in zip(s, shape)))]"]
    return "\n".join(lines) + "\n"


def kernel_names(st: Store, entries: list[dict[str, Any]]) -> dict[str, str]:
    """Kernel hash -> the kernel's name, read from the runs that found its winners.

    Why: the cache keys a kernel by a hash of its source, which no user recognises; the run
    each winner came from keeps the kernel's name (``evaluator_identity``).  A winner without
    a run (or whose run was deleted) leaves its kernel known by the hash alone.
    """
    names: dict[str, str] = {}
    for e in entries:
        if e["kernel_hash"] in names or not e.get("run_id"):
            continue
        try:
            ev = st.get_run(e["run_id"]).evaluator or {}
        except KerntuneError:
            continue
        name = ev.get("kernel_name") or (Path(str(ev["kernel_file"])).stem if ev.get("kernel_file") else None)
        if name and str(name) != e["kernel_hash"]:  # a store keyed by the name already shows it
            names[e["kernel_hash"]] = str(name)
    return names


def _of_kernel(entries: list[dict[str, Any]], names: dict[str, str], kernel: Optional[str]) -> list[dict[str, Any]]:
    """``--kernel``: a kernel's hash, a prefix of it, or its name (both as ``cache list`` shows them)."""
    if kernel is None:
        return entries
    return [e for e in entries if e["kernel_hash"].startswith(kernel) or names.get(e["kernel_hash"]) == kernel]


def _kernel_label(kernel_hash: str, names: dict[str, str]) -> str:
    return f"{kernel_hash} ({names[kernel_hash]})" if kernel_hash in names else kernel_hash


def _some(items: list[str], at_most: int = 6) -> str:
    return ", ".join(items[:at_most]) + (f" and {len(items) - at_most} more" if len(items) > at_most else "")


def one_table(entries: list[dict[str, Any]], names: dict[str, str], kernels_too: bool = True) -> list[dict[str, Any]]:
    """The winners of one kernel on one device, the newest of each problem key.

    Why: an export is one table that a program looks its shapes up in.  Winners of several
    kernels or GPUs in it gave duplicate shape keys (in ``DISPATCH`` the last one silently won,
    and ``load_dispatch`` reads neither kernel nor device), so those are refused in one line
    that names them and the flags that pick one (``kernels_too=False``: several kernels are
    fine, as for ``--kernel-tuner``, whose files are named by kernel hash).  A shape tuned under
    several torch/triton versions keeps its newest winner, the stack the user most likely runs now.
    """
    kernels = sorted({e["kernel_hash"] for e in entries})
    devices = sorted({e["device"] for e in entries})
    mixed = []
    if kernels_too and len(kernels) > 1:
        mixed.append(f"of {len(kernels)} kernels ({_some([_kernel_label(k, names) for k in kernels])})")
    if len(devices) > 1:
        mixed.append(f"on {len(devices)} devices ({_some([repr(d) for d in devices])})")
    if mixed:
        pick = " and ".join(flag for flag, on in (("--kernel HASH", kernels_too and len(kernels) > 1),
                                                  ("--device NAME", len(devices) > 1)) if on)
        one = "one kernel's winners on one device" if kernels_too else "one device's winners"
        raise KerntuneError(f"the cache holds winners {' '.join(mixed)}: an export is {one}, pick it with {pick}"
                            " (`kerntune cache list` shows them)")
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for e in entries:  # iter_best: newest first
        newest.setdefault((e["kernel_hash"], e["problem_key"]), e)
    if len(newest) < len(entries):
        err_console.print(f"[yellow]note:[/yellow] {len(entries) - len(newest)} older winner(s) of the same shape"
                          " under other torch/triton versions left out (the newest of each is exported)")
    return list(newest.values())


@app.command("list")
def list_(store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
          kernel: Optional[str] = typer.Option(None, "--kernel", help="Only this kernel: its hash (or a prefix) or"
                                               " its name")) -> None:
    """Show every cached winner, with its kernel's name where the store knows it."""
    st = open_store(store, readonly=True)
    entries = st.iter_best()
    names = kernel_names(st, entries)
    entries = _of_kernel(entries, names, kernel)
    table = Table(title=f"{len(entries)} cached winners")
    for col in ("kernel", "name", "problem", "device", "versions", "time ms", "config"):
        table.add_column(col)
    for e in entries:
        table.add_row(e["kernel_hash"], names.get(e["kernel_hash"], ""), e["problem_key"], e["device"],
                      e["versions"], f"{e['time_ms']:.4f}", str(e["config"]))
    console.print(table)


@app.command("export")
def export(triton: bool = typer.Option(False, "--triton", help="Emit a triton.Config list and a shape lookup (Python source)"),
           as_json: bool = typer.Option(False, "--json", help="Emit the dispatch table (shape -> config, with "
                                        "each row's dtypes where the store knows them) as JSON, for the "
                                        "decorator's dispatch="),
           kernel_tuner: Optional[Path] = typer.Option(None, "--kernel-tuner", help="Write one Kernel Tuner cache "
                                                       "file per shape into this folder"),
           store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
           kernel: Optional[str] = typer.Option(None, "--kernel", help="Only this kernel: its hash (or a prefix)"
                                                " or its name, as `cache list` shows them"),
           device: Optional[str] = typer.Option(None, "--device", help="Only winners measured on this device"),
           output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write here instead of stdout")) -> None:
    """Export cached winners of one kernel on one device: for users who ship plain @triton.autotune."""
    if sum([triton, as_json, kernel_tuner is not None]) != 1:
        raise KerntuneError("choose one export format: --triton, --json or --kernel-tuner DIR")
    check_output("--output", output)  # a folder given as the file, a path under a file: one line, before
    check_folder("--kernel-tuner", kernel_tuner)
    st = open_store(store, readonly=True)
    entries = st.iter_best()
    names = kernel_names(st, entries)
    entries = [e for e in _of_kernel(entries, names, kernel) if device is None or e["device"] == device]
    if not entries:
        raise KerntuneError("the cache holds no winners" + (f" for kernel {kernel}" if kernel else "")
                            + (f" on {device}" if device else ""))
    entries = one_table(entries, names, kernels_too=kernel_tuner is None)
    if kernel_tuner is not None:
        from kerntune.store.export import export_kernel_tuner

        make_folder("--kernel-tuner", kernel_tuner)
        for e in entries:
            if not e.get("run_id"):
                continue
            path = kernel_tuner / f"{e['kernel_hash']}_{e['problem_key'].replace('/', '_')}.json"
            n = write_output("--kernel-tuner", path, partial(export_kernel_tuner, st, e["run_id"], path))
            console.print(f"{e['problem_key']}: {n} configs -> {path}")
        return
    if as_json:
        from kerntune.run.dispatch import dispatch_table

        text = json.dumps(dispatch_table(entries), indent=1) + "\n"
    else:
        text = triton_configs(entries)
    if output is not None:
        write_output("--output", output, lambda: output.write_text(text))
        console.print(f"{len(entries)} winners -> {output}")
    else:
        typer.echo(text, nl=False)
