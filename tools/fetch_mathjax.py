"""Vendor MathJax 3 into ``_mathjax/mathjax`` so the built book renders formulas offline.

The npm registry is reachable wherever the book is built (a package registry, like PyPI);
the reader's machine needs nothing. The tarball is cached under ``.cache/`` by version,
verified against a pinned SHA-256, and only the files the book loads are extracted: the
``tex-chtml`` component, its CommonHTML woff2 fonts, the TeX extensions it may autoload,
and the menu (no speech-rule engine: 4 MB for screen-reader speech, left out).

Usage: ``python tools/fetch_mathjax.py [--dest _mathjax/mathjax]``
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VERSION = "3.2.2"
SHA256 = "1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09"
KEEP = (
    "package/es5/tex-chtml.js",
    "package/es5/output/chtml/fonts/woff-v2/",
    "package/es5/input/tex/extensions/",
    "package/es5/ui/",
    "package/LICENSE",
)
ROOT = Path(__file__).resolve().parents[1]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tarball(cache: Path) -> Path:
    """The verified MathJax tarball, fetched with ``npm pack`` on first use."""
    path = cache / f"mathjax-{VERSION}.tgz"
    if path.exists() and _sha256(path) == SHA256:
        return path
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        try:
            subprocess.run(
                ["npm", "pack", f"mathjax@{VERSION}", "--silent"],
                cwd=tmp,
                check=True,
                capture_output=True,
                text=True,
            )
        except (OSError, subprocess.CalledProcessError) as err:
            detail = getattr(err, "stderr", "") or str(err)
            raise SystemExit(
                f"fetch_mathjax: `npm pack mathjax@{VERSION}` failed ({detail.strip()[:200]}); "
                "install Node.js/npm or put the tarball at " + str(path)
            ) from err
        fetched = Path(tmp) / f"mathjax-{VERSION}.tgz"
        digest = _sha256(fetched)
        if digest != SHA256:
            raise SystemExit(
                f"fetch_mathjax: {fetched.name} has SHA-256 {digest}, expected {SHA256}"
            )
        shutil.move(fetched, path)
    return path


def extract(archive: Path, dest: Path) -> None:
    """Extract the kept files (regular files only, no absolute or parent paths) into ``dest``."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = member.name
            if not member.isfile() or name.startswith("/") or ".." in Path(name).parts:
                continue
            if not any(name == k or (k.endswith("/") and name.startswith(k)) for k in KEEP):
                continue
            relative = Path(name).relative_to("package/es5" if "/es5/" in name else "package")
            target = tmp / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(member) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
    (tmp / "VERSION").write_text(f"{VERSION} {SHA256}\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=ROOT / "_mathjax" / "mathjax")
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache")
    args = parser.parse_args(argv)
    stamp = args.dest / "VERSION"
    if stamp.exists() and stamp.read_text().split()[:2] == [VERSION, SHA256]:
        return 0
    extract(tarball(args.cache), args.dest)
    print(f"fetch_mathjax: MathJax {VERSION} in {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
