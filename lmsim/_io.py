"""Atomic writes: a file or folder appears complete or not at all; verified cache entries.

The one helper for every cache writer of lmsim (models, zoo, fine-tunes, two-tower runs,
data, extraction, Grams): write under a temporary name in the same folder, then
``os.replace`` into place.

A cache *entry* is a folder (:class:`entry_dir`) or a single file (:func:`write_entry_file`)
that carries lmsim's ownership marker, written before anything else: ``lmsim_entry.json``
inside the folder, or ``<file>.lmsim.json`` beside the file. When the entry is complete the
marker records the size and sha256 of every file (:func:`file_record`). Readers verify
the entry against it (:func:`entry_status`); a cache lookup (:func:`open_entry`) moves a
corrupt *lmsim* entry aside (:func:`move_aside`, numbered ``.corrupt`` copies that never
overwrite each other) and recomputes it, and refuses to touch anything without the marker.

A marker ties itself to its entry: it names the entry (``"entry"``: the folder's or file's
name, the content key it was computed for), lists every file the entry holds by a relative
path inside it (a file entry: the file itself), and, when written during a run of
``python -m lmsim.reproduce``, that run's id (``"run"``, :data:`RUN_ENV`). The only
deletion of an entry, :func:`remove_entry`, requires all of it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = [
    "MARKER",
    "atomic_dir",
    "entry_dir",
    "write_atomic",
    "write_json_atomic",
    "write_entry_file",
    "file_record",
    "check_record",
    "entry_status",
    "open_entry",
    "verify_entry",
    "move_aside",
    "remove_entry",
    "unlisted_files",
    "read_utf8",
    "utf8_lines",
]

#: The ownership marker of a folder entry; a file entry's is ``<file>`` + :data:`SIDECAR`.
MARKER = "lmsim_entry.json"
SIDECAR = ".lmsim.json"
#: The environment variable holding the id of the ``python -m lmsim.reproduce`` run whose
#: kernels write entries; recorded in each marker, so the runner releases only its own.
RUN_ENV = "LMSIM_RUN_ID"
_KIND = "lmsim cache entry"
_WRITABLE_HINT = (
    "lmsim keeps its caches under $LMSIM_CACHE (default ~/.cache/lmsim): set LMSIM_CACHE "
    "to a writable folder (e.g. export LMSIM_CACHE=/tmp/lmsim-cache) to compute this"
)


def _not_writable(path: Path, err: OSError) -> PermissionError:
    return PermissionError(
        f"cannot write {str(path)!r}: {str(path.parent)!r} is not writable ({err.strerror}); "
        f"{_WRITABLE_HINT}"
    )


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary path next to ``path``, then rename it into place.

    The parent folder is created when missing (it may have been removed by a concurrent
    build that finished first). On error the temporary file is removed and ``path`` is
    left as it was.
    """
    path = Path(path)
    # One temporary name per writer (process and thread): two threads writing the same file
    # must not rename or remove each other's temporary.
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}-{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        os.replace(tmp, path)
    except PermissionError as err:
        raise _not_writable(path, err) from None
    finally:
        tmp.unlink(missing_ok=True)


def write_json_atomic(path: Path, payload, **dumps_kwargs) -> None:
    """Write ``json.dumps(payload)`` to ``path`` atomically."""
    text = json.dumps(payload, **dumps_kwargs)
    write_atomic(path, lambda tmp: tmp.write_text(text))


class atomic_dir:
    """Write a folder under a temporary name; rename it into place on success.

    Parameters
    ----------
    path : Path
        The folder to create.
    replace : bool
        When ``path`` exists at the end (another process finished first, or a stale
        build): False keeps the existing folder and discards ours; True moves the old one
        aside (a rename, atomic) and puts ours in place.

    Yields
    ------
    Path
        The temporary folder to write into (private to this process).
    """

    def __init__(self, path: Path, replace: bool = False):
        self.path = Path(path)
        self.replace = replace
        self.tmp: Path | None = None

    def __enter__(self) -> Path:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.tmp", dir=self.path.parent))
        except PermissionError as err:
            raise _not_writable(self.path, err) from None
        self.tmp.chmod(0o755)  # mkdtemp makes it private; caches are shared like any folder
        return self.tmp

    def __exit__(self, exc_type, exc, tb):
        assert self.tmp is not None
        try:
            if exc_type is not None:
                return False
            if self.path.exists():
                if not self.replace:
                    return False  # built concurrently by another process: keep theirs
                trash = Path(
                    tempfile.mkdtemp(prefix=f".{self.path.name}.old", dir=self.path.parent)
                )
                os.replace(self.path, trash / self.path.name)
                shutil.rmtree(trash, ignore_errors=True)
            try:
                os.replace(self.tmp, self.path)
            except OSError:
                if not self.path.exists():
                    raise
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return False


# sha256 of files this process hashed, by path and (size, mtime, ctime, inode): a model
# folder checked by load_model and again by load_tokenizer is read once. Any write changes
# the ctime, which no user call can set back, so a changed file is hashed again; only files
# last changed seconds before they were hashed are remembered, since file times tick in
# milliseconds and a write right after hashing could keep them ("racy git").
_HASHED: dict[str, tuple[tuple, str]] = {}
_HASHED_MAX = 4096
_SETTLED_NS = 2_000_000_000


def _stat_key(stat: os.stat_result) -> tuple:
    return (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev)


def file_record(path: Path) -> dict:
    """``{"size": bytes, "sha256": hex}`` of a file, to store at write time and check on read."""
    key, before = str(Path(path).resolve()), _stat_key(os.stat(path))
    known = _HASHED.get(key)
    if known is not None and known[0] == before:
        return {"size": before[0], "sha256": known[1]}
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    after = _stat_key(os.stat(path))
    settled = time.time_ns() - max(after[1], after[2]) > _SETTLED_NS
    if after == before and settled:  # not written while, nor just before, it was read
        if len(_HASHED) >= _HASHED_MAX:
            _HASHED.clear()
        _HASHED[key] = (after, digest.hexdigest())
    return {"size": after[0], "sha256": digest.hexdigest()}


def check_record(path: Path, record: dict | None) -> None:
    """Raise ``ValueError`` naming ``path`` when it differs from ``record`` (size, then hash).

    ``record`` None checks nothing (a file written before records were kept).
    """
    if not record:
        return
    size = Path(path).stat().st_size
    if size != record.get("size"):
        raise ValueError(f"{path} has {size} bytes, {record.get('size')} were written")
    if file_record(path)["sha256"] != record.get("sha256"):
        raise ValueError(f"{path}'s sha256 differs from the one recorded when it was written")


class entry_dir(atomic_dir):
    """:class:`atomic_dir` for a cache entry: the ownership marker first, records last.

    On entry the temporary folder gets ``lmsim_entry.json`` (:data:`MARKER`) before
    anything else, so even an interrupted build is recognisably lmsim's; on success the
    marker is rewritten with the size and sha256 of every file (``facts`` added), then the
    folder is renamed into place. Parameters as :class:`atomic_dir`, plus ``facts``: a
    JSON-able dict stored in the marker.
    """

    def __init__(self, path: Path, replace: bool = False, facts: dict | None = None):
        super().__init__(path, replace)
        self.facts = dict(facts or {})

    def __enter__(self) -> Path:
        tmp = super().__enter__()
        (tmp / MARKER).write_text(json.dumps({"lmsim": _KIND, "state": "writing"}))
        return tmp

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            assert self.tmp is not None
            files = {
                p.relative_to(self.tmp).as_posix(): file_record(p)
                for p in sorted(self.tmp.rglob("*"))
                if p.is_file() and p.name != MARKER
            }
            marker = {
                "lmsim": _KIND,
                "state": "complete",
                "files": files,
                **_owner(self.path),
                **self.facts,
            }
            (self.tmp / MARKER).write_text(json.dumps(marker, indent=1, default=str))
        return super().__exit__(exc_type, exc, tb)


def _owner(path: Path) -> dict:
    """What ties a marker to its entry: the entry's name (its content key) and the id of the
    runner's run that wrote it, when one did (:data:`RUN_ENV`)."""
    run = os.environ.get(RUN_ENV)
    return {"entry": Path(path).name, **({"run": run} if run else {})}


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR)


def write_entry_file(path: Path, write: Callable[[Path], None], facts: dict | None = None):
    """Write a one-file cache entry: its marker ``<file>.lmsim.json`` first, then the file
    atomically (``write(tmp)``), then the marker again with the file's size and sha256."""
    path = Path(path)
    write_json_atomic(_sidecar(path), {"lmsim": _KIND, "state": "writing"})
    write_atomic(path, write)
    marker = {"lmsim": _KIND, "state": "complete", "files": {path.name: file_record(path)}}
    marker.update(_owner(path))
    write_json_atomic(_sidecar(path), {**marker, **(facts or {})}, indent=1, default=str)


def _entry_marker(path: Path) -> tuple[Path, Path]:
    """``(marker, folder its records are relative to)`` of a folder or file entry."""
    return (path / MARKER, path) if path.is_dir() else (_sidecar(path), path.parent)


def _bad_relative(rel) -> bool:
    """Whether a marker's file path is not a plain relative path inside its entry."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\x00" in rel:
        return True
    parts = rel.split("/")
    return rel.startswith("/") or any(part in ("", ".", "..") for part in parts)


def _walk_files(folder: Path) -> Iterator[tuple[str, Path]]:
    """``(relative posix path, path)`` of everything in ``folder`` that is not a folder of
    its own (files, links, links to folders), without following links."""
    for top, dirs, files in os.walk(folder, followlinks=False):
        base = Path(top)
        for name in sorted(files):
            yield (base / name).relative_to(folder).as_posix(), base / name
        for name in sorted(dirs):
            if (base / name).is_symlink():
                yield (base / name).relative_to(folder).as_posix(), base / name


def unlisted_files(path: Path) -> list[str]:
    """What a folder entry holds beyond the files its marker lists (relative paths: files a
    user put there, links); empty for a file entry or an unreadable marker."""
    path = Path(path)
    if not path.is_dir() or path.is_symlink():
        return []
    try:
        files = json.loads((path / MARKER).read_text()).get("files")
    except (OSError, ValueError, AttributeError):
        return []
    listed = set(files) if isinstance(files, dict) else set()
    return [
        rel
        for rel, file in _walk_files(path)
        if rel != MARKER and (rel not in listed or file.is_symlink())
    ]


def entry_status(path: Path) -> tuple[str, str]:
    """Whether ``path`` (a folder or a file) is a whole lmsim cache entry.

    Returns
    -------
    status : {"absent", "whole", "corrupt", "foreign"}
        ``"foreign"``: it exists without a marker of its own (not lmsim's, written before
        markers existed, or a marker copied from another entry: one that names another
        entry, or a file entry's marker that lists another file); ``"corrupt"``: the marker
        is there but unreadable or unfinished, lists no file, a path outside the entry, or
        a file that is missing or differs from its recorded size or sha256, or the folder
        holds files its marker does not list.
    detail : str
        What is wrong, naming the file (empty when whole or absent).
    """
    return _status(Path(path), Path(path).name)


def _status(path: Path, name: str) -> tuple[str, str]:
    """:func:`entry_status` of ``path`` as the entry ``name`` (its own name, or the one it
    had before :func:`remove_entry` renamed it)."""
    if not path.exists():
        return "absent", ""
    marker, base = _entry_marker(path)
    if not marker.is_file():
        return "foreign", f"{str(path)!r} has no lmsim marker ({marker.name})"
    try:
        data = json.loads(marker.read_text())
        if not isinstance(data, dict) or data.get("lmsim") != _KIND:
            raise ValueError("not an lmsim entry marker")
    except (OSError, ValueError) as err:
        return "corrupt", f"{marker} is unreadable ({type(err).__name__}: {err})"
    named = data.get("entry")
    if named is not None and named != name:
        return "foreign", (
            f"{str(path)!r} has a marker ({marker.name}) written for the entry {named!r}, "
            "not for it (a copy)"
        )
    files = data.get("files")
    if data.get("state") != "complete" or not isinstance(files, dict):
        return "corrupt", f"{path} was never finished (its {marker.name} records no files)"
    if path.is_file() and set(files) != {name}:
        return "foreign", (
            f"{str(path)!r} has a marker ({marker.name}) that lists "
            f"{sorted(map(str, files))}, not this file"
        )
    if not files:
        return "corrupt", f"{marker} lists no files: it verifies nothing"
    outside = [rel for rel in files if _bad_relative(rel)]
    if outside:
        return "corrupt", f"{marker} lists {outside[0]!r}, which is not a path inside the entry"
    for rel, record in files.items():
        file = base / rel
        if file.is_symlink() or not file.is_file():
            return "corrupt", f"{file} is missing" + (" (a link)" if file.is_symlink() else "")
        try:
            check_record(file, record if isinstance(record, dict) else {"size": None})
        except (OSError, ValueError) as err:
            return "corrupt", str(err)
    extra = unlisted_files(path)
    if extra:
        return "corrupt", (
            f"{path} holds {len(extra)} file(s) its {marker.name} does not list "
            f"({', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''})"
        )
    return "whole", ""


def _has_marker(path: Path) -> bool:
    """Whether ``path`` carries a marker file at all (its own or a copied one)."""
    marker, _ = _entry_marker(path)
    return marker.is_file() or marker.is_symlink()


def entry_facts(path: Path) -> dict:
    """The dict stored in a whole entry's marker (its ``facts``, ``files`` and state)."""
    marker, _ = _entry_marker(Path(path))
    return json.loads(marker.read_text())


def _legacy_problem(path: Path, legacy: Callable[[Path], dict | None]) -> str | None:
    """Check an entry written before markers existed against its old size records.

    ``legacy(path)`` returns ``{relative file: size}`` from the old facts file, or None
    when ``path`` is not an old lmsim entry. Returns None when it is one and whole, a
    problem string when it is one but damaged; raises ``LookupError`` when it is not one.
    """
    try:
        sizes = legacy(path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        return f"its old record is unreadable ({type(err).__name__}: {err})"
    if sizes is None:
        raise LookupError(path)
    base = path if path.is_dir() else path.parent
    for rel, size in sizes.items():
        file = base / rel
        if not file.is_file():
            return f"{file} is missing"
        if file.stat().st_size != size:
            return f"{file} has {file.stat().st_size} bytes, {size} were written"
    return None


def _adopt(path: Path) -> None:
    """Give a whole entry written before markers existed its marker (every file's sha256),
    so later reads check hashes; skipped in a read-only cache (checked by size only)."""
    marker, base = _entry_marker(path)
    files = [path] if path.is_file() else [p for p in sorted(path.rglob("*")) if p.is_file()]
    record = {
        "lmsim": _KIND,
        "state": "complete",
        "adopted": True,
        "files": {p.relative_to(base).as_posix(): file_record(p) for p in files},
        "entry": path.name,
    }
    with contextlib.suppress(OSError):
        write_json_atomic(marker, record, indent=1)


def open_entry(
    path: Path,
    then: str,
    legacy: Callable[[Path], dict | None] | None = None,
    stacklevel: int = 3,
) -> bool:
    """A cache lookup: whether ``path`` holds a whole entry, healing a corrupt one.

    Parameters
    ----------
    path : Path
        The entry's folder or file, at a path lmsim computed inside its cache.
    then : str
        What the caller does when the entry is not there, e.g. ``"training it again"``.
    legacy : callable, optional
        For entries written before markers existed: ``legacy(path)`` returns their old
        size records ``{file: bytes}``, or None when ``path`` is not such an entry.

    Returns
    -------
    bool
        True: whole (read it). False: absent, or corrupt and now moved aside with a
        warning (compute it).

    Raises
    ------
    FileExistsError
        ``path`` exists but is not lmsim's: nothing is moved or deleted.
    ValueError
        A corrupt entry that cannot be moved aside (a read-only cache); names the file.
    """
    path = Path(path)
    status, detail = entry_status(path)
    if status == "foreign" and legacy is not None and not _has_marker(path):
        try:
            problem = _legacy_problem(path, legacy)
        except LookupError:
            pass
        else:
            if problem is None:
                _adopt(path)
                return True
            move_aside(path, problem, then, stacklevel=stacklevel + 1, owned=True)
            return False
    if status == "foreign":
        raise FileExistsError(
            f"{detail}: it is not an lmsim cache entry, and lmsim never moves or deletes "
            "what it did not write; move it away, or point LMSIM_CACHE at another folder"
        )
    if status == "corrupt":
        move_aside(path, detail, then, stacklevel=stacklevel + 1)
        return False
    return status == "whole"


def verify_entry(path: Path, what: str, legacy: Callable[[Path], dict | None] | None = None):
    """Check a whole entry at a path the user gave (never moved: nothing recomputes it).

    ``legacy`` as in :func:`open_entry` (an old entry is checked by its sizes, not adopted).

    Raises
    ------
    FileNotFoundError
        Nothing there, or not an lmsim entry; the message names ``path`` and ``what`` it
        should be (a phrase with its article, e.g. ``"a two-tower run"``).
    ValueError
        A corrupt entry; the message names the file and what differs.
    """
    status, detail = entry_status(path)
    if status == "foreign" and legacy is not None and not _has_marker(Path(path)):
        try:
            problem = _legacy_problem(Path(path), legacy)
        except LookupError:
            pass
        else:
            status, detail = ("whole", "") if problem is None else ("corrupt", problem)
    if status == "absent":
        raise FileNotFoundError(f"nothing at {str(path)!r}: expected {what}")
    if status == "foreign":
        raise FileNotFoundError(f"{detail}: it is not {what}")
    if status == "corrupt":
        raise ValueError(f"{what} at {str(path)!r} is damaged: {detail}")


def _taken(path: Path) -> bool:
    """Whether a name is in use, a dangling link included."""
    return os.path.lexists(path)


def _free_aside(path: Path) -> Path:
    """``<name>.corrupt``, else the first free ``<name>.corrupt.<k>`` (a name held by
    anything, a dangling link included, is not free)."""
    first = path.with_name(path.name + ".corrupt")
    if not _taken(first):
        return first
    k = 1
    while _taken(path.with_name(f"{path.name}.corrupt.{k}")):
        k += 1
    return path.with_name(f"{path.name}.corrupt.{k}")


def move_aside(
    path: Path, reason: str, then: str, stacklevel: int = 3, *, owned: bool = False
) -> Path:
    """Rename a corrupt cache file or folder to ``<name>.corrupt`` and warn, naming both.

    Only for what lmsim verified is its own (an entry with its marker, a shard listed in
    its manifest): a folder without lmsim's marker is refused unless ``owned`` (the caller
    recognised an entry written before markers existed by its old facts file).
    An earlier ``.corrupt`` copy is never overwritten: later ones are numbered
    ``<name>.corrupt.1``, ``.2``, ... (a name held by anything, even a dangling link, is
    skipped). A file entry's marker moves with it. The warning says where it went only
    once it is there.

    Parameters
    ----------
    path : Path
        The unreadable file or folder.
    reason : str
        What is wrong with it (the error it gave).
    then : str
        What happens instead, e.g. ``"recomputing it"``.

    Returns
    -------
    Path
        Where it now lies (kept for inspection).

    Raises
    ------
    ValueError
        A folder that is not lmsim's, or a corrupt entry that cannot be moved (a read-only
        cache, or no free name); the message names it and the problem.
    """
    path = Path(path)
    if path.is_dir() and not (owned or (path / MARKER).is_file()):
        raise ValueError(f"refusing to move {str(path)!r} aside: it is not an lmsim cache entry")

    def cannot(why: str) -> ValueError:
        return ValueError(
            f"corrupt cache entry {path}: {reason}; it cannot be moved aside ({why}); "
            f"{_WRITABLE_HINT}"
        )

    moved = gone = False
    for _attempt in range(100):
        aside = _free_aside(path)
        try:
            if path.is_dir():
                os.rename(path, aside)  # fails on a non-empty existing folder
            else:
                os.link(path, aside)  # fails when ``aside`` exists: never overwrites it
                os.unlink(path)
            moved = True
            break
        except FileNotFoundError:
            if not os.path.lexists(path):
                gone = True  # another process moved it first
                break
            continue  # ``aside`` vanished meanwhile: try again
        except (FileExistsError, IsADirectoryError, NotADirectoryError):
            continue  # taken meanwhile by another process: the next number
        except OSError as err:
            if err.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                continue
            if err.errno in (errno.EPERM, errno.EXDEV, errno.EMLINK) and path.is_file():
                if not _taken(aside):  # no hard links here: a plain rename
                    os.replace(path, aside)
                    moved = True
                    break
                continue
            raise cannot(f"{type(err).__name__}: {err}") from None
    if not (moved or gone):
        raise cannot(f"no free name {path.name}.corrupt.<k> after 100 tries")
    if gone:
        warnings.warn(
            f"corrupt cache entry {path}: {reason}; another process moved it away first, {then}",
            stacklevel=stacklevel,
        )
        return aside
    sidecar = _sidecar(path)
    if sidecar.is_file():
        with contextlib.suppress(OSError):
            os.replace(sidecar, _sidecar(aside))
    warnings.warn(
        f"corrupt cache entry {path}: {reason}; moved it to {aside.name} and {then}",
        stacklevel=stacklevel,
    )
    return aside


# ------------------------------------------------------------------------- removal
def remove_entry(path: Path, run: str | None = None) -> int:
    """Delete a whole lmsim cache entry that is provably lmsim's and return its bytes.

    The entry must be whole (:func:`entry_status`: its marker names it, lists every file it
    holds by a path inside it, and each file matches its record), not a link, and with
    ``run`` given, its marker must record that run's id (:data:`RUN_ENV`): an entry another
    run, a user or an older lmsim wrote is never removed. A folder is first renamed to a
    private name and checked again there, so a folder swapped in meanwhile is put back,
    not deleted.

    Raises
    ------
    PermissionError
        It is not such an entry; the message names it and why (nothing was deleted).
    """
    path = Path(path)
    reason = _not_removable(path, run, path.name)
    if reason:
        raise PermissionError(f"not removing {str(path)!r}: {reason}")
    if path.is_dir():
        hidden = path.with_name(f".{path.name}.removing{os.getpid()}-{threading.get_ident()}")
        os.rename(path, hidden)
        reason = _not_removable(hidden, run, path.name)
        if reason:  # changed between the check and the rename: put it back
            with contextlib.suppress(OSError):
                os.rename(hidden, path)
            raise PermissionError(f"not removing {str(path)!r}: {reason}")
        size = sum(f.stat().st_size for _, f in _walk_files(hidden) if f.is_file())
        shutil.rmtree(hidden)
        return size
    size = path.stat().st_size
    path.unlink()
    _sidecar(path).unlink(missing_ok=True)
    return size


def _not_removable(path: Path, run: str | None, name: str) -> str | None:
    """Why ``path`` (an entry named ``name``) must not be removed, or None."""
    if path.is_symlink():
        return "it is a link"
    marker, _ = _entry_marker(path)
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError):
        return "it carries no readable lmsim marker"
    if not isinstance(data, dict) or data.get("entry", name) != name:
        return "its marker was written for another entry"
    if run is not None and data.get("run") != run:
        return "this run did not write it"
    status, detail = _status(path, name)
    if status != "whole":
        return f"it is not a whole lmsim entry ({detail})"
    return None


# ---------------------------------------------------------------------------- text files
def _not_utf8(path, line_no: int, column: int, byte: int) -> ValueError:
    return ValueError(
        f"{path}:{line_no}: not UTF-8 text (byte {byte:#04x} at column {column}); is it "
        "another encoding (re-encode it, e.g. iconv -f latin1 -t utf-8) or a binary file?"
    )


def utf8_lines(path) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a UTF-8 text file, read one line at a time.

    Raises
    ------
    ValueError
        A line that is not UTF-8 or holds a NUL byte (a binary file), naming the file, the
        line and the column.
    """
    with open(path, "rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise _not_utf8(path, line_no, err.start + 1, raw[err.start]) from None
            if "\x00" in line:
                raise _not_utf8(path, line_no, line.index("\x00") + 1, 0)
            yield line_no, line


def read_utf8(path) -> str:
    """The text of a UTF-8 file; an undecodable or binary one raises as :func:`utf8_lines`."""
    return "".join(line for _, line in utf8_lines(path))


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (owned by anyone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True
