"""``kerntune options [STRATEGY]``: each strategy's ``-o`` options, from the models that check them."""

from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table

from kerntune.cli.common import console
from kerntune.strategies import STRATEGIES
from kerntune.strategies.options import describe_options, strategy_name


def options(strategy: Optional[str] = typer.Argument(None, help="One strategy (default: all)")) -> None:
    """List the -o options of each strategy: type, bounds, default and what they do."""
    names = [strategy_name(strategy)] if strategy else list(STRATEGIES)
    for name in names:
        table = Table("option", "type", "default", "what it does", title=name, title_justify="left")
        rows = describe_options(name)
        if not rows:
            console.print(f"{name}: checks its own options (see its module's docstring)")
            continue
        for row in rows:
            table.add_row(*row)
        console.print(table)
        if name == "bayes":
            console.print("and the options of its surrogate: `kerntune options gp` (the default) or `kerntune options tpe`")
