"""Generated smoke data: a tiny seeded grammar with gold tags, and tasks of every kind.

Nothing is read from disk: the ``"smoke"`` corpus and sentences, the ``"smoke"`` and
``"smoke-adverb"`` classification sets, and the smoke tasks (pairs, regression,
multi-label, NER) are generated from fixed word lists and a seed.
"""

from __future__ import annotations

import random

from lmsim.data._sentence import Sentence
from lmsim.tasks import Task

# --------------------------------------------------------------------------------------
# The smoke grammar: tiny, seeded, with gold UPOS / heads / deprels
# --------------------------------------------------------------------------------------

_DETS = ["the", "a", "every", "some", "this", "that", "one", "no"]
_ADJS = [
    "small", "large", "old", "young", "red", "green", "quiet", "busy", "happy", "strange",
    "bright", "dark", "quick", "slow", "heavy", "gentle", "clever", "ancient", "modern", "tired",
]  # fmt: skip
_NOUNS = [
    "cat", "dog", "bird", "horse", "child", "teacher", "farmer", "doctor", "river", "city",
    "machine", "engine", "robot", "computer", "garden", "house", "market", "letter", "book",
    "song", "window", "table", "train", "ship", "village", "forest", "mountain", "student",
    "king", "queen",
]  # fmt: skip
_VERBS = [
    "saw", "liked", "found", "watched", "helped", "built", "painted", "visited", "followed",
    "carried", "opened", "wrote", "heard", "moved", "chased", "fixed", "sold", "read", "met",
    "remembered",
]  # fmt: skip
_ADPS = ["near", "with", "in", "behind", "under", "from", "on", "beside"]
_ADVS = ["quickly", "slowly", "again", "yesterday", "often", "carefully", "today", "quietly"]
_TIME_ADVS = {"again", "yesterday", "often", "today"}


def _noun_phrase(rng: random.Random, start: int) -> tuple[list[tuple[str, str, int, str]], int]:
    """Return the words of ``DET (ADJ) NOUN`` as (word, upos, head, deprel), and the noun index.

    Heads are absolute 1-based positions; ``start`` is the 1-based position of the first word.
    The noun's own head is filled in by the caller (``-1`` placeholder).
    """
    has_adj = rng.random() < 0.5
    noun_pos = start + (2 if has_adj else 1)
    words = [(rng.choice(_DETS), "DET", noun_pos, "det")]
    if has_adj:
        words.append((rng.choice(_ADJS), "ADJ", noun_pos, "amod"))
    words.append((rng.choice(_NOUNS), "NOUN", -1, ""))
    return words, noun_pos


def _smoke_sentence(rng: random.Random) -> list[tuple[str, str, int, str]]:
    """One sentence ``NP (PP) VERB NP (ADV) .`` with gold UD-style annotations."""
    words: list[tuple[str, str, int, str]] = []
    subj, subj_pos = _noun_phrase(rng, 1)
    words += subj
    pp_words: list[tuple[str, str, int, str]] = []
    if rng.random() < 0.4:
        adp_pos = len(words) + 1
        pp_np, pp_noun = _noun_phrase(rng, adp_pos + 1)
        pp_np[-1] = (pp_np[-1][0], "NOUN", subj_pos, "nmod")
        pp_words = [(rng.choice(_ADPS), "ADP", pp_noun, "case")] + pp_np
    words += pp_words
    verb_pos = len(words) + 1
    words[subj_pos - 1] = (words[subj_pos - 1][0], "NOUN", verb_pos, "nsubj")
    words.append((rng.choice(_VERBS), "VERB", 0, "root"))
    obj, obj_pos = _noun_phrase(rng, verb_pos + 1)
    obj[-1] = (obj[-1][0], "NOUN", verb_pos, "obj")
    words += obj
    if rng.random() < 0.3:
        words.append((rng.choice(_ADVS), "ADV", verb_pos, "advmod"))
    words.append((".", "PUNCT", verb_pos, "punct"))
    first = words[0]
    words[0] = (first[0].capitalize(), *first[1:])
    return words


def generate_smoke_sentences(n_sentences: int = 400, seed: int = 0) -> list[Sentence]:
    """Generate English-like sentences from a tiny grammar, with gold annotations.

    Parameters
    ----------
    n_sentences : int
        How many sentences.
    seed : int
        Seed of the generator; the same seed gives the same sentences.

    Returns
    -------
    list of Sentence
        ``silver=False``: UPOS, 1-based heads (0 = root) and UD relations come from the
        grammar itself.
    """
    if n_sentences < 1:
        raise ValueError(f"`n_sentences` must be >= 1, got {n_sentences}")
    rng = random.Random(seed)
    out = []
    for _ in range(n_sentences):
        words = _smoke_sentence(rng)
        out.append(
            Sentence(
                words=[w for w, _, _, _ in words],
                upos=[u for _, u, _, _ in words],
                heads=[h for _, _, h, _ in words],
                deprels=[d for _, _, _, d in words],
                silver=False,
            )
        )
    return out


# Sentences and seeds of the smoke corpus's splits.
_SMOKE_SPLITS = {"train": (400, 0), "valid": (100, 1), "test": (100, 2)}


def _smoke_split_sentences(split: str) -> list[Sentence]:
    n_sentences, seed = _SMOKE_SPLITS[split]
    return generate_smoke_sentences(n_sentences, seed=seed)


def _smoke_texts(split: str) -> list[str]:
    return [s.text for s in _smoke_split_sentences(split)]


def _smoke_classification(seed: int) -> tuple[list[str], list[int], list[str]]:
    rng = random.Random(1000 + seed)
    animals = ["cat", "dog", "bird", "horse", "fox", "owl", "rabbit", "goat"]
    machines = ["engine", "robot", "computer", "printer", "tractor", "drill", "radio", "pump"]
    texts, labels = [], []
    for i in range(200):
        label = i % 2
        nouns = machines if label else animals
        verb = rng.choice(_VERBS)
        texts.append(
            f"{rng.choice(_DETS)} {rng.choice(_ADJS)} {rng.choice(nouns)} {verb} "
            f"{rng.choice(_DETS)} {rng.choice(_NOUNS)} {rng.choice(_ADVS)} ."
        )
        labels.append(label)
    return texts, labels, ["animal", "machine"]


# ------------------------------------------------------------------ generated smoke tasks

# Every word of the smoke tasks is a whole word of the tiny-bert vocabulary (built from the
# smoke grammar): a word's first sub-word is the word itself, so a tiny model learns the
# tasks in a few dozen steps, and real tokenizers read them as ordinary English.
_SMOKE_SIZES = {"train": 240, "validation": 60, "test": 120}
_ALIVE = ["cat", "dog", "bird", "horse", "child", "teacher", "farmer", "doctor"]
_THINGS = ["engine", "robot", "computer", "machine", "train", "ship", "table", "window"]
_PLACES = ["river", "city", "garden", "house", "market", "village", "forest", "mountain"]
_TIME_WORDS = ["today", "yesterday", "again", "often"]
_MANNER_WORDS = ["quickly", "slowly", "carefully", "quietly"]
_INTENSE = ["bright", "busy", "strange", "happy", "heavy", "dark"]
_CALM = ["quiet", "slow", "gentle", "tired", "small", "young"]

_SMOKE_EMOTIONS = ("joy", "anger", "fear", "sadness", "surprise")
# Per domain: the cue word of each emotion (None: not annotated there) and the subjects.
_SMOKE_EMOTION_DOMAINS = {
    "a": (
        {"joy": "liked", "anger": "chased", "fear": "heard", "sadness": "remembered",
         "surprise": "found"},
        ["farmer", "king", "queen", "horse"],
    ),
    "b": (
        {"joy": "helped", "anger": "fixed", "fear": "watched", "sadness": "wrote",
         "surprise": "opened"},
        ["doctor", "teacher", "student", "child"],
    ),
    "c": (
        {"joy": "painted", "anger": "carried", "fear": "followed", "sadness": "sold",
         "surprise": None},
        ["robot", "engine", "computer", "machine"],
    ),
}  # fmt: skip
_SMOKE_NER_ONTO = (
    "O",
    "B-PERSON",
    "I-PERSON",
    "B-GPE",
    "I-GPE",
    "B-ORG",
    "I-ORG",
    "B-DATE",
    "I-DATE",
)
_SMOKE_NER_CONLL = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG")
# Per domain and slot: (first words, second words of two-word names); disjoint vocabularies.
_SMOKE_NER_DOMAINS = {
    "a": {"PER": (["teacher", "doctor"], ["song"]), "LOC": (["river", "forest"], ["village"]),
          "ORG": (["market", "machine"], ["house"])},
    "b": {"PER": (["farmer", "student"], ["letter"]), "LOC": (["city", "mountain"], ["garden"]),
          "ORG": (["computer", "engine"], ["table"])},
    "c": {"PER": (["king", "queen"], ["ship"]), "LOC": (["horse", "bird"], ["window"]),
          "ORG": (["robot", "train"], ["book"])},
}  # fmt: skip
_SMOKE_DATES = [["today"], ["yesterday"], ["often"], ["often", "again"]]
_SMOKE_NER_TEMPLATES = [
    "{PER} visited {LOC} {DATE} .",
    "{PER} helped {ORG} in {LOC} .",
    "{ORG} opened near {LOC} .",
    "{DATE} {PER} met {PER} with {ORG} .",
    "the young {PER} watched the old {ORG} .",
    "{PER} wrote from {LOC} {DATE} .",
]
_ONTO_TYPE = {"PER": "PERSON", "LOC": "GPE", "ORG": "ORG", "DATE": "DATE"}


def _smoke_pair(rng: random.Random, label: int) -> tuple[str, str]:
    # "entailment" iff the premise is about something alive AND the hypothesis says when
    # (a time adverb): both halves matter, and the rule stays linearly separable.
    alive, when = (
        (True, True) if label else rng.choice([(True, False), (False, True), (False, False)])
    )
    noun = rng.choice(_ALIVE if alive else _THINGS)
    premise = f"{rng.choice(_DETS)} {rng.choice(_ADJS)} {noun} {rng.choice(_VERBS)} the {rng.choice(_PLACES)} ."
    hypothesis = f"that {rng.choice(_VERBS)} {rng.choice(_TIME_WORDS if when else _MANNER_WORDS)} ."
    return premise, hypothesis


def _smoke_intense_sentence(rng: random.Random) -> tuple[str, int]:
    k = rng.randint(0, 2)
    adjs = rng.sample(_INTENSE, k) + rng.sample(_CALM, 2 - k)
    rng.shuffle(adjs)
    text = f"the {adjs[0]} {rng.choice(_PLACES)} {rng.choice(_VERBS)} the {adjs[1]} {rng.choice(_PLACES)} ."
    return text, k


def _smoke_emotion_example(rng: random.Random, domain: str) -> tuple[str, list[int]]:
    if domain == "mix":
        domain = rng.choice(sorted(_SMOKE_EMOTION_DOMAINS))
    cues, subjects = _SMOKE_EMOTION_DOMAINS[domain]
    available = [e for e in _SMOKE_EMOTIONS if cues[e]]
    # About 40 % positives per label: with rarer positives a tiny model first learns to
    # predict none and needs many more steps.
    k = rng.choices([0, 1, 2, 3], weights=[1, 4, 4, 1])[0]
    chosen = rng.sample(available, k)
    verbs = [cues[e] for e in chosen] or [rng.choice(["visited", "met", "saw"])]
    text = f"the {rng.choice(subjects)} {' '.join(verbs)} ."
    return text, [int(e in chosen) for e in _SMOKE_EMOTIONS]


def _smoke_ner_example(rng: random.Random, domain: str) -> tuple[list[str], list[str]]:
    conll = domain == "conll"
    words, tags = [], []
    for token in rng.choice(_SMOKE_NER_TEMPLATES).split():
        if not token.startswith("{"):
            words.append(token)
            tags.append("O")
            continue
        slot = token[1:-1]
        if slot == "DATE":
            span = list(rng.choice(_SMOKE_DATES))
        else:
            vocab = _SMOKE_NER_DOMAINS[rng.choice(sorted(_SMOKE_NER_DOMAINS)) if conll else domain]
            firsts, seconds = vocab[slot]
            span = [rng.choice(firsts)] + ([rng.choice(seconds)] if rng.random() < 0.4 else [])
        typ = (None if slot == "DATE" else slot) if conll else _ONTO_TYPE[slot]
        words += span
        tags += ["O"] * len(span) if typ is None else [f"B-{typ}"] + [f"I-{typ}"] * (len(span) - 1)
    return words, tags


_SMOKE_TASKS = {
    "smoke-pairs": None,
    "smoke-regression": None,
    "smoke-multilabel": (*sorted(_SMOKE_EMOTION_DOMAINS), "mix"),
    "smoke-ner": (*sorted(_SMOKE_NER_DOMAINS), "conll"),
}


def smoke_task(name: str, domain: str | None = None, seed: int = 0) -> Task:
    """A tiny generated task of each kind, offline, seeded; learnable by a tiny model quickly.

    Parameters
    ----------
    name : {"smoke-pairs", "smoke-regression", "smoke-multilabel", "smoke-ner"}
        ``smoke-pairs``: sentence pairs, single-label, "entailment" when the premise is about
        something alive and the hypothesis has a time adverb (both halves matter).
        ``smoke-regression``: sentence pairs scored ``1.25 ×`` the number of "intense"
        adjectives in both (0 to 5, STS-B-like), metric Pearson.
        ``smoke-multilabel``: texts with 0 to 3 "emotion" cue verbs, multi-label over joy,
        anger, fear, sadness, surprise (macro-F1 over the annotated ones). The slowest to
        learn: tiny-bert (random init) reaches macro-F1 0.3-0.5 after ~100 steps of 16 at
        lr 1e-2, where the other kinds are solved in 40.
        ``smoke-ner``: sentences with persons, places, organisations and dates, IOB2 tags.
        Every word is a whole word of tiny-bert's vocabulary (the smoke grammar's words).
    domain : str
        ``smoke-multilabel``: ``a``, ``b``, ``c`` (one label space, each domain its own cue
        verbs and subjects, so models trained on them differ; ``c`` does not annotate
        surprise) or ``mix`` (cues of all domains: an out-of-domain test set).
        ``smoke-ner``: ``a``, ``b``, ``c`` (OntoNotes-style tags PERSON, GPE, ORG, DATE; each
        domain its own names) or ``conll`` (names of all domains, CoNLL-style tags PER, LOC,
        ORG, no dates: score a domain model with ``type_map=tasks.ONTONOTES_TO_CONLL``).
    seed : int

    Returns
    -------
    Task
        240 train, 60 validation and 120 test examples.
    """
    if name not in _SMOKE_TASKS:
        raise ValueError(f"unknown smoke task {name!r}; choose one of {sorted(_SMOKE_TASKS)}")
    domains = _SMOKE_TASKS[name]
    if domains is None and domain is not None:
        raise ValueError(f"{name!r} has no domains; got domain {domain!r}")
    if domains is not None and domain not in domains:
        raise ValueError(
            f"{name!r} needs a domain, '{name}#<domain>' with one of {list(domains)}; got {domain!r}"
        )
    spec = name if domain is None else f"{name}#{domain}"
    parts = {}
    for offset, (part, n) in enumerate(_SMOKE_SIZES.items()):
        rng = random.Random(f"{spec}|{seed}|{offset}")
        if name == "smoke-pairs":
            labels = [i % 2 for i in range(n)]
            rng.shuffle(labels)
            inputs = [_smoke_pair(rng, y) for y in labels]
        elif name == "smoke-regression":
            pairs = [(_smoke_intense_sentence(rng), _smoke_intense_sentence(rng)) for _ in range(n)]
            inputs = [(a[0], b[0]) for a, b in pairs]
            labels = [1.25 * (a[1] + b[1]) for a, b in pairs]
        elif name == "smoke-multilabel":
            inputs, labels = map(
                list, zip(*(_smoke_emotion_example(rng, domain) for _ in range(n)))
            )
        else:
            inputs, labels = map(list, zip(*(_smoke_ner_example(rng, domain) for _ in range(n))))
        parts[part] = (inputs, labels)
    info = {"source": "generated", "seed": seed, "sizes": dict(_SMOKE_SIZES)}
    if domain is not None:
        info["domain"] = domain
    if name == "smoke-pairs":
        return Task(
            spec, "single_label", ("not_entailment", "entailment"), "accuracy", **parts, info=info
        )
    if name == "smoke-regression":
        return Task(spec, "regression", ("score",), "pearson", **parts, info=info)
    if name == "smoke-multilabel":
        annotated = [
            e for e in _SMOKE_EMOTIONS if domain == "mix" or _SMOKE_EMOTION_DOMAINS[domain][0][e]
        ]
        return Task(
            spec,
            "multi_label",
            _SMOKE_EMOTIONS,
            "macro_f1",
            **parts,
            scored_labels=tuple(annotated),
            info=info,
        )
    names = _SMOKE_NER_CONLL if domain == "conll" else _SMOKE_NER_ONTO
    parts = {p: (x, [[names.index(t) for t in s] for s in y]) for p, (x, y) in parts.items()}
    return Task(spec, "token", names, "entity_f1", **parts, info=info)
