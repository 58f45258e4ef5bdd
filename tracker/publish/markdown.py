"""What a markdown body posted to GitHub needs, known here so the renderer need not import the poster: the hidden
marker a later run finds the PR comment by, GitHub's size limit, and the cut that makes a body fit it."""

from __future__ import annotations

MARKER = "<!-- compile-baselines:pr-comment -->"
MAX_BODY_CHARS = 65536  # GitHub rejects a longer comment or issue body with a 422


def fit(text: str, note: str, max_chars: int = MAX_BODY_CHARS) -> str:
    """`text` if it fits in `max_chars`, else its start cut at a line boundary (so no table row or marker is left
    half written) and ended by `note`, which says it was cut."""
    if len(text) <= max_chars:
        return text
    return text[: max_chars - len(note)].rsplit("\n", 1)[0] + note
