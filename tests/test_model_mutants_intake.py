"""Does the checker of the intake doors (tests/test_model_intake.py) find the holes of issue 28?

As in tests/test_model_mutants.py: a *mutant* puts one fixed hole back in-process (a monkeypatch
of the function the fix lives in, guarded: when the product's code no longer has the shape the
mutant replaces, the test says so instead of checking nothing), and the state machine must
report the hole's violation class at random, within a bounded number of examples. Unlike the
older mutants, these searches run in the suite: derandomized (the same examples every run),
without shrinking, each stopping at its first violation.

The mutants:
  (a) `intake.refuse_busy`: a no-op, as before a0da072: `add` in another
      worktree while main's worktree is in a rebase (HEAD detached) moves refs/heads/main by a
      plumbing commit, and the rebase's abort or end drops it.  [lost]
  (b) `add.add` files into this worktree's first pile again and `moves.landing` no longer refuses a
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
      fails or completes the task as if it still held it.  [holder], or [ended-twice] when the
      rescuer settled first (RemoteHolderModel)

The focused profiles (below, `focus`): the plain machine drawing only its door's steps. Each
opens its door in an initial step drawn at random ((a) a rebase or a merge in main's worktree;
(b) b1's or b2's pipeline starting with inbox; (c) b1's pipeline with `testing`, b2's with
`checking`: whichever claims first can move the task where the other does not look), then draws
verbs at random, the ones the hole needs always on and the others switched on or off per example
(swarm testing). (d) and (e) open nothing: their one rule draws rename, depend and complete, or
take, fail, retry and rescue. Found in the suite (derandomized, at most SEARCH_EXAMPLES = 15
examples of 10 steps, 8 for the remote): (a) after 2 examples, (b) 2, (c) 5, (d) 4, (e) 8.
BACKLOG_INTAKE_MUTANT_EXAMPLES=N searches at random (a new seed every run) up to N examples and
also runs each focused profile on the product, which must find nothing. With
BACKLOG_INTAKE_SHRINK=1 hypothesis also shrinks and the test prints the sequence.
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
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, initialize, precondition, rule
from test_model import STATS, violation_type
from test_model_intake import HOLES as BY_HAND
from test_model_intake import IntakeModel, RemoteHolderModel

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
    assert "refuse_busy(" in _source(moves.landing), "moves.landing no longer asks refuse_busy: review the mutant"
    _in_place(monkeypatch, intake.refuse_busy, [("for busy in", "for busy in () and")])


def mutant_add_into_this_worktrees_pile(monkeypatch: pytest.MonkeyPatch) -> None:
    """(b) add's pile is this worktree's first; land refuses no pile the intake branch lacks."""
    _in_place(
        monkeypatch, add.add, [("(ctx.pipeline if target is None else target.pipeline).first", "ctx.pipeline.first")]
    )
    _in_place(monkeypatch, moves.landing, [("if pile not in tracked:", "if False:")])


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
    classes: tuple[str, ...]  # what the hole breaks (the first: the by-hand sequence's class)
    mutant: Callable[[pytest.MonkeyPatch], None]
    machine: type[RuleBasedStateMachine]
    steps: int = 10


# The focused profiles. Each search draws the steps of its door only (as the focused profile of
# test_model_mutants.py narrows the draw): the same rules and invariants, fewer choices. A rule
# listed under several names is drawn that many times as often (hypothesis draws a rule uniformly
# among the enabled ones, and its swarm testing switches a rule's copies on and off together);
# inside a rule, the values a hole needs are always on and the others are switched on or off per
# example (`swarmed`). The searches skip the teardown's closing round (CLOSING: maintain twice in
# every worktree, the views agree), which checks classes none of these holes breaks. A printed
# sequence replays on the plain class (the focused classes carry its name).
INTAKE_RULES = (
    "act",
    "act_2",
    "add_dependent",
    "rename_task",
    "maintain",
    "merge",
    "operation",
    "end_operation",
    "pipeline",
    "idle",
)
READY: dict[str, Callable[[Any], bool]] = {
    "operation": lambda self: not self.tainted and self.op is None,
    "end_operation": lambda self: not self.tainted and self.op is not None,
}


def swarmed(key: str, always: tuple[str, ...], optional: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    """sampled_from(always + optional), less the optional values this example switched off (each
    with probability 1/2; a switch shrinks to "on")."""
    off = st.shared(st.lists(st.booleans(), min_size=len(optional), max_size=len(optional)), key=f"swarm: {key}")
    return off.flatmap(
        lambda flags: st.sampled_from([*always, *(v for v, f in zip(optional, flags, strict=True) if not f)])
    )


def _step(machine: type[Any], name: str, draws: dict[str, st.SearchStrategy[Any]]) -> Callable[..., None]:
    def step(self: Any, *args: Any, **values: Any) -> None:
        getattr(machine, name)(self, *args, **values)

    step.__name__ = step.__qualname__ = name
    return precondition(READY.get(name, lambda self: not getattr(self, "tainted", False)))(rule(**draws)(step))


def _not_drawn(machine: type[Any], name: str) -> Callable[..., None]:
    """A rule of `machine` as a plain method: not drawn, still there for the steps that call it."""

    def step(self: Any, *args: Any, **values: Any) -> None:
        getattr(machine, name)(self, *args, **values)

    return step


Draws = dict[str, st.SearchStrategy[Any]]


def focus(
    machine: type[Any],
    label: str,
    off: tuple[str, ...],
    opening: tuple[tuple[str, Draws], ...] = (),
    **rules: tuple[int, Draws] | list[Draws],
) -> type[Any]:
    """`machine` drawing only `rules` (name: (copies, draws), or one copy per draws in a list),
    after its own initial step and the `opening` steps ((name, draws); hypothesis runs them in a
    random order); the rules in `off` are not drawn."""
    attrs: dict[str, Any] = {name: _not_drawn(machine, name) for name in off}
    for i, (name, draws) in enumerate(opening):
        attrs[f"open_{i}"] = initialize(**draws)(_not_drawn(machine, name))
        attrs[f"open_{i}"].__name__ = name
    for name, spec in rules.items():
        copies = [spec[1]] * spec[0] if isinstance(spec, tuple) else spec
        attrs.update({name + ("" if i == 0 else f"_{i + 1}"): _step(machine, name, d) for i, d in enumerate(copies)})
    attrs["CLOSING"] = False
    focused = type(f"{machine.__name__}_{label}", (machine,), attrs)
    focused.__name__ = focused.__qualname__ = machine.__name__
    return focused


def intake_focus(
    label: str, opening: tuple[tuple[str, Draws], ...] = (), **rules: tuple[int, Draws] | list[Draws]
) -> type[IntakeModel]:
    return focus(IntakeModel, label, INTAKE_RULES, opening, **rules)


FOCUS_OPERATION = intake_focus(
    "a",
    (("operation", {"how": st.sampled_from(("rebase", "merge"))}),),
    act=(
        2,
        {
            "verb": swarmed("a", ("add", "add"), ("take", "fail", "retry", "release")),
            "wt": st.sampled_from(("b1", "holder")),
            "task": st.sampled_from(("busy", "a-plan")),
        },
    ),
    end_operation=(1, {"how": st.sampled_from(("abort", "continue"))}),
)
FOCUS_PIPELINE = intake_focus(
    "b",
    (("pipeline", {"wt": st.sampled_from(("b1", "b2")), "shape": st.just("inbox")}),),
    act=(
        1,
        {
            "verb": swarmed("b", ("add", "add"), ("take", "depend")),
            "wt": st.sampled_from(("b1", "b2", "main")),
            "task": st.sampled_from(("busy", "a-plan")),
        },
    ),
)
FOCUS_ELSEWHERE = intake_focus(
    "c",
    (
        ("pipeline", {"wt": st.just("b1"), "shape": st.just("testing")}),
        ("pipeline", {"wt": st.just("b2"), "shape": st.just("checking")}),
    ),
    act=(
        1,
        {
            "verb": swarmed("c", ("take", "take", "advance", "take", "take", "advance"), ("fail", "release")),
            "wt": st.sampled_from(("b1", "b2")),
            "task": st.just("a-plan"),
        },
    ),
)
FOCUS_RENAME = intake_focus(
    "d",
    act=(
        1,
        {
            "verb": swarmed("d", ("rename", "depend", "complete"), ("take", "fail", "retry")),
            "wt": st.sampled_from(("main", "holder")),
            "task": st.just("busy"),
        },
    ),
)


class _RemoteOpening(RemoteHolderModel):
    @initialize()
    def start(self) -> None:
        """Not the plain start's completion of a-plan (a replay on the plain class runs it too: the
        hole is b-plan's)."""
        self.observe()


FOCUS_REMOTE = focus(
    _RemoteOpening,
    "e",
    ("prune", "sync", "remote_clock"),
    remote_act=[
        {
            "verb": swarmed("e", ("take", "fail", "retry"), ("complete",)),
            "clone": st.sampled_from(model.CLONES),
            "task": st.just(model.TASKS[1]),
        },
        {"verb": st.just("rescue"), "clone": st.sampled_from(model.CLONES[::-1]), "task": st.just(model.TASKS[1])},
    ],
)
FOCUS_REMOTE.__name__ = FOCUS_REMOTE.__qualname__ = RemoteHolderModel.__name__
STEPS_REMOTE = 8  # a remote step costs several git exchanges; the hole takes three

HOLES = [
    Hole("a-write-during-a-rebase", ("lost",), mutant_write_during_a_rebase, FOCUS_OPERATION),
    Hole(
        "b-add-into-a-pile-the-intake-branch-lacks", ("invisible",), mutant_add_into_this_worktrees_pile, FOCUS_PIPELINE
    ),
    Hole("c-a-pile-only-another-branch-names", ("one-claimer",), mutant_no_piles_elsewhere, FOCUS_ELSEWHERE),
    Hole("d-a-dependency-on-a-renamed-task", ("dep",), mutant_no_rename_tombstones, FOCUS_RENAME),
    # two holders: the old one's completion exits 0 while the remote's claim is the other's, or
    # (when the rescuer settled first) both end the task
    Hole(
        "e-remote-without-compare-and-swap",
        ("holder", "ended-twice"),
        mutant_push_without_leases,
        FOCUS_REMOTE,
        steps=STEPS_REMOTE,
    ),
]

# In the suite: derandomized (the same examples every run), at most SEARCH_EXAMPLES each. With
# BACKLOG_INTAKE_MUTANT_EXAMPLES=N: a random search of up to N examples (a new seed every run).
LONG = int(os.environ.get("BACKLOG_INTAKE_MUTANT_EXAMPLES", "0") or 0)
SEARCH_EXAMPLES = LONG or 15
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
            derandomize=not LONG,
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
    intake_model.patch_piles(monkeypatch)
    hole.mutant(monkeypatch)
    start = freezegun.api.real_monotonic()
    examples, error, report = search(hole.machine, SEARCH_EXAMPLES, hole.steps)
    took = freezegun.api.real_monotonic() - start
    head = (
        f"mutant {hole.name}: "
        + (f"[{error}]"[:300] if error else "NOT found")
        + f" in {examples} examples, {took:.1f}s"
    )
    model.show(request.config, [head, *(f"    {line}" for text in report for line in text.splitlines())])
    assert error is not None, f"the search did not find hole {hole.name} in {examples} examples"
    assert isinstance(error, tuple(violation_type(cls) for cls in hole.classes)), error


@pytest.mark.skipif(not LONG, reason="with BACKLOG_INTAKE_MUTANT_EXAMPLES=N")
@pytest.mark.parametrize("hole", HOLES, ids=[h.name for h in HOLES])
def test_the_focused_profile_finds_nothing_on_the_product(hole: Hole, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each focused profile, on the product as it is (no mutant): no violation."""
    intake_model.patch_piles(monkeypatch)
    examples, error, _ = search(hole.machine, LONG, hole.steps)
    assert error is None, f"{error} after {examples} examples"


@pytest.mark.parametrize("hole", HOLES, ids=[h.name for h in HOLES])
def test_the_mutant_reopens_its_hole(hole: Hole, monkeypatch: pytest.MonkeyPatch) -> None:
    """Quick: under the mutant, the hole's sequence by hand (test_model_intake.py) fails with its
    class again; without it, it passes (`test_the_holes_stay_closed`)."""
    intake_model.patch_piles(monkeypatch)
    hole.mutant(monkeypatch)
    with pytest.raises(violation_type(hole.classes[0])):
        BY_HAND[hole.name[0]]()
