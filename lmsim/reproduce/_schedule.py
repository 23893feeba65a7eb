"""Pages side by side: which page may start when ``--jobs`` runs several at once.

lmsim's CPU work runs on one thread on a machine with at most two usable cores
(:mod:`lmsim._threads`), so a 2-core machine that executes one page at a time leaves a core
idle for the whole book. ``--jobs 2`` executes two pages at once; every page still runs on
its own thread count, so what a page computes does not depend on what runs beside it.

Two manifest keys order the pages (``notebooks/runs.yml``):

``barrier: true``
    The page starts once every page before it has finished, and no page after it starts
    before it has finished (the zoo: every later page reads its models).
``needs: [slug/name, ...]``
    The page starts once these pages have finished (LMD 02 reads 01's cached shards).

Among the pages free to start, the one with the longest expected chain starts first: its
committed page's wall time plus the longest chain of pages that need it, so long pages and
pages others wait for do not end up alone at the end.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

__all__ = [
    "chain_seconds",
    "check_schedule_entry",
    "expected_seconds",
    "run_pages",
    "schedule_of",
]


def check_schedule_entry(entry: Mapping[str, Any], where: str) -> None:
    """Raise ``ValueError`` naming ``where`` when an entry's ``barrier`` / ``needs`` is
    malformed."""
    barrier = entry.get("barrier", False)
    if not isinstance(barrier, bool):
        raise ValueError(f"{where}: `barrier` must be true or false, got {barrier!r}")
    needs = entry.get("needs", [])
    if not isinstance(needs, list) or not all(
        isinstance(key, str) and key.count("/") == 1 for key in needs
    ):
        raise ValueError(
            f"{where}: `needs` must be a list of pages written slug/name "
            f"(e.g. [zhang2022_lmd/01_decomposition]), got {needs!r}"
        )


def schedule_of(manifest: Mapping[str, Any]) -> dict[str, tuple[bool, tuple[str, ...]]]:
    """``{"slug/name": (barrier, needs)}`` for every page of ``manifest``.

    Raises
    ------
    ValueError
        When a page ``needs`` a page the manifest does not have.
    """
    schedule = {
        f"{chapter['slug']}/{entry['name']}": (
            bool(entry.get("barrier", False)),
            tuple(entry.get("needs", [])),
        )
        for chapter in manifest["chapters"]
        for entry in chapter["notebooks"]
    }
    for key, (_, needs) in schedule.items():
        unknown = [need for need in needs if need not in schedule]
        if unknown:
            raise ValueError(
                f"notebooks/runs.yml: page {key} needs {unknown}, which no chapter has; "
                f"write them as slug/name of existing pages"
            )
    return schedule


def expected_seconds(page: Path) -> float:
    """The wall time recorded in an executed page's provenance; 0 when there is none."""
    try:
        metadata = json.loads(Path(page).read_text(encoding="utf-8")).get("metadata", {})
        return float(metadata.get("lmsim", {}).get("wall_time_s", 0.0))
    except (OSError, ValueError, AttributeError, TypeError):
        return 0.0


def _free(
    position: int,
    keys: Sequence[str],
    schedule: Mapping[str, tuple[bool, tuple[str, ...]]],
    finished: set[str],
    running: set[str],
) -> bool:
    """Whether the page at ``position`` of ``keys`` may start now."""
    key = keys[position]
    barrier, needs = schedule.get(key, (False, ()))
    earlier = keys[:position]
    if barrier and (running or not set(earlier) <= finished):
        return False
    if any(schedule.get(other, (False, ()))[0] and other not in finished for other in earlier):
        return False
    return all(need in finished or need not in keys for need in needs)


def chain_seconds(
    keys: Sequence[str],
    schedule: Mapping[str, tuple[bool, tuple[str, ...]]],
    expected: Mapping[str, float],
) -> dict[str, float]:
    """Each page's expected seconds plus the longest chain of pages among ``keys`` that
    (transitively) need it: the critical path that starts with the page."""
    users: dict[str, list[str]] = {key: [] for key in keys}
    for key in keys:
        for need in schedule.get(key, (False, ()))[1]:
            if need in users:
                users[need].append(key)
    chain: dict[str, float] = {}

    def length(key: str, seen: frozenset) -> float:
        if key not in chain:
            later = [length(user, seen | {key}) for user in users[key] if user not in seen]
            chain[key] = expected.get(key, 0.0) + max(later, default=0.0)
        return chain[key]

    for key in keys:
        length(key, frozenset())
    return chain


def run_pages(
    keys: Sequence[str],
    jobs: int,
    execute: Callable[[int], Any],
    schedule: Mapping[str, tuple[bool, tuple[str, ...]]],
    expected: Mapping[str, float] | None = None,
) -> list[Any]:
    """Call ``execute(i)`` for every page ``keys[i]``, at most ``jobs`` at a time.

    Parameters
    ----------
    keys : sequence of str
        The pages, ``slug/name``, in the manifest's order.
    jobs : int
        How many pages run at once (1: one after the other, in order).
    execute : callable
        ``execute(i)`` runs page ``i`` and returns its result; it must not raise.
    schedule : mapping
        :func:`schedule_of`'s ``(barrier, needs)`` per page; a missing page has neither.
    expected : mapping, optional
        Expected seconds per page: among the free pages the one with the longest chain
        (:func:`chain_seconds`) starts first.

    Returns
    -------
    list
        The results, in the order of ``keys``.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    # One job: the manifest's order; several: the longest chain first.
    expected = chain_seconds(keys, schedule, expected or {}) if jobs > 1 else {}
    results: list[Any] = [None] * len(keys)
    pending = list(range(len(keys)))
    finished: set[str] = set()
    running: dict[Future, int] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        while pending or running:
            while len(running) < jobs:
                names = {keys[i] for i in running.values()}
                free = [i for i in pending if _free(i, keys, schedule, finished, names)]
                if not free:
                    break
                # The longest first; ties in the manifest's order.
                start = max(free, key=lambda i: (expected.get(keys[i], 0.0), -i))
                pending.remove(start)
                running[pool.submit(execute, start)] = start
                if schedule.get(keys[start], (False, ()))[0]:
                    break  # a barrier runs alone
            if not running:  # nothing can start: a cycle of needs
                stuck = [keys[i] for i in pending]
                raise ValueError(f"pages {stuck} wait on each other through `needs`")
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                index = running.pop(future)
                results[index] = future.result()
                finished.add(keys[index])
    return results
