"""The shard cache on disk: shard files, the manifest of their records, and claims.

A shard is written atomically and recorded (size and sha256) in ``manifest.json``; it is
checked when read, and a corrupt one is moved aside. Concurrent processes with the same
key claim a shard with a lock file before computing it (:func:`_claim_shard`).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from lmsim._io import (
    check_record,
    file_record,
    move_aside,
    pid_alive,
    write_atomic,
    write_json_atomic,
)
from lmsim.moments import Moments


def _shard_path(folder: Path, k: int) -> Path:
    return folder / f"shard_{k:05d}.safetensors"


def _save_shard(mom: Moments, folder: Path, k: int) -> dict:
    """Write a shard atomically (a crash leaves the whole file or none); return its record."""
    path = _shard_path(folder, k)
    write_atomic(path, mom.save)
    return file_record(path)


def _read_manifest(folder: Path, stacklevel: int = 4) -> dict:
    """The folder's ``manifest.json``, or {} (an unreadable one is moved aside, with a
    warning ``stacklevel`` frames up from :func:`~lmsim._io.move_aside`)."""
    path = folder / "manifest.json"
    if not path.exists():
        return {}
    try:
        manifest = json.loads(path.read_text())
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
        return manifest
    except (OSError, ValueError) as err:
        move_aside(path, f"{type(err).__name__}: {err}", "rewriting it", stacklevel=stacklevel)
        return {}


def _write_manifest(folder: Path, payload: dict, n_shards: int, records: dict) -> None:
    """Merge ``records`` (shard file -> size and sha256) into the manifest on disk.

    Another process may be adding shards of the same key: its records are kept (a record
    lost to a race only means that shard is checked by loading it, not by its hash).
    """
    shards = {**_read_manifest(folder).get("shards", {}), **records}
    shards = {name: shards[name] for name in sorted(shards) if (folder / name).exists()}
    manifest = {**payload, "n_shards": n_shards, "shards": shards}
    write_json_atomic(folder / "manifest.json", manifest, indent=1, default=str)


def _claim_shard(folder: Path, k: int) -> Path | None:
    """Claim shard ``k`` for this process: its lock file, or None when a live process
    holds it.

    The lock (``shard_NNNNN.lock``, holding ``pid host``) is created with
    ``O_CREAT | O_EXCL``, atomic on local and NFSv3+ file systems, so two processes never
    compute the same shard. A lock whose pid is dead on this host is stale (a killed run)
    and taken over: renamed away first (atomic, so one taker wins), then claimed afresh.
    Locks of other hosts are waited for.
    """
    lock = folder / f"shard_{k:05d}.lock"
    mine = f"{os.getpid()} {socket.gethostname()}"
    for _attempt in range(3):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid_text, _, host = lock.read_text().partition(" ")
            except FileNotFoundError:
                continue  # released meanwhile: try again
            if host.strip() != socket.gethostname() or not pid_text.isdigit():
                return None
            if pid_alive(int(pid_text)):
                return None
            stale = lock.with_name(f"{lock.name}.stale{os.getpid()}")
            try:
                os.replace(lock, stale)
                stale.unlink(missing_ok=True)
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(mine)
        return lock
    return None


def _load_shard(
    folder: Path, k: int, record: dict | None, device, stacklevel: int = 4
) -> Moments | None:
    """Shard ``k`` if it is there and whole; a corrupt one is named, moved aside (warning
    ``stacklevel`` frames up from :func:`~lmsim._io.move_aside`), None."""
    path = _shard_path(folder, k)
    if not path.exists():
        return None
    try:
        check_record(path, record)
        return Moments.load(path, device=device)
    except (OSError, ValueError) as err:
        move_aside(path, str(err), "recomputing that shard", stacklevel=stacklevel)
        return None
