"""``avgcorr``: a layer's mean similarity to its model's other layers, with an interval over
the layers averaged over; and a model's layer x layer linear CKA with its
delete-one-block-of-sentences jackknife replicates (the sentences as the resampling unit).

References
----------
The 2022 thesis on distillation and redundancy, Eq. 3.2 (``avgcorr``); Wu et al. (2020)
compare every layer of every model with every other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

__all__ = ["avgcorr_bootstrap", "cka_matrix_jackknife", "sentence_starts"]


def _avgcorr_weighted(block: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``avgcorr`` of every layer with column ``j`` counted ``counts[j]`` times (j ≠ i)."""
    w = np.broadcast_to(counts, block.shape).astype(np.float64).copy()
    np.fill_diagonal(w, 0.0)
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (block * w).sum(axis=1) / total


def avgcorr_bootstrap(
    blocks: Sequence[np.ndarray],
    statistic: Callable[[list[np.ndarray]], float],
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
):
    """A statistic of the layers' ``avgcorr`` with an interval over the layers averaged over.

    ``avgcorr`` of layer ``i`` is its mean CKA to the model's other layers (the thesis's
    Eq. 3.2, :func:`lmsim.metrics.localization.mean_to_others`). Which layers a model has is
    the sample: every draw resamples, for each block independently, the columns ``j`` (the
    layers averaged over) with replacement and recomputes every ``avgcorr_i`` over the drawn
    ``j ≠ i``; draws where some ``avgcorr`` is undefined are dropped.

    Parameters
    ----------
    blocks : sequence of ndarray of shape (n_layers_m, n_layers_m)
        Each model's own layer x layer CKA (or a part of it, e.g. without the embeddings).
    statistic : callable
        ``statistic([avgcorr_0, avgcorr_1, ...]) -> float``, one array per block.
    n_boot, level, seed
        Resamples, coverage, seed of :func:`numpy.random.default_rng` (block 0's columns
        drawn first, then block 1's, ... in every draw).

    Returns
    -------
    lmsim.stats.Estimate
        ``unit`` "layers averaged over", ``n`` the number of layers of all blocks.
    """
    from lmsim.stats import Estimate

    blocks = [np.asarray(b, dtype=np.float64) for b in blocks]
    if not blocks or any(b.ndim != 2 or b.shape[0] != b.shape[1] or len(b) < 2 for b in blocks):
        raise ValueError("`blocks` must be square layer x layer matrices with >= 2 layers each")
    if not 0 < level < 1:
        raise ValueError(f"`level` must lie in (0, 1), got {level}")
    observed = float(statistic([_avgcorr_weighted(b, np.ones(len(b))) for b in blocks]))
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(int(n_boot)):
        counts = [np.bincount(rng.integers(0, len(b), len(b)), minlength=len(b)) for b in blocks]
        value = statistic([_avgcorr_weighted(b, c) for b, c in zip(blocks, counts, strict=True)])
        if np.isfinite(value):
            draws.append(value)
    if len(draws) < 2:
        raise ValueError("fewer than 2 finite resamples: too few layers to resample")
    draws = np.asarray(draws)
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return Estimate(
        observed, low, high, level, "layers averaged over",
        sum(len(b) for b in blocks), f"percentile bootstrap ({len(draws)} resamples of layers)",
        float(draws.std(ddof=1)), draws=draws,
    )  # fmt: skip


def sentence_starts(lengths) -> np.ndarray:
    """Row index of each sentence's first word in word rows stacked sentence by sentence.

    Parameters
    ----------
    lengths : sequence of int
        Words per sentence (each at least 1).

    Returns
    -------
    ndarray of int of shape (n_sentences,)
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.ndim != 1 or len(lengths) == 0 or (lengths < 1).any():
        raise ValueError(f"`lengths` must be positive word counts, one per sentence, got {lengths}")
    return np.concatenate([[0], np.cumsum(lengths)[:-1]])


def _block_sq_norms(comoment, offsets) -> np.ndarray:
    """``out[a, b] = ‖C_ab‖_F²`` for the blocks ``offsets[a]:offsets[a + 1]`` of ``C``."""
    import torch

    n = len(offsets) - 1
    out = np.empty((n, n))
    for a in range(n):
        for b in range(a, n):
            part = comoment[offsets[a] : offsets[a + 1], offsets[b] : offsets[b + 1]]
            out[a, b] = out[b, a] = float(torch.linalg.matrix_norm(part) ** 2)
    return out


def _cka_from_sq_norms(sq: np.ndarray) -> np.ndarray:
    """Linear CKA ``‖C_ab‖² / (‖C_aa‖ ‖C_bb‖)`` from the blocks' squared norms."""
    diag = np.sqrt(np.diag(sq))
    return sq / np.outer(diag, diag)


def _centred(x):
    """Float64 mean and float32 centred co-moment ``(x - m)ᵀ (x - m)`` of the rows ``x``."""
    import torch

    x = torch.from_numpy(x)
    mean = x.mean(0, dtype=torch.float64)
    xc = (x.double() - mean).float()
    return len(x), mean, xc.T @ xc


def _merge(parts):
    """Count, float64 mean and float64 co-moment of merged ``(n, mean, comoment)`` parts."""
    import torch

    n = sum(p[0] for p in parts)
    mean = sum(p[0] * p[1] for p in parts) / n
    total = torch.zeros(len(mean), len(mean), dtype=torch.float64)
    for k, m, cm in parts:
        total += cm
        total.addr_(m - mean, m - mean, alpha=k)  # between-part share of the co-moment
    return n, mean, total


def cka_matrix_jackknife(
    acts: Mapping[str, np.ndarray],
    lengths: Sequence[int],
    *,
    n_blocks: int = 10,
    first_word: Sequence[str] = ("keep",),
    names: Sequence[str] | None = None,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Linear CKA among layers, with its replicates leaving out one block of sentences each.

    The words of a sentence share their context, so the sentence, not the word, is the
    independent unit. The sentences are cut into ``n_blocks`` consecutive blocks of nearly
    equal size; replicate ``g`` is the CKA matrix of every word outside block ``g``. Each
    block's float64 mean and centred co-moment are computed once (one pass over the rows in
    all; the co-moments kept in float32), the full co-moment is their merge (Chan et al.'s
    pairwise update) and replicate ``g`` is the full one minus block ``g``'s (the inverse
    update, as :meth:`lmsim.moments.Moments.remove`): ``n_blocks`` subtractions, not
    ``n_blocks`` passes. :func:`lmsim.stats.jackknife` turns the replicates of any
    statistic of the matrices into an interval.

    Parameters
    ----------
    acts : dict of str to ndarray of shape (n_words, d_name)
        Word vectors of one or more layers, rows stacked sentence by sentence (as
        :func:`lmsim.extract.extract_activations` gives them with ``pooling="word"``).
    lengths : sequence of int
        Words per sentence; ``sum(lengths) == n_words``.
    n_blocks : int, default=10
        Blocks of sentences (at least 2, at most the number of sentences).
    first_word : sequence of {"keep", "drop"}, default=("keep",)
        With ``"drop"``, also the matrices without each sentence's first word (its row left
        out): "without the sentence-initial word" for any model, an encoder's included
        (its first word sees the sentence, so no one-word pass can stand in for it). Both
        come from the same pass: each block's rows without their first words are
        accumulated apart from its first words and merged for ``"keep"``.
    names : sequence of str, optional
        Blocks of ``acts`` in the matrix's order (default: the dict's order).

    Returns
    -------
    dict of str to (matrix, replicates)
        Per entry of ``first_word``: ``matrix`` of shape (n_layers, n_layers), linear CKA on
        all kept words (:func:`lmsim.metrics.cka.linear_cka_matrix` up to rounding), and
        ``replicates`` of shape (n_blocks, n_layers, n_layers), the same without block
        ``g``'s words.

    Notes
    -----
    Memory: ``n_blocks`` float32 co-moments of ``(Σ d)²`` entries per entry of
    ``first_word`` and two float64 ones (16 layers of 576 and 10 blocks: 3.4 GB per entry
    and 1.4 GB). The float32 copies leave about 1e-7 of a block's co-moment in each
    replicate, far below the differences between replicates.

    References
    ----------
    Kornblith et al. (2019), Eq. 5 (linear CKA); Chan, Golub & LeVeque (1979) (pairwise
    merge of moments); Efron & Tibshirani (1993), ch. 11 (jackknife); the 2022 thesis on
    distillation and redundancy, Eq. 3.1.
    """
    import torch

    names = list(acts) if names is None else list(names)
    missing = [n for n in names if n not in acts]
    if not names or missing:
        raise ValueError(f"`names` must be blocks of `acts` {list(acts)}, got {names}")
    first_word = list(dict.fromkeys(first_word))
    if not first_word or set(first_word) - {"keep", "drop"}:
        raise ValueError(f'`first_word` must hold "keep" and/or "drop", got {first_word}')
    starts = sentence_starts(lengths)
    n_rows = int(np.sum(lengths))
    rows = {n: len(acts[n]) for n in names}
    if any(r != n_rows for r in rows.values()):
        raise ValueError(f"`acts` must have sum(`lengths`) = {n_rows} rows each, got {rows}")
    n_blocks = int(n_blocks)
    if not 2 <= n_blocks <= len(starts):
        raise ValueError(
            f"`n_blocks` must lie in [2, {len(starts)}] (the sentences), got {n_blocks}"
        )
    is_first = np.zeros(n_rows, dtype=bool)
    is_first[starts] = True
    sentence_of_row = np.repeat(np.arange(len(starts)), lengths)
    block_of_sentence = np.zeros(len(starts), dtype=np.int64)
    for g, part in enumerate(np.array_split(np.arange(len(starts)), n_blocks)):
        block_of_sentence[part] = g
    row_block = block_of_sentence[sentence_of_row]
    offsets = np.concatenate([[0], np.cumsum([np.shape(acts[n])[1] for n in names])])
    blocks = {v: [] for v in first_word}
    for g in range(n_blocks):
        pick = row_block == g

        def rows_of(mask):
            return np.concatenate([np.asarray(acts[n])[mask] for n in names], axis=1)

        rest = _centred(rows_of(pick & ~is_first))
        if rest[0] < 2:
            raise ValueError(f"block {g} of sentences keeps {rest[0]} words: use fewer `n_blocks`")
        if "keep" in blocks:
            k, m, cm = _merge([rest, _centred(rows_of(pick & is_first))])
            blocks["keep"].append((k, m, cm.float()))
        if "drop" in blocks:
            blocks["drop"].append(rest)
        del rest
    out = {}
    for variant, parts in blocks.items():
        n, mean, total = _merge(parts)
        matrix = _cka_from_sq_norms(_block_sq_norms(total, offsets))
        replicates = np.empty((n_blocks, len(names), len(names)))
        scratch = torch.empty_like(total)
        for g, (k, m_b, cm) in enumerate(parts):
            r = n - k
            delta = m_b - (mean * n - m_b * k) / r
            torch.sub(total, cm, out=scratch)
            scratch.addr_(delta, delta, alpha=-r * k / n)
            replicates[g] = _cka_from_sq_norms(_block_sq_norms(scratch, offsets))
        out[variant] = (matrix, replicates)
        del total, scratch
    return {v: out[v] for v in first_word}
