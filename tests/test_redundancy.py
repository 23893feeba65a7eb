"""The thesis's redundancy protocol: splits, labels, layer subsets, τ cuts and probe sweeps."""

import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

from lmsim.cluster import kept_per_block
from lmsim.data import Sentence
from lmsim.papers.thesis2022_redundancy.redundancy import (
    SUBSETS,
    cluster_cuts,
    depth_of_kept,
    fitting_sentences,
    label_ids,
    layer_subsets,
    probe_sweep,
    probing_sets,
    scipy_agreement,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
DIMS = {f"m/layer.{i}": 3 for i in range(5)}  # embeddings + 4 layers, 3 neurons each


def test_layer_subsets_follow_the_thesis():
    subsets = layer_subsets(DIMS)
    assert list(subsets) == list(SUBSETS)
    layers = {name: sorted(set((cols // 3).tolist())) for name, cols in subsets.items()}
    assert layers == {
        "all": [0, 1, 2, 3, 4],
        "alternate": [0, 2, 4],
        "bottom half": [1, 2],
        "top half": [3, 4],
        "embeddings only": [0],
        "all but embeddings": [1, 2, 3, 4],
    }
    np.testing.assert_array_equal(subsets["embeddings only"], [0, 1, 2])
    # odd depth: the bottom half takes the middle layer (ceil(L / 2))
    odd = layer_subsets({f"m/layer.{i}": 2 for i in range(4)})
    assert sorted(set((odd["bottom half"] // 2).tolist())) == [1, 2]
    # a 1-layer model has no top half
    assert "top half" not in layer_subsets({"m/layer.0": 2, "m/layer.1": 2})
    with pytest.raises(ValueError, match="embeddings"):
        layer_subsets({"m/layer.1": 2})


def test_label_ids_shared_classes_in_word_order():
    splits = {
        "train": [Sentence(["a", "b"], upos=["DET", "NOUN"])],
        "test": [Sentence(["c"], upos=["VERB"]), Sentence(["d"], upos=["DET"])],
    }
    y, names = label_ids(splits, "upos")
    assert names == ["DET", "NOUN", "VERB"]
    np.testing.assert_array_equal(y["train"], [0, 1])
    np.testing.assert_array_equal(y["test"], [2, 0])


def test_depth_of_kept():
    assert depth_of_kept([0, 1, 2], DIMS) == 0.0
    assert depth_of_kept([12, 13], DIMS) == 1.0
    assert depth_of_kept([0, 12], DIMS) == pytest.approx(0.5)


def test_fitting_sentences_drops_what_a_tokenizer_truncates():
    class Tok:
        model_max_length = 5

        def __call__(self, words, is_split_into_words, add_special_tokens, verbose):
            return {"input_ids": [[0] * (len(w) + 2) for w in words]}

    sentences = [Sentence(["a"] * n) for n in (1, 3, 4)]
    assert [len(s.words) for s in fitting_sentences(sentences, [Tok()], 64)] == [1, 3]
    assert [len(s.words) for s in fitting_sentences(sentences, [Tok()], 3)] == [1]


def correlated(seed, n=400, groups=6, per=4):
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n, groups))
    X = np.repeat(base, per, axis=1) + 0.3 * rng.standard_normal((n, groups * per))
    return X.astype(np.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cluster_cuts_one_per_cluster_monotone_and_scipy(seed):
    X = correlated(seed)
    taus = [0.1, 0.3, 0.5, 0.7, 0.9]
    cuts = cluster_cuts(X, taus, seed=seed)
    sizes = [cuts[t][1].size for t in taus]
    assert sizes == sorted(sizes, reverse=True)
    d = squareform(1 - np.abs(np.corrcoef(X, rowvar=False)), checks=False)
    Z = linkage(d, "average")
    for t in taus:
        labels, kept = cuts[t]
        assert kept.size == labels.max() + 1
        assert sorted(labels[kept].tolist()) == list(range(kept.size))
        ref = fcluster(Z, t, criterion="distance")
        # same partition: the pairs of neurons that share a cluster coincide
        np.testing.assert_array_equal(labels[:, None] == labels, ref[:, None] == ref)


def test_probe_sweep_rows_and_control():
    rng = np.random.default_rng(0)
    y = {k: rng.integers(0, 3, n) for k, n in (("train", 600), ("dev", 100), ("test", 200))}
    X = {
        k: (np.eye(3)[v] * 3 + rng.standard_normal((v.size, 3))).astype(np.float32)
        for k, v in y.items()
    }
    X = {
        k: np.hstack([v, rng.standard_normal((v.shape[0], 2)).astype(np.float32)])
        for k, v in X.items()
    }
    words = {k: [f"w{int(t)}{i % 40}" for i, t in enumerate(v)] for k, v in y.items()}
    table = probe_sweep(
        X,
        y,
        {"all": np.arange(5), "noise": np.array([3, 4])},
        n_classes=3,
        words=words,
        control_for=["all"],
        device="cpu",
        seed=0,
        lr=1e-2,
    )
    assert list(table.key) == ["all", "noise"]
    assert list(table.n_neurons) == [5, 2]
    assert list(table.epochs_run) == [10, 10] and table.converged.isna().all()
    full, noise = table.iloc[0], table.iloc[1]
    assert full.test > noise.test + 0.3 and full.test > full.majority
    assert full.selectivity == pytest.approx(full.test - full.control)
    assert np.isnan(noise.control)


def test_probing_sets_smoke_have_both_tasks():
    sets = probing_sets("smoke", 20, 5, 8, max_words=12)
    assert {k: len(v) for k, v in sets.items()} == {"train": 20, "dev": 5, "test": 8}
    assert all(len(s.words) <= 12 and s.deprels and s.upos for v in sets.values() for s in v)
    assert sets["train"][0].words != sets["test"][0].words
    with pytest.raises(ValueError, match="corpus"):
        probing_sets("nope", 1, 1, 1)
    with pytest.raises(ValueError, match="n_dev"):
        probing_sets("smoke", 1, 0, 1)


def test_kept_counts_sum_to_kept():
    cuts = cluster_cuts(correlated(0, groups=5, per=3), [0.5])
    kept = cuts[0.5][1]
    assert sum(kept_per_block(kept, DIMS).values()) == kept.size


# ---------------------------------------------------------------- treebanks and transfer
def _conllu(sentences):
    """CoNLL-U text of ``[(word, upos, head, deprel), ...]`` sentences."""
    blocks = []
    for k, rows in enumerate(sentences):
        lines = [f"# sent_id = s{k}"]
        lines += [
            f"{i}\t{w}\t{w}\t{u}\t_\t_\t{h}\t{d}\t_\t_" for i, (w, u, h, d) in enumerate(rows, 1)
        ]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n\n"


def test_probing_sets_treebank_splits_of_one_file_are_disjoint(tmp_path):
    from lmsim.papers.thesis2022_redundancy.redundancy import probing_sets

    rows = [[(f"w{k}", "NOUN", 2, "nsubj"), ("runs", "VERB", 0, "root")] for k in range(10)]
    path = tmp_path / "pud.conllu"
    path.write_text(_conllu(rows))
    spec = str(path)
    sets = probing_sets("treebank", 5, 2, 3, treebanks={"train": spec, "dev": spec, "test": spec})
    firsts = {k: [s.words[0] for s in v] for k, v in sets.items()}
    assert firsts == {
        "train": ["w0", "w1", "w2", "w3", "w4"],
        "dev": ["w5", "w6"],
        "test": ["w7", "w8", "w9"],
    }
    assert not any(s.silver for v in sets.values() for s in v)
    with pytest.raises(ValueError, match="no sentences of at most 40 words left for `test`"):
        probing_sets("treebank", 8, 2, 1, treebanks={"train": spec, "dev": spec, "test": spec})
    with pytest.raises(ValueError, match="needs `treebanks` with the splits"):
        probing_sets("treebank", 1, 1, 1, treebanks={"train": spec})


def test_transfer_set_sources(tmp_path):
    from lmsim.papers.thesis2022_redundancy.redundancy import transfer_set

    smoke = transfer_set("smoke", 7, max_words=12)
    assert len(smoke) == 7 and all(len(s.words) <= 12 for s in smoke)
    path = tmp_path / "fr_pud.conllu"
    path.write_text(_conllu([[("Il", "PRON", 2, "nsubj"), ("dort", "VERB", 0, "root")]] * 3))
    gold = transfer_set(str(path), 2)
    assert [s.upos for s in gold] == [["PRON", "VERB"]] * 2
    with pytest.raises(ValueError, match="no spaCy pipeline for the UDHR translation 'deu'"):
        transfer_set("udhr:deu", 5)
    with pytest.raises(ValueError, match="unknown treebank"):
        transfer_set("fr_pud.txt", 5)


@pytest.mark.parametrize("seed", [0, 1])
def test_scipy_agreement_on_the_first_rows(seed):
    X = correlated(seed)
    got = scipy_agreement(X, [0.2, 0.5, 0.8], max_rows=150)
    assert got == {0.2: True, 0.5: True, 0.8: True}
    with pytest.raises(ValueError, match="max_rows"):
        scipy_agreement(X, [0.5], max_rows=1)


def test_scipy_agreement_detects_a_different_partition(monkeypatch):
    X = correlated(0)
    monkeypatch.setattr(
        "lmsim.papers.thesis2022_redundancy.redundancy.cluster_neurons",
        lambda rows, taus: {t: np.arange(rows.shape[1]) for t in taus},
    )
    assert scipy_agreement(X, [0.9])[0.9] is False


def test_parallel_transfer_sets_align_by_article(monkeypatch):
    """Issue 44: English and French UDHR test sets hold the same articles; an article with
    a sentence over ``max_words`` words in either language is dropped in both."""
    from lmsim.data import Sentence
    from lmsim.papers.thesis2022_redundancy import redundancy as red

    def sent(n):
        return Sentence(words=["w"] * n, upos=["X"] * n, heads=[0] * n, deprels=["dep"] * n)

    fake = {
        "eng": {0: [sent(3)], 1: [sent(5), sent(50)], 2: [sent(4)], 3: [sent(2)]},
        "fra": {0: [sent(3), sent(60)], 1: [sent(6)], 2: [sent(5), sent(3)], 3: [sent(2)]},
    }
    monkeypatch.setattr(red, "_udhr_articles", lambda code: fake[code])
    sources = {"en": "udhr:eng", "fr": "udhr:fra"}
    kept = red.parallel_articles(sources, 10, max_words=40)
    assert list(kept["en"]) == list(kept["fr"]) == [2, 3]
    sets = red.parallel_transfer_sets(sources, 1, max_words=40)
    assert [len(s.words) for s in sets["en"]] == [4]
    assert [len(s.words) for s in sets["fr"]] == [5, 3]
    sets, units = red.aligned_transfer_sets(sources, 2, max_words=40)
    assert units["en"].tolist() == [2, 3] and units["fr"].tolist() == [2, 2, 3]
    assert [len(s.words) for s in sets["fr"]] == [5, 3, 2]


def test_depth_of_counts_reads_the_thesis_table():
    from lmsim.papers.thesis2022_redundancy.redundancy import (
        THESIS_BERT_PER_LAYER,
        depth_of_counts,
    )

    low = depth_of_counts(dict(enumerate(THESIS_BERT_PER_LAYER[0.1])))
    assert low - depth_of_counts(dict(enumerate(THESIS_BERT_PER_LAYER[0.9]))) == pytest.approx(
        0.4907, abs=1e-4
    )
    assert depth_of_counts({0: 0, 1: 0, 2: 5}) == 1.0
    assert depth_of_counts({0: 2, 1: 0, 2: 2}) == 0.5
    with pytest.raises(ValueError, match="at least two layers"):
        depth_of_counts({0: 0, 1: 0})


# The thesis's Table 5.1 (rows: layers, embeddings first; columns: τ 0.1 ... 0.9).
_TABLE_51 = {
    "bert": """600 454 359 344 559 527 471 271 45
536 355 368 364 0 0 0 0 0
553 289 362 32 0 0 0 0 0
568 305 356 0 0 0 0 0 0
552 332 146 0 0 0 0 0 0
553 366 0 0 0 0 0 0 0
552 326 0 0 0 0 0 0 0
500 332 0 0 0 0 0 0 0
530 504 0 0 0 0 0 0 0
528 117 0 0 0 0 0 0 0
512 0 0 0 0 0 0 0 0
534 0 0 0 0 0 0 0 0
534 0 0 0 0 0 0 0 0""",
    "distilbert": """751 595 441 383 525 528 498 360 84
743 463 460 400 92 0 0 0 0
730 407 426 125 0 0 0 0 0
739 443 445 0 0 0 0 0 0
718 420 30 0 0 0 0 0 0
717 436 0 0 0 0 0 0 0
691 356 0 0 0 0 0 0 0""",
}


@pytest.mark.parametrize("model", sorted(_TABLE_51))
def test_table_51_is_the_authors_carry_over_prefix(model):
    from lmsim.papers.thesis2022_redundancy.selection import carry_over_prefix

    rows = [[int(v) for v in line.split()] for line in _TABLE_51[model].splitlines()]
    table = {round(0.1 * (j + 1), 1): [r[j] for r in rows] for j in range(9)}
    checks = carry_over_prefix(table, 768)
    assert len(checks) == 8 and all(c["within"] for c in checks)
    assert all(c["last_layer"] == c["predicted_last"] for c in checks)
    # a layer kept beyond the previous total's prefix breaks it
    broken = dict(table)
    broken[0.5] = [table[0.5][0], 0, 5] + table[0.5][3:]
    assert not carry_over_prefix(broken, 768)[3]["within"]
    with pytest.raises(ValueError, match="positive"):
        carry_over_prefix(table, 0)


@pytest.mark.parametrize("model", sorted(_TABLE_51))
def test_the_library_table_51_is_the_thesis_table(model):
    from lmsim.papers.thesis2022_redundancy.selection import THESIS_TABLE_51

    rows = [[int(v) for v in line.split()] for line in _TABLE_51[model].splitlines()]
    name = {"bert": "BERT-base", "distilbert": "distilBERT"}[model]
    for j, tau in enumerate(sorted(THESIS_TABLE_51[name])):
        assert THESIS_TABLE_51[name][tau] == [r[j] for r in rows]


def test_all_16_transitions_of_table_51_fit_the_carry_over():
    from lmsim.papers.thesis2022_redundancy.selection import carry_over_table

    t = carry_over_table()
    assert len(t) == 16 and t.fits.all() and set(t.model) == {"BERT-base", "distilBERT"}
    assert list(t[t.model == "BERT-base"].prefix[:2]) == [7052, 3380]


def _naive_carry_over(X, taus, seed):
    """The authors' loop written out: scipy on 1 - |corrcoef| of the reduced matrix, local
    indices applied to the full matrix."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    from lmsim.cluster import representatives

    out, reduced = {}, X
    for tau in sorted(taus):
        dist = 1 - np.abs(np.nan_to_num(np.corrcoef(reduced.astype(np.float64).T)))
        np.fill_diagonal(dist, 0)
        lab = fcluster(linkage(squareform(dist, checks=False), "average"), tau, "distance")
        _, first = np.unique(lab, return_index=True)
        canon = np.empty_like(lab)  # clusters numbered by their first neuron, as lmsim does
        for new, old in enumerate(lab[np.sort(first)]):
            canon[lab == old] = new
        out[tau] = representatives(canon, seed)
        reduced = X[:, out[tau]]
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_carry_over_selection_is_the_authors_loop(seed):
    from lmsim.cluster import cluster_neurons
    from lmsim.papers.thesis2022_redundancy.selection import carry_over_selection

    rng = np.random.default_rng(seed)
    base = rng.normal(size=(300, 6))
    X = np.repeat(base, 5, axis=1) + rng.normal(scale=0.6, size=(300, 30))  # 6 groups of 5
    X = X + 0.5 * base[:, [0]]  # correlates the groups a little, so higher τ merges more
    taus = [0.2, 0.5, 0.8]
    got = carry_over_selection(X, taus, seed=seed)
    want = _naive_carry_over(X, taus, seed)
    for tau in taus:
        np.testing.assert_array_equal(got[tau], want[tau])
    # every later τ keeps a prefix of the previous count's columns
    for lo, hi in zip(taus[:-1], taus[1:], strict=True):
        assert got[hi].max() < got[lo].size
    first = cluster_neurons(X, 0.2)
    again = carry_over_selection(X, taus, seed=seed, first=first)
    assert all(np.array_equal(again[t], got[t]) for t in taus)
    with pytest.raises(ValueError, match="at least one"):
        carry_over_selection(X, [])
    # one neuron left: it stays the only kept column at every higher τ
    one = carry_over_selection(X, [0.2, 0.99, 0.999, 0.9999], seed=seed)
    if one[0.99].size == 1:
        assert list(one[0.999]) == list(one[0.9999]) == [0]
