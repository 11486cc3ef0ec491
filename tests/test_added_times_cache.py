"""The cache of when git recorded each task's addition never changes the answer (SPEC §5: the
auto-pick order is the same in every worktree and clone; docs/design.md, *Ties*).

`intake.added_times` reads `git log` only over the commits it has not read before and keeps the
answer with the tips it covers. A generated history of adds, removals, resets (a commit undone,
its file left in the work tree or not), and commits on another branch that the worktree then
checks out, with the committer's clock going back now and then, and the tool's own claims and
additions committed through plumbing (whose notes let the cache skip `git log` over a commit
that added no todo/ file): after every step the answer read
through the cache this worktree has kept since the start equals the answer read with no cache at
all (what a fresh worktree or clone of the same commits computes).

`BACKLOG_ADDED_TIMES_EXAMPLES=150` searches longer (about a minute).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import backlog, copy_repo, git, set_aside
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from maildir_backlog.intake import added_times
from maildir_backlog.layout import Layout

EXAMPLES = int(os.environ.get("BACKLOG_ADDED_TIMES_EXAMPLES", "12"))  # (~6 s: the suite's budget)
SLUGS = ("a-plan", "b-plan", "c-plan")

step = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(SLUGS), st.integers(1, 6)),
    st.tuples(st.just("rm"), st.sampled_from(SLUGS), st.integers(1, 6)),
    st.tuples(st.just("reset"), st.sampled_from(("--mixed", "--hard")), st.integers(1, 2)),
    st.tuples(st.just("switch"), st.sampled_from(("main", "other")), st.just(0)),
    st.tuples(st.just("take"), st.sampled_from(SLUGS), st.just(0)),  # the tool's claim: a removal, noted
    st.tuples(st.just("tool-add"), st.sampled_from(SLUGS), st.integers(1, 6)),  # noted, a todo/ path present
)
PLUMBED = {"BACKLOG_PLUMBED_FROM": "0"}  # (`gitplumbed.FROM_VARIABLE`: every commit through plumbing)


def _commit(path: Path, day: int, message: str) -> None:
    env = dict(os.environ, GIT_COMMITTER_DATE=f"2026-01-0{day}T00:00:00Z", GIT_AUTHOR_DATE=f"2026-01-0{day}T00:00:00Z")
    subprocess.run(["git", "commit", "-q", "-m", message], cwd=path, env=env, capture_output=True, check=False)


def apply(path: Path, op: tuple[str, str, int], n: int) -> None:
    kind, arg, num = op
    todo = path / "backlog" / "todo"
    if kind == "add":
        (todo / f"{arg}.md").write_text(f"---\npriority: 5\n---\n\n# {arg} {n}\n")
        git(path, "add", "-A", "--", "backlog/todo")
        _commit(path, num, f"add {arg}")
    elif kind == "rm":
        # (-f: a reset --mixed may have left the work tree's copy unlike the index's, and git
        # refuses to remove such a file without it; session 29)
        git(path, "rm", "-q", "-f", "--ignore-unmatch", "--", f"backlog/todo/{arg}.md")
        _commit(path, num, f"rm {arg}")
    elif kind == "take":
        backlog(path, "take", arg, env=PLUMBED)  # (refused when it is not in todo/: nothing committed)
    elif kind == "tool-add":
        day = f"2026-01-0{num}T00:00:00Z"
        backlog(path, "add", arg.removesuffix("-plan"), env={**PLUMBED, "GIT_COMMITTER_DATE": day})
    elif kind == "reset":
        if git(path, "rev-parse", "-q", "--verify", f"HEAD~{num + 1}", check=False).strip():  # never the setup
            git(path, "reset", "-q", arg, f"HEAD~{num}")
    else:
        git(path, "add", "-A", "--", "backlog/todo")  # (what a reset --mixed left: committed where we are)
        _commit(path, 6, "keep")
        git(path, "checkout", "-q", arg, check=False)


def answers(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """(the answer through this worktree's cache, the answer with none); the cache is left as the
    first read left it, so that it keeps growing step by step."""
    from maildir_backlog.context import open_context

    ctx = open_context(path)
    cached = added_times(ctx.repo, ctx.project)
    with set_aside(Layout.of(ctx.repo).added_cache):
        fresh = added_times(ctx.repo, ctx.project)
    return cached, fresh


@pytest.mark.parametrize("_", [0])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=1, max_size=12))
# found by this test at once (session 20): a task added, its commit undone by `git reset --mixed`
# (the file stays, never committed now): the cache kept the undone addition's time, where a fresh
# worktree ranks the task as newest. `intake._within` now reads the whole history again.
@example(steps=[("add", "a-plan", 1), ("reset", "--mixed", 1)])
@example(steps=[("add", "a-plan", 1), ("add", "b-plan", 2), ("take", "a-plan", 0), ("reset", "--hard", 1)])
# the harness's own removal refused by git (session 29): a file a reset --mixed left modified
@example(steps=[("add", "a-plan", 1), ("add", "a-plan", 1), ("reset", "--mixed", 1), ("rm", "a-plan", 1)])
def test_the_cache_of_added_times_never_changes_the_answer(_, steps, repo_templates):
    base = Path(tempfile.mkdtemp(prefix="added-times-"))
    try:
        path = copy_repo(repo_templates("maildir-shared"), base / "repo").path
        git(path, "branch", "-q", "other")
        for n, op in enumerate(steps):
            apply(path, op, n)
            cached, fresh = answers(path)
            assert cached == fresh, (steps[: n + 1], cached, fresh)
    finally:
        shutil.rmtree(base, ignore_errors=True)
