"""Every stored format's version, and the migrations that bring an older document to the current shape.

A results branch holds a year of nights, each written by the tool of its day, and every one must still read. So each
format the tool writes carries its generation in a `format` field (the first key), and is read through `Format.read`:
a document of an older generation goes through the format's migrations in order (`update_to_2`, `update_to_3`, ...:
each takes the document of the generation before and returns it in its own), so the code past the reader only ever
sees the current shape. A document of a generation newer than the tool knows is refused with one line (`FormatTooNew`,
exit 1) and left as it is: the tool never measures again or rewrites what it cannot read.

A document without the field is generation 1: what the tool wrote before formats were versioned (the paired record,
versioned from its start, must carry it). To change a format's shape: write the new shape, append its `update_to_N`
to the format's migrations below (its current version is then N), and keep a fixture of the old generation read by
tests/test_formats.py.

The formats: `CELL`, one measurement in the cell store, and `LAUNCH_FLOOR`, its run's launch floor beside them
(tracker.store.cells); `SUMMARY`, `compile-baselines summary
--format json` (tracker.publish.summaryjson); `COMPARISON`, `compile-baselines compare --format json`
(tracker.publish.comparison); `PAIRED`, how two runs were measured against each other (tracker.store.pairing).

Standard library only: asv imports the benchmark suite, and with it the cell store, in every benchmark process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tracker.errors import ToolError

KEY = "format"
Document = dict[str, Any]
Migration = Callable[[Document], Document]


class FormatError(ToolError):
    """A stored document whose format this tool cannot read: damaged (no version where one is needed, or one that is
    not a positive whole number), or newer (`FormatTooNew`)."""


class FormatTooNew(FormatError):
    """A document written by a newer version of the tool than this one."""


@dataclass(frozen=True)
class Format:
    """One stored format: its name in messages, its migrations in order (`migrations[i]` takes generation i + 1 to
    i + 2, so the current generation is one more than their number), and whether a document without the field is
    generation 1 (`unversioned`) or damaged."""

    name: str
    migrations: tuple[Migration, ...] = ()
    unversioned: bool = True

    @property
    def current(self) -> int:
        return len(self.migrations) + 1

    def version(self, doc: Mapping[str, Any], where: str) -> int:
        """The generation `doc` says it is (FormatError when it says none it could be, FormatTooNew when it is
        newer than `current`)."""
        if KEY not in doc and self.unversioned:
            return 1
        version = doc.get(KEY)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise FormatError(f"{where}: no {self.name} format version ({KEY} {version!r})")
        if version > self.current:
            raise FormatTooNew(f"{where}: {self.name} format {version} is newer than this tool reads "
                               f"({self.current}): upgrade compile-baselines; the file is left as it is")
        return version

    def read(self, doc: Any, where: str) -> Document:
        """`doc`, a document of this format as stored, in the current shape, without its version field."""
        if not isinstance(doc, dict):
            raise FormatError(f"{where}: a {type(doc).__name__}, not a {self.name}")
        version = self.version(doc, where)
        body = {k: v for k, v in doc.items() if k != KEY}
        for update in self.migrations[version - 1:]:
            body = update(body)
        return body

    def stamp(self, doc: Mapping[str, Any]) -> Document:
        """`doc` as it is stored: the current version first."""
        return {KEY: self.current, **{k: v for k, v in doc.items() if k != KEY}}


def update_cell_to_2(cell: Document) -> Document:
    """Generation 1 cells from before replicates (a cell measured once) name none: they are replicate 1."""
    return {**cell, "replicate": cell.get("replicate") or 1}


def update_paired_to_2(record: Document) -> Document:
    """A paired record of generation 1 is from before shared baselines: every cell was measured in pairs."""
    return {**record, "shared": None}


def update_paired_to_3(record: Document) -> Document:
    """A paired record of generation 2 is from before the pairs the same needs (any number) and the rounds' stop
    reason (none said); one written while generation 3 was made may carry the pairs already."""
    return {"same_pairs": 0, "stopped": "", **record}


def update_paired_to_4(record: Document) -> Document:
    """A paired record of generation 3 is from before changes were confirmed on pairs of two rounds, the rounds'
    shared noise weighed in: one round, not counted."""
    return {"confirm_rounds": 1, **record}


def update_paired_to_5(record: Document) -> Document:
    """A paired record of generation 4 is from before an undecided cell's estimate of the pairs that would settle it
    counted its instance's modes tested with it: its own test alone."""
    return {"more_by_family": False, **record}


def update_paired_to_6(record: Document) -> Document:
    """A paired record of generation 5 is from before a kernel whose own cell is undecided had its speedup's change
    undecided too: a change under the cell's minimum change was the same."""
    return {"kernel_undecided": False, **record}


def update_paired_to_7(record: Document) -> Document:
    """A paired record of generation 6 is from before the rounds' shared variance scaled with each cell's own: every
    cell of a class carried the class's."""
    return {"round_by_scale": False, **record}


def update_comparison_to_2(doc: Document) -> Document:
    """A comparison of generation 1 is from before the same needed a number of pairs (any), the count of best
    latencies undecided (those of its listed instances, where it lists every one; else unknown, null) and a paired
    measurement's stop reason (none said)."""
    instances = doc.get("instances") or []
    summary = doc.get("summary") or {}
    listed_all = len(instances) == summary.get("instances")
    undecided = sum(1 for i in instances if i.get("latency_verdict") == "undecided" and not i.get("best_changed"))
    return {**doc, "summary": {**summary, "undecided_best": undecided if listed_all else None},
            "rule": {**(doc.get("rule") or {}), "same_pairs": 0}, "stopped": ""}


CELL = Format("cell record", (update_cell_to_2,))
LAUNCH_FLOOR = Format("launch floor")
SUMMARY = Format("summary JSON")
COMPARISON = Format("comparison JSON", (update_comparison_to_2,))
PAIRED = Format("paired record", (update_paired_to_2, update_paired_to_3, update_paired_to_4, update_paired_to_5,
                                  update_paired_to_6, update_paired_to_7), unversioned=False)

FORMATS: dict[str, Format] = {f.name: f for f in (CELL, LAUNCH_FLOOR, SUMMARY, COMPARISON, PAIRED)}

__all__ = ["CELL", "COMPARISON", "FORMATS", "KEY", "LAUNCH_FLOOR", "PAIRED", "SUMMARY", "Format", "FormatError",
           "FormatTooNew", "update_cell_to_2", "update_comparison_to_2", "update_paired_to_2", "update_paired_to_3",
           "update_paired_to_4", "update_paired_to_5", "update_paired_to_6", "update_paired_to_7"]
