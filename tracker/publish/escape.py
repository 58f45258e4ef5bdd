"""Text from the results, escaped for where it is shown: a terminal, markdown (the PR comment, the tracking issue,
the job summary, `summary --format md`) or HTML (the report).

A machine name, a torch or driver version, a failure reason or a candidate's name is whatever a result file or a
machine.json says, and anyone who can push to the results branch writes those. So nothing read from the results
reaches a reader as markup or as a control:

- `visible`: a character a reader would not see as itself (a C0 or C1 control such as ESC, BEL or CSI, a bidi
  override, a zero-width or other format character, a line separator, a lone surrogate) is shown as its Python
  escape (`\\x1b`, `\\u202e`). The CLI writes every line of output through `VisibleStream` (tracker.cli), which
  keeps newlines and tabs, the output's own layout.
- `cut`: a value longer than LONGEST characters is shown as its start and how much is left out, in every medium but
  the JSON (which keeps every value exactly).
- `md`: a value set in markdown text: `visible` (newlines included), then no HTML (`<`, `>`, `&` as entities), no
  link, image, code span, emphasis, table cell or math of its own (`\\ [ ] | ` * $` backslash-escaped), and no
  @mention, #123 reference or bare URL (a zero-width space after the `@`, `#`, `GH-`, `www` or a scheme's `:`): a
  result cannot ping anyone, nor link itself to an issue or a site. `code` sets a value in a code span instead.
  `markdown_env` makes `md` the default of every `{{ }}` of a markdown template (its `finalize`), so a template
  cannot forget it: what a template is handed already written as markdown is marked `Markup` (`ours`), and is
  written from escaped values.
- HTML: jinja2's autoescape (tracker.publish.report), with `visible` as the report's `finalize`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any, TextIO

import jinja2
from markupsafe import Markup

from tracker.publish.units import count

# Control (Cc), format (Cf: bidi overrides, zero-width characters, ...), surrogate (Cs) and line or paragraph
# separator (Zl, Zp) characters: what a terminal acts on or a browser draws as nothing, or reorders text around.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _escape(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


LONGEST = 500  # characters of one value a reader is shown; a result file written by hand may hold megabytes


def cut(text: str, longest: int = LONGEST) -> str:
    """`text`, or its start and how much is left out when it is longer than `longest`: a machine name of a megabyte
    never fills a PR comment (GitHub's limit would cut everything after it) or a page."""
    return text if len(text) <= longest else f"{text[:longest]}… ({count(len(text) - longest, 'more character')})"


def shown(value: Any) -> str:
    """A value from the results as one line of plain text (a terminal's, a log's): cut, then visible."""
    return visible(cut(str(value)))


def visible(text: str, keep: str = "") -> str:
    """`text` with every character a reader would not see as itself (`_HIDDEN`) written as its escape, but those in
    `keep` (the output's own newlines and tabs, say)."""
    if text.isascii():  # the usual case, in one pass of the regex engine
        return _ASCII_CONTROL.sub(lambda m: m.group() if m.group() in keep else _escape(m.group()), text)
    newline = "\n" if "\n" in keep else _escape("\n")
    return newline.join(_visible_line(line, keep) for line in text.split("\n"))


def _visible_line(line: str, keep: str) -> str:
    if line.isprintable():  # no hidden character (every one is unprintable), tested at C speed
        return line
    return "".join(_escape(c) if c not in keep and unicodedata.category(c) in _HIDDEN else c for c in line)


# Markdown's own syntax in a value, backslash-escaped: escapes, links and images, code spans, emphasis (of `*`: a
# value's `**` would end the bold around it), table cells, math.
_MD_PUNCTUATION = re.compile(r"([\\\[\]|`*$])")
# What GitHub turns into a link or a notification: @user and @org/team, #123 and owner/repo#123, GH-123, and a
# bare URL (scheme://, www.).
_AUTOLINK = re.compile(r"@(?=[A-Za-z0-9])|#(?=[0-9])|\bGH-(?=[0-9])|:(?=//)|\bwww(?=\.)", re.IGNORECASE)
_ZERO_WIDTH_SPACE = "&#8203;"  # breaks the reference for GitHub, shows nothing to the reader


def md(value: Any) -> str:
    """`value` (a string from the results, or anything that str() shows) as literal text in markdown: one line,
    no markup, no mention or reference."""
    text = visible(cut(str(value)))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_PUNCTUATION.sub(r"\\\1", text)
    return _AUTOLINK.sub(lambda m: m.group(0) + _ZERO_WIDTH_SPACE, text)


def code(value: Any) -> Markup:
    """`value` as a markdown code span (its text literal, as a command or a hash is shown): fenced by more backticks
    than it holds in a row, its `|` escaped (a table cell ends at one, even in a code span), one line."""
    text = visible(cut(str(value))).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return Markup(f"{fence}{pad}{text}{pad}{fence}")


def ours(text: str) -> Markup:
    """Markdown this code wrote (from escaped values, or numbers in the reader's units): written as it is."""
    return Markup(text)


def finalize_md(value: Any) -> Any:
    """A markdown template's default: every value escaped (`md`) unless marked as markdown already (`ours`,
    `code`, a macro's output through `|safe`)."""
    return value if hasattr(value, "__html__") else md(value)


def markdown_env(**kwargs: Any) -> jinja2.Environment:
    """A jinja2 environment for markdown: `{{ x }}` writes md(x) unless x is Markup."""
    return jinja2.Environment(finalize=finalize_md, autoescape=False, undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, **kwargs)


def as_ours(f: Callable[..., str]) -> Callable[..., Markup]:
    """A filter that formats numbers (a latency, a ratio, a p-value): its text is ours, written as it is."""
    return lambda *args, **kwargs: Markup(f(*args, **kwargs))


def finalize_html(value: Any) -> Any:
    """The HTML report's default before autoescape: what a reader would not see shown (`visible`); newlines stay
    (a tooltip's lines)."""
    return visible(cut(value), keep="\n\t") if isinstance(value, str) and not hasattr(value, "__html__") else value


class VisibleStream:
    """A text stream that writes `visible(text)` to `stream`, newlines and tabs kept: the CLI's stdout and stderr,
    so that no text from the results reaches a terminal as a control sequence. Everything else is `stream`'s."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(visible(text, keep="\n\t"))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


__all__ = ["LONGEST", "VisibleStream", "as_ours", "code", "cut", "finalize_html", "finalize_md", "markdown_env", "md",
           "ours", "shown", "visible"]
