"""lmsim.lmd published numbers: the authors' released tables, ranks, ours beside theirs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lmsim.lmd import decompose
from lmsim.papers.zhang2022_lmd import (
    AUTHORS_MODELS,
    PAPER_CHECKPOINTS,
    PAPER_GROUP_RHO,
    PAPER_MULTILINGUAL,
    PAPER_OTHER_OBJECTIVES,
    PAPER_SEQ_LENS,
    PAPER_TABLE2,
    PAPER_TABLE3,
    authors_group_r2,
    authors_pairwise_r2,
    group_beside_authors,
    pairwise_beside_authors,
    paper_group_table,
    paper_ranks,
    paper_seq_lens_where_lowest,
)


# ----------------------------------------------------------------------- the authors' tables
def test_authors_128k_run_is_table3():
    ours = authors_group_r2("128k", "test")
    for checkpoint, row in PAPER_TABLE3.items():
        np.testing.assert_allclose(ours.loc[checkpoint].to_numpy(), row, atol=1.5e-4)
    rho = PAPER_GROUP_RHO["Table 3 (Wikicorpus)"]
    np.testing.assert_allclose(
        ours.mean().to_numpy(), [rho[T] for T in PAPER_SEQ_LENS], atol=1.5e-4
    )
    # The 20k run is not Table 2 (a different corpus and size).
    twenty = authors_group_r2("20k", "test")
    assert (
        np.abs(twenty.to_numpy() - paper_group_table("Table 2").loc[twenty.index].to_numpy()).max()
        > 0.1
    )


def test_authors_tables_shape_orientation_and_overfitting():
    for run in ("20k", "128k"):
        for T in PAPER_SEQ_LENS:
            pair = authors_pairwise_r2(run, T)
            assert pair.shape == (12, 12) and list(pair.index) == list(AUTHORS_MODELS)
            assert (
                np.isnan(np.diag(pair)).all()
                and not np.isnan(pair.to_numpy()[~np.eye(12, dtype=bool)]).any()
            )
        train, test = authors_group_r2(run, "train"), authors_group_r2(run, "test")
        assert (train > test).all().all()  # in-sample fits are better everywhere
    # Their CSV stores R²(output | input) at [input, output]: row bert-base-uncased, column
    # xlm-roberta-base reads 0.69138 in results/128k/128/pairwise_score_test.csv.
    assert authors_pairwise_r2("128k", 128).loc["xlm-roberta-base", "bert-base-uncased"] == 0.6914
    # 2.4 train sequences per basis dimension over-fit far more than 15.2 do.
    gap = lambda run: (authors_group_r2(run, "train") - authors_group_r2(run, "test")).mean().mean()  # noqa: E731
    assert gap("20k") > 3 * gap("128k")
    with pytest.raises(ValueError, match="run"):
        authors_group_r2("1M")
    with pytest.raises(ValueError, match="seq_len"):
        authors_pairwise_r2("128k", 100)


# ----------------------------------------------------------------------- ranks
def test_paper_ranks_match_a_count_and_place_electra():
    ranks = paper_ranks("Table 2")
    for j, T in enumerate(PAPER_SEQ_LENS):
        for checkpoint, row in PAPER_TABLE2.items():
            lower = sum(other[j] < row[j] for other in PAPER_TABLE2.values())
            assert ranks.loc[checkpoint, T] == 1 + lower
    electra = ranks.loc["google/electra-base-discriminator"]
    assert electra[16] == 2 and electra[512] == 6
    assert paper_seq_lens_where_lowest("ELECTRA") == [16, 32]
    assert paper_seq_lens_where_lowest("google/electra-base-discriminator", k=1) == []
    assert paper_seq_lens_where_lowest("XLNet", k=1) == [16, 32, 64]
    assert paper_seq_lens_where_lowest("ELECTRA", k=4, table="Table 3") == [16, 32, 64, 128, 256]
    with pytest.raises(KeyError, match="checkpoints"):
        paper_seq_lens_where_lowest("GPT-2")
    # Table 2 at T = 16 and 32: the 4 lowest R² are XLNet, ELECTRA, XLM-R and M-BERT; the
    # third multilingual model, distil-M-BERT, is only 8th and 7th (what claim cells for
    # "multilingual / XLNet and ELECTRA are least dependent" should be checked against).
    assert set(PAPER_MULTILINGUAL) | set(PAPER_OTHER_OBJECTIVES) <= set(PAPER_CHECKPOINTS.values())
    for T in (16, 32):
        lowest = set(ranks.index[ranks[T] <= 4])
        assert lowest == set(PAPER_OTHER_OBJECTIVES) | set(PAPER_MULTILINGUAL[:2])
    assert list(ranks.loc["distilbert-base-multilingual-cased", [16, 32]]) == [8, 7]
    with pytest.raises(ValueError, match="table"):
        paper_ranks("Table 9")


# ----------------------------------------------------------------------- ours beside theirs
def random_group(labels, seed=0, n_train=300, n_test=200, width=4):
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n_train + n_test, 3))
    acts = {
        label: latent @ rng.normal(size=(3, width)) + rng.normal(size=(n_train + n_test, width))
        for label in labels
    }
    train = {k: v[:n_train] for k, v in acts.items()}
    test = {k: v[n_train:] for k, v in acts.items()}
    return decompose(train, test)


def test_group_beside_authors_lines_up_checkpoints():
    names = list(PAPER_CHECKPOINTS)  # the paper's names, mapped to checkpoints
    dec = random_group(names)
    table = group_beside_authors(dec, 64, run="20k")
    theirs = authors_group_r2("20k", "test")[64]
    assert list(table.index) == [*names, "group ρ"]
    for name in names:
        assert table.loc[name, "checkpoint"] == PAPER_CHECKPOINTS[name]
        assert table.loc[name, "ours"] == dec.group_r2[name]
        assert table.loc[name, "authors"] == theirs[PAPER_CHECKPOINTS[name]]
    assert table.loc["group ρ", "authors"] == pytest.approx(theirs.mean())
    assert table.loc["group ρ", "ours"] == pytest.approx(dec.group_rho)
    np.testing.assert_allclose(table["difference"], table["ours"] - table["authors"])
    with pytest.raises(ValueError, match="whole group"):
        group_beside_authors(random_group(["BERT", "ELECTRA", "mine"]), 64)


def test_pairwise_beside_authors_compares_shared_pairs_only():
    dec = random_group(["BERT", "mine", "electra"])
    table = pairwise_beside_authors(
        dec, 128, checkpoints={"electra": "google/electra-base-discriminator"}
    )
    theirs = authors_pairwise_r2("128k", 128)
    assert sorted(zip(table["target"], table["basis"])) == [
        ("BERT", "electra"),
        ("electra", "BERT"),
    ]
    row = table.set_index(["target", "basis"]).loc[("electra", "BERT")]
    assert row["ours"] == dec.pairwise_r2.loc["electra", "BERT"]
    assert row["authors"] == theirs.loc["google/electra-base-discriminator", "bert-base-uncased"]
    assert row["difference"] == pytest.approx(row["ours"] - row["authors"])
    empty = pairwise_beside_authors(random_group(["a", "b"]), 16)
    assert empty.empty and list(empty.columns) == [
        "target",
        "basis",
        "ours",
        "authors",
        "difference",
    ]
    assert isinstance(empty, pd.DataFrame)


def test_gpu_paper_lite_plan_keeps_pairwise_fits_at_twenty_sequences_per_dimension():
    from lmsim.papers.zhang2022_lmd import gpu

    widths = {"minilm-l6": 384, "all-mpnet-base-v2": 768, "smollm2-135m": 576, "gemma-3-270m": 640}
    assert set(widths) == set(gpu.MODELS)
    table = gpu.plan(widths)
    assert list(table["T"]) == [16, 64] and (table["pairwise n/p"] >= 20).all()
    assert table.loc[0, "group n/p"] >= 20  # T=16: the four-model group fits too
    with pytest.raises(ValueError, match="below 20"):
        gpu.plan(widths, sizes=((16, 10_000, 1_000),))
