"""Model-level merges: :func:`merge_models` over Hugging Face models of one architecture,
with the :class:`lmsim.merge.MergeReport` (``_report``) that names how each parameter was
merged.

Linear weights go to RegMean (:class:`lmsim.merge.RegMeanAccumulator`); every other
parameter, and every parameter of a parameter-wise method, to that method's combiner in
:mod:`lmsim.merge._paramwise` (where a new parameter-wise method is added).

References
----------
Jin et al. (2023), Algorithm 1; Matena & Raffel (2022).
"""

from __future__ import annotations

import copy
import functools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import torch
from torch import nn

from lmsim._threads import thread_policy
from lmsim.merge._algebra import RegMeanAccumulator, _check_alpha
from lmsim.merge._files import load_fishers, load_grams
from lmsim.merge._paramwise import OPTIONS, PARAMWISE, MergeOptions
from lmsim.merge._report import MergeReport

METHODS = ("regmean", *PARAMWISE)
# Config fields that legitimately differ between fine-tuned copies of one architecture.
_CONFIG_IGNORED = {
    "num_labels",
    "id2label",
    "label2id",
    "_name_or_path",
    "name_or_path",
    "architectures",
    "problem_type",
    "finetuning_task",
    "torch_dtype",
    "dtype",
    "transformers_version",
    "_commit_hash",
    "_attn_implementation_autoset",
    "_attn_implementation",
}


def linear_layers(model: nn.Module) -> dict[str, tuple[nn.Module, bool]]:
    """Linear layers of a model: ``{module_name: (module, transposed)}``.

    ``transposed`` is True for GPT-2's ``transformers.pytorch_utils.Conv1D``, whose weight
    is stored ``(in, out)``; ``nn.Linear`` stores ``(out, in)``.
    """
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - transformers is a dependency
        Conv1D = ()
    out = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            out[name] = (module, False)
        elif Conv1D and isinstance(module, Conv1D):
            out[name] = (module, True)
    return out


def _resolve(item):
    """An item of a lazily given sequence: the value itself, or a zero-arg callable's result."""
    if isinstance(item, nn.Module):
        return item
    if callable(item):
        return item()
    return item


def _param_aliases(model: nn.Module) -> dict[str, str]:
    """``{alias_name: canonical_name}`` for parameters shared under several names."""
    canonical: dict[int, str] = {}
    aliases = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in canonical:
            aliases[name] = canonical[id(p)]
        else:
            canonical[id(p)] = name
    return aliases


def _config_diff(a: nn.Module, b: nn.Module) -> list[str]:
    ca, cb = getattr(a, "config", None), getattr(b, "config", None)
    if ca is None or cb is None or not hasattr(ca, "to_dict"):
        return []
    da, db = ca.to_dict(), cb.to_dict()
    keys = (set(da) | set(db)) - _CONFIG_IGNORED
    return sorted(k for k in keys if da.get(k) != db.get(k))


def _load_stats(item, what: str, i: int, loader: Callable) -> Mapping:
    item = _resolve(item)
    if isinstance(item, (str, Path)):
        return loader(item)
    if isinstance(item, Mapping):
        return item
    from lmsim.moments import Moments

    if isinstance(item, Moments):
        raise TypeError(
            f"`{what}[{i}]` is one Moments; pass a dict of Grams: grams_from_moments(moms)"
        )
    raise TypeError(
        f"`{what}[{i}]` must be a dict of tensors, a saved file path or a zero-arg callable "
        f"returning one, got {type(item).__name__}"
    )


@thread_policy
def merge_models(
    models: Iterable,
    grams: Iterable | None = None,
    fishers: Iterable | None = None,
    method: str = "regmean",
    alpha: float = 0.9,
    *,
    diag_constant: float = 0.0,
    fisher_eps: float = 1e-6,
    exclude: str | Sequence[str] | None = None,
    missing_gram: str = "raise",
    ridge: float = 1e-8,
    device: str | torch.device = "cpu",
    product_dtype: str = "float64",
    base=None,
    scaling: float = 1.0,
    density: float = 0.2,
    trim: str = "model",
    drop_rate: float = 0.9,
    seed: int = 0,
    head_rows: Sequence[Sequence[int]] | None = None,
    head_weight: str = r"^classifier(\.out_proj)?\.weight$",
) -> tuple[nn.Module, MergeReport]:
    """Merge models of one architecture by RegMean, Fisher, simple averaging or task vectors.

    Models are visited one at a time: with ``models`` (and ``grams``/``fishers``) given
    as zero-arg callables that load them, memory is one model plus the float64 sums,
    whatever the number of models.

    Parameters
    ----------
    models : iterable of nn.Module or zero-arg callables returning one
        Hugging Face models of one class and config (labels aside), e.g.
        ``[functools.partial(AutoModelForSequenceClassification.from_pretrained, p)
        for p in paths]``. They are not modified.
    grams : iterable of dict, path or callable, optional
        Per model, ``{linear_module_name: (d_in, d_in) Gram}`` as returned by
        :func:`collect_grams`, a file written by :func:`save_grams`, or a callable returning
        either (a path is read lazily, one layer's Gram at a time). Required for
        ``method="regmean"``.
    fishers : iterable of dict, path or callable, optional
        Per model, ``{parameter_name: diagonal Fisher}`` (:func:`collect_fishers`).
        Required for ``method="fisher"``.
    method : {"regmean", "simple", "fisher", "task_arithmetic", "ties", "dare"}, default="regmean"
        The last three (beyond Jin et al.) merge task vectors ``θ_i − θ_0`` against
        ``base`` (:func:`task_arithmetic`, :func:`ties_merging`, :func:`dare`).
    alpha : float in [0, 1], default=0.9
        RegMean's off-diagonal scale (the paper's default, 0.1 for T5).
    diag_constant : float, default=0.0
        RegMean's additive diagonal regulariser (App. C, Table 8).
    fisher_eps : float, default=1e-6
        Floor of the Fisher values (:func:`fisher_average`).
    exclude : regex or list of regexes, optional
        Parameter names (``re.search``) not to merge, e.g. ``r"^classifier\\."`` for task
        heads of different tasks; the merged model keeps the first model's values.
    missing_gram : {"raise", "simple"}, default="raise"
        A linear layer without a Gram raises ``KeyError``, or is simply averaged.
    ridge : float, default=1e-8
        Relative ridge for singular Gram sums (:class:`SingularGramWarning`).
    device : str or torch.device, default="cpu"
        Where the float64 sums live and the solves run.
    product_dtype : {"float64", "float32"}, default="float64"
        Precision of RegMean's ``G̃_i W_iᵀ`` products, most of a merge's FLOPs; the sums
        and solves stay float64 (see :class:`RegMeanAccumulator` for the accuracy cost).
    base : nn.Module, zero-arg callable or dict of str to Tensor, optional
        The pretrained model the models were fine-tuned from, in their class (so that its
        parameter names and shapes match, the head included: the head the models started
        from), or its ``{name: tensor}``. Required by the task-vector methods.
    scaling : float, default=1.0
        ``λ`` of the task-vector methods (``1/K`` makes task arithmetic the simple average).
    density : float in (0, 1], default=0.2
        TIES's kept fraction of each task vector (the paper's ``k`` = 20 %).
    trim : {"model", "parameter"}, default="model"
        Where TIES takes its magnitude threshold: over each model's whole task vector (the
        TIES reference code, FusionBench) or per parameter (mergekit); see
        :func:`trim_threshold`.
    drop_rate : float in [0, 1), default=0.9
        DARE's drop probability ``p`` (the paper: 0.9).
    seed : int, default=0
        DARE's masks (:func:`dare_generator`: per seed, model index and parameter name).
    head_rows : sequence of sequences of int, optional
        Per model, the label ids (rows of the head weight) its training data annotates. The
        head weight (``head_weight``) is then merged row by row over the models trained on
        that label, whatever ``method`` is: the released code's head merge for emotion
        classification (``avg_merger.py``, ``avg_merge_multilabel_classification_heads``,
        applied under simple averaging and RegMean, not Fisher). The head's bias follows
        ``method``, as there.
    head_weight : regex, default=r"^classifier(\\.out_proj)?\\.weight$"
        The head weight ``head_rows`` applies to (``re.search``; one parameter must match).
        The default matches the released code's ``multilabel_head_params``
        (``classifier.out_proj.weight`` of RoBERTa, ``classifier.weight`` of BERT and DeBERTa).

    Returns
    -------
    merged : nn.Module
        The first model with the merged parameters (its dtype kept): a deep copy when
        ``models[0]`` is a module, the loaded model itself when it is a callable (so a
        callable must return a fresh model). Buffers (e.g. position ids) are the first
        model's.
    report : MergeReport
        How each parameter was merged; every parameter name is listed.

    Notes
    -----
    * RegMean applies to every ``nn.Linear`` and GPT-2 ``Conv1D`` weight; biases,
      embeddings and norms are simply averaged (the paper's recipe).
    * Parameters whose shapes differ between models (task heads with different label
      counts) are kept from the first model and reported as ``"kept"``.
    * A weight tied to another parameter (an LM head tied to the embeddings) is simply
      averaged once and its alias reported as ``"tied"``.
    * The task-vector methods merge every parameter (linear weights included) from its
      task vectors; a parameter the base lacks raises ``KeyError`` (``exclude`` it).

    References
    ----------
    Jin et al. (2023), Algorithm 1; Matena & Raffel (2022); Ilharco et al. (2023); Yadav
    et al. (2023); Yu et al. (2024).
    """
    given = {"grams": grams, "fishers": fishers}
    _check_sequences(models, given)
    regexes = _check_arguments(method, missing_gram, alpha, diag_constant, given, exclude)
    if method != "regmean" and PARAMWISE[method].needs_base and base is None:
        raise ValueError(
            f"method={method!r} merges task vectors θ_i − θ_0 and needs `base`, the pretrained "
            "model the models were fine-tuned from (in their class); or use method='simple'"
        )
    head = _check_head(head_rows, head_weight)
    device = torch.device(device)
    statistics = _statistics(method, given)
    acc = RegMeanAccumulator(
        alpha, diag_constant, ridge, device=device, product_dtype=product_dtype
    )
    options = MergeOptions(
        device,
        fisher_eps,
        base=_base_parameters(base) if base is not None else None,
        scaling=scaling,
        density=density,
        trim=trim,
        drop_rate=drop_rate,
        seed=seed,
    )
    run = _ModelMerge(method, regexes, missing_gram, acc, options, head)
    for i, item in enumerate(models):
        run.add(i, item, statistics)
    run.check_counts(statistics)
    run.write_merged()
    return run.first, run.report()


def check_merge_options(method: str = "regmean", **options) -> None:
    """Check :func:`merge_models`' options as it does, without models or statistics.

    ``options`` are its keyword arguments other than the models, their statistics,
    ``base`` and ``device`` (``alpha``, ``exclude``, ``density``, ...). For callers that
    gather inputs before merging (``lmsim merge`` collects Grams first): a bad value is
    named before anything is loaded.

    Raises
    ------
    TypeError
        An option :func:`merge_models` does not take.
    ValueError
        A value it would refuse; the message names the option.
    """
    import inspect

    params = inspect.signature(merge_models).parameters
    fixed = ("models", "grams", "fishers", "method", "base", "device")
    unknown = [k for k in options if k not in params or k in fixed]
    if unknown:
        raise TypeError(f"merge_models takes no option {unknown[0]!r}")
    values = {k: p.default for k, p in params.items() if k not in fixed}
    values.update(options)
    some = {"grams": (), "fishers": ()}
    _check_arguments(
        method, values["missing_gram"], values["alpha"], values["diag_constant"], some,
        values["exclude"],
    )  # fmt: skip
    _check_head(values["head_rows"], values["head_weight"])
    RegMeanAccumulator(
        values["alpha"], values["diag_constant"], values["ridge"],
        product_dtype=values["product_dtype"],
    )  # fmt: skip
    MergeOptions(
        torch.device("cpu"),
        values["fisher_eps"],
        scaling=values["scaling"],
        density=values["density"],
        trim=values["trim"],
        drop_rate=values["drop_rate"],
        seed=values["seed"],
    )


def _check_sequences(models, given: Mapping) -> None:
    """``models`` and the statistics are one entry per model, not a single one."""
    if isinstance(models, (nn.Module, str, os.PathLike)) or not hasattr(models, "__iter__"):
        raise TypeError(
            f"`models` must be a list of models (or of zero-arg callables returning one), got "
            f"a single {type(models).__name__}; pass them all, e.g. [model_a, model_b]"
        )
    for what, value in given.items():
        if isinstance(value, (Mapping, str, os.PathLike)):
            raise TypeError(
                f"`{what}` must be a list with one entry per model, got a single "
                f"{type(value).__name__}; pass [{what}_a, {what}_b] in the order of `models`"
            )


def _base_parameters(base) -> Mapping:
    """``{name: tensor}`` of ``base`` (a module, a zero-arg callable returning one, a dict)."""
    base = _resolve(base)
    if isinstance(base, nn.Module):
        return dict(base.named_parameters())
    if isinstance(base, Mapping):
        return base
    raise TypeError(
        "`base` must be an nn.Module, a zero-arg callable returning one, or a dict of "
        f"tensors, got {type(base).__name__}"
    )


def _check_head(head_rows, head_weight: str) -> tuple[list, re.Pattern] | None:
    """``(head_rows as lists, compiled head_weight)``, or None without ``head_rows``."""
    if head_rows is None:
        return None
    if isinstance(head_rows, (str, bytes)) or not isinstance(head_rows, Sequence):
        raise TypeError(
            "`head_rows` must be a sequence with one list of label ids per model, got "
            f"{type(head_rows).__name__}"
        )
    try:
        pattern = re.compile(head_weight)
    except re.error as err:
        raise ValueError(f"`head_weight` is an invalid regex: {err}") from err
    return [list(rows) for rows in head_rows], pattern


def _needed_statistics(method: str) -> str | None:
    """The argument of :func:`merge_models` that ``method`` needs one entry per model of."""
    return "grams" if method == "regmean" else PARAMWISE[method].statistics


def _check_arguments(
    method: str, missing_gram: str, alpha, diag_constant, given: Mapping, exclude
) -> list[re.Pattern]:
    """Validate :func:`merge_models`' options; return the compiled ``exclude`` regexes."""
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {list(METHODS)}, got {method!r}")
    if missing_gram not in ("raise", "simple"):
        raise ValueError(f"`missing_gram` must be 'raise' or 'simple', got {missing_gram!r}")
    _check_alpha(alpha, diag_constant)
    what = _needed_statistics(method)
    if what is not None and given[what] is None:
        raise ValueError(
            f"method={method!r} needs `{what}` (one dict per model, from collect_{what}); "
            "or use method='simple'"
        )
    patterns = [exclude] if isinstance(exclude, str) else list(exclude or [])
    try:
        return [re.compile(p) for p in patterns]
    except re.error as err:
        raise ValueError(f"`exclude` has an invalid regex: {err}") from err


def _statistics(method: str, given: Mapping) -> dict[str, Iterator]:
    """``{argument name: iterator over its entries}`` for the statistics ``method`` uses."""
    what = _needed_statistics(method)
    return {} if what is None else {what: iter(given[what])}


class _ModelMerge:
    """The running state of one :func:`merge_models` call: models are added one at a time.

    Model 0 fixes the plan (how each canonical parameter is merged) and the shapes; every
    model's parameters then go to RegMean's accumulator or to their method's combiner
    (:data:`lmsim.merge._paramwise.PARAMWISE`), and :meth:`write_merged` writes the merged
    values into model 0.
    """

    def __init__(self, method, regexes, missing_gram, acc, options: MergeOptions, head=None):
        self.method, self.regexes, self.missing_gram = method, regexes, missing_gram
        self.acc = acc
        self.head = head  # (head_rows, head_weight pattern) or None
        combiners = {**PARAMWISE, **OPTIONS}
        self.combiners = {
            how: combiner(options)
            for how, combiner in combiners.items()
            if how in (method, "simple", "masked")  # a method, its fallback, the head option
        }
        self.first: nn.Module | None = None
        self.plan: dict[str, tuple[str, str]] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}
        # param name -> (module name, transposed)
        self.regmean_layers: dict[str, tuple[str, bool]] = {}
        self.n = 0

    def add(self, i: int, item, statistics: Mapping[str, Iterator]) -> None:
        """Add model ``i`` (a module or a zero-arg callable) and its statistics."""
        model = _resolve(item)
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"`models[{i}]` must be an nn.Module or a zero-arg callable returning one, "
                f"got {type(model).__name__}"
            )
        params = dict(model.named_parameters())  # canonical names only (ties removed)
        if self.first is None:
            # A model the merge loaded itself (from a callable) becomes the output; a
            # caller's model is copied, never modified.
            self.first = copy.deepcopy(model) if model is item else model
            self.plan, self.regmean_layers = _plan(model, self.method, self.regexes)
            if self.head is not None:
                _plan_head(self.plan, self.regmean_layers, self.head[1])
            self.shapes = {k: tuple(p.shape) for k, p in params.items()}
        else:
            _check_compatible(self.first, model, i, self.shapes, params)
        stats = _next_statistics(statistics, model, i)
        if self.head is not None:
            if i >= len(self.head[0]):
                raise ValueError(
                    f"`head_rows` has {len(self.head[0])} entries, fewer than `models`; pass "
                    "one list of label ids per model"
                )
            stats["head_rows"] = self.head[0][i]
        for how, combiner in self.combiners.items():
            if hasattr(combiner, "start_model"):
                mine = {
                    k: p
                    for k, p in params.items()
                    if self.plan[k][0] == how and self.shapes[k] == tuple(p.shape)
                }
                combiner.start_model(i, mine)
        for pname, p in params.items():
            self._add_parameter(i, pname, p, stats)
        self.acc.next_model()
        self.n += 1

    def _add_parameter(self, i: int, pname: str, p: torch.Tensor, stats: Mapping) -> None:
        how, _ = self.plan[pname]
        if how == "kept":
            return
        if self.shapes[pname] != tuple(p.shape):
            self.plan[pname] = (
                "kept",
                f"shape {tuple(p.shape)} in model {i} vs {self.shapes[pname]} in model 0",
            )
            for combiner in self.combiners.values():
                combiner.discard(pname)
            self.acc.release(pname)
            return
        if how == "regmean":
            how = self._add_linear(i, pname, p, stats["grams"])
            if how == "regmean":
                return
        combiner = self.combiners[how]
        combiner.add(pname, p, i, stats.get(combiner.statistics))

    def _add_linear(self, i: int, pname: str, p: torch.Tensor, gmap: Mapping) -> str:
        """Add a linear weight to RegMean; ``"simple"`` when model 0 has no Gram for it."""
        module_name, transposed = self.regmean_layers[pname]
        if module_name in gmap:
            self.acc.add_layer(pname, p, gmap[module_name], transposed=transposed)
            return "regmean"
        if self.missing_gram == "raise":
            raise KeyError(
                f"no Gram for linear layer {module_name!r} of model {i}; collect "
                "Grams with collect_grams on this model, exclude the layer with "
                "`exclude`, or pass missing_gram='simple'"
            )
        if i:
            raise KeyError(
                f"no Gram for linear layer {module_name!r} of model {i}, but model "
                "0 had one; give every model Grams for the same layers"
            )
        self.plan[pname] = ("simple", "no Gram for this layer (missing_gram='simple')")
        return "simple"

    def check_counts(self, statistics: Mapping[str, Iterator]) -> None:
        """Raise unless there was a model, and no statistics are left over."""
        if self.first is None:
            raise ValueError("`models` is empty: pass at least one model to merge")
        for what, it in statistics.items():
            if next(it, None) is not None:
                raise ValueError(
                    f"`{what}` has more entries than `models` ({self.n}); pass one per model"
                )
        if self.head is not None and len(self.head[0]) != self.n:
            raise ValueError(
                f"`head_rows` has {len(self.head[0])} entries but `models` {self.n}; pass one "
                "list of label ids per model"
            )

    def write_merged(self) -> None:
        """Solve or average each merged parameter into model 0, in its dtype and device."""
        with torch.no_grad():
            for pname, p in dict(self.first.named_parameters()).items():
                how, _ = self.plan[pname]
                if how == "kept":
                    continue
                if how == "regmean":
                    value = self.acc.solve(pname, transposed=self.regmean_layers[pname][1])
                    self.acc.release(pname)
                else:
                    value = self.combiners[how].pop(pname, self.n)
                p.copy_(value.to(device=p.device, dtype=p.dtype))

    def report(self) -> MergeReport:
        """Every parameter name of the merged model, tied aliases included."""
        report = MergeReport(method=self.method, n_models=self.n)
        aliases = _param_aliases(self.first)
        for name, _ in self.first.named_parameters(remove_duplicate=False):
            if name in aliases:
                target = aliases[name]
                how = self.plan[target][0]
                report.entries[name] = ("tied", f"same tensor as {target!r} ({how})")
            else:
                report.entries[name] = self.plan[name]
        return report


def _plan(model: nn.Module, method: str, regexes) -> tuple[dict, dict]:
    """Per canonical parameter name: (how, note); and RegMean's ``{param: (module, transposed)}``."""
    aliases = _param_aliases(model)  # alias -> canonical name
    shared: dict[str, list[str]] = {}
    for alias, target in aliases.items():
        shared.setdefault(target, []).append(alias)
    linear_weight = {}
    for mname, (_, transposed) in linear_layers(model).items():
        pname = f"{mname}.weight" if mname else "weight"
        linear_weight[aliases.get(pname, pname)] = (mname, transposed)
    plan, regmean_layers = {}, {}
    for pname, _ in model.named_parameters():
        if any(r.search(pname) for r in regexes):
            plan[pname] = ("kept", "excluded by `exclude`")
        elif method != "regmean":  # a parameter-wise method merges every parameter
            plan[pname] = (method, "")
        elif pname in linear_weight:
            if pname in shared:
                # A tied LM head is also the input embedding: RegMean's regression for the
                # output layer would silently change the embedding lookup too.
                plan[pname] = ("simple", f"tied with {shared[pname]}; RegMean not applied")
            else:
                plan[pname] = ("regmean", "")
                regmean_layers[pname] = linear_weight[pname]
        else:
            plan[pname] = ("simple", "")
    return plan, regmean_layers


def _plan_head(plan: dict, regmean_layers: dict, pattern: re.Pattern) -> None:
    """Give the one head weight matching ``pattern`` to the masked row average."""
    matches = [p for p, (how, _) in plan.items() if pattern.search(p)]
    if len(matches) != 1:
        raise ValueError(
            f"`head_weight` {pattern.pattern!r} must match exactly one parameter, matched "
            f"{matches[:5]}; name the head weight (e.g. r'^classifier\\.out_proj\\.weight$')"
        )
    (name,) = matches
    if plan[name][0] == "kept":
        raise ValueError(
            f"the head weight {name!r} is excluded from the merge ({plan[name][1]}); drop it "
            "from `exclude` or do not pass `head_rows`"
        )
    plan[name] = ("masked", "rows averaged over the models trained on each label (head_rows)")
    regmean_layers.pop(name, None)


def _check_compatible(first: nn.Module, model: nn.Module, i: int, shapes, params) -> None:
    if type(model) is not type(first):
        raise ValueError(
            f"`models[{i}]` is a {type(model).__name__} but models[0] a "
            f"{type(first).__name__}; merge only models of one architecture"
        )
    diff = _config_diff(first, model)
    if diff:
        raise ValueError(
            f"`models[{i}]` has a different config from models[0] in {diff[:8]}; merge only "
            "fine-tuned copies of one architecture"
        )
    missing = [k for k in shapes if k not in params]
    extra = [k for k in params if k not in shapes]
    if missing or extra:
        raise ValueError(
            f"`models[{i}]` has different parameter names from models[0]: missing "
            f"{missing[:5]}, unexpected {extra[:5]}; merge only models of one architecture"
        )


def _next_stats(it, what: str, i: int, loader) -> Mapping:
    try:
        item = next(it)
    except StopIteration:
        raise ValueError(
            f"`{what}` has fewer entries than `models` (none for model {i}); pass one per model"
        ) from None
    return _load_stats(item, what, i, loader)


def _check_gram_names(gmap: Mapping, model: nn.Module, i: int) -> None:
    modules = set(linear_layers(model))
    unknown = [k for k in gmap if k not in modules]
    if unknown:
        raise KeyError(
            f"`grams[{i}]` has Grams for {unknown[:5]}, which are not linear layers of "
            f"models[{i}] ({type(model).__name__}); the Grams belong to another architecture"
        )


# The loader of each statistics argument's saved files (read lazily, one tensor at a time).
_LOADERS = {"grams": load_grams, "fishers": load_fishers}


def _next_statistics(statistics: Mapping[str, Iterator], model: nn.Module, i: int) -> dict:
    """Model ``i``'s entry of each statistics argument, loaded; Grams checked on ``model``."""
    out = {}
    for what, it in statistics.items():
        out[what] = _next_stats(it, what, i, functools.partial(_LOADERS[what], lazy=True))
        if what == "grams":
            _check_gram_names(out[what], model, i)
    return out
