"""Which file is a space file, and what the expand diff says an additive group holds.

`space info`/`space schema` once told a space file from a recording by the first 4096 bytes,
while `space prune`/`expand` parsed the whole file: a valid JSON space file whose ``params`` came
later was "not a recording; ... `kerntune space info FILE` reads a space file" from the very
command it named.  And the diff stated ``1 + sum(|values| - 1)`` combinations for a new group
even when an edit had removed a member's base value, which leaves far fewer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kerntune.prune import Edit, apply_edits
from kerntune.prune.edits import SpaceState
from kerntune.prune.spacefile import is_space_file
from kerntune.space import load_space
from tests.cli_runs import one_line, run_cli

# The README's example space file.
README_SPACE = """\
name: matmul
params:
  - {name: BLOCK_M, kind: pow2, low: 16, high: 256, description: rows of C per program}
  - {name: BLOCK_K, kind: choice, options: [32, 64, 128]}
  - {name: num_warps, kind: choice, options: [2, 4, 8]}
  - {name: loop_order, kind: permutation, items: [m, n, k]}
  - {name: block_sizes, kind: list, length: 2, element: {kind: pow2, low: 16, high: 128}}
  - {name: use_tma, kind: bool}
constraints:
  - BLOCK_M * BLOCK_K <= 16384
  - block_sizes[0] <= block_sizes[1]
default: {BLOCK_M: 64, num_warps: 4}
"""

# Four parameters; A, B and C become one additive group, D multiplies with it.
GROUP_SPACE = """\
params:
  - {name: A, kind: choice, options: [1, 2, 4]}
  - {name: B, kind: choice, options: [0.5, 1.0, 2.0]}
  - {name: C, kind: choice, options: [a, b, c]}
  - {name: D, kind: pow2, low: 1, high: 8}
default: {A: 2, B: 1.0, C: b, D: 2}
"""


def _late_params_space(tmp_path: Path) -> tuple[Path, int]:
    """The README's space as sorted JSON with a long description, so "params" lies past 4096 bytes;
    the file and its valid config count."""
    (tmp_path / "s1.yaml").write_text(README_SPACE)
    space = load_space(tmp_path / "s1.yaml")
    data = dict(space.to_dict(), description="A long note on the kernel. " * 170)
    path = tmp_path / "sorted.json"
    path.write_text(json.dumps(data, sort_keys=True, indent=2))
    assert path.read_text().index('"params"') > 4096
    return path, space.count()


def test_space_info_and_schema_read_a_json_space_file_whose_params_lie_past_4096_bytes(tmp_path: Path) -> None:
    """`space info` scanned 4096 bytes for "params", took the file for a recording and refused it
    (exit 2) with a hint to run itself; `space prune` accepted the same file."""
    path, valid = _late_params_space(tmp_path)
    info = run_cli(tmp_path, "space", "info", str(path))
    assert info.returncode == 0, info.stderr
    assert f"valid configs: {valid:,}" in info.stdout
    schema = run_cli(tmp_path, "space", "schema", str(path))
    assert schema.returncode == 0, schema.stderr
    assert json.loads(schema.stdout)["type"] == "object"


def test_space_info_and_expand_share_one_space_file_detector(tmp_path: Path) -> None:
    """Two detectors disagreed; `space info` and `space expand` must read the same file as a space
    file, so both give the same count for it."""
    path, valid = _late_params_space(tmp_path)
    assert is_space_file(path)
    (tmp_path / "none.json").write_text('{"edits": []}')
    out = run_cli(tmp_path, "space", "expand", "--space", str(path), "--edits", "none.json", "-o", "same.json")
    assert out.returncode == 0, out.stderr
    assert f"configs: {valid:,} -> {valid:,}" in out.stdout


@pytest.mark.parametrize("text,needle", [
    ('{"params": [{"name": "A", "kind": "choice", "options": [1, 2]},]}', "not valid JSON"),
    ('{"params": [{"name": "A", "kind": "choice", "options": [1, 2]}], "format": "x"}',
     "unknown top-level key 'format'"),
])
def test_a_faulty_json_space_file_gets_the_same_space_error_from_info_and_expand(tmp_path: Path, text: str,
                                                                                  needle: str) -> None:
    """With two detectors, `space expand` took a broken JSON space file (or one with a stray key) for
    a recording and answered with a recording's error; `space info` named the space file's fault."""
    path = tmp_path / "bad.json"
    path.write_text(text)
    (tmp_path / "none.json").write_text('{"edits": []}')
    one_line(run_cli(tmp_path, "space", "info", str(path)), needle)
    one_line(run_cli(tmp_path, "space", "expand", "--space", str(path), "--edits", "none.json", "-o", "o.json"),
             needle)


def test_expand_diff_counts_a_group_whose_base_value_was_removed_as_its_configs(tmp_path: Path) -> None:
    """Split A, B, C into a group, then drop B's base 1.0: B is always off base, A and C keep theirs,
    so the group holds B's 2 values (8 configs with D's 4).  The diff said 6 combinations."""
    (tmp_path / "s2.yaml").write_text(GROUP_SPACE)
    (tmp_path / "ed2.json").write_text(json.dumps({"edits": [
        {"op": "split_group", "params": ["A", "B", "C"]}, {"op": "remove_value", "param": "B", "value": 1.0}]}))
    out = run_cli(tmp_path, "space", "expand", "--space", "s2.yaml", "--edits", "ed2.json", "-o", "s2o.yaml")
    assert out.returncode == 0, out.stderr
    assert "+group (A, B, C): additive, 2 combinations instead of 3 x 2 x 3" in out.stdout
    info = run_cli(tmp_path, "space", "info", "s2o.yaml")
    assert info.returncode == 0, info.stderr
    assert "valid configs: 8 " in info.stdout  # 4 values of D x the group's 2


@pytest.mark.parametrize("removed", [[], [("B", 1.0)], [("A", 2)], [("C", "b"), ("C", "a")], [("A", 1), ("A", 4)]])
def test_diff_group_count_matches_the_group_projections_of_the_edited_space(tmp_path: Path,
                                                                           removed: list[tuple[str, object]]) -> None:
    """The stated count is the number of distinct (A, B, C) combinations among the edited space's
    configs, with and without a base removed (before: always 1 + sum(|values| - 1))."""
    (tmp_path / "s2.yaml").write_text(GROUP_SPACE)
    state = SpaceState.of(load_space(tmp_path / "s2.yaml"))
    edits = [Edit("split_group", params=["A", "B", "C"])] + [Edit("remove_value", n, v) for n, v in removed]
    out = apply_edits(state, edits)
    assert not out.refused, out.refused
    line = next(x for x in out.diff(state).splitlines() if x.startswith("  +group"))
    stated = int(re.search(r"additive, (\d+) combinations", line).group(1))  # type: ignore[union-attr]
    seen = {(c["A"], c["B"], c["C"]) for c in out.space.enumerate()}
    assert stated == len(seen), line

