"""Every git command the tool runs goes through `run` or `call` here (`spawn.exchange`); this module also
discovers the repository (`Repo`) and answers the queries of objects, refs, the index and the work
tree. Commits, which write the index and refs, are in `gitcommit`, over `run`.
"""

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from . import argv, limits
from .argv import END_OF_OPTIONS
from .errors import BacklogError, InvalidInput
from .spawn import TIMED_OUT as TIMED_OUT
from .spawn import TOO_MUCH as TOO_MUCH
from .spawn import Started, answer, exchange, start
from .typed import NamedTuple, pattern


class GitError(BacklogError):
    """A git command failed; the message is git's own (one line), `stderr` all it said."""

    kind = "failed"

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


# The files by which git marks an operation in progress in a worktree's git dir, named once:
# `worktrees.checked_out` says which operation a worktree is in, `gitcommit.unconcluded` refuses a
# commit during one (each asks them in the order its own question needs)
PICKING = (("MERGE_HEAD", "merge"), ("CHERRY_PICK_HEAD", "cherry-pick"), ("REVERT_HEAD", "revert"))
REBASING = ("rebase-merge", "rebase-apply")  # directories; `rebase-apply/applying`: a `git am`
APPLYING = "rebase-apply/applying"
BISECTING = ("BISECT_START", "BISECT_LOG")


class Repo(NamedTuple):
    toplevel: Path
    common_dir: Path
    git_dir: Path
    branch: str | None  # None when HEAD is detached
    has_commits: bool


_ENCODING = sys.getfilesystemencoding()  # how git's text output is read (undecodable bytes dropped)


def live_env() -> dict[str, str]:
    """This process's environment as it is now, for a child process (read at each call: a test or
    the Python API may have changed it since the import)."""
    return dict(os.environ)


def _env() -> dict[str, str]:
    env = live_env()
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    return env


def run(cwd: Path | str, *args: str, check: bool = True, stdin: bytes | None = None) -> str:
    """Run `git ARGS` in `cwd`; return stdout. On failure raise GitError with git's message."""
    retcode, out, err = _text(cwd, argv.checked("git", args), stdin)
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
        elif message.startswith("fatal:") and (errors := [line for line in lines[:-1] if line.startswith("error:")]):
            message = f"{errors[0].strip()}; {message.strip()}"  # the cause first: `gpg failed to sign the data`
        elif len(lines) > 1 and lines[0].startswith(("error:", "fatal:")) and message.startswith(("hint:", " ")):
            message = lines[0]
        elif len(lines) > 1 and lines[0].rstrip().endswith(":"):  # a heading and its list: keep both
            message = " ".join(line.strip() for line in lines)
        raise GitError(message.strip(), stderr=err or out or "")
    return out


def _text(cwd: Path | str, args: Sequence[str], stdin: bytes | None = None) -> tuple[int, str, str]:
    """Run `git ARGS` (already checked) in `cwd`: its exit code, stdout and stderr as text."""
    return _as_text(exchange(cwd, args, _env(), b"" if stdin is None else stdin))


def _as_text(said: tuple[int, bytes, bytes]) -> tuple[int, str, str]:
    """A git's exit code, stdout and stderr, its outputs as text."""
    code, out, err = said
    return code, out.decode(_ENCODING, "ignore"), err.decode(_ENCODING, "ignore")


def call(
    cwd: Path | str,
    *args: str,
    stdin: bytes = b"",
    timeout: float | None = None,
    max_output: int = limits.GIT_OUTPUT_BYTES,
    index: Path | None = None,
) -> tuple[int, bytes, bytes]:
    """Run `git ARGS` in `cwd` with `stdin`; return (exit code, stdout, stderr), bytes as git wrote
    them, whatever the exit code (the caller reads git's verdict: `push --porcelain`, `cat-file --batch`).

    `timeout` (seconds): git is killed if it has not finished by then (a remote that accepted the
    connection and never answers) and the result is TIMED_OUT with a `fatal:` line saying so. A
    helper git started (ssh, git-remote-https) may outlive it; its pipes are not waited for.
    `max_output` (bytes): git is killed once it printed more (a remote that answers without end),
    and the result is TOO_MUCH with a `fatal:` line saying so: memory stays bounded. `index`: the
    index file git reads and writes instead of the worktree's own (GIT_INDEX_FILE)."""
    env = _env()
    if index is not None:
        env["GIT_INDEX_FILE"] = os.fspath(index)
    return exchange(cwd, argv.checked("git", args), env, stdin, timeout, max_output)


Found = tuple[Repo, tuple[str | None, ...]]  # a repository, with the variables that steered its discovery
_LOCATING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM")


# discover's one question: bare? the common dir, the git dir, the top level, the branch
_LOCATE = ["rev-parse", "--is-bare-repository", "--path-format=absolute", "--git-common-dir", "--git-dir"]
_LOCATE += ["--show-toplevel", "--symbolic-full-name", "HEAD"]


def discover(cwd: Path | str, known: Found | None = None) -> Repo:
    """Find the repository around `cwd` with one git call (two on an unborn branch).

    `known`: what an earlier call found for the same `cwd` (`located`), reused without a git
    process while its worktree's HEAD file still names the same branch and the variables that
    steer git's discovery are unchanged (the Python API's later calls on one object)."""
    if known is not None and _still(*known):
        return known[0]
    early = _SOON.pop(os.fspath(cwd), None)
    cwd = Path(cwd)
    if not cwd.is_dir():
        raise BacklogError(f"no such directory: {cwd}")
    if early is not None and early[0] == _steering():  # its answer, started earlier (`discover_soon`)
        retcode, out, err = _as_text(answer(early[1], "rev-parse"))
    else:
        retcode, out, err = _text(cwd, _LOCATE)
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


def located(repo: Repo) -> Found:
    """`repo` with what steered its discovery, for `discover(..., known=)`."""
    return repo, _steering()


def _steering() -> tuple[str | None, ...]:
    return tuple(os.environ.get(name) for name in _LOCATING)


_SOON: dict[str, tuple[tuple[str | None, ...], Started]] = {}  # cwd → (steering then, its git started)


def discover_soon(cwd: str) -> None:
    """Start `discover`'s one git for `cwd` now, to run while this process imports what the call
    needs (the command's fast door, before the verb's modules): `discover(cwd)` then reads its
    answer instead of starting another, unless the variables that steer git's discovery changed
    meanwhile (then it starts its own, and this one finishes unread). ~3 ms of every call overlap
    the imports on a second core."""
    if cwd not in _SOON and os.path.isdir(cwd):
        _SOON[cwd] = (_steering(), start(cwd, argv.checked("git", _LOCATE), _env()))


def _still(repo: Repo, steering: tuple[str | None, ...]) -> bool:
    if not repo.has_commits or repo.branch is None or steering != located(repo)[1]:
        return False  # an unborn or detached HEAD changes in ways a file read would not see: ask git
    try:
        with open(repo.git_dir / "HEAD", "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return head.rstrip(b"\n") == b"ref: refs/heads/" + os.fsencode(repo.branch) and _same_worktree(repo)


def _same_worktree(repo: Repo) -> bool:
    """Is `repo.toplevel` still the worktree of `repo.git_dir`? Not after `git worktree move` or a
    rename of the directory (the path is gone, or another worktree has it now): its `.git` (the
    main worktree's directory, or a linked worktree's `gitdir:` file) must lead to that git dir."""
    dotgit = repo.toplevel / ".git"
    try:
        if not dotgit.is_file():
            return os.path.samefile(dotgit, repo.git_dir)
        with open(dotgit, "rb") as handle:
            text = handle.read(4096)
        if not text.startswith(b"gitdir: "):
            return False
        return os.path.samefile(repo.toplevel / os.fsdecode(text[8:].strip()), repo.git_dir)
    except OSError:
        return False


def moved_to(repo: Repo) -> Path | None:
    """Where the linked worktree of `repo.git_dir` is now, when that is not `repo.toplevel` (its
    git dir's `gitdir` file names the worktree's `.git`, as `git worktree move` rewrites it);
    None when unknown (a main worktree, the git dir gone, nowhere else)."""
    try:
        with open(repo.git_dir / "gitdir", "rb") as handle:
            target = Path(os.fsdecode(handle.read(4096).strip())).parent
    except OSError:
        return None
    return target if target != repo.toplevel and target.is_dir() else None


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
            result.append((main_worktree(repo) if path == repo.common_dir else path, branch))
            path = None
    return result


def main_worktree(repo: Repo) -> Path:
    """The main worktree's top: the common dir's parent, except in a submodule, whose git dir
    (`.git/modules/<name>`, which `git worktree list` names in its place) says where its files
    are in `core.worktree` (one `rev-parse` there, only then)."""
    if repo.common_dir.name == ".git":
        return repo.common_dir.parent
    code, out, _err = call(repo.common_dir, "rev-parse", "--show-toplevel")
    top = out.decode("utf-8", "surrogateescape").strip()
    return Path(top) if code == 0 and top else repo.common_dir


# -- what a worktree is in the middle of (SPEC §4: a branch being rebased is still checked out) --
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


def ignored(repo: Repo, *paths: str) -> list[str]:
    """Those of `paths` (relative to the toplevel, existing or not) that git ignores; a tracked
    path is never ignored."""
    if not paths:
        return []
    _code, out, _err = call(repo.toplevel, "check-ignore", "--stdin", "-z", stdin="\0".join(paths).encode() + b"\0")
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def discover_has_head(repo: Repo) -> bool:
    return bool(run(repo.toplevel, "rev-parse", "-q", "--verify", END_OF_OPTIONS, "HEAD", check=False).strip())


class Oversize(NamedTuple):
    """An object `objects` did not read: it is larger than the bound asked for."""

    size: int


def objects(cwd: Path | str, specs: list[str], limit: int, checked: bool = False) -> dict[str, bytes | Oversize]:
    """The contents of many objects (`<sha>`, `<sha>:<path>`), none larger than `limit` read.

    Sizes are asked first (`cat-file --batch-check`), so a huge blob from a pull request or a
    remote is never read into memory; `checked`: the caller already knows each is within the
    bound (an `ls-tree -l` listing), and the check is skipped. A missing object is left out."""
    wanted = list(dict.fromkeys(specs))
    found: dict[str, bytes | Oversize] = {}
    if wanted and not checked:
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
    if wanted:
        _read_batch(cwd, wanted, found)
    return found


def _read_batch(cwd: Path | str, wanted: list[str], found: dict[str, bytes | Oversize]) -> None:
    """The contents of `wanted` into `found` (`cat-file --batch`); a missing one left out."""
    code, out, _err = call(cwd, "cat-file", "--batch", stdin=("\n".join(wanted) + "\n").encode())
    if code:
        return
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


def configured_remote(repo: Repo, name: str, where: str = "the remote") -> str:
    """`name` when it is a remote configured in this clone; else InvalidInput saying why.

    The clone's config file is read first (no process); `git remote` is asked only when the name
    is not there (a remote from an included file or the user's global config)."""
    problem = argv.remote_name_problem(name)
    if problem is None and not has_remote(repo, name):
        problem = "no remote of that name is configured in this clone (`git remote -v` lists them)"
    if problem:
        raise InvalidInput(f"{where}: remote {argv.shown(name)}: {problem}")
    return name


def has_remote(repo: Repo, name: str) -> bool:
    """Is `name` (a valid remote name) a remote configured in this clone?"""
    if name in _config_remotes(repo):
        return True
    _code, out, _err = call(repo.toplevel, "remote")
    return name in out.decode("utf-8", "replace").split()


_REMOTE_SECTION = pattern(r'(?m)^\s*\[remote\s+"([^"\n]+)"\s*\]')  # (compiled on first use)


def _config_remotes(repo: Repo) -> set[str]:
    try:
        text = (repo.common_dir / "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return set(_REMOTE_SECTION.findall(text))


# -- git's settings for large repositories (docs/performance.md, *100,000 tasks*) ---------------
LARGE_INDEX = 10_000  # index entries from which git's settings for many files pay off


def index_entries(repo: Repo) -> int:
    """How many entries this worktree's index holds, from the headers (no process); 0 if unknown.
    A split index (`core.splitIndex`, which `setup` turns on for many files) keeps most of them in
    a shared part beside it (`sharedindex.<id>`, in the same git dir): the largest such part counts."""
    own = _entries(repo.git_dir / "index")
    if own >= LARGE_INDEX:
        return own
    try:
        shared = [name for name in os.listdir(repo.git_dir) if name.startswith("sharedindex.")]
    except OSError:
        return own
    return max([own, *(_entries(repo.git_dir / name) for name in shared)])


def _entries(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return 0
    return int.from_bytes(head[8:12], "big") if len(head) == 12 and head[:4] == b"DIRC" else 0
