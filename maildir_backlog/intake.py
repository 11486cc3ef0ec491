"""The intake branch (SPEC §4, *One queue per clone*): the todo tasks every worktree of a
maildir-shared clone can claim, read through git objects (no checkout, no merge needed).

New tasks are added on some branch — by default the one checked out in the main worktree — and
worktrees branched earlier do not have them. `take`, `ready`, `list` and `status` therefore also
read `backlog/todo/` (and `backlog/done/`, for dependencies) of the intake branch's current
commit. A worktree's own copy of a slug (in any pile) wins over the intake branch's. Claiming an
intake task copies its bytes from that commit into the shared pile; the intake branch's todo copy
is then a stale copy, blocked while the task is in flight and by the ledger once it settled, and
cleaned by `maintain` (DUPLICATE) once the branches merge.

Listing costs one `git ls-tree`; a blob's content is read once (`git cat-file --batch`) and each
copy's parsed summary cached by what its parse reads: the blob (blobs never change), the task's
name and branch, and the default priority (`_brief_key`).
"""

import contextlib
from collections.abc import Callable
from pathlib import Path

from . import git, limits, storage, worktrees
from .argv import END_OF_OPTIONS
from .errors import BacklogError, InvalidInput, Unavailable
from .layout import BACKLOG, TASK_SUFFIX, Layout, display, parse_task_rel
from .logline import later
from .project import Pipeline, Project, parse_declaration
from .task import is_slug, parse_task
from .typed import NamedTuple
from .worktrees import intake_branch, intake_to_read

REGULAR = (b"100644", b"100755")  # the tree modes of a regular file


class IntakeCopy(NamedTuple):
    slug: str
    blob: str  # the blob id of backlog/todo/<slug>.md on the intake branch
    branch: str


class Intake(NamedTuple):
    branch: str
    todo: dict[str, IntakeCopy]
    done: frozenset[str]
    skipped: tuple[str, ...] = ()  # symlinks and files over the size bound: named, never read (SPEC §3)

    def read(self, repo: git.Repo, slug: str) -> bytes:
        data = git.objects(repo.toplevel, [self.todo[slug].blob], limits.TASK_BYTES, checked=True).get(
            self.todo[slug].blob
        )
        if not isinstance(data, bytes):
            raise git.GitError(f"cannot read {slug} from the intake branch {self.todo[slug].branch}")
        return data

    def reopens(self, repo: git.Repo, slug: str, here: Callable[[], bytes]) -> bool:
        """Is this branch's todo/ copy of `slug` of a later generation than the copy `here` reads (a
        failed/ copy)? Then a `retry` reopened the task since, perhaps on another clone, whose ledger
        this clone never read (SPEC §8). False when either cannot be read: the copy here stands."""
        try:
            return later(self.read(repo, slug), here())
        except (BacklogError, OSError):
            return False


HERELESS = ("retry",)  # the verbs that land on the intake branch without a `--here`


def refuse_busy(repo: git.Repo, branch: str, verb: str | None = None) -> None:
    """Refuse (exit 4) to write into `branch` while a worktree has it in a rebase, merge,
    cherry-pick, revert, am or bisect (SPEC §4): a commit made meanwhile is dropped by the
    operation's end (an abort resets the branch, a finished rebase rewrites it)."""
    for busy in worktrees.operations(repo):
        if busy.branch == branch:
            who = f"`backlog {verb}`" if verb else "this verb"
            way = "" if verb in HERELESS else ", or pass --here to commit on this branch instead"
            raise Unavailable(
                f"the intake branch {branch} has a git {busy.name} in progress in the worktree {busy.worktree}:"
                f" {who} writes nothing into it until the {busy.name} ends (finish or abort it, then retry){way}"
            )


def read_intake(repo: git.Repo, project: Project, remote: str | None = None) -> Intake | None:
    """The intake branch's todo/ and done/ (not this worktree's own branch), None when nothing to read;
    with a `remote`, its intake branch as last fetched too (SPEC §8): its copies are `<remote>/<branch>`'s."""
    branch = intake_to_read(repo, project, remote)
    if branch is None:
        return None
    here = None if branch == repo.branch else _listing(repo, f"refs/heads/{branch}", branch)
    there = _listing(repo, f"refs/remotes/{remote}/{branch}", f"{remote}/{branch}") if remote else None
    if here is None and branch != repo.branch and there is None and project.intake and not _tip(repo, branch):
        raise missing(project, branch)
    if here is None or there is None:  # (this worktree is on the branch: only what it lacks is the remote's)
        return here or (there if there is not None and (branch != repo.branch or there.todo or there.done) else None)
    todo = {**{s: c for s, c in there.todo.items() if s not in here.done}, **here.todo}
    todo.update((slug, there.todo[slug]) for slug in _later_there(repo, here, there))
    skipped = here.skipped + tuple(line for line in there.skipped if line not in here.skipped)
    return Intake(branch, todo, here.done | there.done, skipped)


def _later_there(repo: git.Repo, here: Intake, there: Intake) -> list[str]:
    """The slugs whose todo/ copy on the remote's intake branch is of a later generation than this
    clone's intake branch's (a retry another clone pushed, while this branch still lists the copy
    the failure left behind): that copy is the task. Only copies that differ are read (one `git
    cat-file --batch`); otherwise, and where either cannot be read, this branch's copy stands."""
    differ = [s for s, c in here.todo.items() if s in there.todo and there.todo[s].blob != c.blob]
    if not differ:
        return []
    blobs = [copy.blob for s in differ for copy in (here.todo[s], there.todo[s])]
    data = git.objects(repo.toplevel, blobs, limits.TASK_BYTES, checked=True)
    newer = []
    for slug in differ:
        mine, theirs = data.get(here.todo[slug].blob), data.get(there.todo[slug].blob)
        if isinstance(mine, bytes) and isinstance(theirs, bytes):
            with contextlib.suppress(BacklogError):
                if later(theirs, mine):
                    newer.append(slug)
    return newer


def _listing(repo: git.Repo, rev: str, shown: str) -> Intake | None:
    """todo/ and done/ of the commit `rev` (one `git ls-tree`), its copies named `shown`; None when
    there is no such commit."""
    code, out, _err = git.call(
        repo.toplevel, "ls-tree", "-z", "-l", END_OF_OPTIONS, rev, "--", f"{BACKLOG}/todo/", f"{BACKLOG}/done/"
    )
    if code != 0:
        return None  # no such branch, or the main worktree's branch has no commit yet: nothing to read
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
        if not is_slug(slug):
            continue
        where = f"{shown}:{display(pile, slug)}"
        if parts[0] not in REGULAR:  # a symlink (120000) is never a task: its "content" is a path
            if pile == "todo":
                skipped.append(f"{where}: a symlink, not a task file; skipped")
            continue
        if pile == "todo":
            size = limits.number(parts[3].decode("ascii", "replace"), limits.NUMBER_MAX)
            if size is None or size > limits.TASK_BYTES:
                skipped.append(f"{where}: {limits.too_large(size or limits.NUMBER_MAX)}; skipped")
                continue
            todo[slug] = IntakeCopy(slug, parts[2].decode(), shown)
        else:
            done.add(slug)
    return Intake(shown, todo, frozenset(done), tuple(skipped))


class Brief(NamedTuple):
    """What auto-pick and the views need of an intake task."""

    slug: str
    priority: int
    dependencies: tuple[str, ...]
    title: str | None
    error: str | None


def briefs(repo: git.Repo, project: Project, intake: Intake, slugs: list[str]) -> dict[str, Brief]:
    """Priority, dependencies and title of the named intake tasks: parsed once per copy. A copy is
    its blob and what else its parse reads (`_brief_key`): two tasks of the same bytes are two
    copies, and a default priority changed in AGENTS.md reads every copy again."""
    import json  # (the intake branch's caches only: a backlog without one never loads it)

    path = Layout.of(repo).intake_cache
    try:
        cache = json.loads(path.read_text())
        if not isinstance(cache, dict):
            cache = {}
    except (OSError, ValueError):
        cache = {}
    keys = {s: _brief_key(intake.todo[s], s, project) for s in slugs}
    missing = [s for s in slugs if not _valid(cache.get(keys[s]))]
    if missing:
        blobs = cat_blobs(repo, sorted({intake.todo[s].blob for s in missing}), checked=True)
        for slug in missing:
            data = blobs.get(intake.todo[slug].blob)
            if not isinstance(data, bytes):
                continue
            try:
                task = parse_task(slug, f"{intake.todo[slug].branch}:{display('todo', slug)}", data, project.defaults)
                cache[keys[slug]] = [task.priority, list(task.dependencies), task.title, None]
            except BacklogError as exc:
                cache[keys[slug]] = [0, [], None, exc.message]
        live = {_brief_key(c, s, project) for s, c in intake.todo.items()}
        cache = {k: v for k, v in cache.items() if k in live}  # only what the branch still holds
        with contextlib.suppress(OSError):
            storage.write_file(path, json.dumps(cache).encode())
    result = {}
    for slug, key in keys.items():
        hit = cache.get(key)
        if isinstance(hit, list) and _valid(hit):
            result[slug] = Brief(slug, hit[0], tuple(hit[1]), hit[2], hit[3])
    return result


def _brief_key(copy: IntakeCopy, slug: str, project: Project) -> str:
    """What a copy's brief is read from: its bytes (the blob), its name and branch (an error names
    the file), and the default priority (a task that gives none has it)."""
    return f"{copy.blob}\t{slug}\t{copy.branch}\t{project.defaults.priority}"


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


# -- writing to the intake branch (SPEC §4: the queue is written where it is read) ------------
class Target(NamedTuple):
    """Where `add` and `retry` land: the intake branch, checked out in `worktree` (commit there)
    or nowhere (`worktree` None: a plumbing commit moves the branch by compare-and-swap), and its
    own pipeline (its backlog/AGENTS.md): the piles a task may be filed into there."""

    branch: str
    worktree: Path | None
    pipeline: Pipeline = Pipeline()


def write_target(repo: git.Repo, project: Project) -> Target | None:
    """Where a new todo task of this clone goes; None: into this worktree (not maildir-shared, no
    intake branch because the main worktree is detached, this worktree is on the intake branch,
    or the main worktree's branch holds no backlog yet: `setup` ran on this one).
    A declared `intake:` branch that does not exist, or holds no backlog, is refused: a task
    committed anywhere else would reach no other worktree."""
    if not project.shares_flight:
        return None
    branch = intake_branch(repo, project)
    if branch is None or branch == repo.branch:
        return None
    if not _tip(repo, branch):
        if not project.intake and not repo.has_commits:
            return None
        raise missing(project, branch, " or add to this branch with --here")
    theirs = declaration(repo, branch)
    if theirs is None:
        if not project.intake:
            return None
        raise BacklogError(
            f"the intake branch {branch} holds no backlog (no {BACKLOG}/AGENTS.md): merge this branch into it,"
            " or add to this branch with --here"
        )
    for path, checked_out in git.worktrees(repo):
        if checked_out == branch and path.is_dir():
            return Target(branch, path, theirs.pipeline)
    return Target(branch, None, theirs.pipeline)


def missing(project: Project, branch: str, more: str = "") -> BacklogError:
    """The error for an intake branch that does not exist (SPEC §3: never an empty queue): exit 1."""
    if not project.intake:
        return BacklogError(f"the intake branch {branch} has no commit yet: commit on it first,{more or ' then retry'}")
    return BacklogError(
        f"the intake branch {branch} (`intake:` at {project.intake_where}) does not exist in this clone:"
        f" create it (`git branch {branch}`) or correct that line,{more or ' then run this again'}"
    )


def declaration(repo: git.Repo, branch: str) -> Project | None:
    """The intake branch's own backlog/AGENTS.md, read through git objects (its size asked first)
    and parsed; None when the branch has none."""
    where = f"{branch}:{BACKLOG}/AGENTS.md"
    spec = f"refs/heads/{where}"
    found = git.objects(repo.toplevel, [spec], limits.DECLARATION_BYTES).get(spec)
    if found is None:
        return None
    if isinstance(found, git.Oversize):
        raise BacklogError(f"{where}: larger than {limits.DECLARATION_BYTES:,} bytes; refusing to read it")
    try:
        return parse_declaration(found.decode("utf-8-sig"), where)
    except UnicodeDecodeError:
        raise InvalidInput(f"{where}: not valid UTF-8 text") from None


def tip_of(repo: git.Repo, branch: str) -> str:
    """The local `branch`'s commit ("" when there is none)."""
    return _rev(repo, f"refs/heads/{branch}")


_tip = tip_of


def on_branch(repo: git.Repo, tip: str, paths: list[str]) -> list[str]:
    """Which of `paths` the commit `tip` holds (one `ls-tree`)."""
    out = git.run(repo.toplevel, "ls-tree", "-r", "-z", "--name-only", END_OF_OPTIONS, tip, "--", *paths)
    return [p for p in out.split("\0") if p]


# -- when git recorded each task (SPEC §5 take: ties never follow a checkout's file times) -------
def added_times(repo: git.Repo, project: Project, remote: str | None = None) -> dict[str, int]:
    """slug → commit time (Unix seconds) of the newest commit that added `todo/<slug>.md`, in the
    history of HEAD and of the intake branch: the same in every worktree that has the same
    commits, whatever its files' times (ties of one second are ranked by slug). One `git log` over
    the commits not read before: the answer is cached in the worktree's git dir with the tips it
    covers. A task never committed has no entry (it is newer than every committed one). With a
    `remote`, the remote's intake branch as last fetched counts too (SPEC §8)."""
    tips = sorted(
        {t for t in (_rev(repo, "HEAD"), _intake_tip(repo, project), _intake_tip(repo, project, remote)) if t}
    )
    if not tips:
        return {}
    layout = Layout.of(repo)
    path = layout.added_cache
    seen, times = _cached_times(path)
    if seen == tips:
        return times
    hops = _own_since(layout.own_commits, seen, tips, f"{BACKLOG}/todo/") if seen else None
    if hops is not None:  # only this worktree's own commits since, none adding a task: the times stand
        if hops >= RESTATED_AFTER:
            _keep_times(path, tips, times)  # (so that the notes followed stay few)
        return times
    if seen and not _within(repo, seen, tips):  # a commit undone, a branch rewritten or left: read it all
        seen, times = [], {}
    todo = f"{BACKLOG}/todo/"
    args = ["--diff-filter=A", "--no-renames", "--format=@%ct", "--name-only", END_OF_OPTIONS, *tips]
    code, out, _err = git.call(repo.toplevel, "log", *args, *[f"^{t}" for t in seen], "--", todo)
    if code and seen:  # (a seen tip gone since `_within` looked): read the whole history again
        seen, times = [], {}
        code, out, _err = git.call(repo.toplevel, "log", *args, "--", todo)
    if code:
        return times
    for when, slug in _added(out, todo):
        if when > times.get(slug, -1):
            times[slug] = when
    _keep_times(path, tips, times)
    return times


RESTATED_AFTER = 8  # notes followed past a cached tip before the cache is written under the new tips


def _keep_times(path: Path, tips: list[str], times: dict[str, int]) -> None:
    import json

    columns = {"slugs": "\n".join(times), "when": list(times.values())}
    with contextlib.suppress(OSError):
        storage.write_file(path, json.dumps({"tips": tips, **columns}).encode())


def _own_since(noted: Path, seen: list[str], tips: list[str], todo: str) -> int | None:
    """Are `tips` the tips the cache covers (`seen`), each moved on only by commits this
    worktree's verbs made that added nothing under `todo` (`gitplumbed`'s notes: a commit's only
    parent, and the paths it may have added)? Then the history of `tips` is that of `seen` and
    those commits, and the times are unchanged: no `git log` (which at 100,000 tasks spends ~50
    ms diffing todo/'s tree for a claim that only removed a file). Every seen tip must be reached
    back from one of `tips`; anything else (a note missing, a commit that may have added a todo/
    path, a tip gone) reads git's history as before. The answer: the most notes followed back
    from one tip, or None when they do not reach."""
    try:
        lines = noted.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError:
        return None
    parent_of: dict[str, str] = {}
    for line in lines:
        fields = line.split("\t")
        if len(fields) >= 2 and not any(p.startswith(todo) for p in fields[2:]):
            parent_of[fields[1]] = fields[0]
    known, reached, most = set(seen), set(), 0
    for tip in tips:
        hops = 0
        while tip not in known and tip in parent_of and hops <= len(parent_of):
            tip, hops = parent_of[tip], hops + 1
        reached.add(tip)
        most = max(most, hops)
    return most if reached == known else None


def _within(repo: git.Repo, seen: list[str], tips: list[str]) -> bool:
    """Is the history of the tips the cache covers (`seen`) all in the history of `tips`? Then the
    commits not read yet are those of `tips` less `seen`'s. Otherwise (a reset or a rebase undid a
    commit, the worktree left its branch, a seen tip is gone) an addition the cache holds may be
    in no history that counts now, and the whole history is read again (one `rev-list` when the
    tips moved; none when they did not)."""
    code, out, _err = git.call(
        repo.toplevel, "rev-list", "--max-count=1", END_OF_OPTIONS, *seen, *[f"^{t}" for t in tips]
    )
    return code == 0 and not out.strip()


def _cached_times(path: Path) -> tuple[list[str], dict[str, int]]:
    """The tips the cache covers and its times (none, when it is missing or unreadable). A cache
    of the older form, which also kept a sequence per task (`seq`, read by nothing since ties
    are ranked by slug), is read the same: its times are these."""
    import json

    try:
        cached = json.loads(path.read_text())
        seen = [t for t in cached["tips"] if isinstance(t, str) and len(t) in (40, 64) and t.isalnum()]
        return seen, _times(cached["slugs"], cached["when"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return [], {}


def _added(out: bytes, todo: str) -> list[tuple[int, str]]:
    """(commit time, slug) of each task file `git log --format=@%ct --name-only` shows added
    under `todo`, newest first, as git log prints them."""
    found: list[tuple[int, str]] = []
    when = 0
    for line in out.decode("utf-8", "replace").splitlines():
        if line.startswith("@") and (stamp := limits.number(line[1:], limits.NUMBER_MAX)) is not None:
            when = stamp
        elif line.startswith(todo) and line.endswith(TASK_SUFFIX) and "/" not in line[len(todo) :]:
            found.append((when, line[len(todo) : -len(TASK_SUFFIX)]))
    return found


def _times(slugs: object, when: object) -> dict[str, int]:
    """The cached times, stored as columns (the slugs one text, a line each; a list of whole
    numbers): read by C-level maps, not an object per task from the JSON (100,000 of them)."""
    if not (isinstance(slugs, str) and isinstance(when, list)):
        raise TypeError("not the columns of added times")
    names = slugs.split("\n") if slugs else []
    if len(names) != len(when) or not set(map(type, when)) <= {int}:
        raise ValueError("columns of added times that do not agree")
    return dict(zip(names, when, strict=True))


def _rev(repo: git.Repo, rev: str) -> str:
    return git.run(
        repo.toplevel, "rev-parse", "-q", "--verify", END_OF_OPTIONS, f"{rev}^{{commit}}", check=False
    ).strip()


def _intake_tip(repo: git.Repo, project: Project, remote: str | None = None) -> str:
    """The intake branch's tip (with a `remote`: its remote-tracking ref's), "" when none."""
    branch = intake_branch(repo, project) if project.shares_flight else None
    if remote:
        return _rev(repo, f"refs/remotes/{remote}/{branch}") if branch else ""
    return _tip(repo, branch) if branch and branch != repo.branch else ""
