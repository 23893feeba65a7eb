"""Both training phases through :func:`lmsim.training.train`, the run cache and loading."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from lmsim._cache import cache_dir
from lmsim._io import entry_dir, move_aside, open_entry, verify_entry, write_entry_file
from lmsim._runtime import resolve_device
from lmsim.training import (
    TrainingRun,
    batch_indices,
    maybe_compile,
    mfu,
    n_params,
    step_generator,
    train,
    trained_on,
    weight_hashes,
)
from lmsim.twotower.config import IGNORE_INDEX, RunSpec, TowerConfig, TwoTowerSettings
from lmsim.twotower.inputs import TowerData, inputs_and_labels, labelled_batches, load_data
from lmsim.twotower.model import OutputHead, TwoTowerLM, new_heads, two_tower_flops_per_token

_WEIGHTS = "weights.pt"
_FACTS = "run.json"
_LOG_CSV = "training_log.csv"
_HEAD_LOG_CSV = "head_log.csv"
_PHASE1 = "phase1.pt"


def _batch(data: TowerData, settings: TwoTowerSettings, seed: int, step: int, device):
    idx = batch_indices(len(data.train), settings.batch_size, step, seed)
    return data.train[torch.as_tensor(idx)].to(device)


def _eval_generator() -> torch.Generator:
    # The same masked positions for every run: comparable validation numbers.
    return torch.Generator().manual_seed(12345)


@torch.no_grad()
def _val_ppl(predict, tower: str, data: TowerData, settings: TwoTowerSettings, device) -> dict:
    """Validation perplexity of ``predict(inputs, labels) -> list of logits``, with the
    unigram's on the same positions."""
    from lmsim.zoo import unigram_log_probs

    # Left-to-right towers predict [SEP] (line ends); BERT never selects a special token.
    never = [
        i for i in data.special_ids.tolist() if tower == "bert" or i != data.tokenizer.sep_token_id
    ]
    log_uni = unigram_log_probs(data.counts, never)
    gen = _eval_generator()
    chunks = data.valid[: settings.n_eval_chunks]
    nll, nll_uni, n = None, 0.0, 0
    for inputs, labels in labelled_batches(tower, chunks, data, settings.batch_size, gen):
        targets = labels[labels != IGNORE_INDEX]
        logits = predict(inputs.to(device), labels.to(device))
        losses = [
            F.cross_entropy(lg.float(), targets.to(device), reduction="sum").item() for lg in logits
        ]
        nll = losses if nll is None else [a + b for a, b in zip(nll, losses)]
        nll_uni += -log_uni[targets].sum().item()
        n += len(targets)
    return {"val_ppl": [math.exp(x / n) for x in nll], "unigram_ppl": math.exp(nll_uni / n)}


def phase1_run(
    model: TwoTowerLM, data: TowerData, settings: TwoTowerSettings, seed: int, device
) -> TrainingRun:
    """The :class:`~lmsim.training.TrainingRun` of Eq. 1: both towers and the joint head."""
    tower = model.config.tower

    def loss_fn(step):
        batch = _batch(data, settings, seed, step, device)
        inputs, labels = inputs_and_labels(tower, batch, data, step_generator(seed, step))
        logits = model(inputs, labels)
        loss = F.cross_entropy(logits.float(), labels[labels != IGNORE_INDEX])
        return loss, batch.numel(), {}

    def eval_fn():
        out = _val_ppl(lambda x, y: [model(x, y)], tower, data, settings, device)
        return {"val_ppl": out["val_ppl"][0], "unigram_ppl": out["unigram_ppl"]}

    flops = two_tower_flops_per_token(model.config, settings.seq_len, data.vocab_size)
    return TrainingRun({"model": model}, loss_fn, eval_fn, settings.steps, flops)


def phase2_run(
    model: TwoTowerLM,
    head: OutputHead,
    which: int,
    data: TowerData,
    settings: TwoTowerSettings,
    seed: int,
    device,
) -> TrainingRun:
    """The :class:`~lmsim.training.TrainingRun` of Eq. 2 for tower ``which`` (0 or 1).

    Only ``head`` trains; it reads tower ``which``'s states (or, with ``untied_heads``, its
    half of the frozen joint LayerNorm of both towers' states: :meth:`TwoTowerLM.head_inputs`),
    computed without gradients from the frozen model. Both towers' runs see the same batches
    and masks.
    """
    tower = model.config.tower

    def states(inputs, labels):
        with torch.no_grad():
            sel = labels != IGNORE_INDEX
            if model.head.in_norm is None:  # one tower suffices
                return model.towers[which](model.embed(inputs))[-1][sel]
            h1, h2 = model.states(inputs)
            return model.head_inputs(h1[sel], h2[sel])[which]

    def loss_fn(step):
        batch = _batch(data, settings, seed + 1, step, device)
        inputs, labels = inputs_and_labels(tower, batch, data, step_generator(seed, step, 1))
        logits = head(states(inputs, labels), model.embedding)
        loss = F.cross_entropy(logits.float(), labels[labels != IGNORE_INDEX])
        return loss, batch.numel(), {}

    def eval_fn():
        out = _val_ppl(
            lambda x, y: [head(states(x, y), model.embedding)], tower, data, settings, device
        )
        return {"val_ppl": out["val_ppl"][0], "unigram_ppl": out["unigram_ppl"]}

    return TrainingRun({"head": head}, loss_fn, eval_fn, settings.head_steps, 0.0)


def _digest(spec: RunSpec, settings: TwoTowerSettings) -> str:
    what = {
        "config": spec.config.key(),
        "seed": spec.seed,
        "settings": {k: v for k, v in dataclasses.asdict(settings).items() if k != "threads"},
    }
    return hashlib.sha1(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:10]


def run_dir(spec: RunSpec, settings: TwoTowerSettings, profile: str) -> Path:
    """Cache folder of a run: ``cache_dir("twotower", profile)/<name>-<digest>``."""
    return cache_dir("twotower", profile) / f"{spec.name}-{_digest(spec, settings)}"


def _frozen_state(model: nn.Module) -> dict[str, torch.Tensor]:
    # The joint head is frozen too (its LayerNorm feeds the untied phase-2 heads).
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _bit_identical(before: Mapping[str, torch.Tensor], model: nn.Module) -> bool:
    after = _frozen_state(model)
    return set(before) == set(after) and all(torch.equal(before[k], after[k]) for k in before)


def train_two_tower(
    spec: RunSpec,
    settings: TwoTowerSettings,
    profile: str,
    progress: bool = True,
    _stop_after: int | None = None,
) -> Path:
    """Train (or find in the cache, or resume) one two-tower run: phase 1, then phase 2.

    Parameters
    ----------
    spec : RunSpec
    settings : TwoTowerSettings
    profile : str
        Cache folder name (``"smoke"``, ``"default"``, ``"paper"``).
    progress : bool
        tqdm bars with loss and tokens/s.

    Returns
    -------
    Path
        The finished run folder (``weights.pt``, ``run.json``, the training logs); while
        ``_stop_after`` interrupts it on purpose (tests), the partial work folder.

    Raises
    ------
    RuntimeError
        Phase 2 changed a frozen weight (it must not).
    """
    path = run_dir(spec, settings, profile)
    if _is_finished(path):
        return path
    work = path.with_name(f".{path.name}.partial")
    work.mkdir(parents=True, exist_ok=True)
    device = resolve_device(settings.device)
    threads = torch.get_num_threads()
    if settings.threads:
        torch.set_num_threads(settings.threads)
    try:
        done = _train(spec, settings, device, work, progress, _stop_after)
    finally:
        torch.set_num_threads(threads)
    if done is None:
        return work
    model, heads, facts, logs = done
    with entry_dir(path) as tmp:
        payload = {"model": model.state_dict(), "heads": heads.state_dict()}
        torch.save(payload, tmp / _WEIGHTS)
        pd.DataFrame(logs[0]).to_csv(tmp / _LOG_CSV, index=False)
        pd.DataFrame(logs[1]).to_csv(tmp / _HEAD_LOG_CSV, index=False)
        facts["weights_sha256"] = weight_hashes(tmp)
        (tmp / _FACTS).write_text(json.dumps(facts, indent=2, default=str))
    shutil.rmtree(work, ignore_errors=True)
    return path


def _legacy_run(path: Path) -> dict | None:
    """A run folder written before entry markers: whole when ``run.json`` parses and
    ``weights.pt`` loads (they recorded no sizes)."""
    if not (path / _FACTS).is_file():
        return None
    json.loads((path / _FACTS).read_text())
    try:
        torch.load(path / _WEIGHTS, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises many types for a bad file
        raise ValueError(f"{path / _WEIGHTS} cannot be loaded ({type(err).__name__})") from None
    return {}


def _legacy_facts(path: Path) -> dict | None:
    return {} if (path / _FACTS).is_file() else None  # weights.pt is checked by loading it


def _is_finished(path: Path) -> bool:
    """Whether ``path`` holds a whole finished run (every file's size and sha256 checked);
    a damaged one is named, moved aside and trained again."""
    return open_entry(path, "training it again", legacy=_legacy_run, stacklevel=5)


def _saved_state(path: Path, device, apply):
    """``apply(state)`` of a finished phase saved at ``path`` (a one-file cache entry in the
    work folder), or None when it is absent or damaged (then named, moved aside, redone)."""

    def legacy(p: Path) -> dict | None:
        return {}  # saved before markers: checked by loading it below

    if not open_entry(path, "training that phase again", legacy=legacy, stacklevel=5):
        return None
    try:
        return apply(torch.load(path, map_location=device, weights_only=True))
    except Exception as err:  # noqa: BLE001 - torch raises many types for a bad file
        move_aside(path, f"{type(err).__name__}: {err}", "training that phase again", 5)
        return None


def _train(spec, settings, device, work: Path, progress, stop_after):
    """Phase 1, then phase 2, in ``work``: the model, its heads, the facts and both logs, or
    None when ``stop_after`` interrupted a phase."""
    data = load_data(settings)
    torch.manual_seed(spec.seed)
    model = TwoTowerLM(spec.config, data.vocab_size, settings.seq_len).to(device)
    run = phase1_run(model, data, settings, spec.seed, device)
    trained = _phase1(spec, settings, model, run, device, work, progress, stop_after)
    if trained is None:
        return None
    done = _phase2(spec, settings, model, data, device, work, progress, stop_after)
    if done is None:
        return None
    heads, head_results = done
    facts = _facts(spec, settings, data, model, run, trained, head_results, device)
    head_log = [{**row, "tower": k + 1} for k, r in enumerate(head_results) for row in r["log"]]
    return model, heads, facts, (trained["log"], head_log)


def _phase1(spec, settings, model, run, device, work: Path, progress, stop_after):
    """Train ``run`` (Eq. 1), or load its finished state from ``work``; the training result,
    or None when interrupted."""
    done_path = work / _PHASE1

    def restore(saved):
        model.load_state_dict(saved["model"])
        return saved["trained"]

    done = _saved_state(done_path, device, restore)
    if done is not None:
        return done
    for tower in model.towers:
        maybe_compile(tower, settings.train_settings(), device)
    trained = train(
        run, settings.train_settings(), work / "phase1", device, spec.name, progress, stop_after
    )
    if not trained["finished"]:
        return None
    state = {"model": model.state_dict(), "trained": trained}
    write_entry_file(done_path, lambda tmp: torch.save(state, tmp))
    return trained


def _phase2(spec, settings, model, data, device, work: Path, progress, stop_after):
    """Freeze ``model`` and train one new head per tower (Eq. 2); the heads and both training
    results, or None when interrupted.

    Raises
    ------
    RuntimeError
        Phase 2 changed a frozen weight of the embedding or towers.
    """
    model.eval().requires_grad_(False)
    frozen = _frozen_state(model)
    heads = new_heads(spec.config, data.vocab_size, spec.seed).to(device)
    head_results = []
    for which in range(2):
        done_path = work / f"phase2-tower{which + 1}.pt"

        def restore(saved, head=heads[which]):
            head.load_state_dict(saved["head"])
            return saved["trained"]

        result = _saved_state(done_path, device, restore)
        if result is not None:  # this tower's head finished before an interruption
            head_results.append(result)
            continue
        head_run = phase2_run(model, heads[which], which, data, settings, spec.seed, device)
        result = train(
            head_run,
            settings.train_settings(head=True),
            work / f"phase2-tower{which + 1}",
            device,
            f"{spec.name} head {which + 1}",
            progress,
            stop_after,
        )
        if not result["finished"]:
            return None
        state = {"head": heads[which].state_dict(), "trained": result}
        write_entry_file(done_path, lambda tmp, state=state: torch.save(state, tmp))
        head_results.append(result)
    if not _bit_identical(frozen, model):
        raise RuntimeError(
            f"{spec.name}: phase 2 changed a frozen weight of the embedding, towers or joint head"
        )
    return heads, head_results


def _facts(spec, settings, data, model, run, trained, head_results, device) -> dict:
    """What ``run.json`` records of a finished run."""
    tokens_per_s = trained["tokens"] / max(trained["train_seconds"], 1e-9)
    last = [r["log"][-1] for r in head_results]
    return {
        "name": spec.name,
        "config": dataclasses.asdict(spec.config),
        "seed": spec.seed,
        "settings": dataclasses.asdict(settings),
        "vocab_size": data.vocab_size,
        "params": n_params([model]),
        "steps": trained["step"],
        "tokens_seen": trained["tokens"],
        "train_seconds": round(trained["train_seconds"], 3),
        "tokens_per_s": round(tokens_per_s, 1),
        "mfu": mfu(tokens_per_s, run.flops_per_token, device),
        "val_ppl": trained["log"][-1].get("val_ppl"),
        "unigram_ppl": trained["log"][-1].get("unigram_ppl"),
        "head_steps": settings.head_steps,
        "head_seconds": round(sum(r["train_seconds"] for r in head_results), 3),
        "head_val_ppl": [row.get("val_ppl") for row in last],
        "frozen_bit_identical": True,
        "device": str(device),
        **trained_on(device),
    }


@dataclass
class TrainedTwoTower:
    """A finished run: the model (eval mode), its two phase-2 heads, facts and logs."""

    name: str
    model: TwoTowerLM
    heads: nn.ModuleList
    facts: dict
    path: Path


def load_two_tower(path: str | Path, device: str | torch.device = "cpu") -> TrainedTwoTower:
    """Load a run folder written by :func:`train_two_tower`."""
    path = Path(path)
    what = "a finished two-tower run (train_two_tower)"
    verify_entry(path, what, legacy=_legacy_facts)
    lacking = [name for name in (_FACTS, _WEIGHTS) if not (path / name).is_file()]
    if lacking:  # another kind of lmsim entry: a zoo model, a fine-tune, a tokenizer
        raise FileNotFoundError(
            f"{str(path)!r} is an lmsim cache entry without {' and '.join(lacking)}: it is "
            f"not {what}"
        )
    facts = json.loads((path / _FACTS).read_text())
    device = resolve_device(device)
    config = TowerConfig(**facts["config"])
    model = TwoTowerLM(config, facts["vocab_size"], facts["settings"]["seq_len"])
    heads = new_heads(config, facts["vocab_size"], facts["seed"])
    try:
        state = torch.load(path / _WEIGHTS, map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        heads.load_state_dict(state["heads"])
    except Exception as err:  # noqa: BLE001 - torch raises many types for a bad file
        raise ValueError(
            f"{path / _WEIGHTS} cannot be loaded ({type(err).__name__}: {str(err)[:200]}); "
            "train the run again with train_two_tower"
        ) from None
    return TrainedTwoTower(
        facts["name"], model.to(device).eval(), heads.to(device).eval(), facts, path
    )


def train_runs(
    runs: Sequence[RunSpec | Mapping],
    settings: TwoTowerSettings,
    profile: str,
    progress: bool = True,
    jobs: int = 1,
) -> dict[str, Path]:
    """Train (or find) several runs; ``{name: run folder}``.

    Parameters
    ----------
    runs : sequence of RunSpec or dict (:meth:`RunSpec.from_dict`)
    settings : TwoTowerSettings
    profile : str
    progress : bool
    jobs : int
        Runs trained at once, each in its own process with one CPU thread (1: one after
        the other in this process, on ``settings.threads``). On CUDA the processes share the
        device: small towers leave most of it idle between kernel launches.
    """
    specs = [r if isinstance(r, RunSpec) else RunSpec.from_dict(r) for r in runs]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"run names must be unique, got {names}")
    todo = [s for s in specs if not _is_finished(run_dir(s, settings, profile))]
    if jobs > 1 and len(todo) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        one_thread = dataclasses.replace(settings, threads=1)
        context = multiprocessing.get_context("spawn")  # no fork of a threaded torch
        # Longest first (left-to-right towers predict every position, BERT 15 %), so the
        # last job does not run alone at the end.
        todo.sort(
            key=lambda s: (
                s.config.tower == "bert",
                -two_tower_flops_per_token(s.config, settings.seq_len),
            )
        )
        with ProcessPoolExecutor(min(jobs, len(todo)), mp_context=context) as pool:
            futures = [pool.submit(train_two_tower, s, one_thread, profile, False) for s in todo]
            for future in futures:
                future.result()
    return {s.name: train_two_tower(s, settings, profile, progress) for s in specs}


def training_log(path: str | Path, heads: bool = False) -> pd.DataFrame:
    """The per-step log of a finished run (phase 1, or phase 2 with ``heads=True``)."""
    return pd.read_csv(Path(path) / (_HEAD_LOG_CSV if heads else _LOG_CSV))
