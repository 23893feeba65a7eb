"""Sentences with gold annotations: CoNLL-U files and Hugging Face treebanks.

:class:`Sentence` (words, UPOS, heads, relations) is what every annotated source returns;
:func:`read_conllu` and :func:`load_treebank` read Universal Dependencies treebanks and check
that the heads form a tree.
"""

from __future__ import annotations

import os
from pathlib import Path

from lmsim._io import read_utf8
from lmsim.data._hub import hub_datasets
from lmsim.data._sentence import Sentence


def read_conllu(path: str | os.PathLike) -> list[Sentence]:
    """Read a CoNLL-U file into gold :class:`Sentence` objects.

    Multiword-token ranges (``1-2``) and empty nodes (``1.1``) are skipped.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    list of Sentence
        ``silver=False``.
    """
    import conllu

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no CoNLL-U file at {str(path)!r}")
    text = read_utf8(path)
    _validate_conllu_lines(text, path)
    try:
        token_lists = conllu.parse(text)
    except Exception as err:  # conllu raises its own ParseException
        raise ValueError(f"{path}: could not parse CoNLL-U ({err})") from err
    sentences = []
    for index, tokens in enumerate(token_lists):
        words = [t for t in tokens if isinstance(t["id"], int)]
        if not words:
            continue
        heads = [int(t["head"]) if t["head"] is not None else 0 for t in words]
        sent_id = tokens.metadata.get("sent_id")
        where = f"sentence #{index + 1}" + (f" (sent_id {sent_id})" if sent_id else "")
        _check_tree(heads, path, where)
        sentences.append(
            Sentence(
                words=[t["form"] for t in words],
                upos=[t["upos"] for t in words],
                heads=heads,
                deprels=[t["deprel"] for t in words],
                silver=False,
            )
        )
    if not sentences:
        raise ValueError(f"{path}: no sentences found")
    return sentences


def _hf_treebank(spec: str, split: str) -> list[Sentence]:
    """Sentences of a Hugging Face treebank ``hf:<dataset>:<config>`` (columns as in
    ``universal_dependencies``: ``tokens``, ``upos``, ``head``, ``deprel``)."""
    parts = spec.split(":")
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise ValueError(
            f"a Hugging Face treebank is written 'hf:<dataset>:<config>', e.g. "
            f"'hf:universal_dependencies:en_gsd', got {spec!r}"
        )
    dataset, config = parts[1], parts[2]
    try:
        datasets = hub_datasets()
    except ImportError as err:
        raise ImportError(
            f"{spec!r} needs Hugging Face `datasets` (`pip install -e .[paper]`); offline, "
            "pass a path to a .conllu file"
        ) from err
    hf_split = {"dev": "validation", "valid": "validation"}.get(split, split)
    try:
        # The Parquet conversion of the hub's dataset: no loading script is run
        # (universal_dependencies ships one; lmsim never executes downloaded code).
        ds = datasets.load_dataset(dataset, config, split=hf_split, revision="refs/convert/parquet")
    except Exception as err:  # network errors come in many types
        raise OSError(
            f"could not load {spec!r} split {hf_split!r} ({type(err).__name__}: {err}); "
            "offline, pass a path to a .conllu file"
        ) from err
    missing = {"tokens", "upos", "head", "deprel"} - set(ds.column_names)
    if missing:
        raise ValueError(
            f"{spec!r} lacks the columns {sorted(missing)} of a universal_dependencies treebank"
        )
    upos_feature = ds.features["upos"]
    names = getattr(getattr(upos_feature, "feature", None), "names", None)
    sentences = [
        _hf_sentence(row, names, spec, f"row {index} of split {hf_split!r}")
        for index, row in enumerate(ds)
    ]
    if not sentences:
        raise ValueError(f"{spec!r} split {hf_split!r}: no sentences")
    return sentences


def _hf_sentence(row: dict, upos_names, spec: str, where: str) -> Sentence:
    """One row of a ``universal_dependencies``-style dataset as a :class:`Sentence` of
    syntactic words.

    The hub's conversion writes every CoNLL-U line of a sentence as a token, multiword-token
    ranges (``2-3 du``, UPOS ``_``) and empty nodes (``4.1``) included, with the HEAD as a
    string (``"None"`` where the column is ``_``). It has no ID column, so a syntactic word
    is recognised by its integer HEAD, which UD's validator requires of every word and
    forbids on ranges and empty nodes; the others are dropped, as :func:`read_conllu` skips
    them, so French ``du`` is read as its words ``de le`` and the heads (word numbers that
    never count ranges or empty nodes) stay aligned.
    """
    tokens, heads_in = list(row["tokens"]), [str(h) for h in row["head"]]
    upos_in = [upos_names[u] if upos_names is not None else str(u) for u in row["upos"]]
    keep = [i for i, h in enumerate(heads_in) if h.isdigit()]
    if not keep:
        raise ValueError(
            f"{spec}: {where}: no token has an integer HEAD, so its syntactic words cannot be "
            "told from multiword-token ranges; pass the treebank as a .conllu file"
        )
    heads = [int(heads_in[i]) for i in keep]
    _check_tree(heads, Path(spec), where)
    return Sentence(
        words=[tokens[i] for i in keep],
        upos=[upos_in[i] for i in keep],
        heads=heads,
        deprels=[str(row["deprel"][i]) for i in keep],
        silver=False,
    )


def load_treebank(
    spec: str | os.PathLike, split: str = "train", max_sentences: int | None = None
) -> list[Sentence]:
    """Gold sentences of a Universal Dependencies treebank, from a file or the hub.

    Parameters
    ----------
    spec : str or path-like
        A path to a ``.conllu`` file (read by :func:`read_conllu`; ``split`` is ignored),
        or ``"hf:<dataset>:<config>"`` for a Hugging Face dataset with the columns of
        ``universal_dependencies`` (``"hf:universal_dependencies:en_gsd"``, ``...:en_pud``,
        ``...:fr_pud``), read from its Parquet conversion (no loading script runs; needs
        network and ``datasets``); multiword-token ranges and empty nodes are dropped
        there too (:func:`_hf_sentence`).
    split : {"train", "dev", "test"}
        The hub split (``"dev"`` is ``"validation"``); PUD treebanks have only ``"test"``.
    max_sentences : int, optional
        Keep the first ``max_sentences``.

    Returns
    -------
    list of Sentence
        Gold UPOS, heads and relations (``silver=False``); multiword-token ranges and
        empty nodes are not words.
    """
    if max_sentences is not None and int(max_sentences) < 1:
        raise ValueError(f"`max_sentences` must be a positive int or None, got {max_sentences}")
    text = str(spec)
    if text.startswith("hf:"):
        sentences = _hf_treebank(text, split)
    elif text.endswith(".conllu"):
        sentences = read_conllu(text)
    else:
        raise ValueError(
            f"unknown treebank {text!r}: pass a path ending in .conllu or "
            "'hf:<dataset>:<config>' (e.g. 'hf:universal_dependencies:en_gsd')"
        )
    return sentences[:max_sentences] if max_sentences else sentences


def _check_tree(heads: list[int], path: Path, where: str) -> None:
    """Raise ``ValueError`` unless ``heads`` (1-based, 0 = root) form a tree.

    Every head must be 0 or a word of the sentence, and following heads from any word
    must reach the root (no cycle). An unannotated HEAD column (``_``, read as 0) passes.
    """
    n = len(heads)
    beyond = [(i + 1, h) for i, h in enumerate(heads) if not 0 <= h <= n]
    if beyond:
        word, head = beyond[0]
        raise ValueError(
            f"{path}: {where}: word {word} has HEAD {head}, beyond the sentence's {n} words; "
            "fix the HEAD column (0 for the root)"
        )
    for start in range(1, n + 1):
        seen, node = set(), start
        while node != 0:
            if node in seen:
                raise ValueError(
                    f"{path}: {where}: the heads of words {sorted(seen)} form a cycle that "
                    "never reaches the root (HEAD 0); fix the HEAD column"
                )
            seen.add(node)
            node = heads[node - 1]


def _validate_conllu_lines(text: str, path: Path) -> None:
    """Check the 10-column layout so errors name the file and line (conllu's do not)."""
    n_words = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            n_words = 0
            continue
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise ValueError(
                f"{path}:{lineno}: expected 10 tab-separated CoNLL-U columns, got {len(cols)}: "
                f"{line[:60]!r}"
            )
        token_id, head = cols[0], cols[6]
        if "-" in token_id or "." in token_id:
            continue
        if not token_id.isdigit():
            raise ValueError(f"{path}:{lineno}: ID column must be an integer, got {token_id!r}")
        n_words += 1
        if int(token_id) != n_words:
            raise ValueError(
                f"{path}:{lineno}: word IDs must count 1, 2, ...; "
                f"expected {n_words}, got {token_id}"
            )
        if head != "_" and not head.isdigit():
            raise ValueError(f"{path}:{lineno}: HEAD column must be an integer, got {head!r}")
