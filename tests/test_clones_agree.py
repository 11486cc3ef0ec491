"""Views that agree across real clones (SPEC §5 *Truthful views*, §8; issue 29 part 6).

A world of two clones (`a`, `b`), each with a second worktree (`a2`, `b2`, branched before any
claim, so they hold stale todo copies), of one bare repository that declares `remote: origin`
(maildir-shared), served over `file://` and through `git daemon` on 127.0.0.1. Every command is
the real `backlog` in a process of its own (tests/forkrun.py, as tests/test_remote.py runs it).

The scenario: alice (a) holds alpha and finished beta; bob (b) failed gamma; carol (b2) holds
delta; epsilon and zeta are free. Then, for every read verb in every worktree of both clones:

* the text answer and the `--json` answer say the same thing;
* facts that are the clone's are the same in every worktree of it (`status`'s counts and claims,
  `where`'s shared root), and facts that are every clone's are the same everywhere: what is
  ready and in which order (for one claimer), the state `list` gives a task, that a task another
  clone holds is marked so and never offered by `ready`;
* `ready --limit 1` is what `take` then claims, for the same claimer (no race).

Three of these found holes when they were written (status counting only this clone's claims and
settlements; `show` answering from a todo copy for a task another clone holds or settled); they
were strict xfails until the fixes landed, and now hold.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import GIT_IDENTITY, git
from test_remote import Daemon, World, make_world, run

SLUGS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
READER = "reader"  # the claimer every view is asked as (ready is per claimer)
TRANSPORTS = ("file", "daemon")
# One worker builds each world once (under xdist, a module fixture would be built per worker).
pytestmark = pytest.mark.xdist_group("clones-agree")


def daemon_available() -> bool:
    if shutil.which("git") is None:
        return False
    exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True).stdout.strip()
    return (Path(exec_path) / "git-daemon").exists()


SHOWN = ["alpha", "beta", "gamma", "delta", "epsilon"]  # one of each kind (zeta is epsilon's twin)
ASKED: list[tuple[str, ...]] = [("status",), ("ready",), ("ready", "--limit", "1"), ("list",), ("where",)] + [
    ("show", slug) for slug in SHOWN
]


@dataclass
class Agreed:
    world: World
    places: dict[str, Path]  # worktree name -> path: a, a2 (clone a), b, b2 (clone b)
    answers: dict[tuple[str, tuple[str, ...]], tuple[list[str], dict]] = field(default_factory=dict)

    def clone_of(self, name: str) -> str:
        return name[0]

    def ask_all(self) -> None:
        """Every read verb of ASKED in every worktree, text and --json, as READER: the worktrees
        at once (each in order, a thread each), every answer kept for the tests below."""

        def one_place(name: str) -> None:
            for args in ASKED:
                self.answers[(name, args)] = both(self.places[name], *args)

        with ThreadPoolExecutor(len(self.places)) as pool:
            list(pool.map(one_place, self.places))

    def said(self, name: str, *args: str) -> tuple[list[str], dict]:
        return self.answers[(name, args)]


def build(root: Path, url: str | None) -> World:
    w = make_world(root, SLUGS, url=url)
    for name in ("a", "b"):
        repo = w.clone(name)
        git(repo.path, "worktree", "add", "-q", "-b", f"{name}2", str(root / f"{name}2"))
    return w


def places_of(w: World) -> dict[str, Path]:
    return {name: w.root / name for name in ("a", "a2", "b", "b2")}


def ok_run(path: Path, *args: str, claimer: str = READER):
    proc = run(path, *args, claimer=claimer)
    assert proc.returncode == 0, f"{path.name}: backlog {' '.join(args)} -> {proc.returncode}: {proc.stderr}"
    assert "Traceback" not in proc.stderr
    return proc


def scenario(agreed: Agreed) -> None:
    p = agreed.places
    ok_run(p["a"], "take", "alpha", claimer="alice")
    ok_run(p["a"], "take", "beta", claimer="alice")
    ok_run(p["a"], "advance", "beta", claimer="alice")
    ok_run(p["b"], "take", "gamma", claimer="bob")
    ok_run(p["b"], "fail", "gamma", "gave up", claimer="bob")
    ok_run(p["b2"], "take", "delta", claimer="carol")


@contextlib.contextmanager
def world_of(transport: str, root: Path) -> Iterator[Agreed]:
    """The scenario's world at `root`, its remote served over `transport` (a `git daemon` on
    127.0.0.1, stopped afterwards, or file://)."""
    daemon = Daemon(root / "srv") if transport == "daemon" else None
    if daemon is not None:
        daemon.start()
    try:
        url = f"git://127.0.0.1:{daemon.port}/backlog.git" if daemon is not None else None
        state = Agreed(w := build(root, url), places_of(w))
        scenario(state)
        yield state
    finally:
        if daemon is not None:
            daemon.stop()


@pytest.fixture(scope="module", params=TRANSPORTS)
def agreed(request, tmp_path_factory):
    """The scenario's world, built once per transport for the read-only tests of this module."""
    if request.param == "daemon" and not daemon_available():
        pytest.skip("git daemon is not available")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "CONDUCTOR_WORKSPACE_NAME", "CMUX_WORKSPACE_ID"):
            mp.delenv(var, raising=False)
        for key, value in GIT_IDENTITY.items():
            mp.setenv(key, value)
        with world_of(request.param, tmp_path_factory.mktemp(f"agree-{request.param}") / "w") as state:
            state.ask_all()
            yield state


def both(path: Path, *args: str, claimer: str = READER) -> tuple[list[str], dict]:
    """The text answer's stdout lines and the `--json` answer of one read verb."""
    text = ok_run(path, *args, claimer=claimer)
    data = ok_run(path, "--json", *args, claimer=claimer)
    assert "unreachable" not in text.stderr + data.stderr, (args, text.stderr, data.stderr)
    return text.stdout.splitlines(), json.loads(data.stdout)


# -- text against JSON, verb by verb -----------------------------------------------------------
STATUS_COUNT = re.compile(r"^([a-z][a-z0-9-]*): (\d+)$")
STATUS_FLIGHT = re.compile(
    r"^  ([a-z][a-z0-9-]*)/(\S+)  (\S+) @ (\S+)  age (\S+) of (.+?)(  STALE)?(  ELSEWHERE: .*)?$"
)
STATUS_STALE = re.compile(r"^  \(not counted: (\d+) stale todo cop")


def status_agrees(lines: list[str], data: dict) -> None:
    counts = {m[1]: int(m[2]) for line in lines if (m := STATUS_COUNT.match(line))}
    assert counts == data["counts"], (lines, data)
    flights = [m.groups() for line in lines if (m := STATUS_FLIGHT.match(line))]
    assert [(f[0], f[1], f[2], f[3]) for f in flights] == [
        (i["pile"], i["slug"], i["claimer"] or "?", i["branch"] or "?") for i in data["in_flight"]
    ], (lines, data)
    assert [bool(f[6]) for f in flights] == [i["stale"] for i in data["in_flight"]]
    stale = [int(m[1]) for line in lines if (m := STATUS_STALE.match(line))]
    assert stale == ([len(data["stale"])] if data["stale"] else []), (lines, data)
    assert data["remote"] == "reached"


def ready_agrees(lines: list[str], data: dict) -> list[str]:
    rows = [line.split("  ") for line in lines]
    assert [(r[0], r[1]) for r in rows] == [(t["slug"], f"priority {t['priority']}") for t in data["tasks"]], (
        lines,
        data,
    )
    assert data["remote"] == "reached"
    return [t["slug"] for t in data["tasks"]]


LIST_STATES = {"ready": "ready", "in flight": "in flight elsewhere: ", "settled elsewhere": "settled elsewhere: "}


def list_agrees(lines: list[str], data: dict) -> dict[str, str]:
    assert len(lines) == len(data["tasks"]), (lines, data)
    for line, task in zip(lines, data["tasks"], strict=True):
        slug, priority, rest = line.split("  ", 2)
        assert (slug, priority) == (task["slug"], f"priority {task['priority']}"), (line, task)
        said = LIST_STATES.get(task["state"], task["state"])
        assert rest.startswith(said), (line, task)
        if "detail" in task:
            assert task["detail"] in rest, (line, task)
        assert task["ready"] == (task["state"] == "ready"), task
    assert data["remote"] == "reached"
    return {t["slug"]: t["state"] for t in data["tasks"]}


SHOW_HEAD = re.compile(r"^(\S+)  \(([a-z][a-z0-9-]*)\)$")
SHOW_CLAIM = re.compile(r"^claim: (\S+) @ (\S+) since (\S+)$")
SHOW_SETTLED = re.compile(r"^settled: (\S+) on branch (\S+) at (\S+)$")


def show_agrees(lines: list[str], data: dict) -> None:
    head = SHOW_HEAD.match(lines[0])
    assert head and head.groups() == (data["path"], data["pile"]), (lines, data)
    assert f"title: {data['title']}" in lines and f"priority: {data['frontmatter']['priority']}" in lines
    claims = [m.groups() for line in lines if (m := SHOW_CLAIM.match(line))]
    claim = data["claim"]
    assert claims == ([(claim["claimer"], claim["branch"], claim["ts"])] if claim else []), (lines, data)
    settled = [m.groups() for line in lines if (m := SHOW_SETTLED.match(line))]
    s = data.get("settled")
    assert settled == ([(s["state"], s["branch"], s["at"])] if s else []), (lines, data)
    logged = lines[lines.index("log:") + 1 :] if "log:" in lines else []
    assert len(logged) == len(data["log"]), (lines, data)


def where_agrees(lines: list[str], data: dict) -> None:
    assert lines[0] == f"backend: {data['backend']}" and lines[1] == f"shared root: {data['shared_root']}"
    assert lines[2:] == [f"{pile}: {path}" for pile, path in data["piles"].items()], (lines, data)


def test_text_and_json_agree_for_every_read_verb_in_every_worktree(agreed):
    for name in agreed.places:
        status_agrees(*agreed.said(name, "status"))
        ready_agrees(*agreed.said(name, "ready"))
        ready_agrees(*agreed.said(name, "ready", "--limit", "1"))
        list_agrees(*agreed.said(name, "list"))
        for slug in SHOWN:
            show_agrees(*agreed.said(name, "show", slug))
        where_agrees(*agreed.said(name, "where"))


# -- across worktrees and clones ---------------------------------------------------------------
def test_ready_is_the_same_everywhere_and_never_offers_what_another_clone_holds(agreed):
    offers = {name: ready_agrees(*agreed.said(name, "ready")) for name in agreed.places}
    assert all(order == ["epsilon", "zeta"] for order in offers.values()), offers
    firsts = {name: ready_agrees(*agreed.said(name, "ready", "--limit", "1")) for name in agreed.places}
    assert firsts == {name: order[:1] for name, order in offers.items()}, (firsts, offers)


def test_list_gives_every_task_one_state_everywhere(agreed):
    """Each worktree lists the todo copies it can see (a branch made before the claims still holds
    alpha and beta); whatever it lists, the state is the same everywhere, and in the same order."""
    seen = {name: list_agrees(*agreed.said(name, "list")) for name in agreed.places}
    expected = {
        "alpha": "in flight",
        "beta": "settled elsewhere",
        "gamma": "settled elsewhere",
        "delta": "in flight",
        "epsilon": "ready",
        "zeta": "ready",
    }
    for name, states in seen.items():
        assert states == {slug: expected[slug] for slug in states}, (name, states)
        assert list(states) == [s for s in sorted(expected) if s in states], (name, list(states))
        assert {"epsilon", "zeta"} <= states.keys(), (name, states)
    # what another clone holds names its holder; what this clone holds, its claim
    for name in agreed.places:
        rows = {t["slug"]: t for t in agreed.said(name, "list")[1]["tasks"]}
        if "alpha" in rows:
            assert "alice @ main" in rows["alpha"]["detail"], (name, rows["alpha"])
        if "delta" in rows:
            assert "carol @ b2" in rows["delta"]["detail"], (name, rows["delta"])


def test_status_is_the_clones_in_every_worktree_of_it(agreed):
    """Counts, in-flight claims and stale marks are the clone's: the same from both worktrees."""
    by_clone: dict[str, list[tuple]] = {}
    for name in agreed.places:
        _lines, data = agreed.said(name, "status")
        flying = [(i["slug"], i["pile"], i["claimer"], i["branch"]) for i in data["in_flight"]]
        by_clone.setdefault(agreed.clone_of(name), []).append((data["counts"], flying))
        assert sum(data["counts"].values()) + 0 <= len(SLUGS)
    for clone, answers in by_clone.items():
        assert all(a == answers[0] for a in answers), (clone, answers)
    assert by_clone["a"][0][1] == [("alpha", "doing", "alice", "main")]
    assert by_clone["b"][0][1] == [("delta", "doing", "carol", "b2")]
    assert by_clone["a"][0][0]["todo"] == by_clone["b"][0][0]["todo"] == 2  # epsilon, zeta


def test_status_counts_are_every_clones_each_task_once(agreed):
    expected = {"todo": 2, "doing": 2, "done": 1, "failed": 1}
    counts = {name: agreed.said(name, "status")[1]["counts"] for name in agreed.places}
    assert counts == {name: expected for name in agreed.places}, counts


def test_where_is_the_clones(agreed):
    """`where` is per clone: one shared root for both worktrees of a clone (the clone's common
    dir), another for the other clone; every in-flight pile lives in it."""
    roots: dict[str, set[str]] = {}
    for name, path in agreed.places.items():
        _lines, data = agreed.said(name, "where")
        common = git(path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()
        assert data["shared_root"] == os.path.join(common, "backlog"), (name, data)
        assert data["piles"]["doing"] == os.path.join(data["shared_root"], "doing"), (name, data)
        assert data["piles"]["todo"] == str(path / "backlog" / "todo"), (name, data)
        roots.setdefault(agreed.clone_of(name), set()).add(data["shared_root"])
    assert all(len(r) == 1 for r in roots.values()) and roots["a"] != roots["b"], roots


def show_everywhere(agreed: Agreed, slug: str) -> dict[str, dict]:
    return {name: agreed.said(name, "show", slug)[1] for name in agreed.places}


def test_show_of_a_task_held_in_this_clone_names_its_claim_from_every_worktree(agreed):
    for slug, clone, claimer, branch in (("alpha", "a", "alice", "main"), ("delta", "b", "carol", "b2")):
        for name, data in show_everywhere(agreed, slug).items():
            if agreed.clone_of(name) != clone:
                continue
            assert data["pile"] == "doing", (name, data)
            assert (data["claim"]["claimer"], data["claim"]["branch"]) == (claimer, branch), (name, data)


def test_show_of_a_task_settled_in_this_clone_says_so_from_every_worktree(agreed):
    for slug, clone, pile in (("beta", "a", "done"), ("gamma", "b", "failed")):
        for name, data in show_everywhere(agreed, slug).items():
            if agreed.clone_of(name) == clone:
                assert data["pile"] == pile, (name, data)


def test_show_of_a_task_another_clone_holds_names_that_clones_claim(agreed):
    for slug, claimer, branch in (("alpha", "alice", "main"), ("delta", "carol", "b2")):
        for name, data in show_everywhere(agreed, slug).items():
            assert data["pile"] == "doing", (name, slug, data)
            assert (data["claim"]["claimer"], data["claim"]["branch"]) == (claimer, branch), (name, data)


def test_show_of_a_task_another_clone_settled_says_how_it_left_flight(agreed):
    for slug, pile in (("beta", "done"), ("gamma", "failed")):
        for name, data in show_everywhere(agreed, slug).items():
            assert data["pile"] == pile, (name, slug, data)


# -- ready --limit 1 is what take claims -------------------------------------------------------
@pytest.fixture(params=TRANSPORTS)
def fresh(request, tmp_path):
    """The scenario's world, fresh (the take test changes it)."""
    if request.param == "daemon" and not daemon_available():
        pytest.skip("git daemon is not available")
    with world_of(request.param, tmp_path / "w") as state:
        yield state


def test_ready_limit_1_is_what_take_claims_in_every_worktree_and_clone(fresh):
    """Worktree after worktree, across both clones, each with claimers of its own: the same
    claimer's `ready --limit 1` names what its `take` then claims, until nothing is left; then
    both say so. Other clones' claims are in flight all along (the spread over the best)."""
    w = fresh.world
    for n in range(2):  # more tasks, of two priorities, from the intake branch of clone a
        ok_run(fresh.places["a"], "add", f"more{n}", "--priority", str(4 + n), claimer="alice")
    # no push and no pull: `add` pushed each to the remote's intake branch, every clone's queue (SPEC §8)
    turn = 0
    taken: list[str] = []
    while True:
        name = ("a", "b", "a2", "b2")[turn % 4]
        claimer = f"agent-{name}-{turn % 3}"
        path = fresh.places[name]
        first = [
            t["slug"]
            for t in json.loads(ok_run(path, "--json", "ready", "--limit", "1", claimer=claimer).stdout)["tasks"]
        ]
        got = ok_run(path, "--json", "take", claimer=claimer)
        slug = json.loads(got.stdout).get("slug")
        if not first:
            assert slug is None and "no available tasks" in got.stderr, (name, claimer, got.stdout, got.stderr)
            break
        assert slug == first[0], (name, claimer, first, slug, taken)
        taken.append(slug)
        turn += 1
        assert turn < 20
    assert sorted(taken) == sorted(["epsilon", "zeta", "more0-plan", "more1-plan"]), taken
    assert sorted(w.claims()) == sorted(["alpha", "delta", *taken])
    for name, path in fresh.places.items():  # and every view says nothing is left
        assert json.loads(ok_run(path, "--json", "ready").stdout)["tasks"] == [], name
