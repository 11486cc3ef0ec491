"""The generative checker's doors (SPEC §7.11: every door keeps the guarantees).

`tests/test_model.py` drives the verbs of the claim path; the holes of the last review sat at the
doors beside it: a checkout of an older commit (the self-heal of the in-flight piles), `migrate`
while other worktrees still run the old backend, and `## Defaults` lines written in another
markdown style. This file adds each as a step of the same state machines (every invariant of
test_model.py is still checked after every step), plus the invariant the step's class needs:

  detour(wt, where, how)   `wt` checks out an older commit — `how` "detach" (a detached HEAD) or
        "branch" (a new branch made there, as `git switch -c topic <commit>` does) — and opens
        the backlog there (what the post-checkout hook does: the self-heal), then goes back to
        its branch and opens it again. `where`: HEAD~1, HEAD~2, "tracked" or "tracked-oldest"
        (the newest or the oldest older commit whose tree tracks an in-flight file: a maildir-git claim, or on maildir-shared
        the history from before a `migrate --to maildir-shared`: the template of
        `DoorsModel` is built that way: see `_build_legacy`; `y-plan`, claimed on b1 before the
        migration, is still in flight when an example starts).
        Invariants: [reopened] no task whose generation ended is back in the clone's in-flight
        piles afterwards (maildir-shared); [detached-commit] nothing is committed on a detached
        HEAD; [lost] etc. as everywhere.
  migrate(wt)   `migrate --to` the other backend in `wt` while the other worktrees still run the
        old one. Refusing (nothing changed) is a fine answer. After a migration, every other
        worktree's auto-pick must claim nothing that is in flight anywhere in the clone
        [one-claimer] and nothing that ended [reclaim]; no task is lost [lost]. The example ends
        there (the model's invariants are per backend).
  import_settled(task, flat, readable)   a branch arrives on which the task's latest generation
        is done (the bash tool's or another clone's history): top-level `done/` or the flat
        layout's `done/2026/`, a readable copy or not; the janitor reads it. [reclaim] from then.
  restyle(wt, limit, style)   the project budget on `wt`'s branch is rewritten in one of the
        styles people use (`` - `timeout: 1h` ``, `` - `timeout`: 1h ``, `- **timeout**: 1h`,
        `* timeout = 1h`, a table row). Invariant [budget-line]: a claim line written by a verb
        run in `wt` records the budget of `wt`'s AGENTS.md as the model reads it (any style).

Profiles: quick (derandomized, in the suite) and long:

    BACKLOG_MODEL_EXAMPLES=2000 python -m pytest -q -n 0 tests/test_model_doors.py

The mutants (tests/test_model_mutants.py, holes 6–8) put each door's fix back and the search
finds it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import test_model as model
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule, run_state_machine_as_test
from test_model import (
    IN_FLIGHT,
    PIPELINE,
    PROFILE,
    STATS,
    UNITS,
    WORKTREES,
    GitModel,
    RenameModel,
    _git,
    claim_of_record,
    log_of,
)

from maildir_backlog.commands import add, claim, setup
from maildir_backlog.commands.migrate import migrate
from maildir_backlog.context import open_context

LEGACY = "z-plan"  # DoorsModel's task claimed and finished under maildir-git before the migration
LEGACY_FLYING = "y-plan"  # and one claimed under maildir-git, still in flight after the migration
STYLES = {
    "tick": "- `timeout: {}`",
    "key-tick": "- `timeout`: {}",
    "bold": "- **timeout**: {}",
    "star-equals": "* timeout = {}",
    "table": "| timeout | {} |",
}
# A Defaults line in any of the styles above (markup first, then the lead, as a reader would).
_BUDGET_LINE = re.compile(r"^(?:[-*]|\|)\s*\**`?timeout`?\**\s*(?::|=|\|)\s*`?\s*(\d+)([smhdw])`?", re.M)
_OLD_STYLE = re.compile(r"^(?:[-*]|\|)\s*\**`?timeout\b.*$", re.M)


def _build_legacy(base: Path) -> None:
    """A clone that migrated from maildir-git, as teams do: main ran maildir-git (z-plan claimed
    and finished there), worktrees b1 and b2 were made, b1's agent claimed y-plan (tracked in
    b1's doing/), main ran `migrate --to maildir-shared`, and b1 and b2 merged main. b1's merge
    commit declares maildir-shared and still tracks doing/y-plan.md (the self-heal then moved it
    into the shared root and committed its removal): the older commit a checkout goes back to."""
    main = model.init_main(base)
    setup.setup(main, "maildir-git", PIPELINE)
    os.environ["BACKLOG_CLAIMER"] = "agent-main"
    for slug in (LEGACY, LEGACY_FLYING):
        add.add(open_context(main), slug.removesuffix("-plan"))
    claim.take(open_context(main), LEGACY)
    for _ in IN_FLIGHT:
        claim.advance(open_context(main), LEGACY)
    for branch in WORKTREES[1:]:
        _git(main, "worktree", "add", "-q", "-b", branch, str(base / branch))
    os.environ["BACKLOG_CLAIMER"] = "agent-b1"
    claim.take(open_context(base / "b1"), LEGACY_FLYING)
    result = migrate(main, to="maildir-shared")
    assert result.code == 0, result.lines
    for branch in WORKTREES[1:]:
        _git(base / branch, "merge", "-q", "--no-edit", "main")
        open_context(base / branch)  # the self-heal: b1's tracked doing/y-plan.md into the shared root
    assert (main / ".git" / "backlog" / "doing" / f"{LEGACY_FLYING}.md").is_file()


model.BUILDERS["maildir-shared+legacy"] = _build_legacy


class _Doors:
    """The door steps, mixed into a model of either backend."""

    # the model's attributes this mixin reads (BacklogModel sets them)
    shared: bool
    paths: dict[str, Path]
    shared_root: Path
    tainted: bool
    env_streak: int
    steps: int
    ended: dict[tuple[str, int], int]
    files: Any

    def budget_of(self, wt: str) -> int:  # any style (test_model's reads the tick style only)
        text = (self.paths[wt] / "backlog" / "AGENTS.md").read_text()
        m = _BUDGET_LINE.search(text)
        return int(m.group(1)) * UNITS[m.group(2)] if m else model.DEFAULT_BUDGET

    def events(self, place: str, pile: str, slug: str, lines: list[Any], acting: str | None) -> None:
        if acting is not None:
            ident: tuple[str, ...] = (self.canon(slug),)  # type: ignore[attr-defined]
            for ln in lines:
                ident = (*ident, ln.raw)
                if ln.starts_clock and ident not in self.seen and ln.get("budget"):  # type: ignore[attr-defined]
                    recorded = ln.get("budget")
                    m = re.fullmatch(r"(\d+)([smhdw])", recorded)
                    want = self.budget_of(acting)
                    if m is None or int(m.group(1)) * UNITS[m.group(2)] != want:
                        self.violate(  # type: ignore[attr-defined]
                            "budget-line",
                            f"{place}:{pile}/{slug}.md: `{ln.raw}` records budget={recorded}, but the"
                            f" AGENTS.md of {acting} (where the verb ran) sets {want}s",
                        )
        super().events(place, pile, slug, lines, acting)  # type: ignore[misc]

    def ended_in_flight(self) -> set[tuple[str, int]]:
        """(task, generation) of every shared in-flight copy whose generation already ended."""
        found = set()
        for (place, pile, slug), data in self.snapshot().items():  # type: ignore[attr-defined]
            if place == "shared" and pile in IN_FLIGHT:
                key = (self.canon(slug), sum(ln.kind == "retried" for ln in log_of(data)))  # type: ignore[attr-defined]
                if key in self.ended:
                    found.add(key)
        return found

    def _tracked_commit(self, wt: str, oldest: bool) -> str | None:
        """The newest (or oldest) commit before HEAD whose tree tracks an in-flight task file and
        (on maildir-shared) declares this backend: where the self-heal has something to do."""
        path = self.paths[wt]
        found = None
        for commit in _git(path, "rev-list", "HEAD~1", check=False).stdout.split():
            listed = _git(path, "ls-tree", "-r", "--name-only", commit, "--", *[f"backlog/{p}" for p in IN_FLIGHT])
            if not any(name.endswith(".md") for name in listed.stdout.split()):
                continue
            agents = _git(path, "show", f"{commit}:backlog/AGENTS.md", check=False).stdout
            if self.shared and not re.search(r"^maildir-shared$", agents, re.M):
                continue
            found = commit
            if not oldest:
                break
        return found

    @precondition(lambda self: not self.tainted and self.env_streak < model.ENV_STREAK)
    @rule(
        wt=st.sampled_from(WORKTREES),
        where=st.sampled_from(("tracked", "tracked-oldest", "HEAD~1", "HEAD~2")),
        how=st.sampled_from(("branch", "detach")),
    )
    def detour(self, wt: str, where: str, how: str) -> None:
        """`wt` checks out an older commit, the backlog is opened there, and `wt` comes back."""
        self.env_streak += 1
        self.steps += 1
        STATS["steps"] += 1
        path = self.paths[wt]
        commit = self._tracked_commit(wt, where == "tracked-oldest") if where.startswith("tracked") else where
        if commit is None or _git(path, "rev-parse", "-q", "--verify", f"{commit}^{{commit}}", check=False).returncode:
            return
        commit = _git(path, "rev-parse", f"{commit}^{{commit}}").stdout.strip()
        before = self.ended_in_flight() if self.shared else set()
        topic = f"{wt}-old{self.steps}"
        checkout = (
            ("checkout", "-q", "-b", topic, commit) if how == "branch" else ("checkout", "-q", "--detach", commit)
        )
        if _git(path, *checkout, check=False).returncode:
            STATS["detours refused by git"] += 1
            return
        STATS[f"detours:{how}"] += 1
        self.call(wt, lambda ctx: _Opened())  # type: ignore[attr-defined]
        if how == "detach":
            head = _git(path, "rev-parse", "HEAD").stdout.strip()
            if head != commit:
                self.violate(  # type: ignore[attr-defined]
                    "detached-commit", f"opening the backlog on a detached HEAD in {wt} committed {head} on {commit}"
                )
        # no observe() here: an older commit lacks tasks added since ([lost] would be the model's
        # mistake); the state is checked once `wt` is back on its branch
        reopened = (self.ended_in_flight() if self.shared else set()) - before
        if reopened:
            self.violate(  # type: ignore[attr-defined]
                "reopened",
                f"a checkout of {where} ({how}) in {wt} put {sorted(reopened)} back in flight, though"
                " that generation already ended",
            )
        _git(path, "checkout", "-q", "-f", wt)
        self.call(wt, lambda ctx: _Opened())  # type: ignore[attr-defined]
        self.observe(wt)  # type: ignore[attr-defined]

    @precondition(lambda self: not self.tainted and self.env_streak < model.ENV_STREAK)
    @rule(wt=st.sampled_from(WORKTREES), limit=st.sampled_from(model.BUDGETS), style=st.sampled_from(tuple(STYLES)))
    def restyle(self, wt: str, limit: str, style: str) -> None:
        """The project budget of `wt`'s branch, rewritten in another markdown style (committed)."""
        self.env_streak += 1
        self.steps += 1
        STATS["steps"] += 1
        agents = self.paths[wt] / "backlog" / "AGENTS.md"
        text = agents.read_text()
        new = _OLD_STYLE.sub(STYLES[style].format(limit).replace("\\", "\\\\"), text, count=1)
        if new != text:
            agents.write_text(new)
            _git(self.paths[wt], "commit", "-q", "-m", f"budget {limit} ({style})", "--", "backlog/AGENTS.md")
        self.observe(None)  # type: ignore[attr-defined]

    @precondition(lambda self: not self.tainted)
    @rule(wt=st.sampled_from(WORKTREES))
    def migrate_step(self, wt: str) -> None:
        """`migrate --to` the other backend in `wt` while the others still run this one."""
        self.steps += 1
        STATS["steps"] += 1
        to = "maildir-git" if self.shared else "maildir-shared"
        before = self.snapshot()  # type: ignore[attr-defined]
        flying = {self.canon(s) for (_, pile, s) in before if pile in IN_FLIGHT}  # type: ignore[attr-defined]
        outcome = self.call(wt, lambda ctx: migrate(self.paths[wt], to=to))  # type: ignore[attr-defined]
        if outcome.code is None or self.tainted:
            return
        if not outcome.ok:
            STATS[f"migrations refused:{outcome.code}"] += 1
            if self.snapshot() != before:  # type: ignore[attr-defined]
                self.violate("atomic", f"migrate --to {to} in {wt} was refused ({outcome.error}) but changed files")  # type: ignore[attr-defined]
            return
        STATS["migrations"] += 1
        after = self.snapshot()  # type: ignore[attr-defined]
        present = {self.canon(s) for (_, _, s) in after}  # type: ignore[attr-defined]
        for slug in sorted(self.added - present):  # type: ignore[attr-defined]
            self.violate("lost", f"migrate --to {to} in {wt}: {slug} is in no pile any more")  # type: ignore[attr-defined]
        ended = {task for (task, _gen) in self.ended}
        for other in WORKTREES:
            if other == wt:
                continue
            got = self.call(other, claim.take, None)  # type: ignore[attr-defined]
            slug = got.result.data.get("slug") if got.ok else None
            if slug is None:
                continue
            if self.canon(slug) in flying:  # type: ignore[attr-defined]
                self.violate(  # type: ignore[attr-defined]
                    "one-claimer",
                    f"after migrate --to {to} in {wt}, {other} (still on the old backend) claimed {slug},"
                    " which was in flight",
                )
            elif self.canon(slug) in ended and self._ended_everywhere(self.canon(slug), after):  # type: ignore[attr-defined]
                self.violate(  # type: ignore[attr-defined]
                    "reclaim", f"after migrate --to {to} in {wt}, {other} claimed {slug}, which already ended"
                )
        self.tainted = True  # the model's invariants are per backend: this example ends here

    def _ended_everywhere(self, task: str, files: Any) -> bool:
        """Every copy's last generation ended (no retry since): claiming it again reopens it."""
        gens = [
            (sum(ln.kind == "retried" for ln in log_of(data)), claim_of_record(log_of(data)))
            for (_, _, s), data in files.items()
            if self.canon(s) == task  # type: ignore[attr-defined]
        ]
        top = max((g for g, _ in gens), default=0)
        return (task, top) in self.ended

    @precondition(lambda self: not self.tainted and self.env_streak < model.ENV_STREAK)
    @rule(task=st.sampled_from(("busy", *model.TASKS)), flat=st.booleans(), readable=st.booleans())
    def import_settled(self, task: str, flat: bool, readable: bool) -> None:
        """A branch arrives (fetched, or from the older bash tool) on which `task`'s latest
        generation is done: `done/<slug>.md`, or the flat layout's `done/2026/<slug>.md`; its copy
        readable, or not (a NUL byte). The janitor runs (it reads the history). From here that
        generation has ended: no claim of it may follow [reclaim]."""
        self.env_streak += 1
        self.steps += 1
        STATS["steps"] += 1
        files = self.snapshot()  # type: ignore[attr-defined]
        if task == "busy":
            task = next((s for (_, pile, s) in sorted(files) if pile == "todo"), "")
        mine = [(key, data) for key, data in files.items() if self.canon(key[2]) == self.canon(task)]  # type: ignore[attr-defined]
        if not mine or any(pile in IN_FLIGHT for (_, pile, _), _ in mine):
            return
        queued = [(key, data) for key, data in mine if key[1] == "todo"]
        if not queued:
            return
        (_, _, slug), data = max(queued, key=lambda kv: sum(ln.kind == "retried" for ln in log_of(kv[1])))
        gen = sum(ln.kind == "retried" for ln in log_of(data))
        stamp = self.now.strftime("%Y-%m-%dT%H:%M:%SZ")  # type: ignore[attr-defined]
        done = (
            data
            + (f"- {stamp} advanced to=doing claimer=bash-tool branch=elsewhere\n- {stamp} advanced to=done\n").encode()
        )
        content = done if readable else b"\x00" + done
        rel = f"backlog/done/{'2026/' if flat else ''}{slug}.md"
        main = self.paths["main"]
        blob = _git_in(main, ["hash-object", "-w", "--stdin"], content)
        index = main / ".git" / f"import-{self.steps}.index"
        env = {"GIT_INDEX_FILE": str(index)}
        _git_in(main, ["update-index", "--add", "--cacheinfo", f"100644,{blob},{rel}"], b"", env)
        tree = _git_in(main, ["write-tree"], b"", env)
        index.unlink()
        commit = _git_in(main, ["commit-tree", tree, "-m", f"settled elsewhere: {slug}"], b"")
        _git(main, "update-ref", f"refs/heads/imported-{self.steps}", commit)
        STATS[f"imports:{'flat' if flat else 'top'}:{'readable' if readable else 'unreadable'}"] += 1
        self.ended.setdefault((self.canon(slug), gen), self.steps)  # type: ignore[attr-defined]
        self.verb("maintain", "main", None)  # type: ignore[attr-defined]


def _git_in(cwd: Path, args: list[str], data: bytes, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, input=data, capture_output=True, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode().strip()


class _Opened:
    """What `open_context` alone returns through `call`: the backlog opened (the hook's work)."""

    code = 0
    data: dict[str, Any] = {}
    lines: list[str] = []


class DoorsModel(_Doors, RenameModel):
    """maildir-shared, from a clone that migrated from maildir-git (z-plan finished before)."""

    TEMPLATE = "maildir-shared+legacy"


class GitDoorsModel(_Doors, GitModel):
    """maildir-git: its own history tracks the in-flight files of every claim."""


_tear_down_leftovers = model._tear_down_leftovers
model_report = model.model_report


@pytest.fixture(scope="module", autouse=True)
def doors_report(request: pytest.FixtureRequest):
    """How often each door was passed (printed at the end of the module, as the checker's line)."""
    yield
    doors = sorted((k, v) for k, v in STATS.items() if k.split(":")[0] in DOOR_STATS or k.startswith("migrations"))
    model.show(request.config, ["doors: " + (", ".join(f"{k}={v}" for k, v in doors) or "none passed")])


DOOR_STATS = ("detours", "imports", "migrations", "detours refused by git")


@pytest.mark.parametrize("machine", [DoorsModel, GitDoorsModel], ids=["maildir-shared", "maildir-git"])
def test_doors(machine: type) -> None:
    search = type(machine.__name__, (machine,), {"TOLERANT": True})
    run_state_machine_as_test(search, settings=settings(PROFILE, max_examples=model.LONG or 10))


# --------------------------------------------------------------------------- regression cases
# (hand-built; each fails under its mutant in tests/test_model_mutants.py, holes 6–9)


def test_regression_a_branch_made_at_a_commit_that_tracked_a_finished_claim() -> None:
    """The self-heal on a branch made where y-plan (finished since) was still tracked in doing/
    must not put it back in flight (hole 7)."""
    state = DoorsModel()
    state.start(wt="main")
    state.act(verb="complete", wt="holder", task="y-plan", crash=None)
    state.detour(wt="b1", where="tracked", how="branch")
    state.teardown()


def test_regression_a_detached_checkout_of_a_commit_that_tracked_a_claim() -> None:
    """The self-heal on a detached HEAD where y-plan (in flight) was tracked must commit nothing
    there (hole 6)."""
    state = DoorsModel()
    state.start(wt="main")
    state.detour(wt="b1", where="tracked", how="detach")
    state.teardown()


def test_regression_migrate_while_the_other_worktrees_still_run_the_old_backend() -> None:
    """A claim in flight, then `migrate --to maildir-git` in another worktree: the third one,
    still on maildir-shared, must claim nothing that was in flight (hole 8)."""
    state = DoorsModel()
    state.start(wt="main")
    state.act(verb="take-any", wt="main", task=None, crash=None)
    state.migrate_step(wt="b1")
    state.teardown()


@pytest.mark.parametrize("machine", [DoorsModel, GitDoorsModel], ids=["maildir-shared", "maildir-git"])
def test_regression_a_budget_in_another_markdown_style(machine: type) -> None:
    """`- **timeout**: 1h` on the claimer's branch: the claim line records 1h (hole 9)."""
    state = machine()
    state.start(wt="main")
    state.restyle(wt="main", limit="1h", style="bold")
    state.act(verb="take-any", wt="main", task=None, crash=None)
    state.teardown()


@pytest.mark.parametrize(("flat", "readable"), [(True, True), (False, False)], ids=["flat-layout", "unreadable"])
def test_regression_a_task_settled_elsewhere_arrives_in_history(flat: bool, readable: bool) -> None:
    """a-plan done on a branch that arrives (the flat layout's done/2026/, or a copy that cannot
    be read): after the janitor read it, no claim of a-plan (holes 10 and 11)."""
    state = DoorsModel()
    state.start(wt="main")
    state.import_settled(task="a-plan", flat=flat, readable=readable)
    state.act(verb="take", wt="main", task="a-plan", crash=None)
    state.teardown()


def test_regression_a_branch_made_where_an_in_flight_task_was_one_pile_back() -> None:
    """Found by the doors search (under the history mutant, but a hole of the product itself):
    y-plan moved on to reviewing/; a branch made at b1's merge commit, which still tracked
    doing/y-plan.md, had the self-heal put that older copy back into the shared doing/: one task
    in two in-flight piles [one-claimer]. The self-heal now drops a tracked copy whose every line
    is in the live one."""
    state = DoorsModel()
    state.start(wt="main")
    state.clock(step="+1h")
    state.act(crash=None, task="busy", verb="progress", wt="holder")
    state.act(crash=None, task="busy", verb="advance", wt="holder")
    state.clock(step="+1h")
    state.detour(how="branch", where="tracked", wt="b1")
    state.teardown()
