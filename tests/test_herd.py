"""No herd (issue: many agents taking at once all race for the same best task).

A lone worker keeps the documented order; with other claimers in flight, claimers start at places
of their own among the equally ranked best candidates (queue.spread)."""

from __future__ import annotations

import json

from conftest import copy_repo


def _ready(repo) -> list[str]:
    return [t["slug"] for t in json.loads(repo.ok("ready", "--json"))["tasks"]]


def test_a_lone_worker_takes_in_the_documented_order(shared):
    for name in ("a", "b", "c", "d"):
        shared.ok("add", name)
    order = _ready(shared)
    taken = [json.loads(shared.ok("take", "--json"))["slug"] for _ in order]
    assert taken == order  # its own claims in flight do not make it spread


def test_claimers_spread_over_the_best_when_others_are_in_flight(shared, tmp_path):
    for n in range(8):
        shared.ok("add", f"t{n}")
    shared.ok("add", "low", "--priority", "5")
    shared.ok("take", env={"BACKLOG_CLAIMER": "first"})  # another claimer in flight
    picks = set()
    for n, name in enumerate(("ann", "bob", "cy", "dee", "eve", "fay")):
        copy = copy_repo(shared.path, tmp_path / f"c{n}")  # the same state for each claimer
        got = json.loads(copy.ok("take", "--json", env={"BACKLOG_CLAIMER": name}))["slug"]
        assert got != "low-plan"  # only among the equally ranked best
        picks.add(got)
    assert len(picks) >= 2, picks
