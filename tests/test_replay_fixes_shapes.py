"""Shapes files and dispatch tables: a line listing several shapes, odd spellings, and malformed
files give the shapes meant or one KerntuneError line, never a merged shape or a traceback."""

from __future__ import annotations

import pytest

from kerntune.errors import KerntuneError
from kerntune.run.dispatch import dispatch_table, load_dispatch
from kerntune.run.shapes import read_shapes


def test_a_line_listing_shapes_is_several_shapes_not_one_merged_shape(tmp_path) -> None:
    plain = tmp_path / "p.txt"
    plain.write_text("4096x4096, 2048x2048\n")
    assert read_shapes(plain) == [(4096, 4096), (2048, 2048)]   # was [(4096, 4096, 2048, 2048)]
    f = tmp_path / "s.txt"
    f.write_text("4096x4096, 2048x2048; 1024X1024\n4096 x 4096\n")
    assert read_shapes(f) == [(4096, 4096), (2048, 2048), (1024, 1024)]
    amb = tmp_path / "a.txt"
    amb.write_text("4096,4096x4096\n")
    with pytest.raises(KerntuneError, match="a.txt:1"):
        read_shapes(amb)


def test_shapes_separated_by_spaces_alone_are_several_shapes(tmp_path) -> None:
    """``4096x4096 2048x2048`` was read as the one shape (4096, 4096, 2048, 2048); spaces between plain
    numbers still make one shape, and ``4096x4096 2048`` (which numbers belong together?) is refused."""
    f = tmp_path / "s.txt"
    f.write_text("4096x4096 2048x2048\t1024 x 1024\n512 512\n")
    assert read_shapes(f) == [(4096, 4096), (2048, 2048), (1024, 1024), (512, 512)]
    amb = tmp_path / "a.txt"
    amb.write_text("4096x4096 2048\n")
    with pytest.raises(KerntuneError, match="a.txt:1"):
        read_shapes(amb)


@pytest.mark.parametrize("content", [b"4\xc2\xb2x4\n", b"\xff\xfe4096x4096\n"])
def test_bad_shapes_files_are_one_line_errors(tmp_path, content) -> None:
    f = tmp_path / "s.txt"
    f.write_bytes(content)
    with pytest.raises(KerntuneError):
        read_shapes(f)
    with pytest.raises(KerntuneError):
        read_shapes(tmp_path)   # a directory


@pytest.mark.parametrize("table", [
    {"format": "kerntune-dispatch/1"},
    {"format": "kerntune-dispatch/1", "entries": None},
    {"format": "kerntune-dispatch/1", "entries": [{"shape": [64, 64]}]},
    {"format": "kerntune-dispatch/1", "entries": [{"shape": "64x64", "config": {}, "time_ms": 1.0}]},
    {"format": "kerntune-dispatch/1", "entries": [{"shape": [64, 64], "config": {}, "time_ms": "fast"}]},
])
def test_malformed_dispatch_tables_are_one_line_errors(table) -> None:
    with pytest.raises(KerntuneError, match="dispatch table"):
        load_dispatch(table)


def test_dispatch_table_skips_keys_of_non_ascii_digits() -> None:
    row = {"config": {"b": 1}, "time_ms": 1.0, "device": "", "versions": "", "kernel_hash": ""}
    table = dispatch_table([{**row, "problem_key": "64x64"}, {**row, "problem_key": "6\u00b2x64"}])
    assert [e["shape"] for e in table["entries"]] == [[64, 64]]
    assert load_dispatch(table) == [((64, 64), {"b": 1}, 1.0)]
