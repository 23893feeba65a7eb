"""The dry run (``python -m lmsim.reproduce --profile paper --dry-run``): stand-ins of hub
models and datasets, the tiny sizes, and the switches the runner sets.

The end-to-end run of every paper page is ``make dry-run`` (part of ``make test``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from lmsim._dryrun import DRY_RUN_ENV, dry_run
from lmsim.models._standins import standin_config, standin_spec
from lmsim.reproduce._dryrun import RESAMPLES, TINY, dry_run_parameters

ROOT = Path(__file__).resolve().parents[1]

# Every hub id of the paper profiles and the configuration class its hub model has.
HUB_CLASSES = {
    "bert-base-uncased": "BertConfig",
    "bert-base-cased": "BertConfig",
    "bert-large-cased": "BertConfig",
    "bert-base-multilingual-cased": "BertConfig",
    "textattack/bert-base-uncased-MNLI": "BertConfig",
    "textattack/bert-base-uncased-QNLI": "BertConfig",
    "textattack/bert-base-uncased-QQP": "BertConfig",
    "textattack/bert-base-uncased-SST-2": "BertConfig",
    "distilbert-base-uncased": "DistilBertConfig",
    "distilbert-base-cased": "DistilBertConfig",
    "distilbert-base-multilingual-cased": "DistilBertConfig",
    "roberta-base": "RobertaConfig",
    "distilroberta-base": "RobertaConfig",
    "xlm-roberta-base": "XLMRobertaConfig",
    "allenai/longformer-base-4096": "LongformerConfig",
    "microsoft/deberta-base": "DebertaConfig",
    "xlnet-base-cased": "XLNetConfig",
    "xlnet/xlnet-large-cased": "XLNetConfig",
    "google/electra-base-discriminator": "ElectraConfig",
    "albert-base-v2": "AlbertConfig",
    "gpt2": "GPT2Config",
    "gpt2-medium": "GPT2Config",
    "distilgpt2": "GPT2Config",
    "openai-community/openai-gpt": "OpenAIGPTConfig",
}
_MODEL_KEYS = ("models", "base", "finetuned", "ft_base", "student", "teacher", "unrelated")
_MODEL_KEYS += ("tokenizer", "reference_tokenizer", "groups", "pairs", "causal")


def _names(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _names(item)
    elif isinstance(value, list):
        for item in value:
            yield from _names(item)


def _paper_hub_ids() -> set[str]:
    manifest = yaml.safe_load((ROOT / "notebooks" / "runs.yml").read_text())
    ids = set()
    for chapter in manifest["chapters"]:
        for entry in chapter["notebooks"]:
            params = entry.get("paper")
            if not isinstance(params, dict):
                continue
            for key in _MODEL_KEYS:
                ids |= {n for n in _names(params.get(key, [])) if not n.startswith("zoo")}
    return ids


@pytest.fixture
def dry(monkeypatch, tmp_path):
    monkeypatch.setenv(DRY_RUN_ENV, "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    return tmp_path


def test_every_paper_model_has_a_stand_in_of_its_class():
    ids = _paper_hub_ids()
    assert ids and ids <= set(HUB_CLASSES), sorted(ids - set(HUB_CLASSES))
    for name, cls in HUB_CLASSES.items():
        config = standin_config(name)
        assert type(config).__name__ == cls, name
        assert config.hidden_size <= 64 and config.num_hidden_layers <= 8


def test_stand_in_sizes_keep_the_hub_models_relations():
    def depth(name):
        return standin_config(name).num_hidden_layers

    assert depth("bert-large-cased") > depth("bert-base-cased") > depth("distilbert-base-cased")
    assert depth("gpt2-medium") > depth("gpt2") > depth("distilgpt2")
    assert standin_spec("FacebookAI/xlm-roberta-base").model_type == "xlm-roberta"
    with pytest.raises(ValueError, match="no stand-in for 'google-t5/t5-small'"):
        standin_spec("google-t5/t5-small")


@pytest.mark.parametrize(
    "name, first, last, pad",
    [
        ("roberta-base", "<s>", "</s>", "<pad>"),
        ("xlnet-base-cased", None, "<cls>", "<pad>"),
        ("bert-base-uncased", "[CLS]", "[SEP]", "[PAD]"),
        ("openai-community/openai-gpt", None, None, None),  # the hub tokenizer has no pad
    ],
)
def test_load_model_builds_the_stand_in_offline(dry, name, first, last, pad):
    from lmsim.models import load_model, load_random_model, load_tokenizer

    model, tok = load_model(name, device="cuda")  # falls back to the CPU in a dry run
    assert next(model.parameters()).device.type in ("cpu", "cuda")
    tokens = tok.convert_ids_to_tokens(tok("The Cat sat .")["input_ids"])
    assert (first is None or tokens[0] == first) and (last is None or tokens[-1] == last)
    assert tok.pad_token == pad
    with torch.no_grad():
        out = model(**tok(["The cat sat ."], return_tensors="pt"), output_hidden_states=True)
    assert out.hidden_states[-1].shape[-1] == model.config.hidden_size
    assert load_tokenizer(name).get_vocab() == tok.get_vocab()
    random, _ = load_random_model(name, seed=1)
    assert type(random) is type(model)
    assert (dry / "dry-run" / "models").is_dir()  # the dry run's own cache


def test_dry_run_switches(dry):
    from lmsim._cache import cache_dir
    from lmsim._runtime import resolve_device

    assert dry_run()
    assert cache_dir("acts") == dry / "dry-run" / "acts"
    assert cache_dir("zoo", "smoke") == dry / "zoo" / "smoke"  # lmsim's own models: shared
    if not torch.cuda.is_available():
        assert resolve_device("cuda").type == "cpu"


def test_switches_off(monkeypatch):
    monkeypatch.setenv(DRY_RUN_ENV, "0")
    assert not dry_run()
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            from lmsim._runtime import resolve_device

            resolve_device("cuda")


def test_hub_datasets_are_generated_with_their_schema(dry):
    from lmsim.data import load_corpus, load_task, load_treebank

    glue = {
        "cola": "single_label",
        "sst2": "single_label",
        "mrpc": "single_label",
        "stsb": "regression",
        "mnli": "single_label",
        "qnli": "single_label",
        "qqp": "single_label",
        "rte": "single_label",
    }
    for task, kind in glue.items():
        loaded = load_task(f"hf:glue:{task}")
        assert loaded.kind == kind and len(loaded.train[0]) and len(loaded.test[0])
        if task in ("mrpc", "mnli"):
            assert isinstance(loaded.train[0][0], tuple)  # sentence pairs
    onto = load_task("hf:conll2012_ontonotesv5:english_v4#nw")
    assert onto.kind == "token" and "B-PERSON" in onto.label_names
    for spec in ("hf:conll2003", "hf:tner/ttc"):
        assert load_task(spec).scored_labels == ("PER", "LOC", "ORG")
    emotion = load_task("emotion:../../data/unified-dataset.jsonl#ssec")  # no such file here
    assert emotion.kind == "multi_label" and not emotion.train[0]  # out of domain: test only
    lines = load_corpus("hf:wikimedia/wikipedia:20231101.en", max_docs=50)
    assert len(lines) == 50
    assert load_treebank("hf:universal_dependencies:fr_pud", "test")
    with pytest.raises(OSError, match="Unknown split 'train'"):  # PUD has only test, as on the hub
        load_treebank("hf:universal_dependencies:en_pud", "train")
    with pytest.raises(OSError, match="no stand-in"):
        load_task("hf:squad")


def test_dry_run_parameters_scale_sizes_and_keep_the_rest():
    paper = {
        "models": ["roberta-base", "gpt2"],
        "n_sentences": 3370,
        "n_train": {"paper": 512000},
        "seq_lens": {"paper": [16, 32, 64, 128, 256, 512]},
        "paper_compat_padding": True,
        "model_pairs": True,
        "threads": 8,
        "runs": [{"name": "elmo", "tower": "elmo", "hidden": 4096, "layers": 2, "embed": 512}],
    }
    out = dry_run_parameters(paper, declared=[*paper, "n_boot"])
    assert out["models"] == paper["models"] and out["paper_compat_padding"] is True
    assert out["model_pairs"] is True
    assert out["n_sentences"] < 100 and out["n_train"]["paper"] < 1_000  # 512,000 in the paper
    assert out["seq_lens"] == {"paper": [16, 512]}  # both ends of the sweep
    assert out["threads"] == 1 and out["n_boot"] == RESAMPLES["n_boot"]
    assert out["runs"][0]["hidden"] == 128 and out["runs"][0]["layers"] == 2
    assert "n_boot" not in dry_run_parameters(paper)  # only where the page declares it


def test_cli_dry_run_refuses_plan_and_verify(capsys):
    from lmsim.reproduce._cli import main

    assert main(["--profile", "paper", "--dry-run", "--plan"]) == 2
    assert "--dry-run executes stand-ins" in capsys.readouterr().err


def test_cli_dry_run_never_writes_into_the_book(capsys, monkeypatch):
    """Issue 46, item 5: `--dry-run --output-dir book` replaced a committed page with a
    dry-run stand-in page; it is refused before anything runs (exit 2), the page as it was."""
    from lmsim.reproduce import _cli

    def boom(*args, **kwargs):
        raise AssertionError("a dry run executed a page into book/")

    monkeypatch.setattr(_cli, "execute_run", boom)
    monkeypatch.setattr(_cli, "enter_dry_run", lambda: None)  # keep this process's switches
    page = ROOT / "book" / "lmsim_zoo" / "01_train_zoo.ipynb"
    before = page.read_bytes()
    for out in (ROOT / "book", ROOT / "book" / "lmsim_zoo", ROOT / "book" / ".." / "book"):
        args = ["--root", str(ROOT), "--only", "lmsim_zoo", "--dry-run", "--output-dir", str(out)]
        assert _cli.main(args) == 2
        err = capsys.readouterr().err
        assert "a dry run never writes into" in err and "book" in err
    assert page.read_bytes() == before


def test_probing_sets_read_gsd_train_and_dev_and_pud_test_as_the_thesis(dry):
    """Found by the dry run: GSD's dev was sliced after the train count (its own split, so
    nothing was left at the thesis's 12,543 train sentences), and an all-PUD profile asked
    the test-only PUD for `train`."""
    from lmsim.data import load_treebank
    from lmsim.papers.thesis2022_redundancy.redundancy import probing_sets

    gsd = "hf:universal_dependencies:en_gsd"
    pud = "hf:universal_dependencies:en_pud"
    n_train = 64  # all of the stand-in's GSD train split
    sets = probing_sets(
        "treebank", n_train, 8, 8, treebanks={"train": gsd, "dev": gsd, "test": pud}
    )
    assert len(sets["train"]) == n_train and len(sets["dev"]) == 8
    sets = probing_sets("treebank", 20, 5, 5, treebanks={"train": pud, "dev": pud, "test": pud})
    texts = [s.words for split in ("train", "dev", "test") for s in sets[split]]
    assert texts == [s.words for s in load_treebank(pud, "test")[:30]]  # consecutive slices


def test_two_tower_hub_corpora_hold_out_their_validation_lines(dry):
    """Found by the dry run: the two-tower paper profile asked Wikipedia and BookCorpus,
    which have only a train split on the hub, for `validation`."""
    from lmsim.data import load_corpus
    from lmsim.twotower.inputs import HELD_OUT, _lines

    spec = "hf:bookcorpus/bookcorpus"
    train, valid = _lines([spec], "train", None), _lines([spec], "valid", None)
    everything = load_corpus(spec, split="train")
    assert valid == everything[::HELD_OUT] and len(train) + len(valid) == len(everything)


def test_every_paper_page_gets_tiny_well_typed_parameters_and_a_dry_run_page():
    from lmsim.reproduce import check_parameter_type, declared_parameters, load_manifest, plan_runs
    from lmsim.reproduce._dryrun import dry_run_runs

    runs = plan_runs(load_manifest(ROOT / "notebooks" / "runs.yml"), "paper", ROOT)
    dry = dry_run_runs(runs, ROOT, None)
    assert len(dry) == len(runs) >= 13
    for run, tiny in zip(runs, dry):
        assert tiny.output == ROOT / "_build" / "dry-run" / run.slug / f"{run.name}.ipynb"
        declared = declared_parameters(run.source)
        for key, value in tiny.parameters.items():
            check_parameter_type(run.source, key, value, declared[key])
        # LMD's n_train stays above the widest stand-in basis (11 x 32): ~1 % of the paper's
        limits = {"n_sentences": 100, "n_train": 480, "steps": 100, "n_ft_train": 100}
        for key, limit in {**limits, "n_partition": 100}.items():
            value = tiny.parameters.get(key, 0)
            assert (max(value.values()) if isinstance(value, dict) else value) <= limit, key
        kept = set(run.parameters) - set(TINY) - set(RESAMPLES)
        assert {k: tiny.parameters[k] for k in kept} == {k: run.parameters[k] for k in kept}
