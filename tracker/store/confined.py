"""What the tool reads and writes under a root (a results directory, a cell store, a branch's files, a published
site's output folder) stays under it: nothing below the root is reached through a symlink, and only regular files
and folders are opened, so a link or a FIFO placed there (by anyone who can push to the results branch, say) never
makes the tool read, write or delete what lies elsewhere, nor wait forever on a pipe.

The root itself may be a link (a results directory kept on another disk); below it, each component is checked with
lstat. A listing (`files`, `folders`) leaves out what fails, with one warning line for each link or special file;
a read (`read_text`, `open_file`) and a write (`check` of the folder written into) raise `Unconfined`, an OSError,
so every caller that already handles a file it cannot read or write says so in its one line. The checks guard
against what is on disk when the command starts, not against another process swapping a folder for a link while it
runs (that process could write the files itself).
"""

from __future__ import annotations

import errno
import fnmatch
import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

# The most a JSON file beside the results (machine.json, benchmarks.json, a cell's record) is read up to; asv's
# suite description of a large suite is a few MB. A result file is mapped, not read (tracker.store.asvjson).
MAX_SMALL_BYTES = 64 * 2**20


class Unconfined(OSError):
    """A path under a root that is reached through a symlink, that is not a regular file or folder, or a file larger
    than it can be: never followed, opened or written through. `at` is the component at fault."""

    def __init__(self, at: Path, why: str, code: int = errno.EINVAL) -> None:
        self.at, self.reason = at, why + _DONE.get(why, "")
        super().__init__(errno.ELOOP if why == "a symlink" else code, f"{at} is {self.reason}")

    def __str__(self) -> str:
        return str(self.strerror)


_DONE = {"a symlink": ", which is never followed", "a FIFO": ", which is never opened",
         "a socket": ", which is never opened", "a device or special file": ", which is never opened"}


def _kind(mode: int) -> str | None:
    """What a file of `mode` is, when it is neither a regular file nor a folder."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device or special file"


def problem(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Unconfined | None:
    """Why `path` is not confined to `root`: not below it, a `..` in it, or its first component below `root` that is
    a symlink or neither a folder nor a regular file. None when every component that exists is one (what does not
    exist yet leads nowhere; the operation that needs it says so)."""
    root, path = Path(root), Path(path)
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return Unconfined(path, f"not under {root}")
    here = root
    for part in parts:
        if part == "..":
            return Unconfined(path, f"a path that climbs out of {root}")
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except OSError:
            return None
        if why := _kind(mode):
            return Unconfined(here, why)
    return None


def check(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """`path`, when it is confined to `root` (`problem`); Unconfined otherwise. Writers check the folder they write
    into: a file put in place by a rename replaces a link there, never what it points to."""
    if (why := problem(root, path)) is not None:
        raise why
    return Path(path)


def warn_stderr(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr)


def quiet(line: str) -> None:
    """Say nothing of what a listing leaves out (where another listing of the same place says it)."""


def _matches(root: Path, pattern: str, want_dir: bool, warn: Callable[[str], object]) -> list[Path]:
    """The paths under `root` matching `pattern` (components of fnmatch patterns, as pathlib's glob), found without
    entering a link: each link or special file that matches a component is left out, one warning each."""
    parts = pattern.split("/")
    found: list[Path] = []

    def walk(folder: Path, depth: int) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if not fnmatch.fnmatchcase(entry.name, parts[depth]):
                continue
            path = Path(entry.path)
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            last = depth == len(parts) - 1
            if why := _kind(mode):
                warn(f"skipped {path}: {Unconfined(path, why).reason}")
            elif stat.S_ISDIR(mode) and not last:
                walk(path, depth + 1)
            elif last and stat.S_ISDIR(mode) == want_dir:
                found.append(path)

    if Path(root).is_dir():
        walk(Path(root), 0)
    return sorted(found)


def files(root: str | os.PathLike[str], pattern: str, warn: Callable[[str], object] = warn_stderr) -> list[Path]:
    """The regular files under `root` matching `pattern` ("*/*.json"), none of them reached through a link; each
    link or special file on the way is left out with one warning line ("skipped P: P is a symlink, ...")."""
    return _matches(Path(root), pattern, False, warn)


def folders(root: str | os.PathLike[str], pattern: str, warn: Callable[[str], object] = warn_stderr) -> list[Path]:
    """The folders under `root` matching `pattern`, as `files` finds files."""
    return _matches(Path(root), pattern, True, warn)


def strays(root: str | os.PathLike[str]) -> list[Unconfined]:
    """Every link and special file anywhere under `root` (links to folders are not entered): what a reader that
    walks the whole tree and follows links, as asv's publish does, must not be given."""
    found = []
    for folder, dirs, names in os.walk(root):
        for name in (*dirs, *names):
            path = Path(folder) / name
            try:
                why = _kind(os.lstat(path).st_mode)
            except OSError:
                continue
            if why:
                found.append(Unconfined(path, why))
    return sorted(found, key=lambda e: e.at)


def open_file(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` opened for reading when it is a regular file: never through a link at its last component, and never
    a FIFO (which would block) or a device; Unconfined otherwise. Its folders are the caller's to check."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise Unconfined(Path(path), "a symlink") from None
        raise
    try:
        why = _kind(os.fstat(fd).st_mode)
        if why is None and stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
        if why is not None:
            raise Unconfined(Path(path), why)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_text(root: str | os.PathLike[str], path: str | os.PathLike[str], limit: int = MAX_SMALL_BYTES) -> str:
    """The UTF-8 text of the regular file `path` under `root`, confined (`check`, `open_file`); an OSError when it is
    not one or is larger than `limit` bytes (a JSON file beside the results is small), UnicodeDecodeError (a
    ValueError) when it is not UTF-8."""
    check(root, Path(path).parent)
    with open_file(path) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise Unconfined(Path(path), f"larger than the {limit // 2**20} MiB such a file can be", errno.EFBIG)
    return data.decode("utf-8")


def read_json(root: str | os.PathLike[str], path: str | os.PathLike[str], limit: int = MAX_SMALL_BYTES) -> Any:
    """The JSON file `path` under `root`, confined (`read_text`), parsed; ValueError for one that is not JSON, not
    UTF-8, or nested too deeply to parse (a file written by hand: the parser's recursion limit is no reason for a
    traceback)."""
    text = read_text(root, path, limit)
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


__all__ = ["MAX_SMALL_BYTES", "Unconfined", "check", "files", "folders", "open_file", "problem", "quiet",
           "read_json", "read_text", "strays", "warn_stderr"]
