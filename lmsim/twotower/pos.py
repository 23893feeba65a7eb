"""Preference scores per part of speech (Fig. 4)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lmsim.twotower.paper import PAPER_POS_CLAIMS


def token_pos(sentences: Sequence, tokenizer) -> pd.DataFrame:
    """Each token's most frequent UPOS tag in tagged sentences.

    Every word is split into the tokenizer's pieces and each piece counts the word's tag.

    Parameters
    ----------
    sentences : sequence of lmsim.data.Sentence
        With ``upos``; PTB's ``<unk>`` is skipped.
    tokenizer : transformers tokenizer

    Returns
    -------
    DataFrame indexed by token id
        ``token``, ``upos`` (most frequent; ties alphabetical), ``n`` (tagged occurrences),
        ``share`` (fraction of them with that tag), ``silver`` (tags from a tagger).
    """
    if not sentences or sentences[0].upos is None:
        raise ValueError("`sentences` must be non-empty and carry UPOS tags")
    pieces: dict[str, list[int]] = {}
    tags: dict[int, Counter] = {}
    for sent in sentences:
        for word, tag in zip(sent.words, sent.upos):
            if word == "<unk>":
                continue
            if word not in pieces:
                enc = tokenizer.backend_tokenizer.encode(word, add_special_tokens=False)
                pieces[word] = enc.ids
            for tid in pieces[word]:
                tags.setdefault(tid, Counter())[tag] += 1
    silver = any(getattr(s, "silver", False) for s in sentences)
    rows = {}
    for tid, counter in tags.items():
        n = sum(counter.values())
        best = max(sorted(counter), key=counter.__getitem__)
        rows[tid] = (tokenizer.convert_ids_to_tokens(tid), best, n, counter[best] / n, silver)
    return pd.DataFrame.from_dict(
        rows, orient="index", columns=["token", "upos", "n", "share", "silver"]
    ).sort_index()


def pos_table(
    scores: Mapping[str, np.ndarray], pos: pd.DataFrame, tokens: np.ndarray, tags: Sequence[str]
) -> pd.DataFrame:
    """Score distribution per tag and run over ``tokens`` (Fig. 4), and the paper's claims.

    A tag is *preferred by the primary tower* when its median score is above 0 and by the
    secondary when below.

    Returns
    -------
    DataFrame with one row per (run, tag)
        ``n_tokens``, ``median``, ``mean``, ``frac_positive``, ``preferred``,
        ``paper`` (the paper's claim, if any) and ``holds``.
    """
    rows = []
    tagged = pos.reindex(tokens)
    for name, s in scores.items():
        for tag in tags:
            ids = tagged.index[tagged["upos"] == tag]
            vals = s[ids]
            vals = vals[np.isfinite(vals)]
            med = float(np.median(vals)) if len(vals) else math.nan
            preferred = "primary" if med > 0 else "secondary" if med < 0 else "none"
            claim = PAPER_POS_CLAIMS.get(tag)
            rows.append(
                {
                    "run": name,
                    "tag": tag,
                    "n_tokens": len(vals),
                    "median": med,
                    "mean": float(vals.mean()) if len(vals) else math.nan,
                    "frac_positive": float((vals > 0).mean()) if len(vals) else math.nan,
                    "preferred": preferred if len(vals) else "n/a",
                    "paper": claim or "spread",
                    "holds": (preferred == claim) if claim and len(vals) else None,
                }
            )
    return pd.DataFrame(rows)
