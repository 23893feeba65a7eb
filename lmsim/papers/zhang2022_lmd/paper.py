"""The published numbers of Zhang (2022): checkpoints (Table 1), group ρ and R² (Tables 2-3), ranks."""

from __future__ import annotations

import pandas as pd

#: Table 1 of Zhang (2022): the 12 models and their Hugging Face checkpoints.
PAPER_CHECKPOINTS: dict[str, str] = {
    "XLM-R": "xlm-roberta-base",
    "M-BERT": "bert-base-multilingual-cased",
    "Longformer": "allenai/longformer-base-4096",
    "DeBERTa": "microsoft/deberta-base",
    "distil-M-BERT": "distilbert-base-multilingual-cased",
    "RoBERTa": "roberta-base",
    "XLNet": "xlnet-base-cased",
    "BERT": "bert-base-uncased",
    "ELECTRA": "google/electra-base-discriminator",
    "distil-RoBERTa": "distilroberta-base",
    "distil-BERT": "distilbert-base-uncased",
    "ALBERT": "albert-base-v2",
}

#: Published group correlation ρ (Eq. 10) by sequence length T: the paper's numbers.
PAPER_GROUP_RHO: dict[str, dict[int, float]] = {
    "Table 2 (Wikipedia + BooksCorpus)": {
        16: 0.7279, 32: 0.7858, 64: 0.8438, 128: 0.8741, 256: 0.8996, 512: 0.9125,
    },
    "Table 3 (Wikicorpus)": {
        16: 0.7427, 32: 0.7925, 64: 0.8543, 128: 0.8904, 256: 0.9151, 512: 0.9299,
    },
}  # fmt: skip

#: Published Table 2: R²(u_i, {u_-i}) per checkpoint (rows) and T (columns), test set.
PAPER_TABLE2: dict[str, list[float]] = {
    # T =                                   16      32      64      128     256     512
    "xlm-roberta-base":                   [0.6415, 0.7279, 0.7866, 0.8316, 0.8430, 0.8692],
    "bert-base-multilingual-cased":       [0.6861, 0.7278, 0.7541, 0.7483, 0.8139, 0.8306],
    "allenai/longformer-base-4096":       [0.8696, 0.9329, 0.9289, 0.9015, 0.9581, 0.9481],
    "microsoft/deberta-base":             [0.7492, 0.7883, 0.8503, 0.8984, 0.9105, 0.9038],
    "distilbert-base-multilingual-cased": [0.7932, 0.8190, 0.8568, 0.8830, 0.8940, 0.9035],
    "roberta-base":                       [0.8322, 0.9037, 0.9512, 0.9180, 0.9566, 0.9552],
    "xlnet-base-cased":                   [0.3412, 0.3925, 0.6733, 0.8341, 0.8865, 0.9154],
    "bert-base-uncased":                  [0.7381, 0.8293, 0.8476, 0.8803, 0.8808, 0.9124],
    "google/electra-base-discriminator":  [0.6190, 0.7278, 0.8029, 0.8499, 0.8852, 0.9067],
    "distilroberta-base":                 [0.8722, 0.8883, 0.9221, 0.9417, 0.9469, 0.9550],
    "distilbert-base-uncased":            [0.8505, 0.8827, 0.9141, 0.9323, 0.9199, 0.9472],
    "albert-base-v2":                     [0.7422, 0.8093, 0.8374, 0.8696, 0.9000, 0.9027],
}  # fmt: skip

#: Published Table 3 (Appendix B, raw English Wikicorpus, 128,000 / 12,800 / 12,800
#: train / validation / test): R²(u_i, {u_-i}) per checkpoint and T, test set.
PAPER_TABLE3: dict[str, list[float]] = {
    # T =                                   16      32      64      128     256     512
    "xlm-roberta-base":                   [0.6319, 0.7179, 0.7714, 0.8215, 0.8562, 0.8808],
    "bert-base-multilingual-cased":       [0.6847, 0.7234, 0.7690, 0.7753, 0.8312, 0.8741],
    "allenai/longformer-base-4096":       [0.9240, 0.9413, 0.9542, 0.9668, 0.9753, 0.9741],
    "microsoft/deberta-base":             [0.7555, 0.8260, 0.8738, 0.9022, 0.9202, 0.9311],
    "distilbert-base-multilingual-cased": [0.8048, 0.8331, 0.8659, 0.8843, 0.9035, 0.9176],
    "roberta-base":                       [0.9186, 0.9401, 0.9532, 0.9667, 0.9750, 0.9761],
    "xlnet-base-cased":                   [0.3255, 0.3766, 0.6868, 0.8419, 0.8959, 0.9194],
    "bert-base-uncased":                  [0.7829, 0.8385, 0.8784, 0.9036, 0.9189, 0.9283],
    "google/electra-base-discriminator":  [0.6143, 0.7173, 0.8066, 0.8618, 0.8993, 0.9228],
    "distilroberta-base":                 [0.8868, 0.9077, 0.9264, 0.9418, 0.9536, 0.9612],
    "distilbert-base-uncased":            [0.8593, 0.8959, 0.9230, 0.9396, 0.9477, 0.9514],
    "albert-base-v2":                     [0.7240, 0.7927, 0.8435, 0.8790, 0.9044, 0.9223],
}  # fmt: skip
PAPER_SEQ_LENS = (16, 32, 64, 128, 256, 512)

#: The multilingual checkpoints of Table 1 ("multilingual LMs have lower dependency
#: compared with others", Sec. 4.2), and the two with objectives other than masked LM
#: (XLNet: permutation LM; ELECTRA: replaced token detection).
PAPER_MULTILINGUAL = (
    "xlm-roberta-base",
    "bert-base-multilingual-cased",
    "distilbert-base-multilingual-cased",
)
PAPER_OTHER_OBJECTIVES = ("xlnet-base-cased", "google/electra-base-discriminator")


_TABLES = {"Table 2": "PAPER_TABLE2", "Table 3": "PAPER_TABLE3"}


def paper_group_table(table: str = "Table 2") -> pd.DataFrame:
    """A published group R² table as a DataFrame: checkpoints × T.

    Parameters
    ----------
    table : {"Table 2", "Table 3"}
        Table 2: Wikipedia + BooksCorpus (Sec. 4); Table 3: Wikicorpus (Appendix B).

    Returns
    -------
    DataFrame of shape (12, 6)
        Index the checkpoints, columns ``PAPER_SEQ_LENS``.
    """
    if table not in _TABLES:
        raise ValueError(f"`table` must be one of {list(_TABLES)}, got {table!r}")
    values = globals()[_TABLES[table]]
    return pd.DataFrame(values, index=list(PAPER_SEQ_LENS)).T.rename_axis(
        index="checkpoint", columns="T"
    )


def paper_ranks(table: str = "Table 2") -> pd.DataFrame:
    """Each checkpoint's rank by group R² per T in a published table, 1 = the lowest.

    Rank 1 is the model *least* linearly dependent on the others. Ties (equal to the 4
    printed decimals, e.g. ELECTRA and M-BERT at T = 32 in Table 2) share the best rank.

    Returns
    -------
    DataFrame of int, shape (12, 6)
        Index the checkpoints, columns ``PAPER_SEQ_LENS``.
    """
    return paper_group_table(table).rank(axis=0, method="min").astype(int)


def paper_seq_lens_where_lowest(checkpoint: str, k: int = 2, table: str = "Table 2") -> list[int]:
    """The T at which the paper's own table puts ``checkpoint`` among the ``k`` lowest R².

    The paper states that "for XLNet and ELECTRA, R² is lower compared to other LMs
    (especially for shorter sequences)" (Sec. 4.2): in Table 2 ELECTRA is 2nd lowest at
    T = 16 and 32 but 6th of 12 at T = 512, so a check of that claim belongs at the T
    this returns, not at the largest T.

    Parameters
    ----------
    checkpoint : str
        A checkpoint of ``PAPER_CHECKPOINTS`` (or the paper's name for it, e.g. "ELECTRA").
    k : int, default=2
    table : {"Table 2", "Table 3"}

    Returns
    -------
    list of int
        Sorted; empty when the table never ranks it that low.
    """
    checkpoint = PAPER_CHECKPOINTS.get(checkpoint, checkpoint)
    ranks = paper_ranks(table)
    if checkpoint not in ranks.index:
        raise KeyError(f"{checkpoint!r} is not one of the paper's checkpoints: {list(ranks.index)}")
    if int(k) < 1:
        raise ValueError(f"`k` must be >= 1, got {k!r}")
    row = ranks.loc[checkpoint]
    return [int(T) for T in row.index if row[T] <= k]
