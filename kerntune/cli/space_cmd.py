"""``kerntune space …``: look at a search space or a recording."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from kerntune.cli.common import console, print_unwrapped, tie_note
from kerntune.errors import KerntuneError
from kerntune.evaluate import load_recording
from kerntune.prune.spacefile import is_space_file
from kerntune.space import jsonable, load_space

app = typer.Typer(no_args_is_help=True, help="Inspect search spaces and recorded spaces.")


@app.command("info")
def info(file: Path = typer.Argument(..., help="A recording (Kernel Tuner cache, T4, KTT results, kerntune table) or a space YAML/JSON"),
         as_json: bool = typer.Option(False, "--json", help="Print the facts as JSON")) -> None:
    """Parameters, counts, valid share, optimum and median/optimum of a space."""
    if not file.exists():
        raise KerntuneError(f"file not found: {file}")
    if file.is_file() and is_space_file(file):
        space = load_space(file)
        facts = {"params": len(space.params), "cartesian": space.cartesian_size, "valid": space.count(),
                 "valid_share": space.count() / space.cartesian_size}
        space_obj, rec_summary = space, None
    else:
        rec = load_recording(file)
        rec_summary = rec.summary()
        space_obj, facts = rec.space, rec_summary
    if as_json:
        console.print_json(json.dumps({k: jsonable(v) if not isinstance(v, dict) else
                                       {a: jsonable(b) for a, b in v.items()} for k, v in facts.items()}))
        return
    table = Table(title=f"{file.name}", show_header=True)
    table.add_column("parameter")
    table.add_column("kind / values")
    table.add_column("default")
    for p in space_obj.params:
        table.add_row(p.name, p.type_text(), repr(jsonable(space_obj.default[p.name])))
    console.print(table)
    for c in space_obj.constraints:
        console.print(f"constraint: {c.text}")
    console.print(f"cartesian size: {space_obj.cartesian_size:,}")
    if rec_summary is None:
        console.print(f"valid configs: {facts['valid']:,} ({facts['valid_share']:.1%} of the cartesian product)")
        return
    s = rec_summary
    console.print(f"kernel: {s['kernel']}  device: {s['device']}  problem size: {s['problem_size']}  format: {s['format']}")
    console.print(f"recorded configs: {s['recorded']:,}  successful: {s['ok']:,}  "
                  f"valid share: {s['valid_share']:.1%} of the cartesian product")
    console.print("status counts: " + ", ".join(f"{k}={v}" for k, v in sorted(s["status_counts"].items())))
    if s.get("note"):  # a file tuned for another objective than time
        print_unwrapped(f"note: {s['note']}")
    if s["optimum_ms"] is not None:
        print_unwrapped(f"optimum: {s['optimum_ms']:.6g} ms at {json.dumps({k: jsonable(v) for k, v in s['optimum_config'].items()})}")
        console.print(f"median: {s['median_ms']:.6g} ms  median/optimum: {s['median_over_optimum']:.3f}")
        if s.get("optimum_ties"):
            print_unwrapped(tie_note(s["optimum_ties"]))


@app.command("schema")
def schema(file: Path = typer.Argument(..., help="Space YAML/JSON or recording")) -> None:
    """Print the JSON schema a model's answer must follow for this space."""
    space = load_space(file) if file.is_file() and is_space_file(file) else load_recording(file).space
    console.print_json(json.dumps(space.json_schema()))


from kerntune.cli import prune_cmd  # noqa: E402 - registered here so that `kerntune space …` holds them

app.command("prune")(prune_cmd.prune)
app.command("expand")(prune_cmd.expand)
app.command("evaluate")(prune_cmd.evaluate)
