"""Atomic file writes (a reader, or a crash, never sees half a file) and the cross-process lock that serializes
a read-modify-write of a shared file."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tracker.errors import ToolError


def _umask() -> int:
    # Reading the umask means setting it; it is set back at once (no thread of ours creates files meanwhile).
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write to a temporary file beside `path`, fsync, then rename over it (atomic on POSIX). The file gets the
    permissions `open` would give a new file (0666 less the umask: 0644 usually), not mkstemp's private 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def unwritable(paths: Iterable[str | os.PathLike[str]]) -> Path | None:
    """The first folder that keeps one of `paths` (files or folders to write, existing or not) from being written,
    or None: the folder a file is renamed into, or the nearest one that exists above a path to create, when this
    process may not write into it (permissions, a read-only file system) or it is not a folder. Checked before a
    write of several files begins, so that it never stops half-way."""
    for path in paths:
        folder = Path(path).parent
        while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            return folder
    return None


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    write_text(path, json.dumps(data, indent=1, allow_nan=True) + "\n")


class LockError(ToolError):
    pass


@contextlib.contextmanager
def locked(path: str | os.PathLike[str], *, directory: bool = False) -> Iterator[None]:
    """Hold an exclusive flock on the lock file `path` (created if absent), or with `directory` on the directory
    `path` itself (created if absent; it leaves no file behind, for folders that are committed or published),
    across processes: a read-modify-write inside it never loses a concurrent writer's work. Blocks until the lock
    is free; released on exit, and by the kernel if the process dies. Not re-entrant."""
    path = Path(path)
    try:
        if directory:
            path.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)  # a link there would create its target
    except OSError as e:
        raise LockError(f"cannot write to {path if directory else path.parent}: {e.strerror or e}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the only descriptor releases the flock
