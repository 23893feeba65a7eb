"""Building, caching and staleness: train what is missing, in dependency order, atomically."""

from __future__ import annotations

import dataclasses
import json
import shutil
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import torch
from safetensors.torch import save_file
from tqdm.auto import tqdm

from lmsim._io import MARKER, entry_dir, open_entry, remove_entry
from lmsim._runtime import architecture, quiet_transformers, resolve_device
from lmsim.training import (
    TrainingRun,
    maybe_compile,
    mfu,
    n_params,
    train,
    trained_on,
    weight_hashes,
)
from lmsim.zoo.objectives import (
    MeanPoolClassifier,
    _causal_ppl,
    _classification_data,
    _classification_predictions,
    _clm_run,
    _distil_run,
    _distil_student,
    _electra_eval,
    _electra_pair,
    _electra_run,
    _finetune_run,
    _masked_ppl,
    _mlm_logits,
    _mlm_run,
    _new_model,
)
from lmsim.zoo.profiles import (
    MODELS,
    ZooProfile,
    _build_hint,
    _check_name,
    _children,
    _dependencies,
    _dependents,
    _root,
    get_profile,
    train_settings,
)
from lmsim.zoo.text import _lm_data, tokenizer_dir

_ZOO_JSON = "zoo.json"


_LOG_CSV = "training_log.csv"
# Per validation chunk (language models) and per test example (classifiers): what an
# interval over chunks or examples is computed from (lmsim.zoo.validation_chunks,
# lmsim.zoo.test_predictions).
_CHUNKS_CSV = "validation_chunks.csv"
_PREDICTIONS_CSV = "test_predictions.csv"
# A classifier's head (MeanPoolClassifier.classifier), beside its encoder.
_HEAD_FILE = "classifier.safetensors"


def _legacy_sizes(path: Path) -> dict | None:
    """Sizes ``zoo.json`` recorded in a build written before entry markers (None: none)."""
    facts = path / _ZOO_JSON
    if not facts.is_file():
        return None
    try:
        data = json.loads(facts.read_text())
    except ValueError as err:
        raise ValueError(f"{facts} is not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{facts} is not a JSON object")
    return dict(data.get("files", {}))


def _is_built(path: Path) -> bool:
    """Whether ``path`` holds a whole built model.

    A folder appears only complete and is a verified cache entry (``entry_dir``: the size
    and sha256 of every file), so one whose files are missing or differ from their records
    was damaged afterwards: it is named in a warning, moved aside (``<name>.corrupt``) and
    reported as not built, so it is trained again.
    """
    if not open_entry(path, "training it again", legacy=_legacy_sizes, stacklevel=4):
        return False
    missing = _missing_records(path)
    if missing:
        warnings.warn(
            f"zoo model {path.name!r} in {path.parent} was built by an older lmsim (it lacks "
            f"{', '.join(missing)}, which the evidence on the pages is computed from): "
            "training it again",
            stacklevel=3,
        )
        return False
    return True


def _missing_records(path: Path) -> list[str]:
    """Files a current build of this kind of model writes that ``path`` lacks."""
    spec = MODELS.get(path.name)
    if spec is None:
        return []
    wanted = (_PREDICTIONS_CSV, _HEAD_FILE) if spec.objective == "finetune" else (_CHUNKS_CSV,)
    return [file for file in wanted if not (path / file).is_file()]


def _discard_outdated(path: Path) -> None:
    """Remove a verified lmsim build that an older lmsim wrote without today's records (only
    a whole, verified entry of lmsim's own, which is trained again next)."""
    if (
        path.is_dir()
        and _missing_records(path)
        and open_entry(path, "training it again", legacy=_legacy_sizes, stacklevel=4)
    ):
        _remove_build(path)


def _remove_build(path: Path) -> None:
    """Delete a built model folder, only when it is lmsim's whole build with nothing in it
    its marker does not list (:func:`lmsim._io.remove_entry`); a damaged build is moved
    aside (``open_entry``), anything else raises ``FileExistsError``, untouched."""
    if not (path.exists() or path.is_symlink()):
        return
    if path.is_symlink() or not path.is_dir():
        raise FileExistsError(
            f"{str(path)!r} is not a zoo model lmsim built (a link or a file): lmsim never "
            "moves or deletes what it did not write; move it away, or point LMSIM_CACHE at "
            "another folder"
        )
    if not open_entry(path, "training it again", legacy=_legacy_sizes, stacklevel=5):
        return  # damaged: moved aside, kept for inspection
    try:
        remove_entry(path)
    except PermissionError as err:
        raise FileExistsError(
            f"{err}; lmsim never deletes what it did not write: move it away, or point "
            "LMSIM_CACHE at another folder"
        ) from None


# Settings that change how a build runs, not what it trains. (Thread counts could change
# the last bits of CPU reductions; the default zoo built with 1 and with 2 threads gave
# bit-identical safetensors here.)
_SCHEDULING_SETTINGS = ("jobs", "threads")
# Settings only the classifiers train with: a language model is not stale when they change.
_FINETUNE_SETTINGS = ("ft_epochs", "ft_lr", "ft_batch_size", "max_ft_train", "max_ft_test")


def stale_settings(name: str, profile: str | ZooProfile | None = None) -> dict:
    """Profile settings a cached model was built with that differ from the profile's now.

    Returns
    -------
    dict
        Setting -> ``(built with, profile now)``; empty when the model is current (or
        not built). ``jobs`` and ``threads`` are ignored: they schedule the work; so are
        the fine-tuning settings for a language model, which does not train with them.
    """
    prof = get_profile(profile)
    spec = _check_name(name)
    ignored = _SCHEDULING_SETTINGS + (() if spec.objective == "finetune" else _FINETUNE_SETTINGS)
    path = _root(prof) / name
    if not _is_built(path):
        return {}
    built = json.loads((path / _ZOO_JSON).read_text()).get("profile_settings", {})
    now = dataclasses.asdict(prof)
    return {
        key: (built.get(key, "<missing>"), value)
        for key, value in now.items()
        if key not in ignored and built.get(key, "<missing>") != value
    }


def _warn_if_stale(name: str, prof: ZooProfile) -> None:
    diff = stale_settings(name, prof)
    if diff:
        shown = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in diff.items())
        warnings.warn(
            f"zoo model {name!r} (profile {prof.name!r}) was built with other settings "
            f"({shown}); rebuild it with `python -m lmsim.zoo build --profile {prof.name} "
            f"--only {name} --rebuild`",
            stacklevel=3,
        )


def model_dir(
    name: str,
    profile: str | ZooProfile | None = None,
    build: bool = True,
    progress: bool = False,
) -> Path:
    """Folder of zoo model ``name``, built (with what it depends on) if missing.

    Parameters
    ----------
    name : str
        A key of :data:`MODELS`, e.g. ``"mlm-s0"``.
    profile : str or ZooProfile, optional
        None: ``"default"``.
    build : bool
        Train the model when it is not cached; otherwise raise ``FileNotFoundError``.
    progress : bool
        Show the on-demand training's progress bar. Off by default: models load on demand
        inside other calls (``load_model("zoo/...")``, extraction) whose callers asked for
        no progress, and executed pages print none (``python -m lmsim.zoo build`` shows it).

    Returns
    -------
    Path
        A Hugging Face model directory (config, safetensors, tokenizer, ``zoo.json``).
    """
    _check_name(name)
    prof = get_profile(profile)
    path = _root(prof) / name
    if _is_built(path):
        _warn_if_stale(name, prof)
        return path
    if not build:
        raise FileNotFoundError(
            f"zoo model {name!r} (profile {prof.name!r}) is not built; {_build_hint(prof)}"
        )
    return build_model(name, prof, progress=progress)


def build_model(
    name: str,
    profile: str | ZooProfile | None = None,
    progress: bool = True,
    _stop_after: int | None = None,
    _on_step: Callable[[int, int], None] | None = None,
) -> Path:
    """Train zoo model ``name`` (and its parents) unless cached; resume from a checkpoint.

    Parameters
    ----------
    name : str
    profile : str or ZooProfile, optional
    progress : bool
        tqdm bars with loss and tokens/s.

    Returns
    -------
    Path
        The finished model directory.
    """
    spec = _check_name(name)
    prof = get_profile(profile)
    path = _root(prof) / name
    if _is_built(path):
        return path
    if spec.parent is not None:
        build_model(spec.parent, prof, progress=progress)
    device = resolve_device(prof.device)
    work = _root(prof) / f".{name}.partial"
    work.mkdir(parents=True, exist_ok=True)
    _discard_outdated(path)
    builder = _finetune_build if spec.objective == "finetune" else _lm_build
    threads_before = torch.get_num_threads()
    if prof.threads:
        torch.set_num_threads(prof.threads)
    try:
        result = builder(name, spec, prof, device, work, progress, _stop_after, _on_step)
    finally:
        torch.set_num_threads(threads_before)
    if result is None:  # interrupted on purpose (tests)
        return work
    model, tokenizer, facts, log, table, tensors = result
    with entry_dir(path) as tmp, quiet_transformers(True):
        model.save_pretrained(tmp, safe_serialization=True)
        for file, state in tensors.items():
            save_file(state, tmp / file)
        tokenizer.save_pretrained(tmp)
        pd.DataFrame(log).to_csv(tmp / _LOG_CSV, index=False)
        csv = _PREDICTIONS_CSV if spec.objective == "finetune" else _CHUNKS_CSV
        # repr-exact floats: the per-chunk sums add up to the recorded perplexities
        pd.DataFrame(table).to_csv(tmp / csv, index_label="index", float_format="%.17g")
        facts["files"] = {
            p.name: p.stat().st_size
            for p in sorted(tmp.iterdir())
            if p.is_file() and p.name != MARKER
        }
        # The weights' fingerprint, to compare a build with another machine's.
        facts["weights_sha256"] = weight_hashes(tmp)
        (tmp / _ZOO_JSON).write_text(json.dumps(facts, indent=2, default=str))
    shutil.rmtree(work, ignore_errors=True)
    return path


def _common_facts(name, spec, prof, device, trained: dict, run: TrainingRun, modules) -> dict:
    tokens_per_s = trained["tokens"] / max(trained["train_seconds"], 1e-9)
    return {
        "name": name,
        "objective": spec.objective,
        "seed": spec.seed,
        "profile": prof.name,
        "steps": trained["step"],
        "batch_size": prof.batch_size,
        "seq_len": prof.seq_len,
        "tokens_seen": trained["tokens"],
        "params": n_params(modules),
        "train_seconds": round(trained["train_seconds"], 3),
        "tokens_per_s": round(tokens_per_s, 1),
        "mfu": mfu(tokens_per_s, run.flops_per_token, device),
        "device": str(device),
        # What can change a CPU build's last bits: the processor (MKL picks its GEMM
        # kernels by it), the kernels torch dispatched to and the intra-op threads (see
        # stale_settings and docs/reproducibility.md).
        **trained_on(device),
        "profile_settings": dataclasses.asdict(prof),
    }


def _lm_build(name, spec, prof, device, work, progress, stop_after, on_step):
    data = _lm_data(prof)
    tokenizer = data.tokenizer
    facts: dict = {}
    if spec.objective in ("mlm", "clm"):
        model = _new_model(name, prof, tokenizer).to(device)
        backbone = model.bert if spec.objective == "mlm" else model.transformer
        run = (_mlm_run if spec.objective == "mlm" else _clm_run)(
            model, data, prof, spec.seed, device
        )
        saved, modules = model, [model]
    elif spec.objective == "electra":
        disc, gen = _electra_pair(prof, tokenizer, spec.seed)
        disc, gen = disc.to(device), gen.to(device)
        backbone = disc.electra
        run = _electra_run(disc, gen, data, prof, spec.seed, device)
        saved, modules = disc, [disc]
        facts["generator"] = {
            "hidden": gen.config.hidden_size,
            "heads": gen.config.num_attention_heads,
            "params": n_params([gen]),
        }
    elif spec.objective == "distil":
        from transformers import BertForMaskedLM

        with quiet_transformers(True):
            teacher = BertForMaskedLM.from_pretrained(_root(prof) / spec.parent).to(device)
        torch.manual_seed(spec.seed)
        student, kept = _distil_student(teacher, prof)
        student = student.to(device)
        backbone = student.bert
        run = _distil_run(student, teacher, data, prof, spec.seed, device)
        saved, modules = student, [student]
        facts.update(teacher=spec.parent, teacher_layers_kept=kept)
    else:  # pragma: no cover
        raise ValueError(spec.objective)
    settings = train_settings(prof, prof.lr)
    maybe_compile(backbone, settings, device)
    trained = train(run, settings, work, device, name, progress, stop_after, on_step)
    if not trained["finished"]:
        return None
    facts.update(_common_facts(name, spec, prof, device, trained, run, modules))
    if spec.objective == "electra":
        final = _electra_eval(disc, gen, data.valid, data, prof, device, per_chunk=True)
        facts.update(val_ppl_of="generator (masked tokens)")
    elif spec.objective == "clm":
        final = _causal_ppl(saved, data.valid, data, prof.batch_size, device, per_chunk=True)
        facts.update(val_ppl_of="next token")
    else:
        final = _masked_ppl(
            lambda x, y: _mlm_logits(saved, x, y),
            data.valid,
            data,
            prof.batch_size,
            device,
            per_chunk=True,
        )
        facts.update(val_ppl_of="masked tokens")
    chunks = final.pop("chunks")
    facts.update(final, n_val_chunks=len(chunks["tokens"]))
    facts.update(_architecture(saved))
    return saved, tokenizer, facts, trained["log"], chunks, {}


def _finetune_build(name, spec, prof, device, work, progress, stop_after, on_step):
    from transformers import AutoTokenizer, BertModel

    base = _root(prof) / spec.parent
    tokenizer = AutoTokenizer.from_pretrained(base)
    cls_data = _classification_data(spec.task, tokenizer, prof)
    label_names = cls_data["label_names"]
    torch.manual_seed(spec.seed)
    # Quiet: transformers reports the MLM head as unused, as meant.
    with quiet_transformers(True):
        encoder = BertModel.from_pretrained(base, add_pooling_layer=False)
    encoder.config.update(
        {
            "num_labels": len(label_names),
            "id2label": dict(enumerate(label_names)),
            "label2id": {n: i for i, n in enumerate(label_names)},
        }
    )
    model = MeanPoolClassifier(encoder, len(label_names)).to(device)
    settings = train_settings(prof, prof.ft_lr)
    maybe_compile(model.encoder, settings, device)
    run = _finetune_run(model, cls_data, tokenizer, prof, spec.seed, device)
    trained = train(run, settings, work, device, name, progress, stop_after, on_step)
    if not trained["finished"]:
        return None
    enc, labels = cls_data["test"]
    train_labels = cls_data["train"][1]
    majority = int(torch.bincount(train_labels).argmax())
    predictions = _classification_predictions(model, enc, tokenizer.pad_token_id, device)
    facts = {"base_model": spec.parent, "task": spec.task, "label_names": label_names}
    facts.update(_common_facts(name, spec, prof, device, trained, run, [model]))
    facts.update(
        batch_size=prof.ft_batch_size,
        n_train=len(train_labels),
        n_test=len(labels),
        test_accuracy=float((predictions == labels).double().mean()),
        majority_class=majority,
        majority_baseline=float((labels == majority).double().mean()),
    )
    facts.update(_architecture(encoder), head="linear on the mean of the last hidden states")
    table = {"label": labels.tolist(), "prediction": predictions.tolist()}
    # The encoder is the model directory (it loads with AutoModel); the head beside it.
    head = {k: v.detach().cpu().contiguous() for k, v in model.classifier.state_dict().items()}
    return encoder, tokenizer, facts, trained["log"], table, {_HEAD_FILE: head}


def _architecture(model) -> dict:
    """The zoo.json keys of a model's shape (read by lmsim's one config reader)."""
    facts = architecture(model)
    return {
        "architecture": facts["architecture"],
        "layers": facts["n_layers"],
        "hidden": facts["hidden_size"],
        "heads": facts["n_heads"],
        "vocab_size": facts["vocab_size"],
    }


def build(
    names: Sequence[str] | None = None,
    profile: str | ZooProfile | None = None,
    progress: bool = True,
    jobs: int | None = None,
    rebuild: bool = False,
) -> dict[str, Path]:
    """Build the zoo (or ``names`` and what they depend on); finished models are skipped.

    Parameters
    ----------
    names : sequence of str, optional
        Models to build (default: all of :data:`MODELS`); their parents are built first.
    profile : str or ZooProfile, optional
    progress : bool
        A bar over models: with ``jobs=1`` plus a per-step bar with loss, tokens/s and
        validation perplexity; with ``jobs > 1`` the running models' steps in its postfix
        and a line per finished model.
    jobs : int, optional
        Models trained at once, each in its own process with ``profile.threads`` threads
        (default: the profile's ``jobs``; always 1 on CUDA). The tiny CPU models scale
        poorly with intra-op threads, so one-thread processes keep the cores busy: the
        default zoo took 11 min 15 s wall for 20.8 min of summed training clocks on an
        idle 2-core machine. A model's weights do not
        depend on ``jobs``: each model is a function of its seed, data and profile.
    rebuild : bool
        Delete ``names`` (and every model built from them) first and train them again,
        e.g. after the profile's settings changed (:func:`stale_settings`). Only whole
        builds of lmsim's are deleted (a damaged one is moved aside); a folder of yours at
        a model's path, or a build holding files lmsim did not write, raises
        ``FileExistsError`` and is left as it is.

    Returns
    -------
    dict
        Model name -> model directory.
    """
    prof = get_profile(profile)
    names = list(MODELS) if names is None else list(names)
    for name in names:
        _check_name(name)
    jobs = prof.jobs if jobs is None else jobs
    if jobs < 1:
        raise ValueError(f"`jobs` must be >= 1, got {jobs}")
    if rebuild:
        names = list(dict.fromkeys(d for n in names for d in [n, *_dependents(n)]))
        for name in names:
            _remove_build(_root(prof) / name)
            shutil.rmtree(_root(prof) / f".{name}.partial", ignore_errors=True)
    todo = list(dict.fromkeys(dep for name in names for dep in _dependencies(name)))
    for name in todo:
        _warn_if_stale(name, prof)
    missing = [name for name in todo if not _is_built(_root(prof) / name)]
    if jobs == 1 or len(missing) < 2 or resolve_device(prof.device).type == "cuda":
        bar = tqdm(todo, desc=f"zoo[{prof.name}]", disable=not progress)
        for name in bar:
            bar.set_postfix(model=name)
            build_model(name, prof, progress=progress)
    else:
        _build_parallel(missing, prof, jobs, progress)
    return {name: _root(prof) / name for name in todo}


def model_facts(name: str, profile: str | ZooProfile | None = None) -> dict:
    """The ``zoo.json`` of a built model."""
    path = model_dir(name, profile, build=False)
    return json.loads((path / _ZOO_JSON).read_text())


def _critical_path_cost(name: str, prof: ZooProfile) -> float:
    """Rough cost of ``name`` plus the longest chain built from it, in units of one
    standard masked LM (scheduling priority)."""
    spec = MODELS[name]
    own = {"finetune": 0.5, "distil": 1.2}.get(spec.objective, 1.0)
    if spec.deep:
        own *= prof.deep_layers / prof.layers
    return own + max((_critical_path_cost(c, prof) for c in _children(name)), default=0.0)


class _StepReport:
    """Picklable ``on_step`` for a worker: writes (step, total) of one model to a shared dict."""

    def __init__(self, shared, name: str):
        self.shared, self.name = shared, name

    def __call__(self, step: int, total: int) -> None:
        if step == total or step % 10 == 0:
            self.shared[self.name] = (step, total)


def _build_in_worker(name: str, prof: ZooProfile, shared) -> Path:
    return build_model(name, prof, progress=False, _on_step=_StepReport(shared, name))


def _build_parallel(missing: list[str], prof: ZooProfile, jobs: int, progress: bool) -> None:
    """Train ``missing`` models ``jobs`` at a time, parents before children, longest first.

    The bar counts finished models; its postfix shows each running model's step.
    """
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    tokenizer_dir(prof)  # once, before the workers: they all read it
    waiting = sorted(missing, key=lambda n: -_critical_path_cost(n, prof))
    running: dict = {}
    bar = tqdm(total=len(missing), desc=f"zoo[{prof.name}] x{jobs}", disable=not progress)
    context = multiprocessing.get_context("spawn")  # no fork of a threaded torch
    with context.Manager() as manager, ProcessPoolExecutor(jobs, mp_context=context) as pool:
        steps = manager.dict()
        while waiting or running:
            unfinished = set(waiting) | set(running.values())
            for name in [n for n in waiting if MODELS[n].parent not in unfinished]:
                if len(running) < jobs:
                    waiting.remove(name)
                    running[pool.submit(_build_in_worker, name, prof, steps)] = name
            done, _ = wait(running, timeout=2.0, return_when=FIRST_COMPLETED)
            bar.set_postfix_str(
                ", ".join(
                    f"{n} {steps[n][0]}/{steps[n][1]}" if n in steps else f"{n} starting"
                    for n in running.values()
                )
            )
            for future in done:
                name = running.pop(future)
                future.result()  # re-raise a worker's error here
                facts = model_facts(name, prof)
                bar.write(
                    f"{name}: {facts['train_seconds']:.0f} s, "
                    + (
                        f"val ppl {facts['val_ppl']:.1f} (unigram {facts['unigram_ppl']:.1f})"
                        if "val_ppl" in facts
                        else f"test accuracy {facts['test_accuracy']:.3f}"
                    )
                )
                bar.update(1)
    bar.close()
