"""Preference scores per part of speech (Fig. 4)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lmsim.papers.he2022_twotower.paper import PAPER_POS_CLAIMS


def token_pos(sentences: Sequence, tokenizer, lowercase: bool = False) -> pd.DataFrame:
    """Each token's most frequent UPOS tag in tagged sentences.

    Every word is split into the tokenizer's pieces and each piece counts the word's tag.

    Parameters
    ----------
    sentences : sequence of lmsim.data.Sentence
        With ``upos``; PTB's ``<unk>`` is skipped.
    tokenizer : transformers tokenizer
    lowercase : bool
        Lower-case every word first (Brown keeps case; the zoo's PTB vocabulary is
        lower-case).

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
            if lowercase:
                word = word.lower()
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


def tag_sources(
    tokenizer, pos_corpus: str, n_pos_sentences: int, gold: str = "", n_gold_sentences: int = 0
) -> dict[str, pd.DataFrame]:
    """Each token's tag from every tag source of the page, the one the claims use first.

    Parameters
    ----------
    tokenizer : transformers tokenizer
    pos_corpus : str
        :func:`lmsim.data.load_sentences` name of the page's tagged sample (``"ptb"``:
        spaCy's silver tags; ``"smoke"``: gold grammar tags).
    n_pos_sentences : int
    gold : str
        A gold-tagged source beside it (``"brown"``: the Brown corpus's tags mapped to
        UPOS, words lower-cased to the PTB vocabulary); "" for none. When given, the
        claims use it and the first source is shown beside.
    n_gold_sentences : int
        Its sentences (0: all).

    Returns
    -------
    dict of label to :func:`token_pos`'s DataFrame, the claims' source first
    """
    from lmsim.data import load_sentences

    first = token_pos(load_sentences(pos_corpus, "train", n_pos_sentences), tokenizer)
    label = f"{'silver spaCy' if first['silver'].any() else 'gold'} tags ({pos_corpus})"
    if not gold:
        return {label: first}
    sentences = load_sentences(gold, "train", n_gold_sentences or None)
    return {f"gold tags ({gold})": token_pos(sentences, tokenizer, lowercase=True), label: first}


POS_REFERENCES = ("all", "PROPN")


def _median_difference(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.median(x) - np.median(y))


def relative_pos_test(
    scores: Mapping[str, np.ndarray],
    pos: pd.DataFrame,
    tokens: np.ndarray,
    tags: Sequence[str],
    reference: str = "all",
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    bootstrap=None,
) -> pd.DataFrame:
    """Which tower a tag leans to, *relative* to the run's other tokens, with an interval.

    "Median s > 0" inherits the primary tower's global lead (every tag can sit above 0).
    Here the estimate is the tag's median score minus the median of a reference set over
    the same ``tokens``: every tagged token (``"all"``) or the PROPN tokens (``"PROPN"``,
    the paper's secondary-preferred tag). The interval resamples the tag's tokens and the
    reference's tokens independently (percentile bootstrap). The tag leans to the primary
    tower when the interval lies above 0, to the secondary when below, else inconclusive.

    Parameters
    ----------
    scores : dict of run name to ndarray of shape (vocab,)
    pos : DataFrame from :func:`token_pos`
    tokens : ndarray of int
    tags : sequence of str
    reference : {"all", "PROPN"}
    n_boot, level, seed : int, float, int
    bootstrap : callable, optional
        ``bootstrap(stat, samples, n_boot=, level=, seed=) -> (low, high)``; default
        :func:`lmsim.papers.he2022_twotower.reliability.bootstrap_interval`.

    Returns
    -------
    DataFrame, one row per (run, tag)
        ``n_tokens``, ``median``, ``reference median``, ``estimate``, ``low``, ``high``,
        ``leans`` (primary / secondary / inconclusive), ``paper`` and ``holds`` (True, False,
        or None when inconclusive or the paper makes no claim).
    """
    from lmsim.papers.he2022_twotower.reliability import bootstrap_interval

    if reference not in POS_REFERENCES:
        raise ValueError(f"`reference` must be one of {POS_REFERENCES}, got {reference!r}")
    bootstrap = bootstrap or bootstrap_interval
    tagged = pos.reindex(tokens)
    has_tag = tagged["upos"].notna().to_numpy()
    rows = []
    for name, s in scores.items():
        s = np.asarray(s)[tokens]
        ok = np.isfinite(s) & has_tag
        ref = s[ok & (tagged["upos"] == reference).to_numpy()] if reference != "all" else s[ok]
        for tag in tags:
            if tag == reference:
                continue
            vals = s[ok & (tagged["upos"] == tag).to_numpy()]
            row = {"run": name, "tag": tag, "reference": reference, "n_tokens": len(vals)}
            if len(vals) and len(ref):
                low, high = bootstrap(
                    _median_difference, (vals, ref), n_boot=n_boot, level=level, seed=seed
                )
                leans = "primary" if low > 0 else "secondary" if high < 0 else "inconclusive"
                row.update(
                    {
                        "median": float(np.median(vals)),
                        "reference median": float(np.median(ref)),
                        "estimate": _median_difference(vals, ref),
                        "low": low,
                        "high": high,
                        "leans": leans,
                    }
                )
            else:
                row.update({"estimate": math.nan, "low": math.nan, "high": math.nan})
                row["leans"] = "n/a"
            claim = PAPER_POS_CLAIMS.get(tag)
            if reference == "PROPN" and claim == "secondary":
                claim = None
            row["paper"] = claim or "spread"
            row["holds"] = (
                (row["leans"] == claim)
                if claim and row["leans"] in PAPER_POS_CLAIMS.values()
                else None
            )
            rows.append(row)
    return pd.DataFrame(rows)
