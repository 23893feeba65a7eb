"""Each CPU benchmark runs end to end at its ``--tiny`` size and writes the standard record.

The standard (``benchmarks/README.md``): a :func:`_common.record` header (threads, load
average, versions, the limits measured in the same run), the task's nominal FLOP count,
each side's best time and its fraction of the GEMM limit, and both sides. Nothing here
looks at a time's value.
"""

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

HEADER = ("threads", "thread_info", "load_average_before", "load_average_after", "versions")


def _check_side(side: dict) -> None:
    assert side["best_s"] > 0
    assert side["best_s"] == min(side["times_s"])
    assert side["flops"] > 0
    assert side["limit_gflops"] > 0
    assert side["fraction_of_gemm_limit"] == pytest.approx(
        side["flops"] / side["best_s"] / 1e9 / side["limit_gflops"]
    )


def _check_header(data: dict) -> None:
    for key in HEADER:
        assert key in data, key
    assert data["threads"] == 1
    limits = data["limits"]
    for entry in ("one_thread", "bench_threads", "before", "after"):
        assert entry in limits, entry
    assert limits["bench_threads"]["gemm_gflops"] > 0
    assert limits["bench_threads"]["gemm_float32_gflops"] > 0


def _run(module: str, tmp_path: Path, *extra: str, repeats: int = 2) -> dict:
    bench = pytest.importorskip(module)
    out = tmp_path / f"{module}.json"
    argv = ["--tiny", "--threads", "1", "--repeats", str(repeats), "--out", str(out), *extra]
    bench.main(argv)
    return json.loads(out.read_text())


# bench_cluster and bench_merge start one process per side and round (peak memory of its
# own): one round keeps them to a few process starts.
def test_bench_cluster_tiny(tmp_path):
    data = _run("bench_cluster", tmp_path, repeats=1)
    _check_header(data)
    assert data["flops_nominal"] == data["n_tokens"] * data["n_neurons"] ** 2
    for side in ("lmsim", "lmsim_moments", "neurox"):
        _check_side(data[side])
        assert 0 < data[side]["fraction_of_bound"]
    assert data["bound"]["seconds"] > data["bound"]["linkage_s"] > 0
    assert all(v == 1.0 for ari in data["adjusted_rand_index"].values() for v in ari.values())
    assert data["speedup_total"] > 0 and data["memory_ratio"] >= 0


def test_bench_merge_tiny(tmp_path):
    data = _run("bench_merge", tmp_path, repeats=1)
    _check_header(data)
    assert data["flops_nominal"] > 0
    for side in ("lmsim", "lmsim_f32", "authors"):
        run = data["runs"][side]
        _check_side(run)
        assert run["accuracy_vs_float64_reference"]["max_abs_error"] >= 0
        assert run["peak_rss_mib"] > 0
    assert "seconds_reference" in data["runs"]["reference"]
    # float64 Cholesky solves are far closer to the float64 reference than float32 inverses
    lm = data["runs"]["lmsim"]["accuracy_vs_float64_reference"]["max_abs_error"]
    au = data["runs"]["authors"]["accuracy_vs_float64_reference"]["max_abs_error"]
    assert lm < au


def test_bench_threads_tiny(tmp_path):
    data = _run("bench_threads", tmp_path, repeats=1)
    _check_header(data)
    assert data["flops_nominal"] > 0
    for side in ("default", "before", "pinned"):
        _check_side(data[side])
        # threads change the order of float sums only
        assert data[side]["max_abs_difference_vs_pinned"] < 1e-4
    # what each side saw at the call: the policy pending, stood aside, or pinned
    assert data["default"]["thread_info_at_call"]["caller_choice"] is None
    assert data["pinned"]["thread_info_at_call"]["torch_threads"] == 1
    assert data["ratio_before_over_default"] == pytest.approx(
        data["before"]["best_s"] / data["default"]["best_s"]
    )


def test_bench_extract_tiny(tmp_path):
    data = _run("bench_extract", tmp_path)
    _check_header(data)
    assert data["device"] == "cpu"
    for side in ("lmsim", "naive", "forward"):
        _check_side(data[side])
        assert data[side]["precision"] == "float32"
        assert data[side]["tokens_per_s"] > 0
    assert data["flops_nominal"] == data["lmsim"]["flops"]
    # the batches lmsim ran hold exactly the tokens the one-at-a-time loop saw
    assert data["real_tokens_in_batches"] == data["n_tokens"]
    assert data["padding_fraction"] >= 0
    assert data["overhead_vs_forward"] < 1
    assert data["max_abs_cov_difference"] < 1e-4 * max(data["max_abs_cov"], 1e-12) + 1e-6


def test_bench_twotower_tiny(tmp_path):
    data = _run("bench_twotower", tmp_path, "--towers", "gpt", "bert")
    _check_header(data)
    assert [row["tower"] for row in data["results"]] == ["gpt", "bert"]
    for row in data["results"]:
        assert row["flops_nominal"] == row["flops_per_token"] * (
            data["steps"] * data["batch_size"] * data["seq_len"]
        )
        for side in ("lmsim", "bare"):
            _check_side(row[side])
            assert len(row[side]["times_s"]) == 2


def test_readme_table_has_a_row_per_standard_result():
    readme_table = pytest.importorskip("readme_table")
    results = Path(readme_table.__file__).parent / "results"
    text = readme_table.table(results)
    for name in readme_table.ROWS:
        if (results / name).exists():
            assert f"`{name}`" in text or name in text.splitlines()[-1], name


def test_bench_plan_replans_a_measured_result_and_judges_it(tmp_path):
    """bench_plan.py --replan: the planned side recomputed with the current estimators,
    the ratios and the 1.5x verdicts from the measured side (nothing executed)."""
    import shutil

    bench_plan = pytest.importorskip("bench_plan")
    results = Path(bench_plan.__file__).parent / "results"
    copy = tmp_path / "plan_smoke.json"
    shutil.copy(results / "plan_smoke.json", copy)
    assert bench_plan.main(["--replan", str(copy)]) == 0
    rows = json.loads(copy.read_text())["rows"]
    assert len(rows) == 12 and all(r["ok"] for r in rows)
    for row in rows:
        assert row["ram_ratio"] == pytest.approx(row["planned_ram"] / row["measured_ram"])
        assert row["ram_within"] == (1 / 1.5 <= row["ram_ratio"] <= 1.5)
    assert "| page | planned RAM (GB) |" in bench_plan.table(rows)


def test_bench_floors_tiny(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "cache"))
    data = _run("bench_floors", tmp_path, repeats=1)
    _check_header(data)
    assert data["all_within_4.5_se"]
    metrics = {"linear_cka", "svcca", "pwcca", "neuronsim", "mixedsim"}
    assert {row["metric"] for row in data["agreement"]} == metrics
    assert data["ratio_with_over_without"] == pytest.approx(
        data["with_floors_s"] / data["without_floors_s"]
    )
    assert data["sampling_limit"]["fraction_of_gemm_limit"] > 0
    # the benchmark points LMSIM_CACHE at its own folder only while it runs
    assert os.environ["LMSIM_CACHE"] == str(tmp_path / "cache")
