"""The locked environment and the machine a page ran on, for its provenance.

The book's environment is locked in ``requirements/lock-cpu-py311.txt`` (exact versions with
hashes, written by ``make lock``). Every executed page records the lock's digest and whether
the running environment matches it; the runner warns before executing when it does not.
Training is not bitwise reproducible across CPU instruction sets, so pages also record the
CPU capability torch dispatches to and the thread policy.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

LOCK_FILE = Path("requirements") / "lock-cpu-py311.txt"
# Packages installed outside the lock on purpose: torch (the CPU build, or the user's CUDA
# build) and lmsim itself (editable).
_NOT_LOCKED = {"torch", "lmsim"}
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(path: str | Path) -> dict[str, str]:
    """``{package: version}`` of a lock file written by ``make lock`` (pip's requirements
    format, one ``name==version`` line per package, hashes on continuation lines).

    Raises
    ------
    ValueError
        When the file holds no pinned package (naming the file and the fix).
    """
    path = Path(path)
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _PIN.match(line.strip())
        if match:
            pins[_canonical(match.group(1))] = match.group(2)
    if not pins:
        raise ValueError(f"{path}: no `name==version` lines; regenerate it with `make lock`")
    return pins


def installed_versions(names) -> dict[str, str | None]:
    """The installed version of each distribution in ``names`` (None when absent)."""
    from importlib import metadata

    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def lock_differences(pins: Mapping[str, str], installed: Mapping[str, str | None]) -> list[str]:
    """``"name: locked X, installed Y"`` for every locked package installed at another
    version or missing (sorted by name)."""
    return [
        f"{name}: locked {version}, installed {installed.get(name) or 'nothing'}"
        for name, version in sorted(pins.items())
        if name not in _NOT_LOCKED and installed.get(name) != version
    ]


def environment_info(root: str | Path) -> dict:
    """The lock's digest and how the running environment differs from it.

    Returns
    -------
    dict
        ``{"lock": "requirements/lock-cpu-py311.txt", "lock_sha256": first 16 hex digits,
        "matches_lock": bool, "differences": [...]}``; ``lock`` is None (and the rest
        empty) when the repository has no lock file.
    """
    path = Path(root) / LOCK_FILE
    if not path.is_file():
        return {"lock": None, "lock_sha256": None, "matches_lock": False, "differences": []}
    pins = lock_pins(path)
    differences = lock_differences(pins, installed_versions(pins))
    return {
        "lock": LOCK_FILE.as_posix(),
        "lock_sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:16],
        "matches_lock": not differences,
        "differences": differences,
    }


def machine_info() -> dict:
    """The processor's model name, the CPU capability torch dispatches to (``AVX512``,
    ``AVX2``, ...), its intra-op thread policy and the cores the process may use: what
    decides trained weights bit for bit on a CPU (docs/reproducibility.md)."""
    from lmsim._runtime import cpu_model
    from lmsim._threads import default_threads

    info = {"cpu_model": cpu_model(), "cpu_capability": None}
    try:
        import torch

        info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except (ImportError, AttributeError):
        pass
    affinity = getattr(os, "sched_getaffinity", None)
    info["usable_cores"] = len(affinity(0)) if affinity else os.cpu_count()
    # lmsim's thread policy in the kernel ($LMSIM_THREADS, else 1 on <= 2 usable cores).
    info["lmsim_threads"] = default_threads()
    return info


def lock_warning(info: Mapping) -> str | None:
    """A one-paragraph warning when the environment differs from the lock, else None."""
    if info.get("lock") is None or info.get("matches_lock"):
        return None
    shown = info["differences"][:5]
    more = len(info["differences"]) - len(shown)
    return (
        f"warning: the environment differs from {info['lock']} in "
        f"{len(info['differences'])} package(s) ({'; '.join(shown)}"
        f"{f'; and {more} more' if more > 0 else ''}); pages record this in their "
        "provenance. `make install` installs the locked versions."
    )


def trained_models(zoo_profile: str | None) -> dict:
    """``{"zoo/<name>": first 16 hex digits of its weights' sha256}`` of every zoo model
    built for ``zoo_profile`` in the cache (the trained models the book's pages rest on),
    from their build records; empty when none is built. A record that predates the hashes
    gets the hash of its ``model.safetensors`` read now (read-only; ``"unrecorded"`` when
    that file is missing too). Fine-tunes and two-tower runs record theirs in their own build
    records (``finetune.json``, ``run.json``)."""
    if not zoo_profile:
        return {}
    try:
        from lmsim.zoo.profiles import MODELS, _root, get_profile

        root = _root(get_profile(zoo_profile))
    except (ImportError, KeyError, ValueError):
        return {}
    found = {}
    for name in MODELS:
        record = root / name / "zoo.json"
        if not record.is_file():
            continue
        try:
            hashes = json.loads(record.read_text()).get("weights_sha256") or {}
        except (OSError, ValueError):
            continue
        weights = hashes.get("model.safetensors")
        if not weights and (root / name / "model.safetensors").is_file():
            from lmsim.training import weight_hashes

            weights = weight_hashes(root / name, ("model.safetensors",)).get("model.safetensors")
        found[f"zoo/{name}"] = weights[:16] if weights else "unrecorded"
    return found
