"""The paper's numbers (He & Toyoizumi, 2022): Table 1 sizes, Tables 2-4, the POS and ICA
facts; shown beside ours, labelled as the paper's."""

from __future__ import annotations

import pandas as pd

from lmsim.twotower.config import TowerConfig

# The paper's Table 1. ELMo's projection to 512 is ELMo's own (Peters et al., 2018); the
# paper gives only "hidden 4096, 2 layers".
PAPER_CONFIGS: dict[str, TowerConfig] = {
    "elmo": TowerConfig("elmo", hidden=4096, layers=2, embed=512, lstm_proj=512),
    "gpt": TowerConfig("gpt", hidden=768, layers=12, heads=12, intermediate=3072),
    "bert-base": TowerConfig("bert", hidden=384, layers=12, heads=12, intermediate=1024),
    "bert-large": TowerConfig("bert", hidden=512, layers=24, heads=16, intermediate=2048),
}

# Sec. 5.2: VERB, ADP, ADV, AUX preferred by the primary tower, PROPN by the secondary.
PAPER_POS_CLAIMS: dict[str, str] = {
    "VERB": "primary",
    "ADP": "primary",
    "ADV": "primary",
    "AUX": "primary",
    "PROPN": "secondary",
}


_PAPER_CASES = ["ELMo", "GPT", "Bert-base", "Bert-large-run1", "Bert-large-run2"]
# Table 2: Pearson correlation of score vectors over the 5,000 most frequent tokens.
PAPER_TABLE2 = pd.DataFrame(
    [
        [1.0, 0.91, 0.27, 0.57, 0.61],
        [0.91, 1.0, 0.26, 0.57, 0.63],
        [0.27, 0.26, 1.0, 0.72, 0.62],
        [0.57, 0.57, 0.72, 1.0, 0.94],
        [0.61, 0.63, 0.62, 0.94, 1.0],
    ],
    index=_PAPER_CASES,
    columns=_PAPER_CASES,
)
# Table 2 by relation: two Bert-large seeds; Bert-base against Bert-large; across types.
PAPER_RELATIONS: dict[str, tuple[float, float]] = {
    "seed": (0.94, 0.94),
    "size": (0.62, 0.72),
    "type": (0.26, 0.91),
}
# Table 4: Spearman correlation among score vectors and the frequency rank (top 5,000).
PAPER_TABLE4 = pd.DataFrame(
    [
        [1.0, 0.93, 0.56, 0.16],
        [0.93, 1.0, 0.65, 0.22],
        [0.56, 0.65, 1.0, 0.18],
        [0.16, 0.22, 0.18, 1.0],
    ],
    index=["ELMo", "GPT", "Bert-large", "frequency rank"],
    columns=["ELMo", "GPT", "Bert-large", "frequency rank"],
)
# Table 3 (selected rows): typical words of an ICA group, its mean score and rank per model.
PAPER_TABLE3 = pd.DataFrame(
    [
        ("which, who, what, where, when", 2.16, 1, 0.79, 6, 0.81, 5),
        ("but, only, than, however, because", 2.16, 2, 0.98, 2, 1.11, 2),
        ("is, was, were, be, been", 1.77, 4, 1.16, 1, 1.12, 1),
        ("can, may, would, could, will", 1.46, 5, 0.94, 3, 0.85, 5),
        ("one, two, three, each, another", 1.28, 7, 0.41, 10, 0.48, 7),
        ("##s, ##ed, ##ly, ##ing, ##ism", 0.65, 13, -1.16, 21, -1.78, 21),
        ("john, christian, william, david, charles", 0.30, 21, -0.99, 21, -0.85, 19),
        ("war, people, government, military, president", 0.02, 18, -0.58, 19, -0.62, 18),
        ("metal, air, ice, iron, stone", -0.28, 20, -0.57, 18, -0.47, 17),
        ("world, states, american, british, french", -0.69, 21, -1.05, 20, -1.37, 20),
    ],
    columns=[
        "words",
        "Bert-large score",
        "Bert-large rank",
        "ELMo score",
        "ELMo rank",
        "GPT score",
        "GPT rank",
    ],
)
# Sec. 5.3 and Fig. 6: the ICA sources of the paper's Bert-large embedding (d = 128).
PAPER_ICA_FACTS = {
    "fraction of values in [-1, 1]": 0.80,
    "fraction of words in no group": 0.13,
    "fraction of words in exactly one group": 0.45,
    "mean groups per word": 1.45,
}
