"""Where piles live, and the layout self-heal of maildir-shared (SPEC §4)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import git
from hypothesis import given, settings
from hypothesis import strategies as st

from maildir_backlog import git as g
from maildir_backlog import project
from maildir_backlog.backend import GitBackend, SharedBackend, open_backend
from maildir_backlog.layout import Layout

TASK_A = b"---\r\npriority: 2\r\n---\r\n\r\n# A  \r\n\r\n---\r\n\r\n- 2026-01-01T00:00:00Z advanced to=doing claimer=x branch=main\r\n"
TASK_B = b"# B\n\nno log yet, odd bytes \xc3\xa9\n"


def common(repo) -> Path:
    return repo / ".git"


def assert_link_ok(worktree: Path, pile: str, shared_root: Path) -> None:
    link = worktree / "backlog" / pile
    assert link.is_symlink()
    assert os.readlink(link) == str(shared_root / pile)  # absolute, straight at the shared pile
    assert os.path.isabs(os.readlink(link))
    assert (shared_root / pile).is_dir()


def layout_warnings(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("backlog: layout:")]


# -- where piles live ----------------------------------------------------------------------
def test_backends_place_piles(anybk):
    ctx = anybk.context()
    be = ctx.backend
    shared = isinstance(be, SharedBackend)
    assert be.shared_root == anybk / ".git/backlog"
    assert be.is_shared("doing") == shared
    assert not any(be.is_shared(p) for p in ("todo", "done", "failed"))
    assert be.pile_dir("doing") == (anybk / ".git/backlog/doing" if shared else anybk / "backlog/doing")
    assert be.pile_dir("todo") == anybk / "backlog/todo"
    assert be.display("doing", "x") == "backlog/doing/x.md"
    if not shared:
        assert (anybk / "backlog/doing").is_dir() and not (anybk / "backlog/doing").is_symlink()
        assert be.heal() == [] and type(be) is GitBackend and not be.shares_flight
        assert "backlog/doing/.gitkeep" in git(anybk.path, "ls-files", "backlog")


def test_setup_symlinks_are_absolute_and_ignored(shared):
    assert_link_ok(shared.path, "doing", common(shared) / "backlog")
    assert "backlog/doing\n" in (shared / ".gitignore").read_text()
    assert git(shared.path, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(shared.path, "check-ignore", "backlog/doing").strip() == "backlog/doing"
    assert git(shared.path, "ls-files", "backlog/doing") == ""


# -- self-heal -----------------------------------------------------------------------------
def test_missing_symlink_recreated_by_any_verb(shared):
    for verb in (["status"], ["list"], ["where"]):
        os.unlink(shared / "backlog/doing")
        proc = shared.run(*verb)
        assert proc.returncode == 0, proc.stderr
        assert_link_ok(shared.path, "doing", common(shared) / "backlog")
        assert any("symlink missing" in w for w in layout_warnings(proc))
    assert shared.run("status").stderr == ""  # healthy layout: nothing to say


def test_missing_shared_pile_recreated(shared):
    os.rmdir(common(shared) / "backlog/doing")
    shared.ok("status")
    assert_link_ok(shared.path, "doing", common(shared) / "backlog")


def test_real_directory_moved_into_shared_pile(shared):
    link = shared / "backlog/doing"
    os.unlink(link)
    link.mkdir()
    (link / "a.md").write_bytes(TASK_A)
    (link / "b.md").write_bytes(TASK_B)
    proc = shared.run("status")
    assert proc.returncode == 0, proc.stderr
    assert_link_ok(shared.path, "doing", common(shared) / "backlog")
    assert (common(shared) / "backlog/doing/a.md").read_bytes() == TASK_A
    assert (common(shared) / "backlog/doing/b.md").read_bytes() == TASK_B
    assert "doing: 2" in proc.stdout
    warnings = layout_warnings(proc)
    assert any("a.md" in w and "moved" in w for w in warnings) and any("b.md" in w for w in warnings)
    assert git(shared.path, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_huge_file_in_a_real_in_flight_directory_is_left_in_place_unread(shared):
    """Session 29: the heal read a real directory's files whole (`Path.read_bytes`). A file past
    what an in-flight task may grow to (`limits.LEAVING_BYTES`) is now left where it is and named,
    never read whole nor moved into flight; the other task moves as before."""
    from maildir_backlog import limits

    link = shared / "backlog/doing"
    os.unlink(link)
    link.mkdir()
    (link / "a.md").write_bytes(TASK_A)
    with open(link / "huge.md", "wb") as f:
        f.truncate(limits.LEAVING_BYTES + 1)
    proc = shared.run("status")
    assert proc.returncode == 0, proc.stderr
    assert (common(shared) / "backlog/doing/a.md").read_bytes() == TASK_A
    assert not (common(shared) / "backlog/doing/huge.md").exists()
    assert (link / "huge.md").stat().st_size == limits.LEAVING_BYTES + 1  # left where it was
    assert any("huge.md" in w and "left in place" in w for w in layout_warnings(proc)), proc.stderr


def test_name_clash_is_reported_and_nothing_overwritten(shared):
    link = shared / "backlog/doing"
    pile = common(shared) / "backlog/doing"
    (pile / "a.md").write_bytes(b"# the shared copy\n")
    os.unlink(link)
    link.mkdir()
    (link / "a.md").write_bytes(TASK_A)
    (link / "b.md").write_bytes(TASK_B)
    (link / "notes.txt").write_text("not a task\n")
    for _ in range(2):  # every verb reports it again; nothing changes
        proc = shared.run("status")
        assert proc.returncode == 0, proc.stderr
        assert any("a.md" in w and "nothing overwritten" in w for w in layout_warnings(proc)), proc.stderr
        assert (pile / "a.md").read_bytes() == b"# the shared copy\n"
        assert (link / "a.md").read_bytes() == TASK_A
        assert (link / "notes.txt").read_text() == "not a task\n"
        assert (pile / "b.md").read_bytes() == TASK_B and not (link / "b.md").exists()  # no clash: moved
        assert link.is_dir() and not link.is_symlink()
    # once the user settles the clash, the next verb finishes the job
    (link / "a.md").rename(shared / "a-local.md")
    (link / "notes.txt").unlink()
    shared.ok("status")
    assert_link_ok(shared.path, "doing", common(shared) / "backlog")


def test_identical_copy_in_both_places_is_not_a_clash(shared):
    link = shared / "backlog/doing"
    (common(shared) / "backlog/doing/a.md").write_bytes(TASK_A)
    os.unlink(link)
    link.mkdir()
    (link / "a.md").write_bytes(TASK_A)
    shared.ok("status")
    assert_link_ok(shared.path, "doing", common(shared) / "backlog")
    assert (common(shared) / "backlog/doing/a.md").read_bytes() == TASK_A


@pytest.mark.parametrize("target", ["elsewhere", "relative"])
def test_symlink_pointing_elsewhere_is_repointed(shared, tmp_path, target):
    link = shared / "backlog/doing"
    os.unlink(link)
    if target == "relative":  # the right directory, but not the absolute path every worktree agrees on
        os.symlink("../.git/backlog/doing", link)
    else:
        other = tmp_path / "elsewhere"
        other.mkdir()
        (other / "keep.md").write_text("untouched\n")
        os.symlink(other, link)
    proc = shared.run("status")
    assert proc.returncode == 0, proc.stderr
    assert any("re-pointed" in w for w in layout_warnings(proc))
    assert_link_ok(shared.path, "doing", common(shared) / "backlog")
    if target == "elsewhere":
        assert (tmp_path / "elsewhere/keep.md").read_text() == "untouched\n"


def test_a_file_in_the_symlinks_place_is_left_alone(shared):
    link = shared / "backlog/doing"
    os.unlink(link)
    link.write_text("precious\n")
    proc = shared.run("status")
    assert proc.returncode == 0
    assert link.read_text() == "precious\n"
    assert any("left in place" in w for w in layout_warnings(proc))


ENTRY_BITS = st.sampled_from(
    ["backlog/doing", "backlog/reviewing", "/", " ", "\t", "x", "#", "!", "é", "\n", "\r", "\r\n"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(ENTRY_BITS, max_size=24).map("".join), st.sampled_from(["utf-8", "latin-1"]))
def test_gitignore_missing_reads_only_the_lines_that_hold_an_entry_and_answers_as_before(text, encoding):
    """Session 29: `gitignore.missing` looks only at the lines holding an entry's text (every verb
    asks; a 55 MB `.gitignore` from a pull request cost each call 0.6 s). It answers what the
    whole-file reading answered: the entries no line covers, in order."""
    from maildir_backlog import gitignore

    data = text.encode(encoding, "replace")
    entries = ["backlog/doing", "backlog/reviewing"]
    have = {line.decode("utf-8", "replace").strip().lstrip("/") for line in data.splitlines()}
    assert gitignore.missing(data, entries) == [e for e in entries if e not in have]


@pytest.mark.parametrize(
    "before",
    ["", "node_modules\n", "node_modules", "backlog/doing/\n", "/backlog/doing\nbuild/\n"],
    ids=["empty", "other", "no-newline", "dir-only-pattern", "anchored"],
)
def test_gitignore_gains_missing_lines(shared, before):
    (shared / ".gitignore").write_text(before)
    shared.ok("status")
    text = (shared / ".gitignore").read_text()
    assert text.startswith(before.rstrip("\n"))
    assert git(shared.path, "check-ignore", "backlog/doing").strip() == "backlog/doing"
    assert git(shared.path, "status", "--porcelain", "--untracked-files=all") in ("", " M .gitignore\n")
    assert shared.run("status").stderr == ""  # healed once, then quiet
    if before == "/backlog/doing\nbuild/\n":
        assert text == before  # already ignored: untouched


def test_heal_with_two_in_flight_piles(repo):
    repo.ok("setup", "--backend=maildir-shared", "--pipeline", "todo doing reviewing done")
    root = common(repo) / "backlog"
    for pile in ("doing", "reviewing"):
        assert_link_ok(repo.path, pile, root)
        os.unlink(repo / "backlog" / pile)
    (repo / ".gitignore").write_text("")
    repo.ok("status")
    for pile in ("doing", "reviewing"):
        assert_link_ok(repo.path, pile, root)
    assert (repo / ".gitignore").read_text() == "backlog/doing\nbacklog/reviewing\n"


def test_heal_dry_run_reports_without_touching(shared):
    os.unlink(shared / "backlog/doing")
    (shared / ".gitignore").write_text("")
    r = g.discover(shared.path)  # not open_context: that heals
    backend = open_backend(r, project.load(Layout.of(r).agents))
    findings = backend.heal(dry_run=True)
    assert any("symlink missing" in f for f in findings) and any(".gitignore" in f for f in findings)
    assert not os.path.lexists(shared / "backlog/doing") and (shared / ".gitignore").read_text() == ""
    assert backend.heal() and backend.heal() == []
    assert_link_ok(shared.path, "doing", common(shared) / "backlog")


def test_no_backlog_no_heal(repo):
    """Before setup there is no layout to heal: verbs refuse and write nothing."""
    proc = repo.run("status")
    assert proc.returncode == 1 and "backlog setup" in proc.stderr
    assert not (repo / "backlog").exists() and not (repo / ".git/backlog").exists()


# -- the one move protocol: a move cannot forget the ledger (docs/design.md, *One way in*) --------
def test_a_move_out_of_flight_without_its_ledger_entry_is_refused_and_changes_nothing(anybk):
    """`Backend.move` works out the remote step and the ledger's place itself, and refuses a move
    that leaves flight (or reopens a failed task) without its ledger entry: a new verb that forgot
    the ledger fails its first test, and nothing moved."""
    anybk.ok("add", "t1")
    anybk.ok("take", "t1-plan")
    ctx = anybk.context()
    (loc,) = [loc for loc in ctx.backend.locate("t1-plan") if loc.pile == "doing"]
    data = ctx.backend.read(loc)
    before = anybk.git("rev-parse", "HEAD")
    with pytest.raises(AssertionError, match="without its ledger entry"):
        ctx.backend.apply("t1-plan", loc, "done", data + b"- 2026-01-01T00:00:00Z done\n", "done(t1-plan)", old=data)
    assert [(x.pile, ctx.backend.read(x)) for x in ctx.backend.locate("t1-plan")] == [("doing", data)]
    assert anybk.git("rev-parse", "HEAD") == before
    assert anybk.git("status", "--porcelain") == ""


def _declare_reviewing(repo) -> None:
    """The branch's AGENTS.md gains an in-flight pile `reviewing` (committed by the user)."""
    agents = repo / "backlog/AGENTS.md"
    agents.write_text(agents.read_text().replace("`doing` → `done`", "`doing` → `reviewing` → `done`", 1))
    git(repo.path, "commit", "-q", "-m", "pipeline", "--", "backlog/AGENTS.md")


def test_a_new_in_flight_piles_gitignore_line_is_committed(shared):
    """A pile the pipeline gains: its .gitignore line is committed with it, so the worktree stays
    clean and the user's `git rebase` is not refused for "unstaged changes" (the intake model's
    long search found that refusal, session 16)."""
    _declare_reviewing(shared)
    shared.ok("status")
    assert (shared / ".gitignore").read_text().splitlines()[-1] == "backlog/reviewing"
    assert git(shared.path, "status", "--porcelain", "--untracked-files=all") == ""
    assert "backlog/reviewing" in git(shared.path, "show", "HEAD:.gitignore")
    assert git(shared.path, "log", "-1", "--format=%s") == "chore(backlog): .gitignore lines for the in-flight piles\n"
    git(shared.path, "rebase", "HEAD~1")  # (a no-op rebase: refused with unstaged changes)


@pytest.mark.parametrize("how", ["users-edit", "detached"])
def test_a_new_in_flight_piles_gitignore_line_is_not_committed(shared, how):
    """Not committed where that would commit the user's own edit of .gitignore, nor on a
    detached HEAD: written, as before, and the user's edit stays theirs."""
    _declare_reviewing(shared)
    head = git(shared.path, "rev-parse", "HEAD")
    if how == "users-edit":
        (shared / ".gitignore").write_text((shared / ".gitignore").read_text() + "build/\n")
    else:
        git(shared.path, "checkout", "-q", "--detach")
    shared.ok("status")
    assert git(shared.path, "rev-parse", "HEAD") == head
    assert git(shared.path, "status", "--porcelain") == " M .gitignore\n"
    assert "backlog/reviewing" in (shared / ".gitignore").read_text()
