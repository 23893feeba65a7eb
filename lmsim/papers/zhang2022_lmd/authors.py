"""The authors' released LMD results (haozhg/lmd, ``results/``), and ours laid beside them.

Zhang's repository publishes the group and pairwise R² of its two full runs over the
paper's twelve checkpoints, for T in {16, 32, 64, 128, 256, 512}, with mean pooling over
``bert-base-uncased`` chunks and λ = 1e-6 (``lmd/cli.py``):

- ``"128k"``: ``results/128k/{T}/`` at commit ``61a47bf`` (still in the repository):
  Wikicorpus ``raw_en``, 128,000 / 12,800 / 12,800 train / validation / test sequences
  (``scripts/run.sh``). Its test group R² are the paper's Table 3 (Appendix B), to the
  4 decimals printed.
- ``"20k"``: ``results/20k/{T}/`` at commit ``c344180`` (removed in ``b30f600``, first
  committed as ``results/20000`` on 2022-10-10): 20,000 train sequences, the CLI default
  then, with 2,000 / 2,000 validation / test. The corpus is not recorded beside these
  files and they match neither Table 2 nor Table 3; with 11 × 768 = 8,448 basis
  dimensions per group fit (2.4 train sequences per dimension) they show the over-fitting
  of the group fits directly (XLNet's test R² is negative at T ≤ 32, its train R² 0.64).

Their pairwise CSVs store ``R²(output | input)`` at ``[input, output]``; here the tables
are transposed to lmsim's ``[target, basis]`` (as :attr:`Decomposition.pairwise_r2`).
Values are rounded to 4 decimals, as the paper prints them.

References
----------
Zhang (2022), Tables 2-3, Fig. 1-5; github.com/haozhg/lmd.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lmsim.lmd._decompose import Decomposition
from lmsim.lmd._groupsize import mean_pairwise_r2
from lmsim.papers.zhang2022_lmd.paper import PAPER_CHECKPOINTS, PAPER_SEQ_LENS

__all__ = [
    "AUTHORS_GROUP_R2",
    "AUTHORS_MODELS",
    "AUTHORS_PAIRWISE_R2",
    "AUTHORS_RUNS",
    "authors_group_r2",
    "authors_group_size_curve",
    "authors_mean_pairwise_r2",
    "authors_pairwise_r2",
    "group_beside_authors",
    "pairwise_beside_authors",
]

#: The two runs, their sources and sizes (see the module docstring).
AUTHORS_RUNS: dict[str, dict[str, object]] = {
    "128k": {
        "source": "github.com/haozhg/lmd, results/128k/{T}/, commit 61a47bf",
        "corpus": "wikicorpus raw_en",
        "n_train": 128_000,
        "n_test": 12_800,
        "paper": "Table 3 (Appendix B)",
    },
    "20k": {
        "source": "github.com/haozhg/lmd, results/20k/{T}/, commit c344180",
        "corpus": "not recorded (matches neither Table 2 nor 3)",
        "n_train": 20_000,
        "n_test": 2_000,
        "paper": None,
    },
}

#: The checkpoints, in the order of every tuple below (the CSVs' column order).
AUTHORS_MODELS: tuple[str, ...] = (
    "bert-base-uncased",
    "xlm-roberta-base",
    "bert-base-multilingual-cased",
    "allenai/longformer-base-4096",
    "microsoft/deberta-base",
    "distilbert-base-multilingual-cased",
    "roberta-base",
    "xlnet-base-cased",
    "google/electra-base-discriminator",
    "distilroberta-base",
    "distilbert-base-uncased",
    "albert-base-v2",
)

#: Group R²(u_i, {u_-i}) per run, split and T, in the order of ``AUTHORS_MODELS``.
AUTHORS_GROUP_R2: dict[str, dict[str, dict[int, tuple[float, ...]]]] = {
    "20k": {
        "train": {
            16: (0.8870, 0.8030, 0.8362, 0.9589, 0.8737, 0.8997, 0.9564, 0.6384, 0.7939, 0.9398, 0.9275, 0.8594),
            32: (0.9183, 0.8528, 0.8574, 0.9689, 0.9115, 0.9149, 0.9682, 0.6686, 0.8508, 0.9516, 0.9481, 0.8958),
            64: (0.9403, 0.8900, 0.8822, 0.9764, 0.9376, 0.9327, 0.9760, 0.8285, 0.9030, 0.9631, 0.9628, 0.9238),
            128: (0.9551, 0.9219, 0.8876, 0.9837, 0.9542, 0.9459, 0.9838, 0.9255, 0.9394, 0.9728, 0.9722, 0.9442),
            256: (0.9631, 0.9403, 0.9184, 0.9881, 0.9633, 0.9547, 0.9880, 0.9525, 0.9574, 0.9786, 0.9765, 0.9566),
            512: (0.9669, 0.9517, 0.9384, 0.9877, 0.9686, 0.9618, 0.9889, 0.9640, 0.9673, 0.9821, 0.9782, 0.9649),
        },
        "test": {
            16: (0.6343, 0.3865, 0.4665, 0.8666, 0.5909, 0.6777, 0.8577, -0.1469, 0.3492, 0.8073, 0.7624, 0.5456),
            32: (0.7256, 0.5709, 0.5317, 0.8965, 0.7070, 0.7242, 0.8958, -0.1049, 0.5609, 0.8464, 0.8230, 0.6599),
            64: (0.8005, 0.6658, 0.6253, 0.9265, 0.7975, 0.7867, 0.9253, 0.5125, 0.7135, 0.8840, 0.8750, 0.7527),
            128: (0.8435, 0.7277, 0.6379, 0.9457, 0.8431, 0.8137, 0.9451, 0.7489, 0.7841, 0.9071, 0.9025, 0.8074),
            256: (0.8715, 0.7721, 0.7283, 0.9589, 0.8738, 0.8473, 0.9592, 0.8264, 0.8362, 0.9253, 0.9183, 0.8466),
            512: (0.8850, 0.8068, 0.7961, 0.9563, 0.8890, 0.8656, 0.9601, 0.8629, 0.8693, 0.9362, 0.9232, 0.8727),
        },
    },
    "128k": {
        "train": {
            16: (0.8154, 0.6798, 0.7318, 0.9337, 0.7913, 0.8345, 0.9294, 0.4137, 0.6679, 0.9014, 0.8807, 0.7662),
            32: (0.8659, 0.7641, 0.7676, 0.9506, 0.8544, 0.8613, 0.9495, 0.4627, 0.7666, 0.9224, 0.9144, 0.8286),
            64: (0.9000, 0.8176, 0.8062, 0.9618, 0.8947, 0.8884, 0.9613, 0.7381, 0.8461, 0.9395, 0.9370, 0.8721),
            128: (0.9216, 0.8613, 0.8112, 0.9728, 0.9197, 0.9056, 0.9728, 0.8712, 0.8937, 0.9533, 0.9510, 0.9030),
            256: (0.9350, 0.8898, 0.8613, 0.9798, 0.9353, 0.9215, 0.9797, 0.9164, 0.9232, 0.9631, 0.9582, 0.9239),
            512: (0.9426, 0.9125, 0.8963, 0.9787, 0.9449, 0.9340, 0.9808, 0.9357, 0.9410, 0.9694, 0.9617, 0.9385),
        },
        "test": {
            16: (0.7829, 0.6319, 0.6847, 0.9240, 0.7555, 0.8048, 0.9186, 0.3255, 0.6143, 0.8868, 0.8593, 0.7240),
            32: (0.8385, 0.7179, 0.7234, 0.9413, 0.8260, 0.8331, 0.9401, 0.3766, 0.7173, 0.9077, 0.8959, 0.7927),
            64: (0.8784, 0.7714, 0.7690, 0.9542, 0.8738, 0.8659, 0.9532, 0.6868, 0.8066, 0.9264, 0.9230, 0.8435),
            128: (0.9036, 0.8215, 0.7753, 0.9668, 0.9022, 0.8843, 0.9667, 0.8419, 0.8618, 0.9418, 0.9396, 0.8790),
            256: (0.9189, 0.8562, 0.8312, 0.9753, 0.9202, 0.9035, 0.9750, 0.8959, 0.8993, 0.9536, 0.9477, 0.9044),
            512: (0.9283, 0.8808, 0.8741, 0.9741, 0.9311, 0.9176, 0.9761, 0.9194, 0.9228, 0.9612, 0.9514, 0.9223),
        },
    },
}  # fmt: skip

#: Test pairwise R²(target | basis) per run and T: row = target, column = basis, both in
#: the order of ``AUTHORS_MODELS``; ``None`` on the diagonal (not fitted).
AUTHORS_PAIRWISE_R2: dict[str, dict[int, tuple[tuple[float | None, ...], ...]]] = {
    "20k": {
        16: (
            (None, 0.3203, 0.3509, 0.3980, 0.4073, 0.3844, 0.3907, 0.1964, 0.3113, 0.3970, 0.7593, 0.3749),
            (0.4227, None, 0.4380, 0.5008, 0.4952, 0.4935, 0.4960, 0.3477, 0.3865, 0.5218, 0.4599, 0.4690),
            (0.3587, 0.3377, None, 0.3658, 0.3736, 0.6415, 0.3555, 0.2158, 0.2510, 0.3816, 0.3985, 0.3301),
            (0.4876, 0.5128, 0.4541, None, 0.6435, 0.5086, 0.8944, 0.3572, 0.4334, 0.8000, 0.5332, 0.4986),
            (0.5016, 0.4944, 0.4571, 0.6476, None, 0.5141, 0.6356, 0.3347, 0.4031, 0.6590, 0.5412, 0.4897),
            (0.4771, 0.4877, 0.7236, 0.5084, 0.5157, None, 0.4956, 0.3100, 0.3408, 0.5324, 0.5347, 0.4607),
            (0.4685, 0.4924, 0.4313, 0.8901, 0.6186, 0.4845, None, 0.3356, 0.4145, 0.7907, 0.5107, 0.4775),
            (0.1773, 0.2009, 0.1816, 0.2247, 0.2255, 0.2091, 0.2201, None, 0.1878, 0.2354, 0.1934, 0.2165),
            (0.4766, 0.3764, 0.3725, 0.4284, 0.4289, 0.3937, 0.4245, 0.2856, None, 0.4250, 0.5093, 0.4527),
            (0.5262, 0.5701, 0.5008, 0.8282, 0.6970, 0.5654, 0.8312, 0.3988, 0.4695, None, 0.5762, 0.5498),
            (0.8106, 0.4132, 0.4450, 0.5027, 0.5105, 0.5011, 0.4932, 0.2572, 0.3815, 0.5060, None, 0.4773),
            (0.5584, 0.5434, 0.4958, 0.5677, 0.5733, 0.5458, 0.5677, 0.4106, 0.5225, 0.5889, 0.6035, None),
        ),
        32: (
            (None, 0.4263, 0.4370, 0.5031, 0.5181, 0.4631, 0.4941, 0.3109, 0.3745, 0.4961, 0.8152, 0.4572),
            (0.5622, None, 0.5594, 0.6309, 0.6277, 0.6174, 0.6269, 0.4645, 0.5091, 0.6503, 0.5955, 0.5953),
            (0.4367, 0.4262, None, 0.4496, 0.4593, 0.6760, 0.4401, 0.3127, 0.3058, 0.4589, 0.4722, 0.4057),
            (0.5889, 0.6137, 0.5481, None, 0.7126, 0.5934, 0.9201, 0.4635, 0.5213, 0.8325, 0.6267, 0.5923),
            (0.6245, 0.6192, 0.5648, 0.7347, None, 0.6091, 0.7275, 0.4870, 0.5139, 0.7369, 0.6556, 0.6063),
            (0.5525, 0.5815, 0.7582, 0.5910, 0.5992, None, 0.5821, 0.4185, 0.3993, 0.6108, 0.6045, 0.5402),
            (0.5755, 0.6048, 0.5354, 0.9196, 0.7005, 0.5809, None, 0.4548, 0.5102, 0.8296, 0.6109, 0.5800),
            (0.1831, 0.2051, 0.1773, 0.2501, 0.2380, 0.2109, 0.2512, None, 0.2016, 0.2623, 0.2095, 0.2219),
            (0.6186, 0.5421, 0.5231, 0.5842, 0.5968, 0.5438, 0.5807, 0.4446, None, 0.5779, 0.6381, 0.5915),
            (0.6211, 0.6700, 0.5907, 0.8615, 0.7593, 0.6493, 0.8639, 0.5120, 0.5493, None, 0.6666, 0.6409),
            (0.8564, 0.5118, 0.5203, 0.5944, 0.6079, 0.5672, 0.5844, 0.3797, 0.4308, 0.5912, None, 0.5491),
            (0.6527, 0.6512, 0.5952, 0.6696, 0.6776, 0.6392, 0.6676, 0.5336, 0.5967, 0.6839, 0.6883, None),
        ),
        64: (
            (None, 0.5231, 0.5325, 0.6051, 0.6137, 0.5536, 0.5959, 0.4901, 0.4452, 0.5904, 0.8603, 0.5475),
            (0.6454, None, 0.6452, 0.6977, 0.6965, 0.6854, 0.6955, 0.6023, 0.5931, 0.7106, 0.6724, 0.6699),
            (0.5401, 0.5256, None, 0.5463, 0.5541, 0.7241, 0.5392, 0.4663, 0.3962, 0.5508, 0.5677, 0.5036),
            (0.6871, 0.6945, 0.6445, None, 0.7791, 0.6779, 0.9434, 0.6285, 0.6169, 0.8661, 0.7134, 0.6822),
            (0.7233, 0.7085, 0.6662, 0.8040, None, 0.6973, 0.7980, 0.6610, 0.6124, 0.7973, 0.7453, 0.6999),
            (0.6516, 0.6661, 0.8038, 0.6761, 0.6820, None, 0.6707, 0.5815, 0.4926, 0.6904, 0.6901, 0.6335),
            (0.6761, 0.6866, 0.6333, 0.9417, 0.7686, 0.6667, None, 0.6199, 0.6075, 0.8673, 0.7007, 0.6732),
            (0.5640, 0.6062, 0.5642, 0.6175, 0.6281, 0.5862, 0.6156, None, 0.5670, 0.6245, 0.5750, 0.6072),
            (0.7263, 0.6749, 0.6578, 0.7137, 0.7282, 0.6738, 0.7111, 0.6159, None, 0.7001, 0.7388, 0.7178),
            (0.7097, 0.7373, 0.6762, 0.8926, 0.8099, 0.7183, 0.8959, 0.6615, 0.6312, None, 0.7413, 0.7167),
            (0.8953, 0.6034, 0.6120, 0.6855, 0.6919, 0.6455, 0.6761, 0.5629, 0.5021, 0.6759, None, 0.6298),
            (0.7294, 0.7287, 0.6799, 0.7487, 0.7510, 0.7151, 0.7463, 0.6605, 0.6637, 0.7539, 0.7580, None),
        ),
        128: (
            (None, 0.5780, 0.6295, 0.6673, 0.6692, 0.6110, 0.6579, 0.5929, 0.4926, 0.6497, 0.8848, 0.6017),
            (0.6949, None, 0.7268, 0.7405, 0.7395, 0.7407, 0.7396, 0.6861, 0.6368, 0.7502, 0.7171, 0.7176),
            (0.5774, 0.5699, None, 0.5881, 0.5908, 0.7262, 0.5834, 0.5334, 0.4385, 0.5915, 0.6014, 0.5451),
            (0.7416, 0.7401, 0.7307, None, 0.8168, 0.7300, 0.9578, 0.7193, 0.6647, 0.8884, 0.7613, 0.7301),
            (0.7716, 0.7562, 0.7520, 0.8392, None, 0.7490, 0.8344, 0.7481, 0.6710, 0.8310, 0.7876, 0.7513),
            (0.6826, 0.7057, 0.8379, 0.7074, 0.7116, None, 0.7049, 0.6480, 0.5363, 0.7223, 0.7160, 0.6706),
            (0.7308, 0.7365, 0.7222, 0.9561, 0.8084, 0.7244, None, 0.7092, 0.6590, 0.8924, 0.7508, 0.7248),
            (0.7270, 0.7564, 0.7381, 0.7817, 0.7828, 0.7401, 0.7774, None, 0.7103, 0.7796, 0.7433, 0.7575),
            (0.7779, 0.7321, 0.7440, 0.7749, 0.7879, 0.7343, 0.7714, 0.7082, None, 0.7549, 0.7865, 0.7752),
            (0.7532, 0.7712, 0.7539, 0.9099, 0.8388, 0.7637, 0.9139, 0.7379, 0.6705, None, 0.7791, 0.7534),
            (0.9144, 0.6501, 0.7020, 0.7369, 0.7370, 0.6937, 0.7284, 0.6600, 0.5457, 0.7262, None, 0.6741),
            (0.7820, 0.7772, 0.7680, 0.7956, 0.7994, 0.7738, 0.7946, 0.7411, 0.7079, 0.7980, 0.8030, None),
        ),
        256: (
            (None, 0.6469, 0.6536, 0.7226, 0.7198, 0.6673, 0.7144, 0.6642, 0.5535, 0.7074, 0.9004, 0.6599),
            (0.7358, None, 0.7368, 0.7728, 0.7706, 0.7651, 0.7735, 0.7338, 0.6746, 0.7816, 0.7544, 0.7517),
            (0.6530, 0.6449, None, 0.6615, 0.6652, 0.7824, 0.6577, 0.6274, 0.5153, 0.6658, 0.6740, 0.6228),
            (0.7852, 0.7828, 0.7504, None, 0.8439, 0.7653, 0.9676, 0.7727, 0.7084, 0.9075, 0.8000, 0.7731),
            (0.8078, 0.7971, 0.7669, 0.8643, None, 0.7810, 0.8612, 0.7974, 0.7182, 0.8572, 0.8202, 0.7928),
            (0.7474, 0.7579, 0.8524, 0.7631, 0.7666, None, 0.7616, 0.7241, 0.5929, 0.7744, 0.7734, 0.7295),
            (0.7773, 0.7809, 0.7460, 0.9652, 0.8386, 0.7626, None, 0.7649, 0.7073, 0.9128, 0.7923, 0.7702),
            (0.7728, 0.8020, 0.7804, 0.8262, 0.8327, 0.7832, 0.8247, None, 0.7562, 0.8216, 0.7891, 0.8026),
            (0.8157, 0.7795, 0.7743, 0.8214, 0.8346, 0.7713, 0.8193, 0.7673, None, 0.8010, 0.8197, 0.8147),
            (0.7935, 0.8054, 0.7684, 0.9233, 0.8605, 0.7921, 0.9279, 0.7855, 0.7086, None, 0.8133, 0.7884),
            (0.9259, 0.7100, 0.7154, 0.7805, 0.7768, 0.7375, 0.7742, 0.7217, 0.6026, 0.7723, None, 0.7244),
            (0.8202, 0.8170, 0.7855, 0.8325, 0.8364, 0.8049, 0.8327, 0.7948, 0.7448, 0.8339, 0.8372, None),
        ),
        512: (
            (None, 0.6795, 0.7280, 0.7527, 0.7479, 0.6979, 0.7475, 0.7007, 0.5976, 0.7418, 0.9069, 0.6943),
            (0.7620, None, 0.7921, 0.7951, 0.7946, 0.7929, 0.7970, 0.7638, 0.7034, 0.8019, 0.7751, 0.7774),
            (0.6969, 0.6896, None, 0.7064, 0.7089, 0.8197, 0.7041, 0.6707, 0.5536, 0.7126, 0.7169, 0.6617),
            (0.8033, 0.8000, 0.8006, None, 0.8545, 0.7883, 0.9638, 0.7968, 0.7296, 0.9152, 0.8156, 0.7927),
            (0.8215, 0.8146, 0.8174, 0.8729, None, 0.8012, 0.8735, 0.8162, 0.7438, 0.8701, 0.8336, 0.8116),
            (0.7444, 0.7604, 0.8795, 0.7630, 0.7652, None, 0.7624, 0.7256, 0.6054, 0.7753, 0.7699, 0.7292),
            (0.8019, 0.8040, 0.8017, 0.9628, 0.8550, 0.7916, None, 0.7920, 0.7351, 0.9244, 0.8146, 0.7955),
            (0.7810, 0.8281, 0.8244, 0.8458, 0.8519, 0.8076, 0.8405, None, 0.7687, 0.8456, 0.7964, 0.8244),
            (0.8384, 0.8070, 0.8198, 0.8420, 0.8586, 0.7939, 0.8454, 0.7932, None, 0.8276, 0.8400, 0.8391),
            (0.8135, 0.8222, 0.8197, 0.9297, 0.8729, 0.8156, 0.9365, 0.8079, 0.7313, None, 0.8301, 0.8085),
            (0.9271, 0.7296, 0.7748, 0.7950, 0.7915, 0.7552, 0.7911, 0.7429, 0.6339, 0.7910, None, 0.7438),
            (0.8429, 0.8402, 0.8380, 0.8554, 0.8582, 0.8306, 0.8555, 0.8231, 0.7725, 0.8561, 0.8566, None),
        ),
    },
    "128k": {
        16: (
            (None, 0.3630, 0.3868, 0.4423, 0.4484, 0.4196, 0.4322, 0.2415, 0.3534, 0.4413, 0.7729, 0.4085),
            (0.4569, None, 0.4657, 0.5265, 0.5203, 0.5201, 0.5208, 0.3757, 0.4355, 0.5452, 0.4943, 0.4983),
            (0.3972, 0.3759, None, 0.4007, 0.4060, 0.6590, 0.3900, 0.2533, 0.2924, 0.4138, 0.4373, 0.3610),
            (0.5327, 0.5440, 0.4925, None, 0.6713, 0.5403, 0.9063, 0.3952, 0.4874, 0.8163, 0.5752, 0.5337),
            (0.5337, 0.5181, 0.4789, 0.6682, None, 0.5307, 0.6563, 0.3631, 0.4426, 0.6768, 0.5737, 0.5137),
            (0.5082, 0.5157, 0.7387, 0.5323, 0.5379, None, 0.5200, 0.3457, 0.3826, 0.5538, 0.5646, 0.4870),
            (0.5118, 0.5244, 0.4683, 0.9027, 0.6475, 0.5155, None, 0.3735, 0.4640, 0.8064, 0.5519, 0.5127),
            (0.2139, 0.2365, 0.2185, 0.2527, 0.2496, 0.2402, 0.2474, None, 0.2201, 0.2654, 0.2361, 0.2576),
            (0.4983, 0.4032, 0.3930, 0.4555, 0.4536, 0.4156, 0.4521, 0.3171, None, 0.4531, 0.5284, 0.4727),
            (0.5625, 0.5943, 0.5286, 0.8417, 0.7170, 0.5864, 0.8429, 0.4308, 0.5124, None, 0.6118, 0.5777),
            (0.8217, 0.4551, 0.4799, 0.5425, 0.5480, 0.5316, 0.5304, 0.3047, 0.4211, 0.5464, None, 0.5079),
            (0.5764, 0.5667, 0.5142, 0.5923, 0.5908, 0.5656, 0.5867, 0.4365, 0.5440, 0.6083, 0.6214, None),
        ),
        32: (
            (None, 0.4534, 0.4662, 0.5369, 0.5469, 0.4913, 0.5272, 0.3523, 0.4032, 0.5258, 0.8276, 0.4861),
            (0.5547, None, 0.5568, 0.6194, 0.6170, 0.6069, 0.6161, 0.4813, 0.5120, 0.6349, 0.5878, 0.5909),
            (0.4713, 0.4579, None, 0.4812, 0.4874, 0.6917, 0.4712, 0.3509, 0.3465, 0.4882, 0.5044, 0.4368),
            (0.6191, 0.6306, 0.5771, None, 0.7345, 0.6162, 0.9283, 0.5126, 0.5576, 0.8430, 0.6522, 0.6198),
            (0.6450, 0.6317, 0.5863, 0.7514, None, 0.6248, 0.7426, 0.5127, 0.5388, 0.7484, 0.6744, 0.6225),
            (0.5806, 0.5989, 0.7695, 0.6104, 0.6163, None, 0.6009, 0.4581, 0.4370, 0.6276, 0.6267, 0.5666),
            (0.6015, 0.6167, 0.5576, 0.9277, 0.7175, 0.5971, None, 0.4971, 0.5392, 0.8391, 0.6336, 0.6037),
            (0.2572, 0.2810, 0.2609, 0.2932, 0.2926, 0.2768, 0.2880, None, 0.2576, 0.3036, 0.2750, 0.2919),
            (0.6081, 0.5394, 0.5176, 0.5861, 0.5949, 0.5375, 0.5824, 0.4490, None, 0.5748, 0.6287, 0.5946),
            (0.6426, 0.6771, 0.6102, 0.8686, 0.7698, 0.6602, 0.8709, 0.5472, 0.5756, None, 0.6825, 0.6587),
            (0.8678, 0.5379, 0.5495, 0.6248, 0.6331, 0.5896, 0.6141, 0.4204, 0.4604, 0.6184, None, 0.5739),
            (0.6640, 0.6614, 0.6075, 0.6851, 0.6857, 0.6521, 0.6811, 0.5453, 0.6123, 0.6951, 0.6990, None),
        ),
        64: (
            (None, 0.5344, 0.5484, 0.6192, 0.6246, 0.5660, 0.6099, 0.5053, 0.4624, 0.6029, 0.8667, 0.5606),
            (0.6289, None, 0.6314, 0.6817, 0.6810, 0.6719, 0.6797, 0.5929, 0.5737, 0.6940, 0.6552, 0.6555),
            (0.5529, 0.5389, None, 0.5619, 0.5686, 0.7330, 0.5538, 0.4835, 0.4146, 0.5661, 0.5803, 0.5180),
            (0.6915, 0.6959, 0.6522, None, 0.7826, 0.6820, 0.9443, 0.6403, 0.6195, 0.8673, 0.7168, 0.6862),
            (0.7290, 0.7167, 0.6793, 0.8102, None, 0.7071, 0.8043, 0.6718, 0.6252, 0.8035, 0.7510, 0.7090),
            (0.6590, 0.6734, 0.8092, 0.6852, 0.6913, None, 0.6792, 0.5965, 0.5058, 0.6991, 0.6963, 0.6443),
            (0.6785, 0.6879, 0.6387, 0.9425, 0.7712, 0.6706, None, 0.6297, 0.6086, 0.8677, 0.7040, 0.6769),
            (0.5597, 0.5978, 0.5679, 0.6124, 0.6208, 0.5828, 0.6100, None, 0.5599, 0.6178, 0.5757, 0.5964),
            (0.7161, 0.6593, 0.6452, 0.7032, 0.7159, 0.6570, 0.6993, 0.6057, None, 0.6883, 0.7285, 0.7077),
            (0.7109, 0.7373, 0.6821, 0.8926, 0.8120, 0.7221, 0.8956, 0.6706, 0.6321, None, 0.7425, 0.7192),
            (0.9001, 0.6107, 0.6236, 0.6960, 0.6998, 0.6538, 0.6871, 0.5752, 0.5164, 0.6850, None, 0.6390),
            (0.7368, 0.7328, 0.6890, 0.7539, 0.7569, 0.7228, 0.7517, 0.6681, 0.6720, 0.7587, 0.7633, None),
        ),
        128: (
            (None, 0.6000, 0.6489, 0.6882, 0.6877, 0.6296, 0.6794, 0.6121, 0.5193, 0.6707, 0.8911, 0.6227),
            (0.6914, None, 0.7243, 0.7354, 0.7348, 0.7386, 0.7348, 0.6795, 0.6325, 0.7443, 0.7123, 0.7108),
            (0.5927, 0.5854, None, 0.6063, 0.6078, 0.7350, 0.6009, 0.5519, 0.4598, 0.6095, 0.6172, 0.5627),
            (0.7525, 0.7494, 0.7427, None, 0.8225, 0.7408, 0.9593, 0.7300, 0.6734, 0.8921, 0.7709, 0.7408),
            (0.7820, 0.7674, 0.7651, 0.8465, None, 0.7604, 0.8419, 0.7581, 0.6828, 0.8390, 0.7982, 0.7631),
            (0.6942, 0.7157, 0.8438, 0.7210, 0.7234, None, 0.7180, 0.6611, 0.5524, 0.7348, 0.7260, 0.6830),
            (0.7431, 0.7462, 0.7352, 0.9586, 0.8151, 0.7356, None, 0.7206, 0.6676, 0.8960, 0.7621, 0.7357),
            (0.7206, 0.7570, 0.7436, 0.7779, 0.7826, 0.7450, 0.7754, None, 0.7118, 0.7809, 0.7398, 0.7543),
            (0.7844, 0.7378, 0.7493, 0.7789, 0.7922, 0.7356, 0.7752, 0.7142, None, 0.7612, 0.7915, 0.7777),
            (0.7644, 0.7803, 0.7660, 0.9130, 0.8439, 0.7747, 0.9163, 0.7491, 0.6786, None, 0.7890, 0.7642),
            (0.9194, 0.6690, 0.7182, 0.7543, 0.7524, 0.7085, 0.7463, 0.6758, 0.5695, 0.7429, None, 0.6926),
            (0.7901, 0.7841, 0.7762, 0.8048, 0.8077, 0.7802, 0.8034, 0.7498, 0.7185, 0.8072, 0.8101, None),
        ),
        256: (
            (None, 0.6600, 0.6699, 0.7370, 0.7340, 0.6822, 0.7292, 0.6788, 0.5775, 0.7214, 0.9047, 0.6781),
            (0.7426, None, 0.7495, 0.7790, 0.7769, 0.7785, 0.7797, 0.7350, 0.6851, 0.7855, 0.7604, 0.7574),
            (0.6680, 0.6593, None, 0.6774, 0.6807, 0.7932, 0.6732, 0.6458, 0.5361, 0.6814, 0.6878, 0.6399),
            (0.7974, 0.7936, 0.7647, None, 0.8524, 0.7795, 0.9695, 0.7851, 0.7221, 0.9128, 0.8113, 0.7857),
            (0.8173, 0.8061, 0.7794, 0.8706, None, 0.7926, 0.8676, 0.8068, 0.7307, 0.8644, 0.8293, 0.8025),
            (0.7552, 0.7645, 0.8584, 0.7715, 0.7738, None, 0.7697, 0.7346, 0.6085, 0.7818, 0.7796, 0.7384),
            (0.7893, 0.7921, 0.7597, 0.9672, 0.8466, 0.7769, None, 0.7765, 0.7198, 0.9170, 0.8036, 0.7824),
            (0.7845, 0.8162, 0.7890, 0.8331, 0.8400, 0.7957, 0.8322, None, 0.7699, 0.8349, 0.7983, 0.8157),
            (0.8345, 0.7979, 0.7900, 0.8335, 0.8453, 0.7867, 0.8315, 0.7832, None, 0.8177, 0.8367, 0.8305),
            (0.8051, 0.8162, 0.7821, 0.9280, 0.8680, 0.8055, 0.9319, 0.7981, 0.7232, None, 0.8242, 0.8013),
            (0.9285, 0.7187, 0.7266, 0.7904, 0.7865, 0.7466, 0.7838, 0.7322, 0.6213, 0.7815, None, 0.7370),
            (0.8301, 0.8251, 0.7961, 0.8420, 0.8444, 0.8149, 0.8417, 0.8040, 0.7596, 0.8429, 0.8458, None),
        ),
        512: (
            (None, 0.7024, 0.7457, 0.7701, 0.7655, 0.7200, 0.7648, 0.7207, 0.6222, 0.7594, 0.9115, 0.7173),
            (0.7751, None, 0.8067, 0.8038, 0.8028, 0.8108, 0.8052, 0.7689, 0.7202, 0.8086, 0.7892, 0.7876),
            (0.7168, 0.7096, None, 0.7247, 0.7256, 0.8305, 0.7226, 0.6896, 0.5813, 0.7300, 0.7343, 0.6836),
            (0.8209, 0.8170, 0.8164, None, 0.8676, 0.8068, 0.9672, 0.8131, 0.7522, 0.9226, 0.8322, 0.8105),
            (0.8351, 0.8269, 0.8285, 0.8820, None, 0.8150, 0.8825, 0.8284, 0.7608, 0.8795, 0.8450, 0.8240),
            (0.7641, 0.7785, 0.8877, 0.7797, 0.7812, None, 0.7796, 0.7432, 0.6343, 0.7914, 0.7872, 0.7490),
            (0.8175, 0.8191, 0.8167, 0.9653, 0.8668, 0.8091, None, 0.8062, 0.7562, 0.9301, 0.8291, 0.8115),
            (0.8114, 0.8519, 0.8453, 0.8608, 0.8653, 0.8294, 0.8614, None, 0.7970, 0.8624, 0.8248, 0.8484),
            (0.8613, 0.8311, 0.8403, 0.8628, 0.8748, 0.8216, 0.8650, 0.8153, None, 0.8495, 0.8611, 0.8597),
            (0.8291, 0.8356, 0.8332, 0.9354, 0.8830, 0.8307, 0.9416, 0.8221, 0.7524, None, 0.8442, 0.8230),
            (0.9311, 0.7495, 0.7898, 0.8103, 0.8059, 0.7734, 0.8061, 0.7611, 0.6571, 0.8058, None, 0.7635),
            (0.8562, 0.8520, 0.8500, 0.8665, 0.8679, 0.8439, 0.8672, 0.8366, 0.7900, 0.8667, 0.8683, None),
        ),
    },
}  # fmt: skip


def _check_run(run: str) -> str:
    if run not in AUTHORS_RUNS:
        raise ValueError(f"`run` must be one of {list(AUTHORS_RUNS)}, got {run!r}")
    return run


def _check_seq_len(seq_len: int) -> int:
    if seq_len not in PAPER_SEQ_LENS:
        raise ValueError(
            f"the authors' runs cover T in {list(PAPER_SEQ_LENS)}, got seq_len={seq_len!r}"
        )
    return int(seq_len)


def authors_group_r2(run: str = "128k", split: str = "test") -> pd.DataFrame:
    """The authors' group R²(u_i, {u_-i}) of one run: checkpoints × T.

    Parameters
    ----------
    run : {"128k", "20k"}
    split : {"test", "train"}

    Returns
    -------
    DataFrame of shape (12, 6)
        Index the checkpoints (``AUTHORS_MODELS``), columns ``PAPER_SEQ_LENS``.
    """
    if split not in ("test", "train"):
        raise ValueError(f"`split` must be 'test' or 'train', got {split!r}")
    table = AUTHORS_GROUP_R2[_check_run(run)][split]
    return pd.DataFrame(
        {T: list(table[T]) for T in PAPER_SEQ_LENS}, index=list(AUTHORS_MODELS)
    ).rename_axis(index="checkpoint", columns="T")


def authors_pairwise_r2(run: str = "128k", seq_len: int = 512) -> pd.DataFrame:
    """The authors' test pairwise R²(target | basis) of one run at one T.

    Returns
    -------
    DataFrame of shape (12, 12)
        ``[target, basis]``, NaN on the diagonal (not fitted).
    """
    rows = AUTHORS_PAIRWISE_R2[_check_run(run)][_check_seq_len(seq_len)]
    values = np.array([[np.nan if v is None else v for v in row] for row in rows])
    return pd.DataFrame(
        values,
        index=pd.Index(AUTHORS_MODELS, name="target"),
        columns=pd.Index(AUTHORS_MODELS, name="basis"),
    )


def _checkpoints(labels, checkpoints: Mapping[str, str] | None) -> dict[str, str | None]:
    """Our label -> the authors' checkpoint (None when the model is not one of theirs)."""
    known = set(AUTHORS_MODELS)
    out = {}
    for label in labels:
        if checkpoints is not None and label in checkpoints:
            name = checkpoints[label]
        else:
            name = PAPER_CHECKPOINTS.get(label, label)
        out[label] = name if name in known else None
    return out


def group_beside_authors(
    dec: Decomposition,
    seq_len: int,
    run: str = "128k",
    checkpoints: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Our group R² beside the authors', model by model, and the group ρ.

    A group R² depends on the whole basis (every other model of the group), so the
    comparison is made only when our group holds exactly the authors' twelve checkpoints.

    Parameters
    ----------
    dec : Decomposition
        Ours, at sequence length ``seq_len``.
    seq_len : int
        T of ``dec``.
    run : {"128k", "20k"}
    checkpoints : mapping of str to str, optional
        Our label -> Hugging Face checkpoint; default: labels that are checkpoints or the
        paper's names (``PAPER_CHECKPOINTS``).

    Returns
    -------
    DataFrame
        Rows our labels plus ``"group ρ"``; columns ``checkpoint``, ``ours``,
        ``authors``, ``difference`` (ours − authors), ``ours_train``, ``authors_train``.

    Raises
    ------
    ValueError
        Our group is not the authors' twelve checkpoints (compare pairwise cells instead:
        :func:`pairwise_beside_authors`).
    """
    names = _checkpoints(dec.models, checkpoints)
    if sorted(n for n in names.values() if n) != sorted(AUTHORS_MODELS) or len(names) != 12:
        missing = sorted(set(AUTHORS_MODELS) - set(names.values()))
        extra = [label for label, n in names.items() if n is None]
        raise ValueError(
            "a group R² depends on the whole group: ours must hold exactly the authors' twelve "
            f"checkpoints (missing {missing}, not theirs {extra}); compare pairwise cells with "
            "`pairwise_beside_authors` instead"
        )
    T = _check_seq_len(seq_len)
    test, train = authors_group_r2(run, "test")[T], authors_group_r2(run, "train")[T]
    ckpt = [names[label] for label in dec.models]
    out = pd.DataFrame(
        {
            "checkpoint": ckpt,
            "ours": dec.group_r2.to_numpy(),
            "authors": test.loc[ckpt].to_numpy(),
            "ours_train": dec.train_group_r2.to_numpy(),
            "authors_train": train.loc[ckpt].to_numpy(),
        },
        index=list(dec.models),
    )
    out.loc["group ρ"] = [
        "",
        dec.group_rho,
        test.mean(),
        dec.train_group_rho,
        train.mean(),
    ]
    out["difference"] = out["ours"].astype(float) - out["authors"].astype(float)
    return out[["checkpoint", "ours", "authors", "difference", "ours_train", "authors_train"]]


def pairwise_beside_authors(
    dec: Decomposition,
    seq_len: int,
    run: str = "128k",
    checkpoints: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Our test pairwise R²(target | basis) beside the authors', cell by cell.

    A pairwise fit depends only on its two models, so every pair of our models that are
    both among the authors' checkpoints is comparable, whatever else our group holds.

    Parameters
    ----------
    dec : Decomposition
        Ours (fitted with ``pairwise=True``), at sequence length ``seq_len``.
    seq_len : int
    run : {"128k", "20k"}
    checkpoints : mapping of str to str, optional
        As in :func:`group_beside_authors`.

    Returns
    -------
    DataFrame
        One row per ordered pair ``(target, basis)`` of different comparable models:
        ``target``, ``basis`` (our labels), ``ours``, ``authors``, ``difference``.
        Empty when fewer than two of our models are theirs.
    """
    names = _checkpoints(dec.models, checkpoints)
    theirs = authors_pairwise_r2(run, seq_len)
    shared = [label for label in dec.models if names[label] is not None]
    rows = [
        {
            "target": t,
            "basis": b,
            "ours": float(dec.pairwise_r2.loc[t, b]),
            "authors": float(theirs.loc[names[t], names[b]]),
        }
        for t in shared
        for b in shared
        if t != b
    ]
    out = pd.DataFrame(rows, columns=["target", "basis", "ours", "authors"])
    out["difference"] = out["ours"] - out["authors"]
    return out


def _authors_subset(checkpoints: Sequence[str] | None) -> list[str]:
    if checkpoints is None:
        return list(AUTHORS_MODELS)
    chosen = [PAPER_CHECKPOINTS.get(c, c) for c in checkpoints]
    unknown = sorted(set(chosen) - set(AUTHORS_MODELS))
    if unknown or len(set(chosen)) < 2:
        raise ValueError(
            f"`checkpoints` must name at least two of the authors' checkpoints "
            f"{list(AUTHORS_MODELS)}, got {list(checkpoints)} (unknown: {unknown})"
        )
    return list(dict.fromkeys(chosen))


def authors_mean_pairwise_r2(
    seq_len: int, run: str = "128k", checkpoints: Sequence[str] | None = None
) -> float:
    """The authors' mean test pairwise R²(target | basis) at one T: the pairwise level.

    A pairwise fit depends only on its two models, so this is comparable with our mean
    pairwise R² (:func:`lmsim.lmd.mean_pairwise_r2`) whatever the size of our group, at
    the same T (``EVIDENCE.md`` §3: compare pairwise with pairwise).

    Parameters
    ----------
    seq_len : int
        T, one of ``PAPER_SEQ_LENS``.
    run : {"128k", "20k"}
    checkpoints : sequence of str, optional
        Average over the pairs of these checkpoints (Hugging Face names or the paper's
        names) only; default all twelve (132 ordered pairs).

    Returns
    -------
    float
        E.g. 0.493 for the 128k run at T = 16.
    """
    table = authors_pairwise_r2(run, seq_len)
    return mean_pairwise_r2(table, _authors_subset(checkpoints))


def authors_group_size_curve(run: str = "128k", split: str = "test") -> pd.DataFrame:
    """The authors' ρ at the two group sizes their tables hold, for every T.

    Their released tables hold pairwise fits (one basis model, Eq. 11) and the twelve-model
    group fits (eleven basis models, Eq. 10): two points of the curve of ρ against the
    number of basis models that :func:`lmsim.lmd.rho_vs_group_size` traces for ours.

    Parameters
    ----------
    run : {"128k", "20k"}
    split : {"test"}
        The released pairwise tables are test R² only.

    Returns
    -------
    DataFrame of shape (12, 4)
        One row per (T, size): ``T``, ``n_basis_models`` (1 or 11), ``group_size`` (2 or
        12), ``rho`` (the mean pairwise R² over the 132 ordered pairs, or the group ρ).
    """
    if split != "test":
        raise ValueError(
            f"the authors' pairwise tables are test R² only: `split` must be 'test', got {split!r}"
        )
    group = authors_group_r2(run, "test")
    rows = []
    for T in PAPER_SEQ_LENS:
        rows.append({"T": T, "n_basis_models": 1, "group_size": 2,
                     "rho": authors_mean_pairwise_r2(T, run)})  # fmt: skip
        rows.append({"T": T, "n_basis_models": len(AUTHORS_MODELS) - 1,
                     "group_size": len(AUTHORS_MODELS), "rho": float(group[T].mean())})  # fmt: skip
    return pd.DataFrame(rows)
