"""Every git command the tool runs goes through this module (via plumbum).

Commits never sweep up the user's staged work: `commit_paths` stages only the given paths and
commits them with `git commit --only`, which leaves every other staged change staged (SPEC §7.6).
Commits from concurrent verbs in one worktree are serialized by a lock file in that worktree's
git dir, and a busy `index.lock` (a user's git command) is retried (SPEC §7.5).
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plumbum import local

from . import argv, limits, storage
from .argv import END_OF_OPTIONS
from .errors import BacklogError, InvalidInput, Unavailable
from .layout import Layout

INDEX_RETRY_SECONDS = 20.0
MERGE_WAIT_SECONDS = 2.0
# what git says when a commit meets a merge in progress (MERGE_HEAD): a conflict the user has not
# concluded, or the moment `git merge` takes to write its own merge commit
MERGING = ("partial commit during a merge", "MERGE_HEAD exists", "not concluded your merge", "you have unmerged")


class GitError(BacklogError):
    """A git command failed; the message is git's own (one line), `stderr` all it said."""

    kind = "failed"

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


class IndexBusy(GitError, Unavailable):
    """The git index or a ref stayed locked by another git command past INDEX_RETRY_SECONDS:
    nothing was committed; retry later (exit 4)."""

    code = Unavailable.code
    kind = Unavailable.kind


@dataclass(frozen=True)
class Repo:
    toplevel: Path
    common_dir: Path
    git_dir: Path
    branch: str | None  # None when HEAD is detached
    has_commits: bool


def _env() -> dict[str, str]:
    # plumbum's local.env is a copy of os.environ taken at import; pass the live one.
    env = dict(os.environ)
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    return env


def run(cwd: Path | str, *args: str, check: bool = True, stdin: bytes | None = None) -> str:
    """Run `git ARGS` in `cwd`; return stdout. On failure raise GitError with git's message."""
    cmd = local["git"][argv.checked("git", args)]
    kwargs: dict[str, Any] = {"cwd": str(cwd), "env": _env()}
    if stdin is not None:
        kwargs["stdin"] = stdin
    retcode, out, err = cmd.run(retcode=None, **kwargs)
    if retcode and check:
        lines = [line for line in (err or out or "").splitlines() if line.strip()]
        lines = [line for line in lines if not line.startswith("hint:")] or lines  # advice, not the error
        message = lines[-1] if lines else f"git {' '.join(args)} failed"
        if "auto-detect email address" in (err or "") or "Please tell me who you are" in (err or ""):
            message = (
                "git has no identity to commit with: set one with `git config --global user.name 'Your Name'`"
                " and `git config --global user.email you@example.com` (or GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL,"
                " GIT_COMMITTER_NAME, GIT_COMMITTER_EMAIL), then run this again"
            )
        elif "sparse-checkout" in (err or ""):
            message = (
                f"{message.strip()} is outside this worktree's sparse-checkout: include the backlog"
                " (`git sparse-checkout add backlog`), or run backlog in a full checkout"
            )
        elif len(lines) > 1 and lines[0].startswith(("error:", "fatal:")) and message.startswith(("hint:", " ")):
            message = lines[0]
        elif len(lines) > 1 and lines[0].rstrip().endswith(":"):  # a heading and its list: keep both
            message = " ".join(line.strip() for line in lines)
        raise GitError(message.strip(), stderr=err or out or "")
    return out


TIMED_OUT = 124  # call()'s exit code for a git command it stopped at its timeout (as timeout(1) says)
TOO_MUCH = 125  # call()'s exit code for a git command it stopped for printing more than its bound


def call(
    cwd: Path | str,
    *args: str,
    stdin: bytes = b"",
    timeout: float | None = None,
    max_output: int = limits.GIT_OUTPUT_BYTES,
) -> tuple[int, bytes, bytes]:
    """Run `git ARGS` in `cwd` with `stdin`; return (exit code, stdout, stderr), bytes as git wrote
    them, whatever the exit code (the caller reads git's verdict: `push --porcelain`, `cat-file --batch`).

    `timeout` (seconds): git is killed if it has not finished by then (a remote that accepted the
    connection and never answers) and the result is TIMED_OUT with a `fatal:` line saying so. A
    helper git started (ssh, git-remote-https) may outlive it; its pipes are not waited for.
    `max_output` (bytes): git is killed once it printed more (a remote that answers without end),
    and the result is TOO_MUCH with a `fatal:` line saying so: memory stays bounded."""
    proc: Any = local["git"][argv.checked("git", args)].popen(cwd=str(cwd), env=_env(), stdin=-1)  # -1: PIPE
    deadline = None if timeout is None else time.monotonic() + timeout
    out = bytearray()
    err = bytearray()
    with selectors.DefaultSelector() as sel:
        if stdin:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        sent = 0
        view = memoryview(stdin)
        while sel.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                _stop(proc)
                return TIMED_OUT, b"", f"fatal: no answer within {timeout:g} s (git {args[0]} stopped)\n".encode()
            for key, _ in sel.select(left):
                if key.events & selectors.EVENT_WRITE:
                    try:
                        sent += os.write(key.fd, view[sent : sent + 65536])
                    except BrokenPipeError:
                        sent = len(stdin)
                    if sent >= len(stdin):
                        sel.unregister(proc.stdin)
                        proc.stdin.close()
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                if len(out) > max_output or len(err) > 65536 * 16:
                    _stop(proc)
                    return (
                        TOO_MUCH,
                        b"",
                        f"fatal: git {args[0]} said more than {max_output:,} bytes (stopped)\n".encode(),
                    )
    proc.wait()
    return int(proc.returncode), bytes(out), bytes(err)


def _stop(proc: Any) -> None:
    proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            pipe.close()


def discover(cwd: Path | str) -> Repo:
    """Find the repository around `cwd` with one git call (two on an unborn branch)."""
    cwd = Path(cwd)
    if not cwd.is_dir():
        raise BacklogError(f"no such directory: {cwd}")
    cmd = local["git"][
        "rev-parse",
        "--is-bare-repository",
        "--path-format=absolute",
        "--git-common-dir",
        "--git-dir",
        "--show-toplevel",
        "--symbolic-full-name",
        "HEAD",
    ]
    retcode, out, err = cmd.run(retcode=None, cwd=str(cwd), env=_env())
    lines = out.splitlines()
    if retcode and not lines:
        if "not a git repository" in err:
            raise BacklogError("not inside a git repository")
        said = [line for line in err.strip().splitlines() if line.strip()] or ["git rev-parse failed"]
        fatal = [line for line in said if line.startswith("fatal:")]  # e.g. dubious ownership, then advice
        raise GitError(fatal[0] if fatal else said[-1])
    if lines and lines[0] == "true":
        raise BacklogError("this is a bare repository: backlog needs a work tree (use `git worktree add`)")
    if retcode and len(lines) < 4 and ("must be run in a work tree" in err or len(lines) < 3):
        raise BacklogError("not inside a work tree: run backlog from a checkout of the repository")
    common, git_dir, top = Path(lines[1]), Path(lines[2]), Path(lines[3])
    if len(lines) >= 5 and retcode == 0:
        # the full ref name: `--abbrev-ref` says `heads/main` when a tag is also named `main`
        branch = lines[4].removeprefix("refs/heads/") if lines[4].startswith("refs/heads/") else None
        return Repo(top, common, git_dir, branch, True)
    # unborn branch: HEAD names a branch with no commits yet
    unborn = run(top, "symbolic-ref", "-q", "--short", "HEAD", check=False).strip() or None
    return Repo(top, common, git_dir, unborn, False)


def worktrees(repo: Repo) -> list[tuple[Path, str | None]]:
    """(path, branch) for every worktree of the clone."""
    result: list[tuple[Path, str | None]] = []
    path: Path | None = None
    branch: str | None = None
    for line in run(repo.toplevel, "worktree", "list", "--porcelain").splitlines() + [""]:
        if line.startswith("worktree "):
            path, branch = Path(line[9:]), None
        elif line.startswith("branch "):
            branch = line[7:].removeprefix("refs/heads/")
        elif not line and path is not None:
            result.append((path, branch))
            path = None
    return result


def branches(repo: Repo) -> set[str]:
    """Local branch names and remote-tracking names (both `origin/x` and `x`)."""
    out = run(repo.toplevel, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes")
    names: set[str] = set()
    for ref in out.split():
        if ref.startswith("refs/heads/"):
            names.add(ref[11:])
        elif ref.startswith("refs/remotes/"):
            short = ref[13:]
            if short.endswith("/HEAD"):  # `origin/HEAD` is a pointer, not a branch
                continue
            names.add(short)
            if "/" in short:
                names.add(short.split("/", 1)[1])
    return names


def tracked(repo: Repo, *pathspecs: str) -> list[str]:
    """Paths in the index matching the pathspecs (relative to the toplevel)."""
    out = run(repo.toplevel, "ls-files", "-z", "--", *pathspecs)
    return [p for p in out.split("\0") if p]


def blob(repo: Repo, spec: str) -> bytes | None:
    """Bytes of `git cat-file blob SPEC` (e.g. `HEAD:path`, `:path`), None when there is none."""
    code, data, _err = call(repo.toplevel, "cat-file", "blob", END_OF_OPTIONS, spec, max_output=limits.TASK_BYTES)
    return data if code == 0 else None


def status_codes(repo: Repo, *pathspecs: str) -> dict[str, str]:
    """`git status` codes (XY) of changed paths under the pathspecs, relative to the toplevel."""
    if not pathspecs:
        return {}
    out = run(
        repo.toplevel,
        "--no-optional-locks",
        "status",
        "--porcelain",
        "-z",
        "--no-renames",
        "--untracked-files=all",
        "--",
        *pathspecs,
    )
    return {entry[3:]: entry[:2] for entry in out.split("\0") if len(entry) > 3}


def dirty(repo: Repo, *pathspecs: str) -> list[str]:
    """Paths with uncommitted changes (staged, unstaged or untracked) under the pathspecs."""
    out = run(repo.toplevel, "status", "--porcelain", "-z", "--untracked-files=all", "--", *pathspecs)
    fields = out.split("\0")
    paths: list[str] = []
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) > 3:
            paths.append(entry[3:])
            if entry[0] in "RC":  # a rename or copy is followed by its source path, unprefixed
                paths.append(fields[i])
                i += 1
    return paths


def _index_lock(repo: Repo) -> contextlib.AbstractContextManager[None]:
    return storage.file_lock(Layout.of(repo).index_lock, timeout=120.0, what="the git index")


def _retrying(repo: Repo, *args: str) -> str:
    """Run a git command that writes the index or a ref, retrying while another git command
    holds them; a user's merge in progress is waited for briefly (the moment `git merge` takes to
    write its own commit), then refused in one line; at once when it stopped at a conflict."""
    start = time.monotonic()
    merging_seen = False
    while True:
        try:
            return run(repo.toplevel, *args)
        except GitError as exc:
            said = f"{exc.message}\n{exc.stderr}"  # the whole of git's message, not just its last line
            waited = time.monotonic() - start
            if any(sign in said for sign in MERGING):
                # a conflict (unmerged index entries) is there from the merge's first refusal on, and
                # only the user resolves it: looked for once; else wait out an automatic merge's commit
                conflict = not merging_seen and bool(run(repo.toplevel, "ls-files", "-u", check=False).strip())
                merging_seen = True
                if conflict or waited > MERGE_WAIT_SECONDS:
                    raise GitError(
                        f"a `git merge` is in progress in {repo.toplevel}: conclude it (`git commit`) or abort it"
                        " (`git merge --abort`), then run this again",
                        exc.stderr,
                    ) from None
            elif not ("index.lock" in said or "cannot lock ref" in said):
                raise
            elif waited > INDEX_RETRY_SECONDS:
                held = next(line for line in said.splitlines() if "index.lock" in line or "cannot lock ref" in line)
                raise IndexBusy(
                    f"another git command kept the git index or a ref locked for {waited:.0f} s"
                    f" ({held.removeprefix('fatal: ').strip()}): nothing was committed; retry later",
                    exc.stderr,
                ) from None
            time.sleep(0.05)


def commit_paths(repo: Repo, paths: list[str], message: str, ignored: bool = False, also: tuple[str, ...] = ()) -> None:
    """Stage exactly `paths` (additions and deletions) and commit only them.

    The user's other staged changes stay staged and out of the commit. Raises GitError
    (e.g. a failing pre-commit hook); the caller puts its files back. `ignored`: the paths may
    be ignored by .gitignore (the removal of tracked in-flight files, whose piles are ignored).
    `also`: pathspecs committed as the work tree has them without being staged first (the
    task's file in every pile: the other half of a move killed between staging and committing,
    which would otherwise stay staged while HEAD keeps a copy the work tree no longer has;
    `git commit --only` never adds an untracked file).
    """
    with _index_lock(repo):
        force = ["--force"] if ignored else []
        try:
            _retrying(repo, "add", "-A", *force, "--", *paths)
        except GitError as exc:
            if "pathspec" not in f"{exc.message}\n{exc.stderr}":
                raise
            paths = _known(repo, paths)  # a task file removed before it was ever committed
            if not paths:
                return
            _retrying(repo, "add", "-A", *force, "--", *paths)
        storage.crash_point("git:staged")
        try:
            try:
                _retrying(repo, "commit", "-q", "--no-edit", "-m", message, "--only", "--", *paths, *also)
            except GitError as exc:
                if "pathspec" not in f"{exc.message}\n{exc.stderr}":
                    raise
                # a removed path git knows in neither HEAD nor the index: without it, with `also`,
                # and then (`also` matching nothing either) without `also`
                paths = _resumed(repo, paths)
                _commit_known(repo, message, paths, also)
        except GitError:
            if discover_has_head(repo) and not status_codes(repo, *paths):
                # nothing to commit: HEAD holds exactly what the work tree has (a resumed move). The
                # work tree, not the index: a concurrent `git merge` may write back an index it read
                # before our `git add`, and the new file would be left untracked while we said done.
                return
            unstage(repo, paths, locked=True)
            raise


def _commit_known(repo: Repo, message: str, paths: list[str], also: tuple[str, ...]) -> None:
    attempts = [spec for spec in ([*paths, *also], paths) if spec]
    for n, spec in enumerate(attempts):
        try:
            _retrying(repo, "commit", "-q", "--no-edit", "-m", message, "--only", "--", *spec)
            return
        except GitError as exc:
            if "pathspec" not in f"{exc.message}\n{exc.stderr}" or n == len(attempts) - 1:
                raise


def _resumed(repo: Repo, paths: list[str]) -> list[str]:
    """`paths` less the removed ones git knows in neither HEAD nor the index: a file an earlier
    move staged and was killed before committing, removed again by this one (`git commit --only`
    refuses such a pathspec, and there is nothing to record about it). A path that exists stays:
    if git lost its staging (an index written back by a concurrent command), the commit fails."""
    if not discover_has_head(repo):
        return paths
    known = set(tracked(repo, *paths))
    in_head = run(repo.toplevel, "ls-tree", "-r", "-z", "--name-only", END_OF_OPTIONS, "HEAD", "--", *paths)
    known |= {p for p in in_head.split("\0") if p}
    return [p for p in paths if p in known or os.path.lexists(repo.toplevel / p)]


def _known(repo: Repo, paths: list[str]) -> list[str]:
    """`paths` less those that neither exist nor are tracked (a task file removed before it was
    ever committed: git refuses such a pathspec, and there is nothing to record about it)."""
    missing = [p for p in paths if not os.path.lexists(repo.toplevel / p)]
    if not missing:
        return paths
    known = set(tracked(repo, *missing))
    return [p for p in paths if p not in missing or p in known]


def unstage(repo: Repo, paths: list[str], locked: bool = False) -> None:
    """Put the index entries of `paths` back as they are in HEAD (or drop them on an unborn branch)."""
    if not paths:
        return
    if not locked:
        with _index_lock(repo):
            return unstage(repo, paths, locked=True)
    if discover_has_head(repo):
        _retrying(repo, "reset", "-q", "HEAD", "--", *paths)
    else:
        _retrying(repo, "rm", "-q", "--cached", "--ignore-unmatch", "--", *paths)


def discover_has_head(repo: Repo) -> bool:
    return bool(run(repo.toplevel, "rev-parse", "-q", "--verify", END_OF_OPTIONS, "HEAD", check=False).strip())


@dataclass(frozen=True)
class Oversize:
    """An object `objects` did not read: it is larger than the bound asked for."""

    size: int


def objects(cwd: Path | str, specs: list[str], limit: int, checked: bool = False) -> dict[str, bytes | Oversize]:
    """The contents of many objects (`<sha>`, `<sha>:<path>`), none larger than `limit` read.

    Sizes are asked first (`cat-file --batch-check`), so a huge blob from a pull request or a
    remote is never read into memory; `checked`: the caller already knows each is within the
    bound (an `ls-tree -l` listing), and the check is skipped. A missing object is left out."""
    wanted = list(dict.fromkeys(specs))
    found: dict[str, bytes | Oversize] = {}
    if not wanted:
        return found
    if not checked:
        code, out, _err = call(cwd, "cat-file", "--batch-check", stdin=("\n".join(wanted) + "\n").encode())
        if code:
            return found
        small = []
        for spec, line in zip(wanted, out.split(b"\n"), strict=False):
            parts = line.split()
            if len(parts) == 3 and parts[2].isdigit():
                if int(parts[2]) > limit:
                    found[spec] = Oversize(int(parts[2]))
                else:
                    small.append(spec)
        wanted = small
    if not wanted:
        return found
    code, out, _err = call(cwd, "cat-file", "--batch", stdin=("\n".join(wanted) + "\n").encode())
    if code:
        return found
    pos = 0
    for spec in wanted:
        end = out.find(b"\n", pos)
        if end < 0:
            break
        header = out[pos:end].split()
        pos = end + 1
        if len(header) != 3 or not header[2].isdigit():
            continue  # `<spec> missing` (or ambiguous)
        size = int(header[2])
        found[spec] = out[pos : pos + size]
        pos += size + 1
    return found


def configured_remote(repo: Repo, name: str, where: str = "the remote") -> str:
    """`name` when it is a remote configured in this clone; else InvalidInput saying why.

    The clone's config file is read first (no process); `git remote` is asked only when the name
    is not there (a remote from an included file or the user's global config)."""
    problem = argv.remote_name_problem(name)
    if problem is None and name not in _config_remotes(repo):
        _code, out, _err = call(repo.toplevel, "remote")
        if name not in out.decode("utf-8", "replace").split():
            problem = "no remote of that name is configured in this clone (`git remote -v` lists them)"
    if problem:
        raise InvalidInput(f"{where}: remote {argv.shown(name)}: {problem}")
    return name


_REMOTE_SECTION = re.compile(r'^\s*\[remote\s+"([^"\n]+)"\s*\]', re.MULTILINE)


def _config_remotes(repo: Repo) -> set[str]:
    try:
        text = (repo.common_dir / "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return set(_REMOTE_SECTION.findall(text))


# -- git's settings for large repositories (docs/performance.md, *100,000 tasks*) ---------------
LARGE_INDEX = 10_000  # index entries from which git's settings for many files pay off
# feature.manyFiles: index version 4 and the untracked cache; core.splitIndex: a commit rewrites
# only the entries that changed, not the whole index
LARGE_SETTINGS = (("feature.manyFiles", "true"), ("core.splitIndex", "true"))


def index_entries(repo: Repo) -> int:
    """How many entries this worktree's index holds, from its header (no process); 0 if unknown."""
    try:
        with open(repo.git_dir / "index", "rb") as f:
            head = f.read(12)
    except OSError:
        return 0
    return int.from_bytes(head[8:12], "big") if len(head) == 12 and head[:4] == b"DIRC" else 0


def large_settings_missing(repo: Repo) -> tuple[int, list[str]]:
    """(index entries, the LARGE_SETTINGS keys not configured at all) when the index holds at
    least LARGE_INDEX entries; (entries, []) otherwise. A value the user set, whatever it is, is
    theirs: only an unset key counts as missing."""
    entries = index_entries(repo)
    if entries < LARGE_INDEX:
        return entries, []
    return entries, [key for key, _ in LARGE_SETTINGS if call(repo.toplevel, "config", key)[0] != 0]


def set_large_settings(repo: Repo, keys: list[str]) -> None:
    """Turn on `keys` of LARGE_SETTINGS in this clone's own config (`git config --unset KEY` undoes one)."""
    for key, value in LARGE_SETTINGS:
        if key in keys:
            run(repo.toplevel, "config", key, value)
