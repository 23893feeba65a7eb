"""``benchmarks/_common.py``: the atomic JSON writer every benchmark uses."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _common import write_result  # noqa: E402


def test_write_result_round_trips_with_header_first(tmp_path):
    out = write_result(
        tmp_path / "sub" / "r.json",
        {"best_s": np.float64(1.5), "sizes": np.arange(3), "threads": 2},
        header={"threads": 1, "load_average_before": [0.1, 0.2, 0.3]},
    )
    text = out.read_text()
    assert text.endswith("\n")
    data = json.loads(text)
    assert list(data)[:2] == ["threads", "load_average_before"]
    assert data == {
        "threads": 2,  # the payload wins on a clash
        "load_average_before": [0.1, 0.2, 0.3],
        "best_s": 1.5,
        "sizes": [0, 1, 2],
    }
    assert [p.name for p in out.parent.iterdir()] == ["r.json"]  # no temporary left


def test_write_result_keeps_the_old_file_when_serialising_fails(tmp_path):
    path = write_result(tmp_path / "r.json", {"a": 1})

    class Boom:
        def __str__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write_result(path, {"a": Boom()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
