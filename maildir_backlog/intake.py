"""The intake branch (SPEC §4, *One queue per clone*): the todo tasks every worktree of a
maildir-shared clone can claim, read through git objects (no checkout, no merge needed).

New tasks are added on some branch — by default the one checked out in the main worktree — and
worktrees branched earlier do not have them. `take`, `ready`, `list` and `status` therefore also
read `backlog/todo/` (and `backlog/done/`, for dependencies) of the intake branch's current
commit. A worktree's own copy of a slug (in any pile) wins over the intake branch's. Claiming an
intake task copies its bytes from that commit into the shared pile; the intake branch's todo copy
is then a stale copy, blocked while the task is in flight and by the ledger once it settled, and
cleaned by `maintain` (DUPLICATE) once the branches merge.

Listing costs one `git ls-tree`; a blob's content is read once (`git cat-file --batch`) and its
parsed summary cached by blob id (blobs never change).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

from . import git, limits, storage
from .argv import END_OF_OPTIONS
from .errors import BacklogError
from .layout import BACKLOG, TASK_SUFFIX, Layout, display, parse_task_rel
from .project import Project
from .task import SLUG_RE, parse_task

REGULAR = (b"100644", b"100755")  # the tree modes of a regular file


@dataclass(frozen=True)
class IntakeCopy:
    slug: str
    blob: str  # the blob id of backlog/todo/<slug>.md on the intake branch
    branch: str


@dataclass(frozen=True)
class Intake:
    branch: str
    todo: dict[str, IntakeCopy]
    done: frozenset[str]
    skipped: tuple[str, ...] = ()  # symlinks and files over the size bound: named, never read (SPEC §3)

    def read(self, repo: git.Repo, slug: str) -> bytes:
        data = git.objects(repo.toplevel, [self.todo[slug].blob], limits.TASK_BYTES, checked=True).get(
            self.todo[slug].blob
        )
        if not isinstance(data, bytes):
            raise git.GitError(f"cannot read {slug} from the intake branch {self.branch}")
        return data


def intake_branch(repo: git.Repo, project: Project) -> str | None:
    """The `intake:` option, else the branch checked out in the main worktree (its HEAD lives in
    the common dir); None when that is detached."""
    if project.intake:
        return project.intake
    try:
        head = (Layout.of(repo).common_dir / "HEAD").read_text().strip()
    except OSError:
        return None
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else None


def read_intake(repo: git.Repo, project: Project) -> Intake | None:
    """The intake branch's todo/ and done/ listings, or None when there is nothing to read: not
    maildir-shared, this worktree is on the intake branch itself, or the branch does not exist."""
    if project.backend != "maildir-shared":
        return None
    branch = intake_branch(repo, project)
    if branch is None or branch == repo.branch:
        return None
    code, out, _err = git.call(
        repo.toplevel,
        "ls-tree",
        "-z",
        "-l",
        END_OF_OPTIONS,
        f"refs/heads/{branch}",
        "--",
        f"{BACKLOG}/todo/",
        f"{BACKLOG}/done/",
    )
    if code != 0:
        return None  # no such branch (yet): nothing to read
    todo: dict[str, IntakeCopy] = {}
    done: set[str] = set()
    skipped: list[str] = []
    for record in out.split(b"\0"):
        meta, _, raw_path = record.partition(b"\t")
        parts = meta.split()
        if len(parts) != 4 or parts[1] != b"blob":
            continue
        found = parse_task_rel(raw_path.decode("utf-8", "replace"))
        if found is None or not raw_path.endswith(TASK_SUFFIX.encode()):
            continue
        pile, slug = found
        if not SLUG_RE.fullmatch(slug) or ".." in slug:
            continue
        where = f"{branch}:{display(pile, slug)}"
        if parts[0] not in REGULAR:  # a symlink (120000) is never a task: its "content" is a path
            if pile == "todo":
                skipped.append(f"{where}: a symlink, not a task file; skipped")
            continue
        size = int(parts[3]) if parts[3].isdigit() and len(parts[3]) < 16 else limits.TASK_BYTES + 1
        if pile == "todo":
            if size > limits.TASK_BYTES:
                skipped.append(f"{where}: {limits.too_large(size)}; skipped")
                continue
            todo[slug] = IntakeCopy(slug, parts[2].decode(), branch)
        else:
            done.add(slug)
    return Intake(branch, todo, frozenset(done), tuple(skipped))


@dataclass(frozen=True)
class Brief:
    """What auto-pick and the views need of an intake task."""

    slug: str
    priority: int
    dependencies: tuple[str, ...]
    title: str | None
    error: str | None


def briefs(repo: git.Repo, project: Project, intake: Intake, slugs: list[str]) -> dict[str, Brief]:
    """Priority, dependencies and title of the named intake tasks: parsed once per blob id."""
    path = Layout.of(repo).intake_cache
    try:
        cache = json.loads(path.read_text())
        if not isinstance(cache, dict):
            cache = {}
    except (OSError, ValueError):
        cache = {}
    wanted = {intake.todo[s].blob: s for s in slugs}
    missing = [b for b in wanted if not _valid(cache.get(b))]
    if missing:
        for blob, data in cat_blobs(repo, missing, checked=True).items():
            slug = wanted[blob]
            if not isinstance(data, bytes):
                continue
            try:
                task = parse_task(slug, f"{intake.branch}:{display('todo', slug)}", data, project.defaults)
                cache[blob] = [task.priority, list(task.dependencies), task.title, None]
            except BacklogError as exc:
                cache[blob] = [0, [], None, exc.message]
        live = {c.blob for c in intake.todo.values()}
        cache = {k: v for k, v in cache.items() if k in live}  # only what the branch still holds
        with contextlib.suppress(OSError):
            storage.write_file(path, json.dumps(cache).encode())
    result = {}
    for blob, slug in wanted.items():
        hit = cache.get(blob)
        if isinstance(hit, list) and _valid(hit):
            result[slug] = Brief(slug, hit[0], tuple(hit[1]), hit[2], hit[3])
    return result


def _valid(hit: object) -> bool:
    return (
        isinstance(hit, list)
        and len(hit) == 4
        and type(hit[0]) is int
        and isinstance(hit[1], list)
        and all(isinstance(d, str) for d in hit[1])
        and (hit[2] is None or isinstance(hit[2], str))
        and (hit[3] is None or isinstance(hit[3], str))
    )


def cat_blobs(repo: git.Repo, blobs: list[str], checked: bool = False) -> dict[str, bytes | git.Oversize]:
    """Many blobs with one `git cat-file --batch` (after a size check unless `checked`)."""
    return git.objects(repo.toplevel, blobs, limits.TASK_BYTES, checked=checked)
