"""The store's side of the file system: run locks, why a write failed, and reading a store
whose directory cannot be written.

Kept apart from ``sqlite`` (which imports these names) because none of it is SQL: it is
what SQLite leaves to the caller, the files around the database and what the disk says.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path

from kerntune.errors import StoreError

log = logging.getLogger("kerntune.store")


#: This process's one descriptor on each run-lock file, and how many holds it has on each run's byte.
#: Why one descriptor: run locks are POSIX record locks (``lockf``), which belong to the process, and
#: closing *any* descriptor of the file drops *all* of them; with a descriptor per lock, one run's
#: release (or a refused acquire's close) silently freed every other run this process held in that
#: store (two decorated kernels tuning in two threads), and another process could then resume it.
_FDS: dict[str, int] = {}
_HOLDS: dict[tuple[int, int, int], int] = {}  # (device, inode, byte) -> holds
_GUARD = threading.Lock()


def _forget_after_fork() -> None:
    """A forked child holds none of its parent's record locks: it starts with no descriptors or holds."""
    global _GUARD
    _GUARD = threading.Lock()
    for fd in _FDS.values():
        try:
            os.close(fd)  # the child's copy: closing it drops nothing of the parent's
        except OSError:
            pass
    _FDS.clear()
    _HOLDS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _same_file(fd: int, name: str) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(name)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _close_if_unheld(fd: int, name: str, key: tuple[int, int, int]) -> None:
    """Close ``fd`` once this process holds no run of its file (so a long process, a test suite, does
    not keep a descriptor per store it ever locked); caller holds ``_GUARD``."""
    if any(k[:2] == key[:2] for k in _HOLDS):
        return
    if _FDS.get(name) == fd:
        del _FDS[name]
    try:
        os.close(fd)
    except OSError:
        pass


class RunLock:
    """One run held by this process (see ``Store.lock_run``); ``release`` or exit frees it.  Holds
    are counted per process (a process is never kept out of its own runs, as before): the byte is
    unlocked at the last release."""

    def __init__(self, fd: int | None, key: tuple[int, int, int] | None = None, name: str = "") -> None:
        self.fd, self.key, self.name = fd, key, name

    @classmethod
    def acquire(cls, path: Path, run_id: str) -> "RunLock":
        try:
            import fcntl
        except ImportError:  # Windows: no advisory locks; one process per run is up to the user
            return cls(None)
        offset = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:4], "big") & 0x3FFFFFFF
        name = os.path.realpath(path)
        with _GUARD:
            fd = _FDS.get(name)
            if fd is not None and not _same_file(fd, name):
                fd = None  # the file was removed or replaced: a lock on the old one keeps no one out
            if fd is None:
                try:
                    fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o644)
                except OSError as exc:
                    raise StoreError(f"cannot lock run {run_id}: {path}: {exc.strerror}") from None
                _FDS[name] = fd  # an earlier descriptor of a replaced file stays open: closing frees its holds
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino, offset)
            if key in _HOLDS:
                _HOLDS[key] += 1
                return cls(fd, key, name)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
            except OSError:
                _close_if_unheld(fd, name, key)  # never while this process holds another run of the file
                raise StoreError(f"run {run_id} is in use by another kerntune process; wait for it to end"
                                 " (or end it) before continuing this run") from None
            _HOLDS[key] = 1
        return cls(fd, key, name)

    def release(self) -> None:
        if self.fd is None or self.key is None:
            self.fd = None
            return
        import fcntl

        with _GUARD:
            left = _HOLDS.get(self.key, 0) - 1
            if left > 0:
                _HOLDS[self.key] = left
            elif self.key in _HOLDS:
                del _HOLDS[self.key]
                try:
                    fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.key[2])
                except OSError:
                    pass
                _close_if_unheld(self.fd, self.name, self.key)
        self.fd = None


def free_bytes(path: Path) -> int | None:
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):  # no statvfs on Windows
        return None
    if st.f_blocks == 0:
        return None   # /proc, /sys and the like have no blocks at all: "0 bytes free" is no full disk
    return st.f_bavail * st.f_frsize


def file_size_limit_reached(path: Path) -> int | None:
    """The RLIMIT_FSIZE (``ulimit -f``) the store or its WAL has reached, if any."""
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if soft == resource.RLIM_INFINITY:
        return None
    sizes = []
    for suffix in ("", "-wal"):
        try:
            sizes.append(Path(f"{path}{suffix}").stat().st_size)
        except OSError:
            pass
    return soft if sizes and max(sizes) + 65536 >= soft else None


def writable(path: Path) -> bool:
    """Whether this process may write ``path`` (or create it in its directory)."""
    target = path if path.exists() else path.parent
    return os.access(target, os.W_OK) and os.access(path.parent, os.W_OK)


def wal_bytes(path: Path) -> int:
    """The size of the store's ``-wal`` file (0 when there is none)."""
    try:
        return Path(f"{path}-wal").stat().st_size
    except OSError:
        return 0


def readable_copy(path: Path) -> tuple[tempfile.TemporaryDirectory, Path]:
    """A copy of the store and its ``-wal`` in a fresh temporary directory, to read instead of it.

    Why: reading a WAL store needs its shared-memory file (``-shm``), which a read-only directory
    cannot hold once the writer is gone; ``immutable=1`` reads without it but ignores the WAL, so
    every trial a killed run committed after the last checkpoint was silently missing.  SQLite
    rebuilds the index from the copied WAL in a directory it may write.  The two files are copied
    one after the other, so a copy during which either changed (a writer after all) is made again.
    The caller removes the directory (``TemporaryDirectory.cleanup``) when done.
    """
    wal = Path(f"{path}-wal")
    tmp = tempfile.TemporaryDirectory(prefix="kerntune-store-")
    copy = Path(tmp.name) / path.name
    try:
        for _ in range(3):
            before = _states(path, wal)
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, f"{copy}-wal")
            if _states(path, wal) == before:
                break
        else:
            raise StoreError(f"cannot read store {path}: it changed while it was copied to be read (a run is"
                             " writing it?); try again once it has ended")
    except OSError as exc:
        tmp.cleanup()
        raise StoreError(f"cannot read store {path}: it cannot be read in place and trials are still in"
                         f" {wal.name}, which could not be copied to read ({exc.strerror or exc})") from None
    except StoreError:
        tmp.cleanup()
        raise
    log.warning("%s cannot be read in place (a read-only directory holds no -shm file) and trials are still in %s:"
                " reading a copy of both (%d bytes) made in %s", path, wal.name,
                copy.stat().st_size + wal_bytes(copy), tmp.name)
    return tmp, copy


def _states(*paths: Path) -> list[tuple[int, int]]:
    """(size, modification time) of each file: what a copy made meanwhile would have missed."""
    out = []
    for p in paths:
        st = p.stat()
        out.append((st.st_size, st.st_mtime_ns))
    return out
