"""The generative checker's intake doors (issue 28 item 7): writes into the intake branch while
it is rebased, pipelines that differ between branches, renames with dependents, and claims
across clones with a bare remote.

`IntakeModel` is `RenameModel` (tests/test_model.py: every invariant there is still checked after
every step) with steps of its own and a narrower draw of the old ones:

  act(verb, wt, task)      take, take-any, advance (one hop), complete, fail, retry, release, add
        (b-plan, c-plan), depend (as add_dependent), rename, as `wt`'s agent ("holder": the
        claim's branch). While main's worktree is in an operation, what would run there runs in
        b2 instead (main's agent waits).
  operation(how)           main's worktree starts a `git rebase` or `git merge` of a side branch
        that stops at a conflict (a rebase detaches HEAD); the other worktrees go on working.
  end_operation(how)       the operation is aborted, or the conflict resolved and it continued.
  pipeline(wt, shape)      `wt`'s branch commits another pipeline: the base one, one that starts
        with `inbox` (a pile the others lack), or one with an in-flight pile only it names
        (`testing`; `checking`, drawn by the mutants' focused profile only).
  add_dependent(wt)        `add dN --depends a-plan` (a-plan: the first task, maybe renamed since).
  rename_task, merge, maintain   as in RenameModel.

Invariants (besides test_model.py's, whose [lost] now also counts the intake branch's tip while
main's worktree is in an operation: a plumbing commit lives there until the operation ends):
  [invisible]  every task added is in a pile that some branch's pipeline names, on that branch
               (its worktree or, during an operation, main's tip), or in the clone's shared root.
  [dep]        a task whose dependencies are all done (under any name: a renamed task is one task)
               is not `blocked` in `list` where it waits.

`RemoteHolderModel` is test_model.py's `RemoteModel` (two clones of a bare repository over
file://, `remote: origin`) plus [holder]: complete and fail succeed in a clone only while the
remote's `claims/<slug>` is that clone's own (its `refs/backlog-mine/claims/<slug>`): at most one
holder across the clones. `rescue`: the clock +8d, then `take SLUG` (it rescues a stale claim).

`AlikeIntakeModel` is `IntakeModel` with every task but the dependents written alike (one title,
test_model's AlikeModel): two tasks of the same bytes through the intake branch and its briefs.

Profiles: quick (derandomized, in the suite: 3 examples of 10 steps, 2 of the remote machine) and,
with BACKLOG_INTAKE_EXAMPLES=N, a long random search of each machine. The mutants of classes (a)–(e) are in tests/test_model_mutants_intake.py.
"""

from __future__ import annotations

import os
import subprocess
from datetime import timedelta
from typing import Any

import pytest
import test_model as model
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule, run_state_machine_as_test
from test_model import STATS, BacklogModel, RemoteModel, RenameModel, _git

from maildir_backlog.commands import add, claim, read, settle
from maildir_backlog.context import open_context
from maildir_backlog.project import parse_declaration

SHAPES = {
    "base": ("todo", "doing", "reviewing", "done"),
    "inbox": ("inbox", "todo", "doing", "reviewing", "done"),
    "testing": ("todo", "doing", "testing", "reviewing", "done"),
    "checking": ("todo", "doing", "checking", "reviewing", "done"),
}
# the model's piles while these machines run (test_model reads them at call time: `patched_piles`)
IN_FLIGHT = ("doing", "testing", "checking", "reviewing")
ALL_PILES = ("inbox", "todo", "doing", "testing", "checking", "reviewing", "done", "failed")
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")  # the post-checkout hook's work is done in-process
INTAKE_VERBS = ("take", "take", "take-any", "advance", "complete", "fail", "retry", "release", "add")
INTAKE_ACTORS = ("holder", "holder", "b1", "main")
INTAKE_TARGETS = ("busy", "busy", "a-plan", "b-plan")
DEPENDENTS = ("d1", "d2", "d3")


class IntakeModel(RenameModel):
    """RenameModel with the intake doors (see the module's docstring)."""

    CLOSING = True  # the teardown's closing round (maintain twice everywhere, the views agree)

    def __init__(self) -> None:
        self.op: str | None = None  # the operation main's worktree is in: rebase, merge
        self.ops = 0
        self.depends: dict[str, str] = {}  # dependent slug -> the name it depends on
        self.dep_checked: set[tuple[str, str]] = set()
        super().__init__()

    # -- what the model reads ---------------------------------------------------------------------
    def snapshot(self) -> model.Files:
        files = super().snapshot()
        if self.op is not None:  # a plumbing commit lives on main's tip until the operation ends
            files.update(self.tip_files("main"))
        return files

    def tip_files(self, branch: str) -> model.Files:
        main = self.paths["main"]
        out = _git(main, "ls-tree", "-r", "-z", "--end-of-options", f"refs/heads/{branch}", "--", "backlog/").stdout
        files: model.Files = {}
        for entry in filter(None, out.split("\0")):
            meta, _, path = entry.partition("\t")
            parts = path.split("/")
            if len(parts) == 3 and parts[2].endswith(".md") and parts[1] in ALL_PILES:
                blob = subprocess.run(["git", "cat-file", "blob", meta.split()[2]], cwd=main, capture_output=True)
                files[(f"tip:{branch}", parts[1], parts[2][:-3])] = blob.stdout
        return files

    def piles_of(self, wt: str) -> tuple[str, ...]:
        """The pipeline `wt`'s AGENTS.md declares (what its verbs file into)."""
        return parse_declaration((self.paths[wt] / "backlog" / "AGENTS.md").read_text()).pipeline.piles

    def observe(self, acting: str | None) -> model.Files:
        files = super().observe(acting)
        if self.tainted:
            return files
        seen: dict[str, tuple[str, ...]] = {wt: (*self.piles_of(wt), "failed") for wt in model.WORKTREES}
        seen["tip:main"] = seen["main"]
        for task in sorted(self.added):
            copies = [(place, pile) for (place, pile, slug) in files if self.canon(slug) == task]
            if copies and not any(place == "shared" or pile in seen.get(place, ()) for place, pile in copies):
                self.violate("invisible", f"{task} is only in piles no branch's pipeline there names: {copies}")
        self.dependencies(files)
        return files

    def dependencies(self, files: model.Files) -> None:
        """[dep]: a dependent whose dependency is done (under any of its names) is not blocked."""
        if self.op is not None:
            return
        done = {
            self.canon(slug)
            for (place, pile, slug), data in files.items()
            if pile == "done" and (last := model.last_event(model.log_of(data))) is not None and last.is_terminal
        }
        for dependent, dep in self.depends.items():
            if self.canon(dep) not in done:
                continue
            for wt in model.WORKTREES:
                if (wt, "todo", dependent) not in files or (wt, dependent) in self.dep_checked:
                    continue
                self.dep_checked.add((wt, dependent))
                listed = self.call(wt, read.list_pile)
                if listed.result is None:
                    continue
                states = {t["slug"]: t["state"] for t in listed.result.data["tasks"]}
                if states.get(dependent) == "blocked":
                    self.violate(
                        "dep",
                        f"{dependent} (depends on {dep}, done as {sorted(s for (_, p, s) in files if p == 'done')})"
                        f" is blocked in {wt}'s list",
                    )

    # -- verbs --------------------------------------------------------------------------------------
    def actor(self, wt: str, task: str | None, verb: str = "") -> str:
        who = super().actor(wt, task, verb)
        return "b2" if self.op is not None and who == "main" else who

    def other_verb(self, verb: str, wt: str, task: str) -> None:
        """A verb test_model's `verb` does not know (release, add --depends): run, then observed."""
        self.steps += 1
        STATS["steps"] += 1
        if verb == "release":
            task = self.busy(None, wt) if task == "busy" else task
            wt = self.actor(wt, task, verb)
            outcome = self.call(wt, settle.release, task, "back")
        else:
            wt = "b2" if self.op is not None and wt == "main" else wt
            outcome = self.call(wt, add.add, task.removesuffix("-plan"), None, None, None, ["a-plan"])
            if outcome.ok:
                self.added.add(task)
                self.depends[task] = "a-plan"
        STATS[f"verb:{verb}:{outcome.code}"] += 1
        self.observe(wt)

    def check_effect(self, verb: str, wt: str, slug: str | None, *rest: Any) -> None:
        if verb == "add" or (self.op is not None and verb in ("retry", "release")):
            return  # filed into the intake branch's first pile, maybe on main's tip: [lost], [invisible]
        super().check_effect(verb, wt, slug, *rest)  # type: ignore[arg-type]

    @initialize(wt=st.just("main"))
    def start(self, wt: str) -> None:
        BacklogModel.start(self, wt)

    @precondition(lambda self: not self.tainted)
    @rule(verb=st.sampled_from(INTAKE_VERBS), wt=st.sampled_from(INTAKE_ACTORS), task=st.sampled_from(INTAKE_TARGETS))
    def act(self, verb: str, wt: str, task: str | None, crash: str | None = None) -> None:
        self.env_streak = 0
        if verb == "release":
            self.other_verb("release", wt, task or "busy")
        elif verb == "advance":
            self.verb("advance", wt, task or "busy")
        elif verb == "add":
            self.verb("add", "b1" if wt == "holder" else wt, "c-plan" if task == "a-plan" else "b-plan")
        elif verb == "depend":
            self.depend("main" if wt == "holder" else wt)
        else:
            BacklogModel.act(self, verb, wt, task, None)

    act_2 = act

    @precondition(lambda self: not self.tainted)
    @rule(wt=st.sampled_from(("b1", "main")))
    def add_dependent(self, wt: str) -> None:
        self.depend(wt)

    def depend(self, wt: str) -> None:
        """`add dN --depends a-plan` as `wt`'s agent (d1, d2, d3: the first not added yet)."""
        fresh = [d for d in DEPENDENTS if f"{d}-plan" not in self.depends]
        if fresh:
            self.other_verb("add-dependent", wt, f"{fresh[0]}-plan")

    @precondition(lambda self: not self.tainted)
    @rule(wt=st.sampled_from(("main", "b1")), task=st.just("busy"))
    def rename_task(self, wt: str, task: str | None, crash: str | None = None) -> None:
        self.env_streak = 0
        self.verb("rename", wt, task or "busy")

    @precondition(lambda self: not self.tainted)
    @rule(wt=st.sampled_from(("b1", "main", "b2")), twice=st.just(False), crash=st.just(None))
    def maintain(self, wt: str, twice: bool, crash: str | None) -> None:
        self.verb("maintain", "b2" if self.op is not None and wt == "main" else wt, None)

    @precondition(lambda self: not self.tainted)
    @rule(into=st.sampled_from(("b1", "main")), other=st.sampled_from(("b1", "main")))
    def merge(self, into: str, other: str) -> None:
        if self.op is not None and into == "main":
            return
        BacklogModel.merge(self, into, other)

    set_budget = clock = None  # type: ignore[assignment]  # not drawn here

    # -- the doors ----------------------------------------------------------------------------------
    @precondition(lambda self: not self.tainted and self.op is None)
    @rule(how=st.sampled_from(("rebase", "merge")))
    def operation(self, how: str) -> None:
        """main's worktree starts a rebase onto (or a merge of) a side branch; it stops at a conflict."""
        self.steps += 1
        self.ops += 1
        main = self.paths["main"]
        side = f"side{self.ops}"
        blob = subprocess.run(
            ["git", "hash-object", "-w", "--stdin"], cwd=main, input=f"{side}\n", capture_output=True, text=True
        ).stdout.strip()
        index = main / ".git" / f"side-index-{self.ops}"
        env = {**os.environ, "GIT_INDEX_FILE": str(index)}
        for args in (["read-tree", "HEAD"], ["update-index", "--add", "--cacheinfo", f"100644,{blob},README.md"]):
            subprocess.run(["git", *args], cwd=main, env=env, check=True, capture_output=True)
        tree = subprocess.run(["git", "write-tree"], cwd=main, env=env, capture_output=True, text=True, check=True)
        index.unlink()
        commit = _git(main, "commit-tree", tree.stdout.strip(), "-p", "HEAD", "-m", side).stdout.strip()
        _git(main, "branch", side, commit)
        (main / "README.md").write_text(f"main {self.ops}\n")
        _git(main, "commit", "-q", "-m", f"readme {self.ops}", "--", "README.md")
        args = ["rebase", side] if how == "rebase" else ["merge", "--no-edit", side]
        proc = _git(main, *NO_HOOKS, *args, check=False)
        assert proc.returncode, f"git {how} {side} did not stop at its conflict"
        head = "REBASE_HEAD" if how == "rebase" else "MERGE_HEAD"  # stopped at it, not refused at the start
        stopped = _git(main, "rev-parse", "-q", "--verify", head, check=False).returncode == 0
        assert stopped, f"git {how} {side} did not start in main: {proc.stderr.strip()}"
        self.op = how
        STATS[f"intake:{how}"] += 1
        self.observe(None)

    @precondition(lambda self: not self.tainted and self.op is not None)
    @rule(how=st.sampled_from(("abort", "continue")))
    def end_operation(self, how: str) -> None:
        self.steps += 1
        main, op = self.paths["main"], self.op
        if how == "abort":
            _git(main, *NO_HOOKS, op, "--abort")
        else:
            (main / "README.md").write_text("resolved\n")
            _git(main, "add", "README.md")
            env = {**os.environ, "GIT_EDITOR": "true"}
            cont = ["rebase", "--continue"] if op == "rebase" else ["commit", "-q", "--no-edit"]
            proc = subprocess.run(["git", *NO_HOOKS, *cont], cwd=main, env=env, capture_output=True, text=True)
            if proc.returncode:  # git refuses to finish (main moved under the rebase): the user aborts
                STATS[f"intake:{op}:continue refused"] += 1
                _git(main, *NO_HOOKS, op, "--abort")
        self.op = None
        open_context(main)  # what the post-checkout hook does
        STATS[f"intake:{op}:{how}"] += 1
        self.observe(None)

    @precondition(lambda self: not self.tainted)
    @rule(wt=st.sampled_from(("b1", "main", "b2")), shape=st.sampled_from(tuple(SHAPES)))
    def pipeline(self, wt: str, shape: str) -> None:
        """`wt`'s branch declares another pipeline (committed). A pile that still holds tasks in
        `wt` is not dropped (the user's own loss, not the tool's)."""
        self.steps += 1
        if wt == "main" and self.op is not None:
            return
        path = self.paths[wt]
        old = self.piles_of(wt)
        new = SHAPES[shape]
        gone = [p for p in old if p not in new and p not in IN_FLIGHT and any((path / "backlog" / p).glob("*.md"))]
        if gone or old == new:
            return
        agents = path / "backlog" / "AGENTS.md"
        line = " → ".join(f"`{p}`" for p in old)
        agents.write_text(agents.read_text().replace(line, " → ".join(f"`{p}`" for p in new), 1))
        _git(path, "commit", "-q", "-m", f"pipeline {shape}", "--", "backlog/AGENTS.md")
        open_context(path)  # the symlink of a new in-flight pile
        STATS[f"intake:pipeline:{shape}"] += 1
        self.observe(None)

    def teardown(self) -> None:
        if self.op is not None and not self.failed and not self.tainted:
            try:
                self.end_operation("abort")
            except model.Violation:
                self.failed = True
                super().teardown()
                raise
        if not self.CLOSING:
            self.failed = True  # the closing round is skipped: teardown only cleans up
        super().teardown()


class RemoteHolderModel(RemoteModel):
    """RemoteModel plus [holder] (see the module's docstring) and `rescue`: an agent that comes
    back past the budget (the clock +8d) and runs `take SLUG`, which rescues a stale claim."""

    @rule(
        verb=st.sampled_from((*model.REMOTE_VERBS, "rescue")),
        clone=st.sampled_from(model.CLONES),
        task=st.sampled_from(model.TASKS),
    )
    def remote_act(self, verb: str, clone: str, task: str) -> None:
        if verb != "rescue":
            RemoteModel.remote_act(self, verb, clone, task)
            return
        self.now += timedelta(seconds=model.CLOCK_STEPS["+8d"])
        self.call(clone, claim.take, task)

    def remote_claim(self, clone: str, slug: str) -> tuple[str | None, str | None]:
        """(the remote's claims/<slug>, this clone's memory of it)."""
        server = self.base / "srv.git"
        theirs = _git(server, "rev-parse", "-q", "--verify", f"refs/backlog/claims/{slug}", check=False).stdout.strip()
        mine = _git(
            self.paths[clone], "rev-parse", "-q", "--verify", f"refs/backlog-mine/claims/{slug}", check=False
        ).stdout.strip()
        return theirs or None, mine or None

    def call(self, clone: str, fn: Any, *args: Any, skew: int = 0) -> model.Outcome:
        slug = args[0] if fn in (claim.advance, settle.fail) else None
        before = self.remote_claim(clone, slug) if slug else (None, None)
        outcome = super().call(clone, fn, *args, skew=skew)
        if slug and outcome.ok and before[0] is not None and before[0] != before[1]:
            self.violate(
                "holder",
                f"{fn.__name__} {slug} in {clone} exited 0, but the remote's claim {before[0][:12]}"
                f" is not this clone's ({(before[1] or 'none')[:12]})",
            )
        return outcome


# --------------------------------------------------------------------------- profiles

LONG = int(os.environ.get("BACKLOG_INTAKE_EXAMPLES", "0") or 0)
QUICK = settings(
    max_examples=LONG or 3,
    stateful_step_count=20 if LONG else 10,
    deadline=None,
    derandomize=not LONG,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(autouse=True)
def patched_piles(monkeypatch: pytest.MonkeyPatch) -> None:
    """test_model's pile lists, with the piles the pipelines of this file add."""
    patch_piles(monkeypatch)


def patch_piles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "IN_FLIGHT", IN_FLIGHT)
    monkeypatch.setattr(model, "ALL_PILES", ALL_PILES)


_tear_down_leftovers = model._tear_down_leftovers


def test_model_intake() -> None:
    """The intake doors on the product as it is: no violation."""
    run_state_machine_as_test(IntakeModel, settings=QUICK)


class AlikeIntakeModel(IntakeModel):
    """IntakeModel where every `add` but the dependents' writes the same bytes (test_model's
    AlikeModel): tasks alike through the intake branch, its briefs and the views."""

    ALIKE = True


def test_model_intake_alike() -> None:
    """The intake doors with tasks of the same bytes: no violation."""
    run_state_machine_as_test(AlikeIntakeModel, settings=QUICK)


def test_model_remote_holder() -> None:
    run_state_machine_as_test(RemoteHolderModel, settings=settings(QUICK, max_examples=LONG or 2))


# --------------------------------------------------------------------------- the holes, by hand
#
# One sequence per class of issue 28 (a)-(e): each passes on the product as it is, and fails with
# its class under its mutant (tests/test_model_mutants_intake.py).


def hole_a_add_during_a_rebase() -> None:
    """[lost] b1 adds while main's worktree is in a rebase; the rebase is aborted."""
    state = IntakeModel()
    state.start(wt="main")
    state.operation(how="rebase")
    state.act(verb="add", wt="b1", task="busy")
    state.end_operation(how="abort")
    state.teardown()


def hole_b_add_into_a_pile_main_lacks() -> None:
    """[invisible] b1's pipeline starts with inbox, main's does not; b1 adds."""
    state = IntakeModel()
    state.start(wt="main")
    state.pipeline(wt="b1", shape="inbox")
    state.act(verb="add", wt="b1", task="busy")
    state.teardown()


def hole_c_a_pile_only_b1_names() -> None:
    """[one-claimer] b1 advances a-plan into testing/, a pile only its pipeline names; main,
    which still holds a-plan in todo/, takes it."""
    state = IntakeModel()
    state.start(wt="main")
    state.pipeline(wt="b1", shape="testing")
    state.merge(into="b1", other="main")
    state.act(verb="take", wt="b1", task="a-plan")
    state.act(verb="advance", wt="b1", task="a-plan")
    state.act(verb="take", wt="main", task="a-plan")
    state.teardown()


def hole_d_a_dependency_on_a_renamed_task() -> None:
    """[dep] a-plan is renamed, d1 depends on a-plan (the old name), the renamed task is done."""
    state = IntakeModel()
    state.start(wt="main")
    state.rename_task(wt="main", task="busy")
    state.add_dependent(wt="main")
    state.act(verb="complete", wt="main", task="busy")
    state.teardown()


def hole_e_a_rescued_claim_completed_by_its_old_holder() -> None:
    """[holder] c2 rescues c1's claim past its budget; c1 then completes the task."""
    state = RemoteHolderModel()
    state.start()
    state.remote_act(verb="take", clone="c1", task="b-plan")
    state.remote_clock(step="+8d")
    state.remote_act(verb="take", clone="c2", task="b-plan")
    state.remote_act(verb="complete", clone="c1", task="b-plan")
    state.teardown()


HOLES = {
    "a": hole_a_add_during_a_rebase,
    "b": hole_b_add_into_a_pile_main_lacks,
    "c": hole_c_a_pile_only_b1_names,
    "d": hole_d_a_dependency_on_a_renamed_task,
    "e": hole_e_a_rescued_claim_completed_by_its_old_holder,
}


@pytest.mark.parametrize("name", sorted(HOLES))
def test_the_holes_stay_closed(name: str) -> None:
    HOLES[name]()


def test_a_new_in_flight_pile_leaves_main_clean_for_a_rebase() -> None:
    """Found by the long search (`BACKLOG_INTAKE_EXAMPLES=150`, session 16): main's pipeline gains
    the in-flight pile `checking`; the self-heal added its .gitignore line without committing it,
    and the user's `git rebase` in main was refused ("cannot rebase: You have unstaged changes").
    The line is now committed with it (heal.py); the shrunk sequence, trimmed."""
    state = IntakeModel()
    state.start(wt="main")
    state.pipeline(shape="checking", wt="main")
    state.operation(how="rebase")
    state.add_dependent(wt="b1")
    state.teardown()
