"""The asv result file, read fast: its JSON with the samples skipped unless asked for, and its header.

A year of nightly history is ~730 files of ~4 MB, almost all of it samples. Unless `with_samples`, every
samples column is found with a bracket-hopping scan and cut out before parsing, so a file costs its small rest, not
its megabytes of samples; anything the scan does not expect falls back to the plain JSON parser. Which run a file
holds is read from its first bytes. Files are only ever read, and only regular files, never through a link
(tracker.store.confined.open_file).
"""

from __future__ import annotations

import json
import mmap
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.store import confined

ASV_RESULTS_VERSION = 2  # asv's result file format (asv.results.Results.api_version)
MAX_RESULT_BYTES = 512 * 2**20  # a year's nightly file is ~4 MB; reading one takes ~4x its size in memory
# The dates a run can plausibly have, ms since the epoch: 2000-01-01 up to 2100-01-01. A date outside (seconds or
# nanoseconds given for ms, a negative number) is refused where it enters and skips its file where it is read.
DATE_MS_MIN, DATE_MS_MAX = 946_684_800_000, 4_102_444_800_000


def date_problem(date_ms: object) -> str | None:
    """Why `date_ms` is not a plausible run date in ms since the epoch, or None when it is."""
    if isinstance(date_ms, bool) or not isinstance(date_ms, int | str):
        return f"date {date_ms!r} is not a whole number of ms since the epoch"
    try:
        value = int(date_ms)
    except ValueError:
        return f"date {date_ms!r} is not a whole number of ms since the epoch"
    if not DATE_MS_MIN <= value < DATE_MS_MAX:
        return (f"date {value} is not in ms since the epoch between 2000 and 2100 (seconds or nanoseconds given "
                "for ms?)")
    return None


@dataclass(frozen=True)
class RunFile:
    """One asv result file: one run of the suite on one machine for one commit and environment."""

    path: Path
    machine: str
    commit: str
    date_ms: int
    env_name: str
    params: dict[str, str]

    @property
    def torch(self) -> str:
        return str(self.params.get("torch", "unknown"))


_RESULTS_KEY = re.compile(rb'"results"\s*:\s*\{')
_COLUMNS_KEY = re.compile(rb'"result_columns"\s*:\s*(\[[^\]]*\])')
_STRUCT = re.compile(rb'[\[\]{}"]')  # the bytes that change nesting, or start a string
_SCALAR = re.compile(rb'[^,\]}\s]*')
_WS = b" \t\n\r"
_OPEN, _CLOSE, _QUOTE = b"[{", b"]}", ord('"')


class _Unexpected(ValueError):
    """The fast reader met a layout it does not handle; the plain JSON parser is used instead."""


def _skip_ws(buf: Any, i: int) -> int:
    while buf[i] in _WS:
        i += 1
    return i


def _skip_string(buf: Any, i: int) -> int:
    """End of the JSON string starting at `i` (its opening quote)."""
    j = i + 1
    while True:
        j = buf.find(b'"', j)
        if j < 0:
            raise _Unexpected("unterminated string")
        k = j - 1
        while buf[k] == 0x5C:  # backslashes: an odd count escapes this quote
            k -= 1
        if (j - 1 - k) % 2 == 0:
            return j + 1
        j += 1


def _skip_value(buf: Any, i: int) -> int:
    """End of the JSON value at `i`, without building it: a regex hops from bracket to bracket over the numbers."""
    c = buf[i]
    if c == _QUOTE:
        return _skip_string(buf, i)
    if c not in _OPEN:
        return _SCALAR.match(buf, i).end()
    depth, j = 0, i
    while True:
        m = _STRUCT.search(buf, j)
        if m is None:
            raise _Unexpected("unterminated value")
        ch = buf[m.start()]
        if ch == _QUOTE:
            j = _skip_string(buf, m.start())
            continue
        depth += 1 if ch in _OPEN else -1
        j = m.end()
        if depth == 0:
            return j


def _skip_samples(buf: Any, i: int) -> int:
    """End of a samples value: null, or a list of (null | flat list of numbers). A sample list holds no brackets
    or strings, so its end is the next ']' (a memchr-speed find): the bulk of a file is crossed at memory speed."""
    if buf[i : i + 4] == b"null":
        return i + 4
    if buf[i] != 0x5B:
        raise _Unexpected(f"samples at {i}")
    i += 1
    while True:
        c = buf[i]
        if c == 0x5B:  # '['
            i = buf.find(b"]", i) + 1
            if i == 0:
                raise _Unexpected("unterminated samples")
        elif c == 0x6E:  # 'n'ull
            i += 4
        elif c == 0x5D:  # ']'
            return i + 1
        elif c in b", \t\n\r":
            i += 1
        else:
            raise _Unexpected(f"samples at {i}")


def _samples_spans(buf: Any) -> list[tuple[int, int]]:
    """Byte spans of every benchmark's samples column in an asv result file (empty when there are none)."""
    cols = _COLUMNS_KEY.search(buf)
    start = _RESULTS_KEY.search(buf)
    if not cols or not start:
        raise _Unexpected("no result_columns or results")
    columns = json.loads(cols.group(1))
    if "samples" not in columns:
        return []
    samples_col = columns.index("samples")
    spans = []
    i = _skip_ws(buf, start.end())
    while buf[i] != 0x7D:  # '}': the end of "results"
        i = _skip_ws(buf, _skip_string(buf, i))
        if buf[i] != 0x3A:  # ':'
            raise _Unexpected("key")
        i = _skip_ws(buf, i + 1)
        if buf[i] != 0x5B:
            raise _Unexpected("row")
        i = _skip_ws(buf, i + 1)
        col = 0
        while buf[i] != 0x5D:
            if col == samples_col:
                end = _skip_samples(buf, i)
                spans.append((i, end))
                i = end
            else:
                i = _skip_value(buf, i)
            col += 1
            i = _skip_ws(buf, i)
            if buf[i] == 0x2C:  # ','
                i = _skip_ws(buf, i + 1)
        i = _skip_ws(buf, i + 1)
        if buf[i] == 0x2C:
            i = _skip_ws(buf, i + 1)
    return spans


def parse_result_bytes(buf: Any, with_samples: bool = False) -> dict[str, Any]:
    """An asv result file's JSON (bytes or an mmap; NaN and Infinity allowed). Unless `with_samples`, every samples
    column is cut out before parsing (read as null): only the small rest is decoded and parsed."""
    if not with_samples:
        try:
            spans = _samples_spans(buf)
        except (_Unexpected, ValueError, IndexError):
            spans = None  # anything unusual: the plain parser decides (and reports a broken file)
        if spans is not None:
            parts, last = [], 0
            for a, b in spans:
                parts += [buf[last:a], b"null"]
                last = b
            parts.append(buf[last:])
            return json.loads(b"".join(parts))
    return json.loads(bytes(buf))


def parse_result_text(text: str, with_samples: bool = False) -> dict[str, Any]:
    return parse_result_bytes(text.encode("utf-8"), with_samples)


class _TooLarge(ValueError):
    pass


def read_result_file(path: Path, with_samples: bool = False) -> dict[str, Any]:
    """The parsed file; ValueError (with the reason) when it is not a readable asv result file of our format (one
    larger than MAX_RESULT_BYTES included: parsing it would take several times its size in memory)."""
    try:
        with confined.open_file(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_RESULT_BYTES:
                raise _TooLarge(f"{size / 2**20:.0f} MiB, larger than the {MAX_RESULT_BYTES // 2**20} MiB a result "
                                "file can be")
            try:
                buf: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # no copy of the samples' megabytes
            except ValueError:  # an empty file cannot be mapped
                buf = b""
            try:
                data = parse_result_bytes(buf, with_samples)
            finally:
                if isinstance(buf, mmap.mmap):
                    buf.close()
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 text ({e.reason})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply to be an asv result file") from None
    except _TooLarge:
        raise
    except ValueError as e:
        raise ValueError(f"not valid JSON, truncated or corrupt ({e})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    version = data.get("version")
    if version != ASV_RESULTS_VERSION:
        raise ValueError(f"asv result format version {version!r}; this tracker reads version {ASV_RESULTS_VERSION}")
    for key in ("commit_hash", "date", "params", "result_columns", "results"):
        if key not in data:
            raise ValueError(f"missing key {key!r}")
    columns = data["result_columns"]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise ValueError("\"result_columns\" is not a list of column names")
    if not isinstance(data["results"], dict) or not all(isinstance(r, list) for r in data["results"].values()):
        raise ValueError("\"results\" is not an object of benchmark rows")
    return data


_HEAD = {
    "commit": re.compile(r'"commit_hash"\s*:\s*"([0-9A-Fa-f]+)"'),
    "env": re.compile(r'"env_name"\s*:\s*"([^"]*)"'),
    "date": re.compile(r'"date"\s*:\s*(\d+)'),
    "params": re.compile(r'"params"\s*:\s*(\{[^{}]*\})'),
}


def run_of(path: Path, data: dict[str, Any]) -> RunFile:
    """The run a parsed file (or its header's fields) holds; the machine is its folder's name when unrecorded."""
    raw = data["params"]
    if not isinstance(raw, dict) or not all(isinstance(v, str | int | float | None) for v in raw.values()):
        raise ValueError("\"params\" is not an object of machine keys and their values")
    params = {k: str(v) for k, v in raw.items()}
    commit = data["commit_hash"]
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9A-Fa-f]{1,64}", commit):
        raise ValueError(f"commit_hash {commit!r} is not a hexadecimal commit hash")
    problem = date_problem(data["date"])
    if problem:
        raise ValueError(problem)
    return RunFile(path, params.get("machine") or path.parent.name, commit, int(data["date"]),
                   str(data.get("env_name", "")), params)


def read_header(path: Path) -> RunFile:
    """Which run a file holds, from its first bytes (asv writes commit, env, date and params first)."""
    with confined.open_file(path) as f:
        head = f.read(16384).decode("utf-8", errors="replace")
    found = {k: rx.search(head) for k, rx in _HEAD.items()}
    if all(found.values()) and head.lstrip().startswith("{"):
        try:
            params = json.loads(found["params"].group(1))
        except ValueError:
            params = None
        if isinstance(params, dict):
            data = {"commit_hash": found["commit"].group(1), "date": found["date"].group(1), "params": params,
                    "env_name": found["env"].group(1)}
            return run_of(path, data)
    return run_of(path, read_result_file(path))
