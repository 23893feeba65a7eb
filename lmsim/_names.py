"""``did you mean ...`` for a mistyped name: one helper for every "unknown X" message."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(name: str, choices: Iterable[str], n: int = 2) -> str:
    """``" (did you mean 'a'?)"`` naming the closest of ``choices`` to ``name``, or ``""``.

    Examples
    --------
    >>> did_you_mean("minilm-l7", ["minilm-l6", "tiny-bert"])
    " (did you mean 'minilm-l6'?)"
    >>> did_you_mean("xyz", ["minilm-l6"])
    ''
    """
    choices = [str(c) for c in choices]
    close = difflib.get_close_matches(str(name), choices, n=n, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = [lowered[c] for c in difflib.get_close_matches(str(name).lower(), lowered, n=n)]
    if not close and len(str(name)) >= 3:  # a part of the name: "mpnet" for all-mpnet-base-v2
        close = [c for c in choices if str(name).lower() in c.lower()][:n]
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"
