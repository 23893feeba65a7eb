"""``--jobs``: pages side by side, in an order that respects ``barrier`` and ``needs``."""

from __future__ import annotations

import json
import threading

import pytest

from lmsim.reproduce._cli import _jobs
from lmsim.reproduce._schedule import (
    chain_seconds,
    check_schedule_entry,
    expected_seconds,
    run_pages,
    schedule_of,
)


class Recorder:
    """``execute(i)`` that logs starts and ends and tracks how many run at once."""

    def __init__(self, keys, pause=None):
        self.keys, self.events, self.lock = keys, [], threading.Lock()
        self.active = self.most = 0
        self.pause = pause or {}

    def __call__(self, i):
        with self.lock:
            self.events.append(("start", self.keys[i]))
            self.active += 1
            self.most = max(self.most, self.active)
        if self.keys[i] in self.pause:
            self.pause[self.keys[i]].wait(timeout=10)
        with self.lock:
            self.active -= 1
            self.events.append(("end", self.keys[i]))
        return f"result {self.keys[i]}"

    def position(self, kind, key):
        return self.events.index((kind, key))


KEYS = ["zoo/01", "a/01", "a/02", "b/01", "c/01"]


def test_one_job_runs_in_order_and_returns_results_in_order():
    rec = Recorder(KEYS)
    results = run_pages(KEYS, 1, rec, {}, {"c/01": 99.0})
    assert results == [f"result {key}" for key in KEYS]
    assert [key for kind, key in rec.events if kind == "start"] == KEYS
    assert rec.most == 1


def test_two_jobs_really_run_two_pages_at_once():
    both = threading.Barrier(2, timeout=10)
    keys = ["a/01", "b/01"]

    def execute(i):
        both.wait()  # raises BrokenBarrierError unless the other page runs meanwhile
        return keys[i]

    assert run_pages(keys, 2, execute, {}) == keys


def test_a_barrier_runs_alone_after_everything_before_it():
    schedule = schedule_of(
        {
            "chapters": [
                {"slug": "pre", "notebooks": [{"name": "01"}]},
                {"slug": "zoo", "notebooks": [{"name": "01", "barrier": True}]},
                {"slug": "a", "notebooks": [{"name": "01"}, {"name": "02"}]},
            ]
        }
    )
    keys = ["pre/01", "zoo/01", "a/01", "a/02"]
    rec = Recorder(keys)
    run_pages(keys, 3, rec, schedule)
    assert rec.position("end", "pre/01") < rec.position("start", "zoo/01")
    for later in ("a/01", "a/02"):
        assert rec.position("end", "zoo/01") < rec.position("start", later)


def test_needs_wait_for_the_page_they_read_and_the_longest_free_page_starts_first():
    schedule = {"a/02": (False, ("a/01",))}
    keys = ["a/01", "a/02", "b/01", "c/01"]
    rec = Recorder(keys)
    expected = {"a/02": 500.0, "c/01": 100.0, "b/01": 10.0, "a/01": 1.0}
    run_pages(keys, 2, rec, schedule, expected)
    starts = [key for kind, key in rec.events if kind == "start"]
    # a/02 is the longest but needs a/01, which therefore goes first; then c/01.
    assert starts[:2] == ["a/01", "c/01"]
    assert rec.position("end", "a/01") < rec.position("start", "a/02")
    assert rec.most <= 2


def test_a_cycle_of_needs_is_named():
    schedule = {"a/01": (False, ("b/01",)), "b/01": (False, ("a/01",))}
    with pytest.raises(ValueError, match="wait on each other"):
        run_pages(["a/01", "b/01"], 2, lambda i: i, schedule)


def test_a_need_outside_the_selection_does_not_block():
    assert run_pages(["a/02"], 2, lambda i: "ran", {"a/02": (False, ("a/01",))}) == ["ran"]


@pytest.mark.parametrize(
    "entry, match",
    [
        ({"barrier": "yes"}, "`barrier` must be true or false"),
        ({"needs": "a/01"}, "`needs` must be a list"),
        ({"needs": ["a01"]}, "slug/name"),
    ],
)
def test_malformed_schedule_keys_are_named(entry, match):
    with pytest.raises(ValueError, match=match):
        check_schedule_entry(entry, "runs.yml: notebook x/01")


def test_a_need_of_a_missing_page_is_named():
    manifest = {"chapters": [{"slug": "a", "notebooks": [{"name": "02", "needs": ["a/01"]}]}]}
    with pytest.raises(ValueError, match=r"a/02 needs \['a/01'\]"):
        schedule_of(manifest)


def test_expected_seconds_reads_the_provenance_and_is_zero_without_one(tmp_path):
    page = tmp_path / "p.ipynb"
    page.write_text(json.dumps({"metadata": {"lmsim": {"wall_time_s": 12.5}}, "cells": []}))
    assert expected_seconds(page) == 12.5
    (tmp_path / "bad.ipynb").write_text("not json")
    assert expected_seconds(tmp_path / "bad.ipynb") == 0.0
    assert expected_seconds(tmp_path / "missing.ipynb") == 0.0


def test_jobs_option(monkeypatch):
    assert _jobs("3", 10) == 3
    assert _jobs("3", 2) == 2  # never more workers than pages
    monkeypatch.setattr("lmsim._threads.default_threads", lambda: 1)
    assert _jobs("auto", 10) >= 1
    for bad in ("0", "-1", "two"):
        with pytest.raises(ValueError, match="positive number of pages, or auto"):
            _jobs(bad, 5)


def test_the_book_manifest_schedule_is_valid():
    from lmsim.reproduce._manifest import MANIFEST, find_root, load_manifest

    schedule = schedule_of(load_manifest(find_root() / MANIFEST))
    assert schedule["lmsim_zoo/01_train_zoo"][0]  # every later page reads the zoo
    assert "zhang2022_lmd/01_decomposition" in schedule["zhang2022_lmd/02_beyond_the_paper"][1]


def test_a_page_others_wait_for_counts_their_time_too():
    keys = ["lmd/01", "lmd/02", "wu/01", "red/02"]
    schedule = {"lmd/02": (False, ("lmd/01",))}
    expected = {"lmd/01": 14.0, "lmd/02": 8.0, "wu/01": 20.0, "red/02": 21.0}
    chain = chain_seconds(keys, schedule, expected)
    assert chain == {"lmd/01": 22.0, "lmd/02": 8.0, "wu/01": 20.0, "red/02": 21.0}
    rec = Recorder(keys)
    run_pages(keys, 2, rec, schedule, expected)
    # lmd/01 alone is shorter than wu/01 and red/02, but with lmd/02 after it the longest.
    assert [key for kind, key in rec.events if kind == "start"][:2] == ["lmd/01", "red/02"]


def test_chain_seconds_survives_a_cycle():
    schedule = {"a/01": (False, ("b/01",)), "b/01": (False, ("a/01",))}
    chain = chain_seconds(["a/01", "b/01"], schedule, {"a/01": 1.0, "b/01": 2.0})
    assert chain["a/01"] >= 1.0 and chain["b/01"] >= 2.0
