"""The rule a comparison's cells were judged by, in words: the terminal table's footer and the PR comment's fine
print say the same thing, from here, with the numbers of the comparison's ChangeRule (never restated).

A comparison judges a cell one of three ways (tracker.analyse.judge): against its own noise (the noise test, where
anything is known of it); where nothing is, by the fixed bands: a cell measured in one compile a side by its samples
(p-value) and the bands, a cell measured in several compiles on either side by its compiles (the slower side's best
beyond the faster side's slowest compile by a band). The words name the ways that applied to this comparison's
cells, and the confirmation the rule asks for.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracker.analyse import paired
from tracker.analyse.changes import Comparison
from tracker.analyse.compare import ChangeRule, launch_floor
from tracker.analyse.judge import NOISE_TEST
from tracker.publish.units import PLAIN_MICRO, PLAIN_TIMES, TIMES, band, us


@dataclass(frozen=True)
class Applied:
    """Which ways of judging a cell this comparison used (cells with a status verdict were not judged on times)."""

    single: bool  # some cell of the bands had one compile on both sides
    several: bool  # some cell of the bands had several compiles on at least one side
    one_sided: bool  # some cell of the bands had several compiles on one side only: its band is the fixed one
    noise: bool = False  # some cell was judged against its own noise (or no judged cell at all: the default test)
    paired: bool = False  # some cell was judged on pairs of compiles (tracker.analyse.paired)

    @classmethod
    def of(cls, c: Comparison) -> Applied:
        judged = [x for x in c.cells if x.compiles]
        paired = [x for x in judged if (x.noise or "").startswith("paired")]
        noise = [x for x in judged if x.ci is not None and x not in paired]
        bands = [x.compiles for x in judged if x.ci is None and x.compiles and x not in paired]
        several = any(max(n) > 1 for n in bands)
        default = not judged and c.rule.test == NOISE_TEST
        return cls(single=any(max(n) == 1 for n in bands) or (not several and not noise and not default and not paired),
                   several=several, one_sided=any(min(n) == 1 < max(n) for n in bands), noise=bool(noise) or default,
                   paired=bool(paired))


def confirm_text(rule: ChangeRule) -> str:
    """"fewer than 3 compiles at head" (or "a side", "at base", both sides' numbers; and where a paired record of
    format 7 or later asks rounds, "or pairs of fewer than 2 rounds"): what leaves a change unconfirmed; "" when the
    rule asks for none."""
    base, head = rule.confirm
    if base <= 1 and head <= 1:  # every measured cell has at least one compile
        return ""
    rounds = f" or pairs of fewer than {rule.confirm_rounds} rounds" if _says_rounds(rule) else ""
    if base == head:
        return f"fewer than {head} compiles a side{rounds}"
    sides = [f"{n} at {side}" for side, n in (("base", base), ("head", head)) if n > 1]
    return "fewer than " + " or ".join(sides).replace(" at", " compiles at", 1) + rounds


def _clauses(c: Comparison, markdown: bool) -> tuple[list[str], list[str]]:
    """(one clause per way of judging that applied to `c`, the conditions every verdict met: the launch floor's
    share, the confirmation, the spread limit)."""
    r, applied = c.rule, Applied.of(c)
    small_ms = r.noise.small_below_ms * 1000
    factor = (f", and a change also had to exceed the factor {r.factor:g}{TIMES} (--factor)" if markdown else
              f" and beyond --factor {r.factor:g}") if r.factor is not None else ""
    ways = _paired_clause(r, markdown, factor) if applied.paired else []
    if applied.noise:
        joint = ", an instance's modes together where its source changed" if markdown else ", modes together"
        ways.append(f"a cell changed when its compiles' mean moved beyond its own noise (compile to compile and run "
                    f"to run, from this comparison, the cell's history and its class), the comparison's cells "
                    f"selected together so that unchanged code raises an alarm in under {r.alpha:.0%} of "
                    f"comparisons (Benjamini-Hochberg{joint}), and beyond its minimum change ({r.floor:.0%}, and one "
                    f"compile's spread){factor}; it is the same when its interval lies within {band(r.resolve)}, and "
                    f"undecided otherwise" if markdown else
                    f"a cell changed when its compiles' mean moved beyond its own noise (t-test, the cells selected "
                    f"together at {r.alpha:.0%} false alarms a comparison{joint}) and beyond {r.floor:.0%} and one "
                    f"compile's spread{factor}; the same within {band(r.resolve)}; else undecided")
    if applied.single:
        if markdown:
            who = "a cell measured in one compile a side" if applied.several else "a cell"
            who += " of unknown noise" if applied.noise else ""
            ways.append(f"{who} changed when Mann-Whitney U on its samples gives p < {r.p_value} and its median moved "
                        f"beyond its band: {band(r.min_change)}, {band(r.small_change)} under "
                        f"{us(small_ms, decimals=None)} or host-bound (≤ {r.host.k:g} launch floors), "
                        f"{band(r.autotuned_change)} for {' and '.join(r.autotuned_modes)}{factor}")
        else:
            who = "a cell of one compile a side" if applied.several else "a cell"
            who += " of unknown noise" if applied.noise else ""
            ways.append(f"{who} changed when p < {r.p_value:g} and its median moved beyond its band "
                        f"({r.min_change:.0%}, {r.small_change:.0%} when small or host-bound, "
                        f"{r.autotuned_change:.0%} autotuned){factor}")
    if applied.several:
        one_sided = ("; the fixed band where only one side has several" if markdown else
                     ", the fixed band where one side has one") if applied.one_sided else ""
        if markdown:
            ways.append(f"a cell measured in several compiles (fresh processes) was judged on its compiles: it changed "
                        f"when the slower side's best lies beyond the faster side's slowest compile by "
                        f"{band(r.replicated_change)} ({band(r.replicated_autotuned_small_change)} for "
                        f"{' and '.join(r.autotuned_modes)} under {us(small_ms, decimals=None)} or "
                        f"host-bound{one_sided}), whatever its samples' p-value{factor}")
        else:
            ways.append(f"a cell of several compiles changed when the slower side's best lay beyond the faster side's "
                        f"slowest compile by {r.replicated_change:.0%} ({r.replicated_autotuned_small_change:.0%} "
                        f"autotuned and small or host-bound{one_sided}), p not deciding{factor}")
    out = []
    jitter_us = r.launch_jitter * launch_floor(c.base, c.head)
    if jitter_us > 0:
        beyond = " beyond the faster side's slowest compile" if applied.several else ""
        out.append(f"every change also had to exceed {r.launch_jitter:g}{TIMES} the launch floor in time "
                   f"({us(jitter_us, decimals=2)}){beyond}" if markdown else
                   f"every change also beyond {r.launch_jitter:g}{PLAIN_TIMES} the launch floor "
                   f"({us(jitter_us, PLAIN_MICRO, decimals=2)}){beyond}")
    fewer = confirm_text(r)
    if fewer:
        out.append(f"a change found on {fewer} is unconfirmed: listed, not counted")
    out.append(_too_noisy(r, applied, markdown))
    return ways, out


def _says_rounds(r: ChangeRule) -> bool:
    """Whether the text names the rounds a change needs and their shared spread: a rule that counts rounds, of a
    paired record of format 7 or later (older records' comments render as they were posted)."""
    return r.round_by_scale and r.confirm_rounds > 1


def _noise_words(r: ChangeRule) -> str:
    """What a paired cell's noise is, as the footer says it."""
    rounds = ", and its rounds' shared spread, its class's in proportion to its own" if _says_rounds(r) else ""
    return f"its pairs' spread, moderated by its class's{rounds}"


def _paired_clause(r: ChangeRule, markdown: bool, factor: str) -> list[str]:
    """How the paired test decides (tracker.analyse.paired)."""
    looks = paired.looks(r)
    level = paired.nominal_alpha(r.alpha, looks)
    if markdown:
        return [f"base and head were measured in pairs, the two compiles of a pair started together on one GPU, round "
                f"after round until each cell was decided or the budget spent (at most {r.max_compiles} compiles a "
                f"side): a cell changed when the mean of its pairs' differences moved beyond {r.floor:.0%} and beyond "
                f"its noise ({_noise_words(r)}), the cells selected together at each look at "
                f"Pocock's level for {looks} looks ({level:.2%}; Benjamini-Hochberg, an instance's modes together) so "
                f"that unchanged code raises an alarm in under {r.alpha:.0%} of comparisons{factor}; it is the same "
                f"when its interval lies within {band(r.same_within)}{_on_pairs(r)}, and undecided otherwise"]
    return [f"paired: a cell changed when its pairs' mean difference moved beyond {r.floor:.0%} and its noise "
            f"(t-test at {level:.2%} a look, {looks} looks, cells selected together){factor}; the same within "
            f"{band(r.same_within)}{_on_pairs(r)}; else undecided (more compiles would decide it)"]


def _on_pairs(r: ChangeRule) -> str:
    return f" on {r.same_pairs} pairs or more" if r.same_pairs > 1 else ""


def _too_noisy(r: ChangeRule, applied: Applied, markdown: bool) -> str:
    """When a cell is too noisy to judge, the ways that applied (each row says which was its own)."""
    ways = [f"its samples spread (IQR) over more than {r.max_spread:.0%} of its median (disturbed while measured)"
            if markdown else f"samples spread over {r.max_spread:.0%} (disturbed)"]
    if applied.single:
        ways.append("it moved beyond half its band on samples that differ" if markdown else
                    "a move beyond half its band")
    either = ", ".join(ways[:-1]) + (", or " if len(ways) > 2 else " or ") + ways[-1] if len(ways) > 1 else ways[0]
    return (f"a cell is too noisy to judge when {either}; each such row says why" if markdown else
            f"too noisy (~): {either}; the row says which")


def rule_clauses(c: Comparison, markdown: bool = False) -> list[str]:
    """The rule that applied to `c`, one clause per way of judging, then what every verdict met (the launch floor's
    share, the confirmation, the spread limit): plain text for the terminal, or the comment's words (`markdown`:
    ± bands, µs, the test named); each starts in lower case."""
    ways, conditions = _clauses(c, markdown)
    return [*ways, *conditions]


def rule_text(c: Comparison) -> str:
    """The terminal table's footer: a line per way of judging, the last carrying what every verdict met."""
    ways, conditions = _clauses(c, markdown=False)
    return "\n".join([*ways[:-1], "; ".join([ways[-1], *conditions])])


def rule_md(c: Comparison) -> str:
    """The comment's fine print on the cells: one sentence."""
    text = "; ".join(rule_clauses(c, markdown=True))
    return text[0].upper() + text[1:] + "."


__all__ = ["Applied", "confirm_text", "rule_clauses", "rule_md", "rule_text"]
