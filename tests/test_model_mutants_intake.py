"""Does the checker of the intake doors (tests/test_model_intake.py) find the holes of issue 28?

As in tests/test_model_mutants.py: a *mutant* puts one fixed hole back in-process (a monkeypatch
of the function the fix lives in, guarded: when the product's code no longer has the shape the
mutant replaces, the test says so instead of checking nothing), and the state machine must
report the hole's violation class at random, within a bounded number of examples. Unlike the
older mutants, these searches run in the suite: derandomized (the same examples every run),
without shrinking, each stopping at its first violation.

The mutants:
  (a) `intake.refuse_busy` (and moves' name for it): a no-op, as before a0da072: `add` in another
      worktree while main's worktree is in a rebase (HEAD detached) moves refs/heads/main by a
      plumbing commit, and the rebase's abort or end drops it.  [lost]
  (b) `add.add` files into this worktree's first pile again and `moves.land` no longer refuses a
      pile the intake branch's pipeline lacks (both halves of 634fae7): a task added in a
      worktree whose pipeline starts with `inbox` lands in main's inbox/, a pile main does not
      name.  [invisible]
  (c) `Pipeline.with_clone_piles`: the pipeline learns nothing of the shared root (before
      b902fe0): a task in a shared in-flight pile only another branch names is claimable
      here too.  [one-claimer]
  (d) `lifecycle`'s `renamed_to`: the tombstones are not followed (before 4feff20): a dependency
      on a renamed task is never met.  [dep]
  (e) `Transport.push` without its leases (every update forced): the remote's compare-and-swap
      is what keeps one holder across clones; a clone whose claim was rescued by another then
      completes the task as if it still held it.  [holder] (RemoteHolderModel)

Searches: SEARCH_EXAMPLES (BACKLOG_INTAKE_MUTANT_EXAMPLES=N for a longer bound). With
BACKLOG_INTAKE_SHRINK=1 hypothesis also shrinks and the test prints the sequence (the
`found_*` sequences below were made so).
"""

from __future__ import annotations

import inspect
import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import freezegun.api
import pytest
import test_model as model
import test_model_intake as intake_model
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, precondition, rule
from test_model import STATS, violation_type
from test_model_intake import HOLES as BY_HAND
from test_model_intake import IntakeModel, RemoteHolderModel
from test_model_mutants import stress_enabled

from maildir_backlog import intake, lifecycle, moves
from maildir_backlog.commands import add
from maildir_backlog.project import Pipeline
from maildir_backlog.remote.transport import Transport


def _source(fn: Callable[..., object]) -> str:
    return textwrap.dedent(inspect.getsource(inspect.unwrap(fn)))


def _recompiled(fn: Callable[..., Any], pairs: list[tuple[str, str]]) -> Any:
    """`fn`'s code with each `old` replaced by `new` (each found exactly once), compiled in its
    own module's namespace."""
    fn = inspect.unwrap(fn)
    source = _source(fn)
    for old, new in pairs:
        assert source.count(old) == 1, f"{fn.__qualname__} changed ({old!r}): review the mutant"
        source = source.replace(old, new)
    namespace: dict[str, Any] = {}
    exec(compile(source, inspect.getsourcefile(fn) or "<mutant>", "exec"), fn.__globals__, namespace)  # noqa: S102
    return namespace[fn.__name__]


def _in_place(monkeypatch: pytest.MonkeyPatch, fn: Callable[..., Any], pairs: list[tuple[str, str]]) -> None:
    """Replace `fn`'s code in place: every module that imported it by name runs the mutant."""
    fn = inspect.unwrap(fn)
    monkeypatch.setattr(fn, "__code__", _recompiled(fn, pairs).__code__)


def mutant_write_during_a_rebase(monkeypatch: pytest.MonkeyPatch) -> None:
    """(a) no refusal while a worktree has the intake branch in a rebase or the like."""
    assert "operations(repo)" in _source(intake.refuse_busy), "intake.refuse_busy changed: review the mutant"
    assert "refuse_busy(" in _source(moves.land), "moves.land no longer asks refuse_busy: review the mutant"
    _in_place(monkeypatch, intake.refuse_busy, [("for busy in", "for busy in () and")])


def mutant_add_into_this_worktrees_pile(monkeypatch: pytest.MonkeyPatch) -> None:
    """(b) add's pile is this worktree's first; land refuses no pile the intake branch lacks."""
    _in_place(
        monkeypatch, add.add, [("(ctx.pipeline if target is None else target.pipeline).first", "ctx.pipeline.first")]
    )
    _in_place(monkeypatch, moves.land, [("if pile not in tracked:", "if False:")])


def mutant_no_piles_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """(c) the shared root's in-flight piles this pipeline lacks are not in flight here."""
    assert "elsewhere=extra" in _source(Pipeline.with_clone_piles), "with_clone_piles changed: review the mutant"
    monkeypatch.setattr(Pipeline, "with_clone_piles", lambda self, names: self)


def mutant_no_rename_tombstones(monkeypatch: pytest.MonkeyPatch) -> None:
    """(d) a dependency's name is looked up as it is, never through the rename tombstones."""
    assert "renamed_to(" in _source(lifecycle.unmet), "lifecycle.unmet changed: review the mutant"
    monkeypatch.setattr(lifecycle, "renamed_to", lambda lookup, name, stop=(): (name, lookup(name)))


def mutant_push_without_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    """(e) every update of refs/backlog/ forced: no compare-and-swap on the remote."""
    _in_place(
        monkeypatch,
        Transport.push,
        [
            ("for u in updates if u.expect is not None]", "for u in updates if False]"),
            ('args.append(f"+{spec}" if u.expect is None else spec)', 'args.append(f"+{spec}")'),
        ],
    )


@dataclass(frozen=True)
class Hole:
    name: str
    cls: str
    mutant: Callable[[pytest.MonkeyPatch], None]
    machine: type[RuleBasedStateMachine]
    quick: bool  # its search runs in the suite (else with -m stress or BACKLOG_INTAKE_MUTANT_EXAMPLES)


# Each search draws the steps of its door only (as the focused profile of test_model_mutants.py
# narrows the draw): the same rules and invariants, fewer choices, so a hole that needs three to
# five steps in order lines up within a few dozen examples. A printed sequence replays on the
# plain class (the focused classes carry its name).
RULES = ("act", "act_2", "add_dependent", "rename_task", "maintain", "merge", "operation", "end_operation", "pipeline")
READY: dict[str, Callable[[Any], bool]] = {
    "operation": lambda self: not self.tainted and self.op is None,
    "end_operation": lambda self: not self.tainted and self.op is not None,
}


def _step(name: str, draws: dict[str, st.SearchStrategy[Any]]) -> Callable[..., None]:
    def step(self: IntakeModel, **values: Any) -> None:
        getattr(IntakeModel, name)(self, **values)

    step.__name__ = step.__qualname__ = name
    return precondition(READY.get(name, lambda self: not self.tainted))(rule(**draws)(step))


def focus(label: str, **rules: dict[str, st.SearchStrategy[Any]]) -> type[IntakeModel]:
    attrs: dict[str, Any] = {name: None for name in RULES}
    attrs.update({name: _step(name.rstrip("_2"), draws) for name, draws in rules.items()})
    machine = type(f"IntakeModel_{label}", (IntakeModel,), attrs)
    machine.__name__ = machine.__qualname__ = IntakeModel.__name__
    return machine


ACT = {"wt": st.sampled_from(("holder", "b1")), "task": st.sampled_from(("busy", "a-plan"))}
FOCUS_OPERATION = focus(
    "a",
    act={**ACT, "verb": st.sampled_from(("add", "take", "fail", "retry", "release"))},
    add_dependent={"wt": st.just("b1")},
    operation={"how": st.sampled_from(("rebase", "merge"))},
    end_operation={"how": st.sampled_from(("abort", "continue"))},
)
FOCUS_PIPELINE = focus(
    "b",
    act={**ACT, "wt": st.sampled_from(("b1", "b2", "main")), "verb": st.just("add")},
    pipeline={"wt": st.sampled_from(("b1", "b2")), "shape": st.just("inbox")},
)
FOCUS_ELSEWHERE = focus(
    "c",
    act={**ACT, "wt": st.sampled_from(("holder", "b1", "main")), "verb": st.sampled_from(("take", "advance"))},
    pipeline={"wt": st.sampled_from(("b1", "main")), "shape": st.sampled_from(("testing", "base"))},
    merge={"into": st.sampled_from(("b1", "main")), "other": st.sampled_from(("main", "b1"))},
)
FOCUS_RENAME = focus(
    "d",
    act={**ACT, "verb": st.sampled_from(("complete", "take"))},
    add_dependent={"wt": st.sampled_from(("main", "b1"))},
    rename_task={"wt": st.sampled_from(("main", "b1")), "task": st.just("busy")},
    merge={"into": st.sampled_from(("b1", "main")), "other": st.sampled_from(("main", "b1"))},
)


class FocusedRemote(RemoteHolderModel):
    """RemoteHolderModel drawing claims and completions of one task, and the clock past its budget."""

    @rule(verb=st.sampled_from(("take", "complete")), clone=st.sampled_from(model.CLONES), task=st.just(model.TASKS[1]))
    def remote_act(self, verb: str, clone: str, task: str) -> None:
        RemoteHolderModel.remote_act(self, verb, clone, task)

    @rule(step=st.just("+8d"))
    def remote_clock(self, step: str) -> None:
        RemoteHolderModel.remote_clock(self, step)

    def sync(self, clone: str, how: str) -> None:  # not drawn here (start pushes c1's main)
        RemoteHolderModel.sync(self, clone, how)

    prune = None  # type: ignore[assignment]


FocusedRemote.__name__ = FocusedRemote.__qualname__ = RemoteHolderModel.__name__

HOLES = [
    Hole("a-write-during-a-rebase", "lost", mutant_write_during_a_rebase, FOCUS_OPERATION, True),
    Hole(
        "b-add-into-a-pile-the-intake-branch-lacks",
        "invisible",
        mutant_add_into_this_worktrees_pile,
        FOCUS_PIPELINE,
        True,
    ),
    Hole("c-a-pile-only-another-branch-names", "one-claimer", mutant_no_piles_elsewhere, FOCUS_ELSEWHERE, False),
    Hole("d-a-dependency-on-a-renamed-task", "dep", mutant_no_rename_tombstones, FOCUS_RENAME, False),
    Hole("e-remote-without-compare-and-swap", "holder", mutant_push_without_leases, FocusedRemote, False),
]

LONG = int(os.environ.get("BACKLOG_INTAKE_MUTANT_EXAMPLES", "0") or 0)
SEARCH_EXAMPLES = LONG or 25
SHRINK = os.environ.get("BACKLOG_INTAKE_SHRINK", "") not in ("", "0")


def search(
    machine: type[RuleBasedStateMachine], examples: int, steps: int
) -> tuple[int, BaseException | None, list[str]]:
    """(examples run, the violation or None, what hypothesis printed)."""
    phases = list(Phase) if SHRINK else [Phase.explicit, Phase.generate]
    test = get_state_machine_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            derandomize=True,
            database=None,
            phases=phases,
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
        ),
    )
    before = STATS["sequences"] + STATS["remote sequences"]
    report: list[str] = []
    with with_reporter(report.append):
        try:
            test()
        except model.Violation as exc:
            report += getattr(exc, "__notes__", [])
            return STATS["sequences"] + STATS["remote sequences"] - before, exc, report
    return STATS["sequences"] + STATS["remote sequences"] - before, None, report


_tear_down_leftovers = model._tear_down_leftovers


@pytest.mark.parametrize("hole", HOLES, ids=[h.name for h in HOLES])
def test_the_search_finds_the_hole(hole: Hole, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    if not (hole.quick or LONG or stress_enabled(request.config)):
        pytest.skip("this search runs with -m stress, BACKLOG_STRESS=1 or BACKLOG_INTAKE_MUTANT_EXAMPLES=N")
    intake_model.patch_piles(monkeypatch)
    hole.mutant(monkeypatch)
    start = freezegun.api.real_monotonic()
    examples, error, report = search(hole.machine, SEARCH_EXAMPLES if hole.quick else LONG or 200, 10)
    took = freezegun.api.real_monotonic() - start
    head = (
        f"mutant {hole.name}: "
        + (f"[{error}]"[:300] if error else "NOT found")
        + f" in {examples} examples, {took:.0f}s"
    )
    model.show(request.config, [head, *(f"    {line}" for text in report for line in text.splitlines())])
    assert error is not None, f"the search did not find hole {hole.name} in {examples} examples"
    assert isinstance(error, violation_type(hole.cls)), error


@pytest.mark.parametrize("hole", HOLES, ids=[h.name for h in HOLES])
def test_the_mutant_reopens_its_hole(hole: Hole, monkeypatch: pytest.MonkeyPatch) -> None:
    """Quick: under the mutant, the hole's sequence by hand (test_model_intake.py) fails with its
    class again; without it, it passes (`test_the_holes_stay_closed`)."""
    intake_model.patch_piles(monkeypatch)
    hole.mutant(monkeypatch)
    with pytest.raises(violation_type(hole.cls)):
        BY_HAND[hole.name[0]]()
