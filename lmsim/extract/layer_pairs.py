"""All-layers similarity matrices of many models, in one joint pass or one pass per pair.

Wu et al. (2020) compare every layer of every model with every other. One joint
:class:`~lmsim.moments.Moments` of all layers gives every measure from a single pass over
the corpus, but holds ``(Σ d)² × 8`` bytes: all 160 hidden states of the paper's seven
models (117k features) would need 110 GB. :func:`pairwise_by_model_pairs` is the out-of-core
form: one extraction per *pair* of models, holding only that pair's moments
(``(d_a + d_b)² × 8`` bytes), whose layer × layer blocks are written into the full
matrices. It gives the same matrices as the joint pass (up to float64 rounding) at the
cost of running every model ``n_models − 1`` times instead of once and of preparing each
layer (its whitening or per-neuron scale) once per pair.

With ``pairs`` only the pairs a page draws are extracted (the 2022 thesis: every model's own
layer × layer CKA and its teacher × student blocks), each model that is in no pair alone:
the joint moments of all models never exist, and the entries of pairs not asked for are NaN.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from lmsim.blocks import model_of
from lmsim.extract import extract_activations, extract_moments
from lmsim.metrics import pairwise_matrix
from lmsim.moments import Moments

__all__ = ["moments_without_first_words", "pairwise_by_model_pairs"]


def pairwise_by_model_pairs(
    models: Sequence[str] | Mapping[str, tuple],
    texts,
    metrics: Mapping[str, tuple[str, Mapping]],
    *,
    layers="all",
    pairs: Sequence[Sequence[str]] | None = None,
    on_moments: Callable[[Moments], None] | None = None,
    **extract_kw,
) -> tuple[list[str], dict[str, np.ndarray]]:
    """Layer × layer similarity matrices over all models, one moments pass per pair of models.

    Parameters
    ----------
    models : sequence of str, or dict of str to (model, tokenizer)
        Model names (at least one), or loaded models by name, as
        :func:`lmsim.extract.extract_moments` takes them; a dict's models are loaded once
        and reused by every pair, names are loaded again for each pair.
    texts : list
        The texts (lists of words with ``pooling="word"``) every model sees.
    metrics : dict of str to (str, dict)
        Label -> (metric of :func:`lmsim.metrics.pairwise_matrix`, its options), e.g.
        ``{"svsim": ("svcca", {"paper_compat": True})}``.
    layers : "all", list or dict
        As in :func:`~lmsim.extract.extract_moments`.
    pairs : sequence of (str, str), optional
        Only these pairs of models (each a pair of names in ``models``); every model in
        no pair gets a pass of its own, so each model's own block is always filled.
        Default: all pairs.
    on_moments : callable, optional
        Called with each pass's :class:`~lmsim.moments.Moments` (its blocks
        ``"{model}/layer.{i}"``) before they are dropped: other measures of the same pass
        (e.g. :func:`lmsim.metrics.cka.linear_cka_matrix` on z-scored neurons) without
        extracting again.
    **extract_kw
        Passed to every :func:`~lmsim.extract.extract_moments` call (``pooling``,
        ``subword``, ``batch_size``, ``device``, ``dtype``, ``cache_key_extra``, ...);
        its shard cache keeps each pair's moments, so an interrupted run resumes.

    Returns
    -------
    names : list of str
        Block names, each model's layers in order, models in the order given.
    sims : dict of str to ndarray of shape (len(names), len(names))
        ``sims[label][i, j] = metric(names[i] → names[j])``. A model's own block comes
        from its first pair. With ``pairs``, the blocks of two models that form no pair
        are NaN.

    Notes
    -----
    Memory: the largest ``(d_a + d_b)² × 8`` bytes over pairs, instead of ``(Σ d)² × 8``.
    Time: each model's forward passes ``n_models − 1`` times; pairs are independent, so
    they can run on several machines sharing the extraction cache.
    """
    if isinstance(models, (str, bytes)):
        raise TypeError(
            f"`models` must be a list of names or a dict, got the string {models!r}; wrap it: [{models!r}]"
        )
    loaded = dict(models) if isinstance(models, Mapping) else None
    models = list(models)
    if not models:
        raise ValueError("`models` is empty: pass at least one model name")
    if len(set(models)) != len(models):
        raise ValueError(f"`models` has duplicate names {models}")
    extract_kw = {"progress": False, **extract_kw}
    pairs = _passes(models, pairs)
    values: dict[str, dict[tuple[str, str], float]] = {label: {} for label in metrics}
    blocks: dict[str, list[str]] = {}
    for pair in pairs:
        spec = {m: layers.get(m, "all") for m in pair} if isinstance(layers, Mapping) else layers
        chosen = list(pair) if loaded is None else {m: loaded[m] for m in pair}
        mom = extract_moments(chosen, texts, layers=spec, **extract_kw)
        names = mom.names
        for name in names:
            blocks.setdefault(model_of(name), [])
            if name not in blocks[model_of(name)]:
                blocks[model_of(name)].append(name)
        for label, (metric, options) in metrics.items():
            matrix = pairwise_matrix(mom, names, metric=metric, progress=False, **options)
            for (i, a), (j, b) in itertools.product(enumerate(names), repeat=2):
                values[label].setdefault((a, b), float(matrix[i, j]))
        if on_moments is not None:
            on_moments(mom)
        del mom
    names = [name for model in models for name in blocks[model]]
    sims = {
        label: np.array([[values[label].get((a, b), np.nan) for b in names] for a in names])
        for label in metrics
    }
    return names, sims


def moments_without_first_words(mom: Moments, model, texts, **extract_kw) -> Moments:
    """A causal model's word moments without each sentence's first word, by one short pass.

    In a causal model a word's hidden states depend on the words before it only, so the
    sentence-initial word's vectors are those of the one-word sentence ``[text[0]]``. One
    pass over the first words alone (raw activations, ``len(texts)`` rows) gives their
    moments, which :meth:`lmsim.moments.Moments.remove` takes out of ``mom``: the moments of
    every other word, without a second pass over the corpus. **Causal models only**: in a
    bidirectional model the first word sees the rest of its sentence, and the result is not
    the moments without it.

    Parameters
    ----------
    mom : Moments
        Word moments (``pooling="word"``) of ``texts`` holding blocks
        ``"{name}/layer.{i}"`` of this one model only.
    model : str or (model, tokenizer)
        The causal model as :func:`lmsim.extract.extract_activations` takes it (a name, or a
        loaded pair under the name its blocks carry, ``{name: (model, tokenizer)}``).
    texts : list of list of str
        The sentences ``mom`` was accumulated over.
    **extract_kw
        As given to the extraction of ``mom`` (``subword``, ``batch_size``, ``device``,
        ``dtype``, ``zoo_profile``, ...); ``layers`` and ``pooling`` are set here.

    Returns
    -------
    Moments
        ``mom.n - len(texts)`` words, the same blocks.

    Notes
    -----
    The first words are computed again in other batches, so their float32 rounding differs
    from the rows accumulated in ``mom`` by ~1e-6 relative; :meth:`Moments.remove` leaves
    that difference in the result.
    """
    names = mom.names
    owners = {model_of(n) for n in names}
    if len(owners) != 1:
        raise ValueError(f"`mom` must hold the blocks of one model, got models {sorted(owners)}")
    if any(not isinstance(t, (list, tuple)) or not t for t in texts):
        raise ValueError("`texts` must be non-empty lists of words (pooling='word')")
    name = owners.pop()
    layers = {name: [int(n.rsplit(".", 1)[1]) for n in names]}
    extract_kw = {"progress": False, **extract_kw, "layers": layers, "pooling": "word"}
    extract_kw.pop("cache", None)
    extract_kw.pop("cache_key_extra", None)
    chosen = model if isinstance(model, Mapping) else [model]
    acts = extract_activations(chosen, [list(t[:1]) for t in texts], **extract_kw)
    return mom.remove(Moments.from_arrays({n: acts[n] for n in names}, device=mom.device))


def _passes(models: list[str], pairs) -> list[tuple[str, ...]]:
    """The model tuples to extract together: all pairs, or the pairs asked for plus every
    model left out of them on its own."""
    if pairs is None:
        return list(itertools.combinations(models, 2)) or [(models[0],)]
    if isinstance(pairs, (str, bytes)):
        raise TypeError(f"`pairs` must be a list of [model, model] pairs, got {pairs!r}")
    chosen = []
    for pair in pairs:
        pair = tuple(pair)
        unknown = [m for m in pair if m not in models]
        if len(pair) != 2 or pair[0] == pair[1] or unknown:
            raise ValueError(
                f"every entry of `pairs` must be two different names of `models` {models}, "
                f"got {list(pair)}"
            )
        if pair not in chosen and pair[::-1] not in chosen:
            chosen.append(pair)
    paired = {m for pair in chosen for m in pair}
    return chosen + [(m,) for m in models if m not in paired]
