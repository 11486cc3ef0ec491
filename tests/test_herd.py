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


def test_a_lost_race_looks_again_instead_of_losing_to_each_task_taken_meanwhile(shared, monkeypatch):
    """Auto-pick ranked t0..t7, then another claimer took t0..t3 before it claimed: the loss of t0
    makes it look at the in-flight piles once, so it claims t4 next (one lost race, not four)."""
    from maildir_backlog import state
    from maildir_backlog.commands import claim
    from maildir_backlog.context import open_context

    for n in range(8):
        shared.ok("add", f"t{n}")
    real = state.Model.picks

    def ranked_then_overtaken(model, skipped):
        order = list(real(model, skipped))
        for slug in order[:4]:
            shared.ok("take", slug, env={"BACKLOG_CLAIMER": "other"})
        return iter(order)

    monkeypatch.setattr(state.Model, "picks", ranked_then_overtaken)
    monkeypatch.setenv("BACKLOG_CLAIMER", "me")
    monkeypatch.setenv("BACKLOG_DEBUG", "1")
    order = [t["slug"] for t in json.loads(shared.ok("ready", "--json"))["tasks"]]
    result = claim.take(open_context(shared.path), None)
    assert result.data["slug"] == order[4]
    assert [line.split(": ")[1] for line in result.stderr] == [f"lost {order[0]}"]


def test_ready_shows_what_this_claimers_take_would_claim(shared):
    """SPEC §5 ready: what *this claimer's* auto-pick would try, in that order, so that
    `ready --limit 1` is what `take` claims when no race intervenes, the spread over equally
    ranked tasks included (another claimer holds a task: the herd spread is on)."""
    for n in range(6):
        shared.ok("add", f"t{n}")
    shared.ok("take", env={"BACKLOG_CLAIMER": "someone-else"})
    firsts = set()
    for n in range(8):
        me = {"BACKLOG_CLAIMER": f"agent-{n}"}
        first = json.loads(shared.ok("--json", "ready", "--limit", "1", env=me))["tasks"][0]["slug"]
        whole = [t["slug"] for t in json.loads(shared.ok("--json", "ready", env=me))["tasks"]]
        taken = json.loads(shared.ok("--json", "take", env=me))["slug"]
        assert taken == first == whole[0], (n, taken, first, whole)
        firsts.add(first)
        shared.ok("release", taken, env=me)
    assert len(firsts) > 1  # claimers start at places of their own: the spread is on
