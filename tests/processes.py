"""Whether a process is alive, for tests that check what a run leaves behind."""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """Running or sleeping: a zombie (exited, not yet reaped) or a vanished pid is not alive."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")
