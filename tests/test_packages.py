"""The npm tarball cache (lmsim._packages), run against a fake ``npm`` on PATH."""

import hashlib
import io
import json
import os
import sys
import tarfile

import pytest

from lmsim._packages import npm_pack, npm_tarball, npm_tarball_members

SPEC = "fakepkg@1.2.3"

# A stand-in for `npm`: logs its argv, then (by $FAKE_NPM_MODE) writes a one-file tarball
# into its cwd and prints its name as `npm pack --silent` does, or fails like npm.
FAKE_NPM = """#!{python}
import io, json, os, sys, tarfile
with open(os.environ["FAKE_NPM_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_NPM_MODE") == "fail":
    sys.stderr.write("npm error 404 Not Found\\n")
    sys.exit(1)
name = sys.argv[2].replace("@", "-") + ".tgz"
member = os.environ.get("FAKE_NPM_MEMBER", "package/index.txt")
with tarfile.open(name, "w:gz") as tar:
    info = tarfile.TarInfo(member)
    info.size = 5
    tar.addfile(info, io.BytesIO(b"hello"))
print(name)
"""


@pytest.fixture
def fake_npm(tmp_path, monkeypatch):
    """Put the fake npm first on PATH and the cache in tmp; return its call log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(FAKE_NPM.format(python=sys.executable))
    npm.chmod(0o755)
    log = tmp_path / "npm.log"
    log.write_text("")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_NPM_LOG", str(log))
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "cache"))

    def calls():
        return [json.loads(line) for line in log.read_text().splitlines()]

    return calls


def _safe_only(path):
    """A verify() like the real ones: every member a plain file under package/."""
    return npm_tarball_members(path, SPEC, sha1=None)


def _write_tarball(path, members):
    """A gzip tarball with ``members``: name -> bytes (regular files) or TarInfo."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            if isinstance(data, tarfile.TarInfo):
                tar.addfile(data)
                continue
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_cache_hit_runs_no_npm_and_no_verify(tmp_path, fake_npm):
    folder = tmp_path / "cache" / "fakepkg"
    folder.mkdir(parents=True)
    cached = folder / "fakepkg-1.2.3.tgz"
    cached.write_bytes(b"not even a tarball: a cached file is trusted as it is")

    def verify(path):
        raise AssertionError("a cached tarball is not verified again")

    assert npm_tarball(SPEC, "fakepkg", verify) == cached
    assert npm_tarball(SPEC, "fakepkg", verify, download=False) == cached
    assert fake_npm() == []


def test_absent_without_download_names_package_and_fix(tmp_path, fake_npm):
    with pytest.raises(FileNotFoundError) as err:
        npm_tarball(SPEC, "fakepkg", _safe_only, download=False)
    message = str(err.value)
    assert SPEC in message and "download=True" in message
    assert f"`npm pack {SPEC} --ignore-scripts`" in message
    assert fake_npm() == []


def test_fetch_verifies_then_renames_into_place(tmp_path, fake_npm):
    seen = []

    def verify(path):
        seen.append(path)
        assert path.parent.name == "_partial"  # checked before it enters the cache
        return _safe_only(path)

    folder = tmp_path / "cache" / "fakepkg"
    got = npm_tarball(SPEC, "fakepkg", verify)
    assert got == folder / "fakepkg-1.2.3.tgz" and got.is_file()
    assert [m.name for m in npm_tarball_members(got, SPEC, None)] == ["package/index.txt"]
    assert not (folder / "_partial").exists()
    assert fake_npm() == [["pack", SPEC, "--ignore-scripts", "--silent"]]
    assert len(seen) == 1
    assert npm_tarball(SPEC, "fakepkg", verify) == got  # now a cache hit
    assert len(fake_npm()) == 1 and len(seen) == 1


def test_stale_partial_folder_is_replaced(tmp_path, fake_npm):
    partial = tmp_path / "cache" / "fakepkg" / "_partial"
    partial.mkdir(parents=True)
    (partial / "leftover.tgz").write_bytes(b"from an interrupted run")
    assert npm_tarball(SPEC, "fakepkg", _safe_only).is_file()
    assert not partial.exists()


def test_failed_verify_removes_partial_and_caches_nothing(tmp_path, fake_npm, monkeypatch):
    monkeypatch.setenv("FAKE_NPM_MEMBER", "../escape.txt")
    folder = tmp_path / "cache" / "fakepkg"
    with pytest.raises(ValueError, match="failed its check, so it was not cached") as err:
        npm_tarball(SPEC, "fakepkg", _safe_only)
    assert "unexpected entries" in str(err.value) and SPEC in str(err.value)
    assert "`path`" in str(err.value)  # the fix
    assert not (folder / "_partial").exists()
    assert list(folder.iterdir()) == []
    assert len(fake_npm()) == 1


def test_failed_npm_removes_partial(tmp_path, fake_npm, monkeypatch):
    monkeypatch.setenv("FAKE_NPM_MODE", "fail")
    folder = tmp_path / "cache" / "fakepkg"
    with pytest.raises(RuntimeError, match=f"`npm pack {SPEC}` failed .*404"):
        npm_tarball(SPEC, "fakepkg", _safe_only)
    assert list(folder.iterdir()) == []


def test_no_npm_on_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no npm
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match=r"npm.*not on PATH.*--ignore-scripts"):
        npm_tarball(SPEC, "fakepkg", _safe_only)
    with pytest.raises(FileNotFoundError, match="not on PATH"):
        npm_pack(SPEC, tmp_path / "dest")


def test_given_path_is_returned_without_touching_cache(tmp_path, fake_npm):
    given = tmp_path / "mine.tgz"
    given.write_bytes(b"x")

    def verify(path):
        raise AssertionError("a given path is used as is")

    assert npm_tarball(SPEC, "fakepkg", verify, path=str(given)) == given
    with pytest.raises(FileNotFoundError, match="does not exist"):
        npm_tarball(SPEC, "fakepkg", verify, path=tmp_path / "nope.tgz")
    assert not (tmp_path / "cache").exists() and fake_npm() == []


def test_members_check_hash_and_every_unsafe_kind(tmp_path):
    good = _write_tarball(tmp_path / "good.tgz", {"package/a.txt": b"a", "package/d/b": b"b"})
    digest = hashlib.sha1(good.read_bytes()).hexdigest()  # independent of the helper
    assert [m.name for m in npm_tarball_members(good, SPEC, digest)] == [
        "package/a.txt",
        "package/d/b",
    ]
    with pytest.raises(ValueError, match=f"SHA-1 {digest}, expected 0+ \\({SPEC}\\)"):
        npm_tarball_members(good, SPEC, "0" * 40)
    link = tarfile.TarInfo("package/link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    folder = tarfile.TarInfo("package/sub")
    folder.type = tarfile.DIRTYPE
    for i, members in enumerate(
        [
            {"package/../x": b"x"},
            {"/abs/package/x": b"x"},
            {"other/x": b"x"},
            {"package/link": link},
            {"package/sub": folder},
        ]
    ):
        bad = _write_tarball(tmp_path / f"bad{i}.tgz", {"package/ok": b"ok", **members})
        with pytest.raises(ValueError, match="unexpected entries .*: not a fakepkg tarball"):
            npm_tarball_members(bad, SPEC, None)
