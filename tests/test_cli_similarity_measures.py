"""``lmsim similarity`` with the measures beyond Wu et al.'s five, and its chance floors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from lmsim.cli import main
from lmsim.metrics.floors import chance_floors

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_row_measures_match_the_library_on_the_extracted_activations(capsys, tmp_path, cache):
    from lmsim.data import load_corpus
    from lmsim.extract import extract_activations
    from lmsim.metrics import pairwise_matrix, pairwise_matrix_raw
    from lmsim.moments import Moments

    out = tmp_path / "sim"
    status, stdout, err = run(
        capsys,
        "similarity",
        "tiny-bert",
        "tiny-gpt2",
        "--corpus",
        "smoke",
        "--max-docs",
        "30",
        "--measures",
        "procrustes,rsa,rbf_cka,debiased_cka,cka",
        "--floor-draws",
        "3",
        "--device",
        "cpu",
        "--out",
        out,
        "--json",
        "--quiet",
    )
    assert status == 0, err
    summary = json.loads(stdout)
    texts = load_corpus("smoke", split="valid", max_docs=30)
    acts = extract_activations(["tiny-bert", "tiny-gpt2"], texts, device="cpu", progress=False)
    names = list(acts)
    for measure in ("rsa", "rbf_cka", "debiased_cka"):
        table = pd.read_csv(out / f"{measure}.csv", index_col=0)
        assert list(table.index) == names
        ref = pairwise_matrix_raw(acts, names, metric=measure, progress=False)
        np.testing.assert_allclose(table.to_numpy(), ref, atol=1e-9)
    mom = Moments.from_arrays(acts)
    for measure, metric in (("procrustes", "procrustes"), ("cka", "linear_cka")):
        table = pd.read_csv(out / f"{measure}.csv", index_col=0)
        np.testing.assert_allclose(
            table.to_numpy(), pairwise_matrix(mom, names, metric=metric, progress=False), atol=1e-7
        )
    widths = sorted(set(summary["blocks"].values()))
    floors = chance_floors(["rsa", "procrustes"], summary["n_rows"], widths, n_draws=3)
    assert summary["measures"]["rsa"]["chance"]["floors"] == floors["rsa"]
    assert summary["measures"]["procrustes"]["chance"]["floors"] == floors["procrustes"]
    assert summary["chance_floor_seconds"] >= 0


def test_row_measures_from_a_moments_file_are_refused_in_one_line(capsys, tmp_path):
    from lmsim.moments import Moments

    rng = np.random.default_rng(0)
    path = tmp_path / "m.safetensors"
    Moments.from_arrays({"a/layer.0": rng.normal(size=(20, 3))}).save(path)
    status, _, err = run(
        capsys, "similarity", "--moments", path, "--measures", "cka,rsa", "--out", tmp_path / "o"
    )
    assert status == 2
    assert "--measures rsa: these need the activations themselves" in err
    assert len(err.strip().splitlines()) == 1


def test_floors_show_progress_unless_quiet_and_are_read_back(capsys, tmp_path, cache):
    from lmsim.moments import Moments

    rng = np.random.default_rng(0)
    path = tmp_path / "m.safetensors"
    Moments.from_arrays(
        {"a/layer.0": rng.normal(size=(40, 5)), "b/layer.0": rng.normal(size=(40, 7))}
    ).save(path)
    argv = ["similarity", "--moments", path, "--measures", "svcca,procrustes", "--floor-draws", "4"]
    status, stdout, err = run(capsys, *argv, "--out", tmp_path / "loud")
    assert status == 0
    assert "chance floors" in err
    # a distance's floor is a lower bound for unrelated data, a similarity's an upper one
    assert "unrelated data ≥" in stdout and "chance floor ≤" in stdout
    assert len(list((cache / "floors").glob("*.json"))) == 2
    status, stdout, err = run(capsys, *argv, "--out", tmp_path / "quiet", "--quiet", "--json")
    assert status == 0 and err == ""
    quiet = json.loads(stdout)
    loud = json.loads((tmp_path / "loud" / "summary.json").read_text())
    for measure in ("svcca", "procrustes"):
        assert quiet["measures"][measure]["chance"] == loud["measures"][measure]["chance"]
    assert (
        quiet["measures"]["procrustes"]["distance"] and not quiet["measures"]["svcca"]["distance"]
    )
