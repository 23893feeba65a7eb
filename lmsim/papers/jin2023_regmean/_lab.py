"""The RegMean page's fine-tuned models, their published statistics and their merges.

:class:`MergeLab` holds the page's individual models by name (one per model and seed),
collects each model's Grams and Fishers once (to the lmsim cache and read back one layer at
a time with ``cache_stats``), and merges any of them by any method of
:func:`lmsim.merge.merge_models`: RegMean, Fisher and simple averaging (Jin et al. 2023),
task arithmetic, TIES and DARE (beyond the paper) against each model's pretrained start,
whose hyper-parameter :meth:`MergeLab.choose_on_validation` picks on validation parts only.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Sec. 3 (Eq. 1-2), Sec. 4.1, App. B.
Ilharco et al. (2023). Editing Models with Task Arithmetic. ICLR.
Yadav et al. (2023). TIES-Merging. NeurIPS.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from lmsim.merge import collect_fishers, collect_grams, merge_models
from lmsim.papers.jin2023_regmean._stats import published_stats

# Page labels of the merging methods, and the lmsim.merge method each runs.
PAPER_METHODS = {"Simple": "simple", "Fisher": "fisher", "RegMean": "regmean"}
BEYOND_METHODS = {"Task arithmetic": "task_arithmetic", "TIES": "ties"}


def seed_name(name: str, seed: int) -> str:
    """A model's name at a fine-tuning seed: ``name`` at seed 0, ``"name@s<seed>"`` else."""
    return name if int(seed) == 0 else f"{name}@s{int(seed)}"


def settings_for(settings, name: str, by_model: Mapping[str, Mapping[str, object]]):
    """``settings`` with the fields ``by_model`` gives a model, by its name or its setup's.

    Parameters
    ----------
    settings : lmsim.finetune.FinetuneSettings
    name : str
        ``"<setup>-<rest>"``; an entry for the full name wins over one for the setup (the
        part before the first ``"-"``).
    by_model : dict of field to dict of name to value
        E.g. ``{"lr": lr_by_model, "epochs": epochs_by_model}``.

    Returns
    -------
    FinetuneSettings
    """
    setup = name.split("-")[0]
    own = {k: v.get(name, v.get(setup)) for k, v in by_model.items()}
    return dataclasses.replace(settings, **{k: v for k, v in own.items() if v is not None})


def initial_model(settings, label_names: Sequence[str], kind: str = "single_label"):
    """The model a fine-tune starts from: the base with its head drawn from ``head_seed``.

    The task-vector methods subtract it (``τ_i = θ_i − θ_0``); models fine-tuned with one
    ``settings.head_seed`` share it, head included.
    """
    from lmsim.finetune._heads import _new_classifier

    return _new_classifier(settings, list(label_names), settings.head_seed, "cpu", kind)[0]


def finetune_runs(
    train: Mapping[str, tuple],
    home: Mapping[str, object],
    settings,
    seeds: Sequence[int],
    by_model: Mapping[str, Mapping[str, object]],
    *,
    seeded: Callable[[str], bool] = lambda name: True,
    head_seeds: Mapping[str, int] | None = None,
    prefix: str = "regmean",
) -> dict[str, tuple]:
    """Fine-tune (or read from the cache) every model at its seeds.

    Parameters
    ----------
    train : dict of str to (inputs, labels)
        Each model's training data, by model name.
    home : dict of str to Task
        The task each model is trained and scored on (its label names and kind).
    settings : lmsim.finetune.FinetuneSettings
        Shared settings; ``seed`` and ``head_seed`` are replaced per run.
    seeds : sequence of int
        Fine-tuning seeds (batch order and head initialisation); models ``seeded`` rejects
        train at the first only.
    by_model : dict
        Per-model fields, as in :func:`settings_for`.
    seeded : callable
        ``seeded(name)``: whether the model trains at every seed.
    head_seeds : dict of str to int, optional
        A head seed per model that replaces the run's seed as its head initialisation
        (different heads: the paper's "DH" variant).
    prefix : str
        Cache folder prefix.

    Returns
    -------
    dict of str to (Path, FinetuneSettings)
        By :func:`seed_name`.
    """
    from lmsim.finetune import finetune

    head_seeds = dict(head_seeds or {})
    out = {}
    for i, seed in enumerate(seeds):
        for name in train:
            if i and not seeded(name):
                continue
            cfg = dataclasses.replace(
                settings_for(settings, name, by_model),
                seed=int(seed),
                head_seed=int(head_seeds.get(name, seed)),
            )
            task = home[name]
            path = finetune(
                *train[name], task.label_names, cfg, kind=task.kind, name=f"{prefix}-{name}"
            )
            out[seed_name(name, seed)] = (path, cfg)
    return out


class MergeLab:
    """Named fine-tuned models with their Grams and Fishers, merged on demand.

    Parameters
    ----------
    tokenizer
        Shared by every model (copies of one base).
    train_inputs : dict of str to sequence
        Each model's training inputs (its Grams and Fishers are computed on their start).
    kinds : dict of str to str
        Each model's task kind.
    batch_size, max_length : int
    n_gram_batches : int
        Batches of the model's inputs for its Grams (the paper: 1,000).
    n_fisher : int
        Inputs for its diagonal Fisher.
    alpha : float
        RegMean's default off-diagonal scale.
    device : str
    seed : int
        Fisher label sampling.
    cache_stats : bool
        Grams and Fishers written to the lmsim cache once and read back lazily, one layer at
        a time (base-size models), keyed by ``keys[name]``.
    keys : dict of str to str, optional
        A cache key per model that determines its weights (its fine-tune folder's name).
    """

    def __init__(
        self,
        tokenizer,
        train_inputs: Mapping[str, Sequence],
        kinds: Mapping[str, str],
        *,
        batch_size: int,
        max_length: int,
        n_gram_batches: int,
        n_fisher: int,
        alpha: float = 0.9,
        device: str = "cpu",
        seed: int = 0,
        cache_stats: bool = False,
        keys: Mapping[str, str] | None = None,
    ):
        self.tokenizer, self.train_inputs, self.kinds = tokenizer, train_inputs, kinds
        self.batch_size, self.max_length = int(batch_size), int(max_length)
        self.n_gram_batches, self.n_fisher = int(n_gram_batches), int(n_fisher)
        self.alpha, self.device, self.seed = float(alpha), device, int(seed)
        self.cache_stats, self.keys = bool(cache_stats), dict(keys or {})
        self.models: dict[str, object] = {}
        self.bases: dict[tuple, object] = {}
        self._starts: dict[str, tuple] = {}
        self._grams: dict[tuple[str, int], Mapping] = {}
        self._fishers: dict[str, Mapping] = {}

    def add(self, name: str, model, start: tuple | None = None) -> None:
        """Register a model, and for the task-vector methods where it started from.

        Parameters
        ----------
        name : str
        model : nn.Module
        start : (FinetuneSettings, label names, kind), optional
            Its fine-tune's settings: the start (:func:`initial_model`) is drawn when a
            task-vector merge first needs it, once per head seed, label set and kind.
        """
        self.models[name] = model
        if start is not None:
            cfg, labels, kind = start
            self._starts[name] = (cfg, (cfg.head_seed, tuple(labels), kind))

    def base(self, name: str):
        """The model ``name`` was fine-tuned from (its pretrained start and initial head)."""
        cfg, key = self._starts[name]
        if key not in self.bases:
            self.bases[key] = initial_model(cfg, list(key[1]), key[2])
        return self.bases[key]

    def grams(self, name: str, n_batches: int | None = None) -> Mapping:
        """Grams of the named model over its first ``n_batches`` batches (memoised)."""
        n_batches = self.n_gram_batches if n_batches is None else int(n_batches)
        if (name, n_batches) not in self._grams:
            inputs = list(self.train_inputs[name][: n_batches * self.batch_size])
            compute = functools.partial(
                collect_grams,
                self.models[name],
                self.tokenizer,
                inputs,
                batch_size=self.batch_size,
                max_length=self.max_length,
                device=self.device,
                progress=False,
            )
            # Only the page's own Grams go to the cache; the sweep's are used once.
            keep = self.cache_stats and n_batches == self.n_gram_batches
            key = f"{self.keys.get(name, name)}-{n_batches}x{self.batch_size}-{self.max_length}"
            self._grams[name, n_batches] = (
                published_stats("grams", key, compute) if keep else compute()
            )
        return self._grams[name, n_batches]

    def fishers(self, name: str) -> Mapping:
        """Diagonal Fisher of the named model over its first ``n_fisher`` inputs (memoised;
        float32 and in the cache with ``cache_stats``)."""
        if name not in self._fishers:

            def compute():
                fisher = collect_fishers(
                    self.models[name],
                    self.tokenizer,
                    list(self.train_inputs[name][: self.n_fisher]),
                    max_length=self.max_length,
                    seed=self.seed,
                    kind=self.kinds[name],
                    progress=False,
                )
                return {k: v.float() for k, v in fisher.items()} if self.cache_stats else fisher

            key = f"{self.keys.get(name, name)}-{self.n_fisher}-{self.max_length}-{self.seed}"
            self._fishers[name] = (
                published_stats("fishers", key, compute) if self.cache_stats else compute()
            )
        return self._fishers[name]

    def merge(self, names: Sequence[str], method: str, *, gram_batches=None, **kw):
        """The named models merged by ``method`` (any of :func:`lmsim.merge.merge_models`).

        RegMean reads the models' Grams (over ``gram_batches`` batches, default the
        page's), Fisher their Fishers; the task-vector methods the first model's start.
        ``kw`` goes to ``merge_models`` (``alpha`` defaults to the lab's).
        """
        names = list(names)
        kw.setdefault("alpha", self.alpha)
        if method == "regmean":
            kw["grams"] = [self.grams(n, gram_batches) for n in names]
        elif method == "fisher":
            kw["fishers"] = [self.fishers(n) for n in names]
        elif method in ("task_arithmetic", "ties", "dare"):
            kw["base"] = self.base(names[0])
        return merge_models([self.models[n] for n in names], method=method, **kw)[0]

    def choose_on_validation(
        self,
        names: Sequence[str],
        method: str,
        grid: Mapping[str, Sequence],
        validate: Callable[[object], float],
        **kw,
    ) -> tuple[object, dict]:
        """The merge whose hyper-parameters score best on validation, and those settings.

        Parameters
        ----------
        names : sequence of str
        method : str
        grid : dict of str to sequence
            ``merge_models`` keyword -> candidate values (e.g. ``{"scaling": [0.3, 1.0]}``);
            every combination is tried, the first best kept.
        validate : callable
            ``validate(model) -> float``: the mean score on validation parts only.
        kw
            Fixed keywords for :meth:`merge`.

        Returns
        -------
        model, dict
            The chosen merge and ``{keyword: value, ..., "validation": score}``.
        """
        keys = list(grid)
        linear = _LINEAR_IN_SCALING.get(method) and "scaling" in grid and "exclude" not in kw
        best, chosen, merged = None, None, {}
        for values in itertools.product(*(list(grid[k]) for k in keys)):
            settings = dict(zip(keys, values))
            others = tuple((k, v) for k, v in settings.items() if k != "scaling")
            if linear and others in merged:  # θ0 + λ τ: rescale the merge made at λ0
                model = rescaled(self.base(names[0]), *merged[others], settings["scaling"])
            else:
                model = self.merge(names, method, **kw, **settings)
                if linear and settings["scaling"] != 0:
                    merged[others] = (model, settings["scaling"])
            value = float(validate(model))
            if chosen is None or value > chosen["validation"]:
                best, chosen = model, {**settings, "validation": value}
        return best, chosen


# Task-vector methods whose merge is θ0 + λ τ with τ independent of λ (``scaling``): task
# arithmetic (Σ τ_i) and TIES (the trimmed, sign-elected τ); DARE's τ is too, but its drop
# masks are drawn per call, so it is merged afresh.
_LINEAR_IN_SCALING = {"task_arithmetic": True, "ties": True}


def rescaled(base, model, scaling: float, new_scaling: float):
    """The task-vector merge at ``λ' = new_scaling`` from the one made at ``λ = scaling``.

    ``θ(λ') = θ0 + (λ'/λ) (θ(λ) − θ0)`` for every parameter (``θ0`` the ``base``'s), which
    is exact for task arithmetic and TIES, whose merged task vector does not depend on λ;
    a grid over λ then costs one merge per other setting (TIES's trim and sign election,
    the expensive part, once per density).

    Parameters
    ----------
    base : nn.Module
        The models' start, in their class (:meth:`MergeLab.base`).
    model : nn.Module
        The merge at ``scaling`` (not changed).
    scaling, new_scaling : float
        ``scaling`` must not be 0.

    Returns
    -------
    nn.Module
        A copy of ``model`` with the rescaled parameters (buffers copied).
    """
    import copy

    import torch

    if scaling == 0:
        raise ValueError("`scaling` must not be 0: the merge at λ = 0 holds no task vector")
    start = dict(base.named_parameters())
    out = copy.deepcopy(model)
    ratio = float(new_scaling) / float(scaling)
    with torch.no_grad():
        for name, p in out.named_parameters():
            b = start[name].to(dtype=torch.float64, device=p.device)
            p.copy_((b + ratio * (p.double() - b)).to(p.dtype))
    return out


def gram_megabytes(grams: Mapping) -> float:
    """Size of one model's float64 Grams in MB."""
    return sum(int(np.prod(g.shape)) * 8 for g in grams.values()) / 1e6
