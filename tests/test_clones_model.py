"""A generative checker across real clones (issue 29 part 6; SPEC §5 *Truthful views*, §7.1, §8).

Two clones (`c1`, `c2`) of one bare repository that declares `remote: origin` (maildir-shared),
over `file://`; `c1` has a second worktree `c1w` (branch c1w). Hypothesis draws interleavings of
add / take / advance / fail / retry / rename / release in the three worktrees, each run as the
worktree's own agent (`agent-<worktree>`), plus `sync` (a clone fetches, merges origin/main and
pushes it, as people do). Verbs run in-process (one `open_context` per call, what one CLI call
does); the clones meet only through the remote, as separate machines do.

Before every `take`, the same claimer's `ready --limit 1` is asked: the take must claim that slug,
or, when ready was empty, say `no available tasks` (SPEC §5: `ready --limit 1` is what `take`
claims when no race intervenes; nothing races here).

The model keeps what each exit 0 says became of each task (todo, in flight in a clone, done or
failed in a worktree); after every step:

  [one-claimer]  a slug is in flight in at most one place across all clones: the clones' shared
                 piles and the remote's `claims/` refs name the same claims, each this clone's
                 own (its `refs/backlog-mine/claims/<slug>` is the remote's);
  [reclaim]      take never claims what the model says is in flight or settled;
  [lost]         every added task is in exactly the state the model says, and there: in flight
                 in that clone only; done/failed in that worktree's pile and in flight nowhere;
                 todo in flight nowhere and in some todo/ a clone can reach (a worktree's, a
                 clone's intake branch, the remote's main);
  [ready-take]   ready --limit 1 names what take then claims (or both say nothing is left);
  [counts]       `status --json` in every worktree: doing = the tasks in flight in this clone, and
                 in another clone when this worktree can see the task (every clone's count, SPEC
                 v4), todo = the tasks the model says are todo that this worktree, its clone's
                 intake branch or the remote's holds (a task once);
  [show]         `show SLUG` agrees with the counts where a worktree's settled copy could mislead
                 it: a task the model says is todo, and this worktree can see, is shown as todo
                 (retried since, here or on another clone); one failed or done in this worktree,
                 so (a stale todo/ copy a merge brought beside it gives way);
  [exit]         no exit 2 (valid input only), 3 (no race) or 4 (the remote is local), and no
                 exception but BacklogError;
  [verbs]        what the spec says succeeds does (session 18): `advance`, `fail` and `release`
                 of a task by the worktree that claimed it, and `retry` of a failed task from any
                 worktree of any clone (SPEC §5 retry, §8).

Profiles: quick (derandomized, a dozen short sequences) in the default run; `-m stress` (or
BACKLOG_CLONES_EXAMPLES=N) runs a long search. Every shrunk failure is kept below as a plain test
replaying its sequence.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test
from test_model import _git

from maildir_backlog.commands import add, claim, read, rename, settle, setup
from maildir_backlog.context import open_context
from maildir_backlog.errors import BacklogError
from maildir_backlog.git import GitError

CLONES = ("c1", "c2")
WORKTREES = ("c1", "c1w", "c2")  # worktree -> its clone: its first two letters
SEEDS = ("s0-plan", "s1-plan", "s2-plan")
NAMES = {"c1": ("x0", "x1"), "c1w": ("x2", "x3"), "c2": ("y0", "y1")}  # add: names of each worktree's own
TARGETS = ("mine", "mine", "any-flying", "failed", *SEEDS, "x0-plan", "y0-plan")
VERBS = ("take", "take", "take", "advance", "advance", "fail", "retry", "release", "rename", "add", "sync")
IN_FLIGHT = ("doing",)


def clone_of(wt: str) -> str:
    return wt[:2]


class Violation(AssertionError):
    pass


# -- the world: built once, copied per example -------------------------------------------------
_ROOT: list[Path] = []
_TEMPLATE: list[Path] = []


def _root() -> Path:
    if not _ROOT:
        _ROOT.append(Path(tempfile.mkdtemp(prefix="backlog-clones-")))
        atexit.register(shutil.rmtree, _ROOT[0], True)
    return _ROOT[0]


def _build(base: Path) -> None:
    seed = base / "seed"
    seed.mkdir(parents=True)
    _git(seed, "init", "-q", "-b", "main")
    (seed / "README.md").write_text("# clones\n")
    _git(seed, "add", "README.md")
    _git(seed, "commit", "-q", "-m", "init")
    setup.setup(seed, "maildir-shared", "todo doing done")
    agents = seed / "backlog" / "AGENTS.md"
    agents.write_text(agents.read_text().replace("\nmaildir-shared\n", "\nmaildir-shared\nremote: origin\n", 1))
    for n, slug in enumerate(SEEDS):  # two priorities: ties and an order
        (seed / "backlog" / "todo" / f"{slug}.md").write_text(f"---\npriority: {4 + n % 2}\n---\n\n# {slug}\n\n---\n\n")
    _git(seed, "add", "-A", "backlog")
    _git(seed, "commit", "-q", "-m", "seed")
    _git(base, "init", "-q", "--bare", "-b", "main", str(base / "srv.git"))
    _git(seed, "push", "-q", str(base / "srv.git"), "main")
    shutil.rmtree(seed)
    for name in CLONES:
        _git(base, "clone", "-q", (base / "srv.git").as_uri(), str(base / name))
    _git(base / "c1", "worktree", "add", "-q", "-b", "c1w", str(base / "c1w"))


def fresh_world() -> Path:
    """A copy of the template, relocated: the clones' remote URL and c1w's worktree links hold
    absolute paths (the in-flight symlinks are made by the first verb's self-heal)."""
    if not _TEMPLATE:
        _TEMPLATE.append(_root() / "template")
        _build(_TEMPLATE[0])
    base = Path(tempfile.mkdtemp(dir=_root(), prefix="ex-"))
    shutil.copytree(_TEMPLATE[0], base, symlinks=True, dirs_exist_ok=True)
    for name in CLONES:
        _git(base / name, "config", "remote.origin.url", (base / "srv.git").as_uri())
    common = base / "c1" / ".git"
    (base / "c1w" / ".git").write_text(f"gitdir: {common / 'worktrees' / 'c1w'}\n")
    (common / "worktrees" / "c1w" / "gitdir").write_text(f"{base / 'c1w' / '.git'}\n")
    return base


# -- the machine -------------------------------------------------------------------------------
# Known open holes, counted (not failed) by the search (none now: the exit-3 refusals of a task
# another clone holds or completed are closed, and their regressions below replay strictly).
KNOWN: Counter[str] = Counter()


class ClonesModel(RuleBasedStateMachine):
    strict = False

    def __init__(self) -> None:
        super().__init__()
        self.base = fresh_world()
        self.paths = {wt: self.base / wt for wt in WORKTREES}
        self.server = self.base / "srv.git"
        # slug -> ("todo", None) | ("flight", clone) | ("done", worktree) | ("failed", worktree)
        self.expected: dict[str, tuple[str, str | None]] = {slug: ("todo", None) for slug in SEEDS}
        self.trace: list[str] = []

    def violate(self, cls: str, message: str) -> None:
        raise Violation(f"[{cls}] {message}\n  steps: {self.trace}")

    # -- running a verb --
    def call(self, wt: str, fn: Callable[..., Any], *args: Any) -> tuple[int, Any]:
        os.environ["BACKLOG_CLAIMER"] = f"agent-{wt}"
        try:
            result = fn(open_context(self.paths[wt]), *args)
            code, out = result.code, result
        except BacklogError as exc:
            code, out = exc.code, exc
        except GitError as exc:
            self.violate("exit", f"{fn.__qualname__}{args} in {wt}: raw git failure: {exc.message}")
        except Exception:
            self.violate("exit", f"{fn.__qualname__}{args} in {wt} raised:\n{traceback.format_exc()}")
        if code in (2, 3, 4):
            self.violate("exit", f"{fn.__qualname__}{args} in {wt}: exit {code}: {out}")
        return code, out

    # -- what is there --
    def flying(self) -> dict[str, set[str]]:
        """slug -> the clones whose shared in-flight piles hold it."""
        found: dict[str, set[str]] = {}
        for clone in CLONES:
            for pile in IN_FLIGHT:
                directory = self.base / clone / ".git" / "backlog" / pile
                for entry in directory.glob("*.md") if directory.is_dir() else []:
                    found.setdefault(entry.stem, set()).add(clone)
        return found

    def refs(self, cwd: Path, prefix: str) -> dict[str, str]:
        out = _git(cwd, "for-each-ref", "--format=%(objectname) %(refname)", prefix).stdout
        return {name.removeprefix(prefix): sha for sha, name in (line.split(" ", 1) for line in out.splitlines())}

    def tree_todo(self, cwd: Path, rev: str) -> set[str]:
        out = _git(cwd, "ls-tree", "--name-only", f"{rev}:backlog/todo", check=False).stdout
        return {name.removesuffix(".md") for name in out.split() if name.endswith(".md")}

    def checkout(self, wt: str, pile: str) -> set[str]:
        directory = self.paths[wt] / "backlog" / pile
        return {p.stem for p in directory.glob("*.md")} if directory.is_dir() else set()

    def check(self) -> None:
        flying = self.flying()
        settled = self.refs(self.server, "refs/backlog/settled/")
        claims = {  # live claims: one equal to the task's settled ref is its tombstone (SPEC §8)
            slug: sha
            for slug, sha in self.refs(self.server, "refs/backlog/claims/").items()
            if settled.get(slug) != sha
        }
        for slug, clones in flying.items():
            if len(clones) > 1:
                self.violate("one-claimer", f"{slug} is in flight in {sorted(clones)}")
        if set(claims) != set(flying):
            self.violate("one-claimer", f"the remote claims {sorted(claims)}, the clones hold {sorted(flying)}")
        for clone in CLONES:
            mine = self.refs(self.base / clone, "refs/backlog-mine/claims/")
            for slug, holders in flying.items():
                if clone in holders and mine.get(slug) != claims.get(slug):
                    self.violate("one-claimer", f"{clone} holds {slug}; the remote's claim is not its own")
        reachable = set().union(*(self.checkout(wt, "todo") for wt in WORKTREES))
        reachable |= self.tree_todo(self.server, "main")
        for clone in CLONES:
            reachable |= self.tree_todo(self.base / clone, "main")
        for slug, (what, where) in self.expected.items():
            here = flying.get(slug, set())
            if what == "flight" and here != {where}:
                self.violate("lost", f"{slug} should be in flight in {where}; in flight in {sorted(here)}")
            if what != "flight" and here:
                self.violate("lost", f"{slug} should be {what} ({where}); in flight in {sorted(here)}")
            if what in ("done", "failed") and slug not in self.checkout(where, what):  # type: ignore[arg-type]
                self.violate("lost", f"{slug} should be in {where}'s {what}/; it is not")
            if what == "todo" and slug not in reachable:
                self.violate("lost", f"{slug} should be todo; no todo/ a clone can reach holds it")
        unknown = set(flying) - set(self.expected)
        if unknown:
            self.violate("lost", f"in flight but never added: {sorted(unknown)}")
        self.counts(flying)
        self.shows()

    def shows(self) -> None:
        for wt in WORKTREES:
            clone = clone_of(wt)
            visible = self.checkout(wt, "todo") | self.tree_todo(self.base / clone, "main")
            visible |= self.tree_todo(self.server, "main")
            for slug in sorted(self.checkout(wt, "failed") | self.checkout(wt, "done")):
                what, where = self.expected.get(slug, ("?", None))
                if what == "todo" and slug in visible and slug in self.checkout(wt, "failed"):
                    want = "todo"
                elif what in ("failed", "done") and where == wt:
                    want = what
                else:
                    continue
                code, out = self.call(wt, read.show, slug)
                pile = out.data.get("pile") if code == 0 else f"exit {code}: {out}"
                if pile != want:
                    self.violate("show", f"show {slug} in {wt} says {pile}; the task is {what} ({where})")

    def counts(self, flying: dict[str, set[str]]) -> None:
        for wt in WORKTREES:
            code, out = self.call(wt, read.status)
            if code:
                self.violate("counts", f"status in {wt}: exit {code}: {out}")
            counts = out.data["counts"]
            clone = clone_of(wt)
            # SPEC v4: the queue is the remote's intake branch too, and counts are every clone's
            visible = self.checkout(wt, "todo") | self.tree_todo(self.base / clone, "main")
            visible |= self.tree_todo(self.server, "main")
            doing = sum(1 for slug, clones in flying.items() if clones and (clone in clones or slug in visible))
            todo = sum(1 for slug, (what, _) in self.expected.items() if what == "todo" and slug in visible)
            if (counts["doing"], counts["todo"]) != (doing, todo):
                self.violate(
                    "counts",
                    f"status in {wt} counts doing {counts['doing']}, todo {counts['todo']}; there are {doing} in"
                    f" flight in {clone} and {todo} todo it can see ({sorted(visible)})",
                )

    # -- targets --
    def target(self, wt: str, which: str) -> str:
        clone = clone_of(wt)
        if which in ("mine", "any-flying"):
            held = sorted(s for s, (what, where) in self.expected.items() if what == "flight")
            if which == "mine":
                held = [s for s in held if self.expected[s][1] == clone and self.holder.get(s) == wt] or held
            return held[0] if held else SEEDS[0]
        if which == "failed":
            failed = sorted(s for s, (what, _) in self.expected.items() if what == "failed")
            return failed[0] if failed else SEEDS[1]
        return which

    # -- steps --
    @initialize()
    def start(self) -> None:
        self.holder: dict[str, str] = {}
        for wt in WORKTREES:
            open_context(self.paths[wt])  # the in-flight symlinks (the post-checkout hook's job)
        self.check()

    @rule(verb=st.sampled_from(VERBS), wt=st.sampled_from(WORKTREES), which=st.sampled_from(TARGETS))
    def act(self, verb: str, wt: str, which: str) -> None:
        self.step(verb, wt, which)

    def step(self, verb: str, wt: str, which: str) -> None:
        self.trace.append(f"{verb} {wt} {which}")
        getattr(self, f"do_{verb}")(wt, which)
        self.check()

    def do_take(self, wt: str, _which: str) -> None:
        code, offered = self.call(wt, read.ready, 1)
        first = [t["slug"] for t in offered.data["tasks"]] if code == 0 else None
        code, out = self.call(wt, claim.take, None)
        if code:
            self.violate("ready-take", f"take in {wt}: exit {code} ({out}) after ready offered {first}")
        slug = out.data.get("slug")
        if first is not None and (first[:1] != ([slug] if slug else [])):
            self.violate("ready-take", f"in {wt}, ready --limit 1 said {first}, take claimed {slug}")
        if slug is None:
            if "no available tasks" not in out.stderr:
                self.violate("ready-take", f"take in {wt} claimed nothing and said {out.stderr}")
            return
        if self.expected.get(slug, ("?", None))[0] != "todo":
            self.violate("reclaim", f"take in {wt} claimed {slug}, which is {self.expected.get(slug)}")
        self.expected[slug] = ("flight", clone_of(wt))
        self.holder[slug] = wt

    def do_advance(self, wt: str, which: str) -> None:
        slug = self.target(wt, which)
        code, out = self.call(wt, claim.advance, slug)
        if code == 0:
            if self.expected.get(slug, ("?", None))[0] == "todo":
                self.holder[slug] = wt  # advance from todo/ is a claim (SPEC §5): this worktree holds it now
            self.expected[slug] = ("done", wt) if out.data.get("pile") == "done" else ("flight", clone_of(wt))
        else:
            self.must_hold(wt, slug, "advance", code, out)

    def do_fail(self, wt: str, which: str) -> None:
        slug = self.target(wt, which)
        code, out = self.call(wt, settle.fail, slug, "gave up")
        if code == 0:
            self.expected[slug] = ("failed", wt)
        else:
            self.must_hold(wt, slug, "fail", code, out)

    def do_release(self, wt: str, which: str) -> None:
        slug = self.target(wt, which)
        code, out = self.call(wt, settle.release, slug, "back")
        if code == 0:
            self.expected[slug] = ("todo", None)
        else:
            self.must_hold(wt, slug, "release", code, out)

    def must_hold(self, wt: str, slug: str, verb: str, code: int, out: Any) -> None:
        """`[verbs]`: the worktree that claimed a task in flight may advance, fail or release it."""
        if self.expected.get(slug, ("?", None)) == ("flight", clone_of(wt)) and self.holder.get(slug) == wt:
            self.violate("verbs", f"{verb} {slug} in {wt}, which claimed it: exit {code}: {out}")

    def do_retry(self, wt: str, which: str) -> None:
        slug = self.target(wt, "failed" if which in ("mine", "any-flying") else which)
        code, out = self.call(wt, settle.retry, slug, "again")
        if code == 0:
            self.expected[slug] = ("todo", None)
        elif self.expected.get(slug, ("?", None))[0] == "failed":
            self.violate("verbs", f"retry {slug} in {wt}, a failed task: exit {code}: {out}")

    def do_rename(self, wt: str, which: str) -> None:
        slug = self.target(wt, which)
        new = f"{slug}-r{len(self.trace)}"
        if self.call(wt, rename.rename, slug, new)[0] == 0:
            self.expected[new] = self.expected.pop(slug)
            if slug in self.holder:
                self.holder[new] = self.holder.pop(slug)

    def do_add(self, wt: str, which: str) -> None:
        names = [n for n in NAMES[wt] if f"{n}-plan" not in self.expected]
        if not names:
            return
        code, out = self.call(wt, add.add, names[0])
        if code == 0:
            self.expected[f"{names[0]}-plan"] = ("todo", None)

    def do_sync(self, wt: str, _which: str) -> None:
        """The clone's main: fetch, merge origin/main (a conflict is aborted: the user's problem),
        push. From c1w, the worktree merges main into its branch instead."""
        path = self.paths[wt]
        if wt == "c1w":
            if _git(path, "merge", "--no-edit", "-q", "main", check=False).returncode:
                _git(path, "merge", "--abort", check=False)
            return
        _git(path, "fetch", "-q", "origin")
        if _git(path, "merge", "--no-edit", "-q", "origin/main", check=False).returncode:
            _git(path, "merge", "--abort", check=False)
            return
        _git(path, "push", "-q", "origin", "main", check=False)

    def teardown(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


def replay(steps: list[str]) -> None:
    """A sequence as the checker printed it (`verb worktree target` each), invariants checked
    after every step, known holes included."""
    machine = ClonesModel()
    machine.strict = True
    try:
        machine.start()
        for line in steps:
            machine.step(*line.split())
    finally:
        machine.teardown()


# -- profiles ----------------------------------------------------------------------------------
LONG = int(os.environ.get("BACKLOG_CLONES_EXAMPLES", "0") or 0)
QUICK = settings(
    max_examples=8,
    stateful_step_count=10,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
STRESS = settings(QUICK, max_examples=LONG or 300, stateful_step_count=40, derandomize=False)


def test_clones_model():
    start = time.monotonic()
    run_state_machine_as_test(ClonesModel, settings=QUICK)
    print(f"clones model: {time.monotonic() - start:.1f} s; known holes met: {dict(KNOWN)}")


@pytest.mark.stress
@pytest.mark.skipif(not LONG, reason="the long search runs when asked: BACKLOG_CLONES_EXAMPLES=N")
def test_clones_model_long():
    """The long search: `BACKLOG_CLONES_EXAMPLES=300 pytest -m stress tests/test_clones_model.py`."""
    run_state_machine_as_test(ClonesModel, settings=STRESS)


# -- regressions: sequences the checker found, replayed as printed ------------------------------
def test_the_template_world_starts_agreeing():
    replay([])


def test_regression_advance_of_a_task_another_clone_holds_was_exit_3():
    """Found by the quick profile (its first example, shrunk): c1's agent takes s0-plan; c2's
    agent runs `advance s0-plan` (its own todo copy): exit 3, a race lost in the act, though the
    claim was there before it looked and nothing raced."""
    replay(["take c1 mine", "advance c2 mine"])


def test_regression_advance_from_todo_makes_its_worktree_the_holder():
    """A fault of the machine's `[verbs]` bookkeeping, found by the long profile in session 19
    (200 examples, 32 steps; this is its core): c1w claims s0-plan and releases it; c1's
    `advance s0-plan` claims it from todo/ (SPEC §5), and the machine still counted c1w the
    holder, so c1w's refused `advance` read as a verb the spec says succeeds."""
    replay(["take c1w mine", "release c1w s0-plan", "advance c1 s0-plan", "advance c1w s0-plan"])


def test_regression_advance_of_a_task_another_clone_completed_was_exit_3():
    """Found by the long profile (40 examples, shrunk): c1's agent takes s0-plan and completes
    it; c2's agent runs `advance s0-plan` from its stale todo copy: exit 3, though nothing raced."""
    replay(["take c1 mine", "advance c1 mine", "advance c2 s0-plan"])


def test_regression_a_task_another_clone_retried_is_claimable_but_not_counted():
    """Found by the long profile (`BACKLOG_CLONES_EXAMPLES=100`, session 16, shrunk to three
    steps): c1's agent takes s0-plan and fails it; c2's agent retries it (the remote's
    `settled/s0-plan` now ends in `retried`). In c1, `take s0-plan` claims it, but `status`
    counted 2 todo and `ready` listed s1 and s2 only: c1's own failed/ copy stood for the task
    in the views (its ledger never heard of the retry). The intake branch's copy of a later
    generation now supersedes it (`queue._retried_since`)."""
    replay(["take c1 mine", "fail c1 mine", "retry c2 mine"])


def test_regression_a_failed_intake_task_beside_its_stale_todo_copy_is_shown_and_retried():
    """Found by the long profile with `[show]` (`BACKLOG_CLONES_EXAMPLES=150`, session 17; shrunk
    by hand from 29 steps): c1 adds x0-plan on main; c1w's agent claims it from the intake branch
    (main's todo/ copy stays) and fails it; c1w merges main, which brings that todo/ copy beside
    the failed/ one. `show x0-plan` in c1w refused ("in several piles: run `backlog maintain`"),
    and so did `retry`. The todo/ copy of the same generation gives way to the failed one."""
    replay(["add c1 x", *["take c1w x"] * 4, "fail c1w x0-plan", "sync c1w x", "retry c1w x0-plan", "take c1 x"])


def test_regression_a_task_another_clone_retried_counts_in_the_linked_worktree_that_failed_it():
    """Found by the long profile (`BACKLOG_CLONES_EXAMPLES=150`, session 17; 19 steps, shrunk by
    hand to three): c1w (a linked worktree of c1, on its own branch) takes s0-plan and fails it;
    c2 retries it. c1w's `status` counted 2 todo, not 3: the intake listing preferred c1's own
    main, whose todo/ copy is the one the failure left behind (generation 0), over the remote's
    main as fetched (the retried copy, generation 1), so neither the failed copy gave way nor was
    the intake copy live. The remote's copy of a later generation is now the intake copy."""
    replay(["take c1w x", "fail c1w mine", "retry c2 failed", "take c1w x", "take c1 x", "take c1 x"])


def test_regression_a_retried_copy_merged_beside_the_failed_one_is_the_task():
    """Found by the long profile (`BACKLOG_CLONES_EXAMPLES=200`, session 17; 27 steps, shrunk by
    hand to five): c2 fails s0-plan and pushes; c1 retries it (the remote's record); c2 pulls, and
    its main holds the retried todo/ copy (generation 1) beside its failed/ one (generation 0).
    `show s0-plan` in c2 refused ("in several piles"): c2's ledger never heard of c1's retry. Of a
    todo/ and a settled copy here, the later generation is the task (`OneTask._unstale`)."""
    replay(["take c2 x", "fail c2 mine", "sync c2 x", "retry c1 failed", "sync c2 x", "take c2 x"])


def test_regression_a_retry_lands_on_a_remote_main_that_holds_a_failed_and_a_stale_todo_copy():
    """Found by the long profile (`BACKLOG_CLONES_EXAMPLES=120`, session 17: 38 steps, shrunk by
    hand to these 8 in session 18). c2 claims c1's new task from the remote and fails it; its
    sync merges the remote's main, which still lists the todo/ copy of the task, beside the failed
    one, and pushes both. c1w's retry then refused to push to the remote's main ("appeared
    meanwhile": two copies held), so the reopened task stayed in c1, and c2 counted it failed
    (`[counts]`). A retry now replaces every earlier state of the task it finds there (`moves.in_the_way`)."""
    replay(
        [
            *["take c1 mine"] * 3,
            "add c1 s0-plan",
            "take c2 failed",
            "fail c2 mine",
            "sync c2 mine",
            "retry c1w failed",
        ]
    )


def test_regression_a_completed_intake_task_beside_its_stale_todo_copy_is_shown_done():
    """The same with a completion (`[show]` over done/ too): `show` refused ("in several piles")."""
    replay(["add c1 x", *["take c1w x"] * 4, "advance c1w x0-plan", "sync c1w x", "sync c1 x", "take c2 x"])


def test_show_in_the_clone_that_failed_a_task_another_clone_retried_leads_with_the_live_copy():
    """The same three steps: `show s0-plan` in c1 (whose failed/ copy is the earlier attempt) shows
    the intake branch's todo/ copy, as `list` and `status` count it, and says why (session 17; the
    [show] invariant checks the pile after every step)."""
    machine = ClonesModel()
    machine.strict = True
    try:
        machine.start()
        for line in ["take c1 mine", "fail c1 mine", "retry c2 mine"]:
            machine.step(*line.split())
        code, out = machine.call("c1", read.show, "s0-plan")
        assert code == 0 and out.data["pile"] == "todo", out
        assert "retried since: backlog/failed/s0-plan.md here is the earlier attempt; the task is todo again" in list(
            out.lines
        )
        assert "on the intake branch only" not in "\n".join(out.lines)
    finally:
        machine.teardown()
