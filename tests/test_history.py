"""History counts (SPEC §7.10): tasks settled on any branch before the ledger knew them."""

from __future__ import annotations

import json

from conftest import git


def settle_by_hand(wt, slug: str, pile: str, line: str) -> None:
    """What the older bash tool leaves: the task moved and committed, no ledger entry."""
    src = wt / f"backlog/todo/{slug}.md"
    dst = wt / f"backlog/{pile}/{slug}.md"
    dst.write_text(
        src.read_text() + f"- 2026-11-01T10:00:00Z advanced to=doing claimer=bash branch={wt.path.name}\n{line}\n"
    )
    src.unlink()
    git(wt.path, "add", "-A", "backlog")
    git(wt.path, "commit", "-qm", f"bash tool: {slug} → {pile}")


def test_tasks_settled_on_other_branches_are_never_claimed_again(shared):
    for name in ("a", "b", "c"):
        shared.ok("add", name)
    feat = shared.worktree("feat")
    settle_by_hand(feat, "a-plan", "done", "- 2026-11-01T11:00:00Z advanced to=done")
    settle_by_hand(feat, "b-plan", "failed", "- 2026-11-01T11:00:00Z failed | broke")
    assert not (shared.path / ".git/backlog/.ledger/a-plan").exists()  # the ledger starts empty
    proc = shared.run("take", "a-plan")
    assert proc.returncode == 1 and "settled (done) on branch feat" in proc.stderr
    assert shared.run("take", "b-plan").returncode == 1
    assert json.loads(shared.ok("--json", "take"))["slug"] == "c-plan"  # auto-pick skips a and b
    out = shared.ok("maintain")
    assert "SETTLED ELSEWHERE: backlog/todo/a-plan.md" in out and "SETTLED ELSEWHERE: backlog/todo/b-plan.md" in out


def test_history_is_read_once_per_tree(shared):
    shared.ok("add", "a")
    feat = shared.worktree("feat")
    settle_by_hand(feat, "a-plan", "done", "- 2026-11-01T11:00:00Z advanced to=done")
    shared.run("take")
    scanned = json.loads((shared.path / ".git/backlog/.history/scanned.json").read_text())
    assert git(feat.path, "rev-parse", "HEAD^{tree}").strip() in scanned
    (shared.path / ".git/backlog/.ledger/a-plan").unlink()  # forgotten: no re-read while no branch moved
    assert shared.run("take", "a-plan").returncode == 0


# -- SPEC §7.11: history in every layout the tool reads ------------------------------------------
def settle_into(wt, slug: str, rel: str, data: bytes) -> None:
    """The bash tool's older layouts: the todo/ copy moved to `rel` (e.g. done/2025/), committed."""
    (wt / f"backlog/todo/{slug}.md").unlink()
    dst = wt / f"backlog/{rel}/{slug}.md"
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)
    git(wt.path, "add", "-A", "backlog")
    git(wt.path, "commit", "-qm", f"bash tool: {slug} → {rel}")


def test_history_reads_the_year_folders_of_done_and_failed(shared):
    for name in ("a", "b", "c"):
        shared.ok("add", name)
    feat = shared.worktree("feat")
    line = "- 2025-11-01T10:00:00Z advanced to=doing claimer=bash branch=feat\n"
    a = (feat / "backlog/todo/a-plan.md").read_text() + line + "- 2025-11-01T11:00:00Z advanced to=done\n"
    b = (feat / "backlog/todo/b-plan.md").read_text() + line + "- 2025-11-01T11:00:00Z failed | broke\n"
    settle_into(feat, "a-plan", "done/2025", a.encode())
    settle_into(feat, "b-plan", "failed/2025/11", b.encode())
    proc = shared.run("take", "a-plan")
    assert proc.returncode == 1 and "settled (done) on branch feat" in proc.stderr
    proc = shared.run("take", "b-plan")
    assert proc.returncode == 1 and "settled (failed) on branch feat" in proc.stderr
    assert json.loads(shared.ok("--json", "take"))["slug"] == "c-plan"


def test_a_settled_copy_that_cannot_be_read_still_counts_as_settled(shared):
    shared.ok("add", "a")
    shared.ok("add", "b")
    feat = shared.worktree("feat")
    settle_into(feat, "a-plan", "done", b"\xff\xfe not a task \x00")  # not UTF-8, a NUL byte
    settle_into(feat, "b-plan", "done/2024", b"\x00")
    git(feat.path, "update-ref", "refs/remotes/origin/feat", "HEAD")  # known only as a remote-tracking branch
    git(feat.path, "switch", "-q", "--detach")
    git(shared.path, "branch", "-D", "feat")
    assert shared.run("take", "a-plan").returncode == 1
    assert shared.run("take", "b-plan").returncode == 1
    proc = shared.run("--json", "take")
    assert json.loads(proc.stdout)["slug"] is None and not list((shared / "backlog/doing").glob("*.md"))


def test_two_tasks_settled_with_the_same_bytes_are_both_known(shared):
    """History was read per blob: two settled copies of the same bytes (tasks written alike, settled
    by hand with no log) were one, and the other stayed claimable from a stale todo/ copy (session 20)."""
    body = "---\npriority: 3\n---\n\n# Same words\n"
    for slug in ("a-plan", "b-plan"):
        (shared / f"backlog/todo/{slug}.md").write_text(body)
    shared.git("add", "-A", "backlog")
    shared.git("commit", "-qm", "two tasks, one text")
    feat = shared.worktree("feat")
    for slug in ("a-plan", "b-plan"):
        settle_into(feat, slug, "done", body.encode())
    for slug in ("a-plan", "b-plan"):
        proc = shared.run("take", slug)
        assert proc.returncode == 1 and "on branch feat" in proc.stderr, (slug, proc.stderr)
    assert json.loads(shared.ok("--json", "take"))["slug"] is None
