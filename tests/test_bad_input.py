"""Bad input, as one table (SPEC §7 exit codes; errors are one line on stderr, never a traceback).

Every row of CASES runs the real command in a fresh copy of a prepared repository and asserts:
the exact exit code, exactly one stderr line starting `backlog: ` that names the culprit (the
slug, the file, the field or the line), no traceback, and that nothing in the backlog changed
(every file under the worktree's backlog/ and the shared root `<common dir>/backlog/` except
`.locks`, plus HEAD, `git status --porcelain` and `git ls-files -s`).

Decisions recorded here (and in the product):
* a slug with a leading `-`: after `--` it reaches the slug check (exit 2, `invalid slug '-x'`);
  without `--` plumbum reads it as an unknown switch, which is also exit 2 and one line.
* NUL cannot be passed in argv: `validate_slug` is tested in-process for NUL and for a file
  name with undecodable bytes; such a file in a pile is also exercised through the command.
* a task file that is not a regular file (a symlink, a FIFO, a directory) or is over 1 MiB is
  *refused* (exit 1: the tool will not open it); a regular file whose content is not a task
  (NUL bytes, not UTF-8, bad frontmatter) is *invalid input* (exit 2).
* a named `take` of a malformed task is refused before anything moves; auto-pick skips every
  malformed todo file with one `warning: skipped <file>: <problem>` line each and still claims
  a good task (or says `no available tasks`, exit 0).
* progress, cancel, fail and advance only append to the log and do not interpret frontmatter
  fields, so they still work on an in-flight task with, say, `priority: high`; a file they cannot
  append to (binary, not UTF-8, an unclosed frontmatter) is refused naming the file (exit 2).
* a UTF-8 BOM is tolerated; CRLF files keep every byte and get CRLF log lines.
* a repository without commits: `setup` works and makes the first commit, then verbs work.
* a shared root that cannot be written is simulated by putting a regular file or a dangling
  symlink where a directory must be, which fails for root too (permission bits would not).
* `-C` to a missing directory is a refusal (exit 1, `no such directory: DIR`), like every other
  "no repository here" error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
from conftest import GIT_IDENTITY, Repo, git, init_repo
from hypothesis import example, given, settings
from hypothesis import strategies as st

from maildir_backlog.errors import InvalidInput
from maildir_backlog.guide import render_declaration
from maildir_backlog.project import Pipeline
from maildir_backlog.task import validate_slug
from maildir_backlog.verbs import VERBS

TIMEOUT = 30  # every command gets a deadline: a FIFO must never hang the tool
PIPELINE_LINE = render_declaration("maildir-shared", Pipeline()).splitlines().index("## Pipeline") + 3
DEFAULTS_LINE = render_declaration("maildir-shared", Pipeline()).splitlines().index("## Defaults") + 3


# -- worlds --------------------------------------------------------------------------------
def _common(path: Path) -> Path:
    return Path(git(path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    """One prepared repository per backend, built once; every case works on a copy.

    Piles: `ready-plan` in todo, `flying-plan` in flight, `finished-plan` in done,
    `broken-plan` in failed.
    """
    built: dict[str, Path] = {}

    def get(backend: str) -> Path:
        if backend not in built:
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("HOME", str(tmp_path_factory.mktemp("home")))
                for key, value in GIT_IDENTITY.items():
                    mp.setenv(key, value)
                repo = Repo(init_repo(tmp_path_factory.mktemp(backend) / "repo"))
                repo.ok("setup", f"--backend={backend}")
                for slug in ("ready", "flying", "finished", "broken"):
                    repo.ok("add", slug)
                repo.ok("take", "broken-plan")
                repo.ok("fail", "broken-plan", "it broke")
                repo.ok("take", "finished-plan")
                repo.ok("advance", "finished-plan")
                repo.ok("take", "flying-plan")
                assert repo.git("status", "--porcelain") == ""
            built[backend] = repo.path
        return built[backend]

    return get


def copy_world(template: Path, dst: Path) -> Repo:
    shutil.copytree(template, dst, symlinks=True)
    for entry in (dst / "backlog").iterdir():  # shared piles: re-point the absolute symlinks
        if entry.is_symlink() and os.readlink(entry).startswith(str(template)):
            target = str(dst) + os.readlink(entry)[len(str(template)) :]
            entry.unlink()
            entry.symlink_to(target)
    return Repo(dst)


def make_world(kind: str, templates, tmp_path: Path) -> Repo:
    if kind in ("shared", "git"):
        return copy_world(templates(f"maildir-{kind}"), tmp_path / "repo")
    if kind == "plain":  # a repository with one commit and no backlog
        return Repo(init_repo(tmp_path / "repo"))
    if kind == "bare":
        path = tmp_path / "repo"
        path.mkdir()
        git(path, "init", "-q", "--bare", "bare.git")
        return Repo(path)
    if kind == "outside":
        path = tmp_path / "repo"
        path.mkdir()
        (path / "notes.txt").write_text("not a repository\n")
        return Repo(path)
    raise AssertionError(kind)


# -- the snapshot ----------------------------------------------------------------------------
def _tree(base: Path, skip: tuple[str, ...] = ()) -> dict[str, object]:
    """Every entry under `base` (symlinks not followed): bytes, link target, or a kind marker."""
    found: dict[str, object] = {}
    if not os.path.lexists(base):
        return found
    todo = [base]
    while todo:
        path = todo.pop()
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            found[str(path)] = ("symlink", os.readlink(path))
        elif stat.S_ISREG(st.st_mode):
            found[str(path)] = path.read_bytes()
        elif stat.S_ISDIR(st.st_mode):
            found[str(path)] = "dir"
            todo += [path / name for name in os.listdir(path) if name not in skip]
        else:
            found[str(path)] = f"special {stat.S_IFMT(st.st_mode):o}"
    return found


def snapshot(world: Repo, kind: str) -> dict:
    outside = _tree(world.path.parent / "outside")  # targets of symlinks that point out of the backlog
    if kind in ("bare", "outside"):
        return {"tree": _tree(world.path), "outside": outside}
    common = _common(world.path)
    return {
        "files": {**_tree(world / "backlog"), **_tree(common / "backlog", skip=(".locks",))},
        "outside": outside,
        "head": git(world.path, "rev-parse", "HEAD"),
        "status": git(world.path, "status", "--porcelain"),
        "index": git(world.path, "ls-files", "-s"),
    }


# -- preparations ----------------------------------------------------------------------------
Prep = Callable[[Repo], None]


def commit(repo: Repo, *paths: str) -> None:
    repo.git("add", "-f", "--", *paths)
    repo.git("commit", "-q", "-m", "prep", "--", *paths)


def todo_file(name: str, data: bytes, tracked: bool = True) -> Prep:
    def prep(repo: Repo) -> None:
        (repo / f"backlog/todo/{name}").write_bytes(data)
        if tracked:
            commit(repo, f"backlog/todo/{name}")

    return prep


def flying_file(name: str, data: bytes) -> Prep:
    """A file in the in-flight pile `doing/` (the shared root for maildir-shared)."""

    def prep(repo: Repo) -> None:
        doing = (repo / "backlog/doing").resolve()
        (doing / name).write_bytes(data)

    return prep


def symlink_in(pile_rel: str, name: str) -> Prep:
    """`<pile>/<name>` is a symlink to a file outside the backlog (next to the repository)."""

    def prep(repo: Repo) -> None:
        outside = repo.path.parent / "outside"
        outside.mkdir(exist_ok=True)
        target = outside / "secret.md"
        target.write_bytes(b"# not yours\n\n---\n\n")
        pile = (repo / pile_rel).resolve()
        (pile / name).symlink_to(target)
        if not (repo / pile_rel).is_symlink():  # tracked pile: commit the link like a user would
            commit(repo, f"{pile_rel}/{name}")

    return prep


def fifo_in(pile_rel: str, name: str) -> Prep:
    def prep(repo: Repo) -> None:
        os.mkfifo((repo / pile_rel).resolve() / name)

    return prep


def dir_in(pile_rel: str, name: str) -> Prep:
    def prep(repo: Repo) -> None:
        path = (repo / pile_rel).resolve() / name
        path.mkdir()
        (path / "inside.txt").write_text("a directory named like a task\n")

    return prep


def big_todo(name: str) -> Prep:
    def prep(repo: Repo) -> None:
        with open(repo / f"backlog/todo/{name}", "wb") as handle:
            handle.write(b"# big\n\n")
            handle.truncate(20 * 1024 * 1024)

    return prep


def agents_edit(pattern: str, replacement: str) -> Prep:
    def prep(repo: Repo) -> None:
        path = repo / "backlog/AGENTS.md"
        text, n = re.subn(pattern, replacement, path.read_text(), count=1, flags=re.M)
        assert n == 1, pattern
        path.write_text(text)

    return prep


def agents_pipeline(line: str) -> Prep:
    return agents_edit(r"^`todo` → `doing` → `done`$", line)


def shared_root_entry(rel: str, how: str) -> Prep:
    """Put a regular file (or a dangling symlink) where the shared root needs a directory.

    Root ignores permission bits; a file in a directory's place stops root as well.
    """

    def prep(repo: Repo) -> None:
        path = _common(repo.path) / "backlog" / rel if rel else _common(repo.path) / "backlog"
        if path.is_dir():
            shutil.rmtree(path)
        if how == "file":
            path.write_bytes(b"not a directory\n")
        else:
            path.symlink_to(repo.path.parent / "nowhere" / "dir")

    return prep


def pile_is_file(pile: str) -> Prep:
    def prep(repo: Repo) -> None:
        path = repo / "backlog" / pile
        shutil.rmtree(path)
        path.write_bytes(b"not a directory\n")

    return prep


def detach(repo: Repo) -> None:
    repo.git("checkout", "-q", "--detach")


def chain(*preps: Prep) -> Prep:
    def prep(repo: Repo) -> None:
        for p in preps:
            p(repo)

    return prep


# -- the table -------------------------------------------------------------------------------
@dataclass
class Case:
    id: str
    args: tuple[str, ...]
    code: int
    culprits: tuple[str, ...]
    world: str = "shared"
    prep: Prep | None = None
    cwd: str = ""  # relative to the world's directory
    env: dict = field(default_factory=dict)
    input: str | None = None  # stdin


CASES: list[Case] = []


def case(id: str, args, code: int, *culprits: str, **kw) -> None:
    CASES.append(Case(id, tuple(args), code, culprits, **kw))


# bad slugs: every kind on `take`, and every other verb that takes a slug with a rotation of kinds
LONG = "a" * 300
BAD_SLUGS = {
    "traversal": ("../x", "'../x'"),
    "slash": ("/", "'/'"),
    "space": ("a b", "'a b'"),
    "upper": ("Foo", "'Foo'"),
    "dash": ("-x", "'-x'"),
    "long": (LONG, "'" + "a" * 40),
    "nonascii": ("café", "'café'"),
    "empty": ("", "''"),
    "dotdot": ("a..b", "'a..b'"),
}


def slug_call(verb):
    """`verb` with `s` as its slug (the table's `slug` parameter; positionals after `--`)."""

    def build(s):
        options = [arg for p in verb.params_of("cli") if p.name == "slug" and not p.positional for arg in (p.flag, s)]
        given = [p for p in verb.params_of("cli") if p.positional and (p.required or p.name == "slug")]
        rest = [s if p.name == "slug" else "reason" for p in given]
        return (verb.name, *options, "--", *rest)

    return build


SLUG_VERBS = {verb.name: slug_call(verb) for verb in VERBS if any(p.name == "slug" for p in verb.params_of("cli"))}
SLUG_VERBS["add-depends"] = lambda s: ("add", "ok", f"--depends={s}")

_kinds = list(BAD_SLUGS)
for v, (verb, build) in enumerate(SLUG_VERBS.items()):
    chosen = _kinds if verb == "take" else [_kinds[(v * 2 + k) % len(_kinds)] for k in range(3)]
    for kind in chosen:
        value, shown = BAD_SLUGS[kind]
        case(f"slug-{kind}-{verb}", build(value), 2, f"invalid slug {shown}")
for verb in ("take", "show", "cancel"):  # leading '-' without `--`: plumbum's unknown switch, still one line
    case(f"slug-dash-noquote-{verb}", (verb, "-x") + (("r",) if verb == "cancel" else ()), 2, "-x")

# empty notes and reasons
case("empty-progress", ("progress", ""), 2, "empty note")
case("blank-progress", ("progress", " \n\t "), 2, "empty note")
case("empty-progress-slug", ("progress", "--slug", "flying-plan", ""), 2, "empty note")
case("empty-cancel", ("cancel", "flying-plan", ""), 2, "empty reason")
case("blank-cancel", ("cancel", "flying-plan", "\n\n"), 2, "empty reason")
case("blank-fail", ("fail", "flying-plan", "  "), 2, "empty reason")
case("empty-retry", ("retry", "broken-plan", ""), 2, "empty reason")
case("empty-retry-git", ("retry", "broken-plan", ""), 2, "empty reason", world="git")

# malformed frontmatter in a task the verb must read
FRONTMATTER = {
    "yaml": (b"---\npriority: [1\n---\n# bad\n", "invalid frontmatter"),
    "priority-high": (b"---\npriority: high\n---\n# bad\n", "invalid priority: 'high'"),
    "timeout-0d": (b"---\ntimeout: 0d\n---\n# bad\n", "invalid timeout: '0d'"),
    "timeout-neg": (b"---\ntimeout: -3h\n---\n# bad\n", "invalid timeout: '-3h'"),
    "timeout-soon": (b"---\ntimeout: soon\n---\n# bad\n", "invalid timeout: 'soon'"),
    "deps-7": (b"---\ndependencies: 7\n---\n# bad\n", "invalid dependencies: 7"),
    "unclosed": (b"---\npriority: 1\n# bad\n", "no closing '---'"),
    "deps-bad-slug": (b"---\ndependencies: [Up]\n---\n# bad\n", "invalid dependencies"),
}
for name, (data, field_) in FRONTMATTER.items():
    for verb in ("take", "show"):
        case(f"fm-{name}-{verb}", (verb, "bad"), 2, "backlog/todo/bad.md", field_, prep=todo_file("bad.md", data))
case(
    "fm-priority-advance",
    ("advance", "bad"),
    2,
    "backlog/todo/bad.md",
    "invalid priority",
    prep=todo_file("bad.md", FRONTMATTER["priority-high"][0]),
)
case(
    "fm-priority-take-git",
    ("take", "bad"),
    2,
    "backlog/todo/bad.md",
    "invalid priority",
    world="git",
    prep=todo_file("bad.md", FRONTMATTER["priority-high"][0]),
)
case(
    "fm-timeout-inflight-show",
    ("show", "bad"),
    2,
    "backlog/doing/bad.md",
    "invalid timeout: 'soon'",
    prep=flying_file("bad.md", FRONTMATTER["timeout-soon"][0]),
)
case(
    "fm-timeout-inflight-rescue",
    ("rescue", "bad"),
    2,
    "backlog/doing/bad.md",
    "invalid timeout: 'soon'",
    prep=flying_file("bad.md", FRONTMATTER["timeout-soon"][0]),
)
case(
    "fm-yaml-inflight-take",
    ("take", "bad"),
    2,
    "backlog/doing/bad.md",
    "invalid frontmatter",
    prep=flying_file("bad.md", FRONTMATTER["yaml"][0]),
)
for args in (("cancel", "bad", "r"), ("fail", "bad", "r"), ("advance", "bad"), ("progress", "--slug", "bad", "n")):
    case(
        f"fm-unclosed-inflight-{args[0]}",
        args,
        2,
        "backlog/doing/bad.md",
        "no closing '---'",
        prep=flying_file("bad.md", FRONTMATTER["unclosed"][0]),
    )
case(
    "fm-unclosed-inflight-cancel-git",
    ("cancel", "bad", "r"),
    2,
    "backlog/doing/bad.md",
    "no closing '---'",
    world="git",
    prep=flying_file("bad.md", FRONTMATTER["unclosed"][0]),
)

# files that are not task files
case(
    "symlink-todo-take",
    ("take", "link"),
    1,
    "backlog/todo/link.md",
    "symlink",
    prep=symlink_in("backlog/todo", "link.md"),
)
case(
    "symlink-todo-show",
    ("show", "link"),
    1,
    "backlog/todo/link.md",
    "symlink",
    prep=symlink_in("backlog/todo", "link.md"),
)
case(
    "symlink-todo-take-git",
    ("take", "link"),
    1,
    "backlog/todo/link.md",
    "symlink",
    world="git",
    prep=symlink_in("backlog/todo", "link.md"),
)
for args in (("show", "link"), ("advance", "link"), ("cancel", "link", "r"), ("progress", "--slug", "link", "n")):
    case(
        f"symlink-doing-{args[0]}",
        args,
        1,
        "backlog/doing/link.md",
        "symlink",
        prep=symlink_in("backlog/doing", "link.md"),
    )
case(
    "symlink-doing-advance-git",
    ("advance", "link"),
    1,
    "backlog/doing/link.md",
    "symlink",
    world="git",
    prep=symlink_in("backlog/doing", "link.md"),
)
case(
    "fifo-todo-take",
    ("take", "fifo"),
    1,
    "backlog/todo/fifo.md",
    "not a regular file",
    prep=fifo_in("backlog/todo", "fifo.md"),
)
case(
    "fifo-todo-show",
    ("show", "fifo"),
    1,
    "backlog/todo/fifo.md",
    "not a regular file",
    prep=fifo_in("backlog/todo", "fifo.md"),
)
case(
    "fifo-doing-cancel",
    ("cancel", "fifo", "r"),
    1,
    "backlog/doing/fifo.md",
    "not a regular file",
    prep=fifo_in("backlog/doing", "fifo.md"),
)
case(
    "fifo-doing-rescue",
    ("rescue", "fifo"),
    1,
    "backlog/doing/fifo.md",
    "not a regular file",
    prep=fifo_in("backlog/doing", "fifo.md"),
)
case("dir-todo-take", ("take", "x"), 1, "backlog/todo/x.md", "is a directory", prep=dir_in("backlog/todo", "x.md"))
case("dir-todo-show", ("show", "x"), 1, "backlog/todo/x.md", "is a directory", prep=dir_in("backlog/todo", "x.md"))
case(
    "dir-doing-progress",
    ("progress", "--slug", "x", "n"),
    1,
    "backlog/doing/x.md",
    "is a directory",
    prep=dir_in("backlog/doing", "x.md"),
)
case(
    "binary-todo-take", ("take", "bin"), 2, "backlog/todo/bin.md", "binary", prep=todo_file("bin.md", b"# x\n\0\0\1\2")
)
case(
    "binary-todo-show", ("show", "bin"), 2, "backlog/todo/bin.md", "binary", prep=todo_file("bin.md", b"# x\n\0\0\1\2")
)
case(
    "binary-doing-cancel",
    ("cancel", "bin", "r"),
    2,
    "backlog/doing/bin.md",
    "binary",
    prep=flying_file("bin.md", b"# x\n\0\0\1\2"),
)
case(
    "latin1-doing-progress",
    ("progress", "--slug", "latin", "n"),
    2,
    "backlog/doing/latin.md",
    "not valid UTF-8",
    prep=flying_file("latin.md", "# caf\xe9\n".encode("latin-1")),
)
case("big-todo-take", ("take", "big"), 1, "backlog/todo/big.md", "too large", prep=big_todo("big.md"))
case(
    "latin1-todo-take",
    ("take", "latin"),
    2,
    "backlog/todo/latin.md",
    "not valid UTF-8",
    prep=todo_file("latin.md", "# caf\xe9\n".encode("latin-1")),
)
case(
    "latin1-todo-show",
    ("show", "latin"),
    2,
    "backlog/todo/latin.md",
    "not valid UTF-8",
    prep=todo_file("latin.md", "# caf\xe9\n".encode("latin-1")),
)

# the project declaration
for name in ("jira", "github-issues"):
    case(
        f"backend-{name}",
        ("status",),
        1,
        "backlog/AGENTS.md:",
        repr(name),
        "not supported by this tool",
        prep=agents_edit(r"^maildir-shared$", name),
    )
case(
    "backend-jira-take",
    ("take", "ready-plan"),
    1,
    "not supported by this tool",
    prep=agents_edit(r"^maildir-shared$", "jira"),
)
for name, line, why in (
    ("no-done", "`todo` → `doing`", "must end with `done`"),
    ("no-todo", "`inbox` → `doing` → `done`", "must contain `todo`"),
    ("duplicate", "todo doing doing done", "`doing` appears twice"),
    ("failed", "todo doing failed done", "`failed`"),
):
    case(
        f"pipeline-{name}",
        ("status",),
        2,
        f"backlog/AGENTS.md:{PIPELINE_LINE}",
        why,
        repr(line),
        prep=agents_pipeline(line),
    )
case(
    "defaults-timeout",
    ("status",),
    0,
    f"backlog/AGENTS.md:{DEFAULTS_LINE}",
    "timeout",
    "'soon'",
    prep=agents_edit(r"^- `timeout: 7d`$", "- `timeout: soon`"),
)
case(
    "agents-not-utf8",
    ("status",),
    2,
    "backlog/AGENTS.md",
    "UTF-8",
    prep=lambda r: (r / "backlog/AGENTS.md").write_bytes(b"## Backend\n\nmaildir-shared \xff\n"),
)
case("agents-missing", ("status",), 1, "backlog/AGENTS.md is missing", world="plain")

# a shared root that cannot be written (holds for root: a file or dangling link in a directory's place)
case(
    "shared-doing-is-file",
    ("take", "ready-plan"),
    1,
    ".git/backlog/doing",
    "not a directory",
    prep=shared_root_entry("doing", "file"),
)
case(
    "shared-doing-dangling",
    ("take", "ready-plan"),
    1,
    ".git/backlog/doing",
    "not a directory",
    prep=shared_root_entry("doing", "dangling"),
)
case(
    "shared-root-is-file",
    ("take", "ready-plan"),
    1,
    ".git/backlog ",
    "not a directory",
    prep=shared_root_entry("", "file"),
)
case(
    "shared-locks-is-file",
    ("take", "ready-plan"),
    1,
    ".git/backlog/.locks",
    "not a directory",
    prep=shared_root_entry(".locks", "file"),
)
case(
    "shared-ledger-is-file",
    ("advance", "flying-plan"),
    1,
    ".git/backlog/.ledger",
    "not a directory",
    prep=shared_root_entry(".ledger", "file"),
)
case(
    "git-locks-is-file",
    ("take", "ready-plan"),
    1,
    ".git/backlog/.locks",
    "not a directory",
    world="git",
    prep=shared_root_entry(".locks", "file"),
)
case(
    "git-done-is-file",
    ("advance", "flying-plan"),
    1,
    "backlog/done",
    "not a directory",
    world="git",
    prep=pile_is_file("done"),
)

# repository states
for args in (
    ("take", "ready-plan"),
    ("take",),
    ("advance", "flying-plan"),
    ("progress", "note"),
    ("advance", "ready-plan"),
):
    case(f"detached-{'-'.join(args)}", args, 1, "HEAD is detached", prep=detach)
case("detached-take-git", ("take", "ready-plan"), 1, "HEAD is detached", world="git", prep=detach)
case("bare", ("status",), 1, "bare repository", world="bare", cwd="bare.git")
case("bare-C", ("-C", "bare.git", "take"), 1, "bare repository", world="bare")
case("inside-git-dir", ("status",), 1, "not inside a work tree", world="plain", cwd=".git")
case("outside", ("status",), 1, "not inside a git repository", world="outside")
case("outside-take", ("take", "x"), 1, "not inside a git repository", world="outside")
case("C-missing", ("-C", "no/such/dir", "status"), 1, "no such directory: no/such/dir")
case("C-missing-outside", ("-C", "/nonexistent/dir", "take"), 1, "no such directory: /nonexistent/dir", world="outside")

# command-line misuse
case("unknown-verb", ("frob",), 2, "'frob'")
case("no-verb", (), 2, "missing verb")
case("unknown-switch", ("status", "--bogus"), 2, "--bogus")
case("C-without-dir", ("-C",), 2, "-C")
case("missing-arg-show", ("show",), 2, "show")
case("missing-reason", ("cancel", "flying-plan"), 2, "cancel")
case("missing-note", ("progress",), 2, "progress")
case("extra-arg-show", ("show", "ready-plan", "extra"), 2, "extra")
case("extra-arg-take", ("take", "ready-plan", "extra"), 2, "extra")
case("add-priority-high", ("add", "x", "--priority", "high"), 2, "--priority", "'high'")
case("add-priority-zero", ("add", "x", "--priority", "0"), 2, "priority 0")
case("add-timeout-soon", ("add", "x", "--timeout", "soon"), 2, "--timeout", "'soon'")
case("add-timeout-0d", ("add", "x", "--timeout", "0d"), 2, "--timeout", "'0d'")
case("add-category", ("add", "x", "bogus"), 2, "category 'bogus'")
case("add-body-file", ("add", "x", "--body-file", "/nonexistent/body.md"), 2, "/nonexistent/body.md")
case("add-body-stdin-nul", ("add", "x", "--body-file", "-"), 2, "backlog/todo/x-plan.md", "binary", input="a\0b\n")
case(
    "add-body-file-latin1",
    ("add", "x", "--body-file", "latin.txt"),
    2,
    "--body-file latin.txt",
    "utf-8",
    prep=lambda r: (r / "latin.txt").write_bytes(b"caf\xe9\n"),
)
case(
    "check-deps-bad-field",
    ("check-deps", "backlog/todo/bad.md"),
    1,
    "backlog/todo/bad.md",
    "invalid dependencies",
    prep=todo_file("bad.md", FRONTMATTER["deps-7"][0]),
)
case(
    "check-deps-binary",
    ("check-deps", "backlog/todo/bin.md"),
    1,
    "backlog/todo/bin.md",
    "binary",
    prep=todo_file("bin.md", b"\0"),
)
case("advance-pr-space", ("advance", "flying-plan", "--pr", "a b"), 2, "--pr", "'a b'")
case("retry-set-nokey", ("retry", "broken-plan", "r", "--set", "nokey"), 2, "--set", "'nokey'")
case("retry-set-bad-key", ("retry", "broken-plan", "r", "--set", "bad key=1"), 2, "--set", "'bad key=1'")
case("retry-set-empty-key", ("retry", "broken-plan", "r", "--set==1"), 2, "--set", "'=1'")
case(
    "retry-set-priority-high",
    ("retry", "broken-plan", "r", "--set", "priority=high"),
    2,
    "backlog/todo/broken-plan.md",
    "invalid priority: 'high'",
)
case("retry-set-timeout-0d", ("retry", "broken-plan", "r", "--set", "timeout=0d"), 2, "invalid timeout: '0d'")
case("list-nosuchpile", ("list", "nosuchpile"), 2, "'nosuchpile'")
case("migrate-neither", ("migrate",), 2, "--to", "--from-flat")
case("migrate-both", ("migrate", "--to", "maildir-git", "--from-flat"), 2, "--to", "--from-flat")
case("migrate-to-jira", ("migrate", "--to", "jira"), 2, "jira")
case("setup-no-backend", ("setup",), 2, "--backend", world="plain")
case("setup-backend-jira", ("setup", "--backend=jira"), 2, "'jira'", "not supported by this tool", world="plain")
case(
    "setup-pipeline-no-done",
    ("setup", "--backend=maildir-git", "--pipeline", "todo doing"),
    2,
    "--pipeline",
    "must end with `done`",
    world="plain",
)
case("setup-again", ("setup", "--backend=maildir-shared"), 1, "backlog/AGENTS.md already exists")


def assert_one_line_error(proc, code: int, culprits) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr, proc.stdout)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("backlog: ") and "internal error" not in line, line
    for culprit in culprits:
        assert culprit in line, (culprit, line)
    return line


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input(c: Case, templates, tmp_path):
    world = make_world(c.world, templates, tmp_path)
    if c.prep:
        c.prep(world)
    before = snapshot(world, c.world)
    env = {"GIT_CEILING_DIRECTORIES": str(tmp_path), **c.env}
    proc = Repo(world.path / c.cwd).run(*c.args, env=env, input=c.input, timeout=TIMEOUT)
    assert_one_line_error(proc, c.code, c.culprits)
    assert snapshot(world, c.world) == before


def test_the_table_is_big_enough():
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


# -- what is not an error, or not testable through argv --------------------------------------
def test_nul_and_odd_bytes_in_slugs_in_process():
    """NUL cannot travel through argv; the slug check refuses it (and odd bytes) in one line."""
    for slug in ("a\0b", "\0", "odd\udcff", "a\nb", "tab\tx"):
        with pytest.raises(InvalidInput) as info:
            validate_slug(slug)
        assert info.value.code == 2
        message = info.value.message
        assert "\n" not in message and "\0" not in message and message.startswith("invalid slug '")
    with pytest.raises(InvalidInput, match=r"\\x00"):
        validate_slug("a\0b")


@pytest.fixture
def shared_world(templates, tmp_path) -> Repo:
    return copy_world(templates("maildir-shared"), tmp_path / "repo")


@pytest.fixture
def git_world(templates, tmp_path) -> Repo:
    return copy_world(templates("maildir-git"), tmp_path / "repo")


def test_multiline_note_and_reason_are_folded(shared_world):
    w = shared_world
    w.ok("progress", "first line\nsecond line\n\n  third\tline  ")
    text = (w / "backlog/doing/flying-plan.md").read_text()
    assert text.splitlines()[-1].endswith(" progress | first line second line third line")
    w.ok("cancel", "flying-plan", "no longer\r\nneeded")
    last = (w / "backlog/done/flying-plan.md").read_text().splitlines()[-1]
    assert last.endswith(" cancelled | no longer needed")
    assert w.head_message() == "cancel(flying-plan) no longer needed"


def test_log_only_verbs_do_not_interpret_the_frontmatter(shared_world):
    """Decision: progress/cancel/fail only append to the log, so an in-flight task whose fields are
    invalid can still be reported on and given up (its spec stays frozen, bad field and all);
    verbs that need a field (take, rescue, show) refuse it, naming file and field."""
    w = shared_world
    spec = FRONTMATTER["priority-high"][0]
    flying_file("bad.md", spec)(w)
    w.ok("progress", "--slug", "bad", "still here")
    w.ok("fail", "bad", "cannot parse my own priority")
    data = (w / "backlog/failed/bad.md").read_bytes()
    assert data.startswith(spec) and data.decode().splitlines()[-1].endswith(" failed | cannot parse my own priority")


def test_auto_pick_skips_malformed_files_with_one_warning_each(shared_world):
    w = shared_world
    bad = {
        "yaml.md": FRONTMATTER["yaml"][0],
        "prio.md": FRONTMATTER["priority-high"][0],
        "bin.md": b"\0\0",
        "latin.md": b"\xff\xfe",
    }
    for name, data in bad.items():
        (w / f"backlog/todo/{name}").write_bytes(data)
    os.mkfifo(w / "backlog/todo/fifo.md")
    (w / "backlog/todo/dir.md").mkdir()
    symlink_in("backlog/todo", "link.md")(w)
    big_todo("big.md")(w)
    fifo_in("backlog/doing", "fifo.md")(w)  # the prelude reads every in-flight task: must not hang either
    commit(w, *(f"backlog/todo/{n}" for n in (*bad, "link.md")))
    proc = w.run("take", timeout=TIMEOUT)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.strip() == "backlog/doing/ready-plan.md"
    warnings = proc.stderr.splitlines()
    expected = {*bad, "fifo.md", "dir.md", "link.md", "big.md"}
    assert len(warnings) == len(expected), warnings
    for name in expected:
        assert sum(f"warning: skipped backlog/todo/{name}: " in line for line in warnings) == 1, (name, warnings)
    # nothing good left: still exit 0, the same warnings, then `no available tasks`
    proc = w.run("take", timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[-1] == "no available tasks" and len(lines) == len(expected) + 1
    assert all(line.startswith("warning: skipped backlog/todo/") for line in lines[:-1])
    for name in bad:  # the malformed files are untouched
        assert (w / f"backlog/todo/{name}").read_bytes() == bad[name]


def test_odd_bytes_file_name_in_a_pile(shared_world):
    w = shared_world
    name = os.fsencode(str(w / "backlog/todo")) + b"/odd\xff.md"
    with open(name, "wb") as handle:
        handle.write(b"# odd\n")
    env = {"PYTHONIOENCODING": "utf-8:strict"}  # what a UTF-8 locale gives: no surrogateescape
    proc = w.run("list", env=env, timeout=TIMEOUT)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert any("INVALID" in line and "odd\\xff" in line for line in proc.stdout.splitlines()), proc.stdout
    proc = w.run("take", env=env, timeout=TIMEOUT)
    assert proc.returncode == 0 and proc.stdout.strip() == "backlog/doing/ready-plan.md", proc.stderr
    warnings = proc.stderr.splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("warning: skipped backlog/todo/odd\\xff.md: invalid slug")


def test_utf8_bom_is_tolerated(shared_world):
    w = shared_world
    spec = b"\xef\xbb\xbf---\npriority: 1\n---\n\n# bom task\n"
    todo_file("bom.md", spec)(w)
    shown = json.loads(w.ok("--json", "show", "bom"))
    assert shown["frontmatter"]["priority"] == 1 and shown["title"] == "bom task"
    assert w.ok("take").strip() == "backlog/doing/bom.md"  # priority 1 wins: the BOM did not hide it
    w.ok("progress", "--slug", "bom", "going")
    w.ok("advance", "bom")
    data = (w / "backlog/done/bom.md").read_bytes()
    assert data.startswith(spec + b"\n---\n\n- ")
    assert [line.split()[2] for line in data.decode("utf-8-sig").split("---\n\n")[-1].splitlines()] == [
        "advanced",
        "progress",
        "advanced",
    ]


def test_crlf_task_is_kept_byte_exact(git_world):
    w = git_world
    spec = b"---\r\npriority: 2\r\ntimeout: 2d\r\nodd:   yaml  \r\n---\r\n\r\n# crlf  \r\n\r\nbody\r\n\r\n---\r\n\r\n"
    todo_file("crlf.md", spec)(w)
    w.ok("take", "crlf")
    w.ok("progress", "--slug", "crlf", "a\nb")
    w.ok("advance", "crlf", "--pr", "https://example.invalid/pull/1")
    data = (w / "backlog/done/crlf.md").read_bytes()
    assert data.startswith(spec)
    log = data[len(spec) :]
    assert log.count(b"\r\n") == 3 and log.count(b"\n") == 3 and log.endswith(b"\r\n")
    assert b"progress | a b\r\n" in log and b"| PR=https://example.invalid/pull/1\r\n" in log
    committed = subprocess.run(["git", "show", "HEAD:backlog/done/crlf.md"], cwd=w.path, capture_output=True).stdout
    assert committed == data


@pytest.mark.parametrize("backend", ["maildir-git", "maildir-shared"])
def test_a_commit_git_cannot_sign_says_why_in_one_line_and_leaves_nothing(tmp_path, backend):
    """`commit.gpgSign` set and gpg failing (here `gpg.program=false`): git's last line alone
    (`fatal: failed to write commit object`) does not say why; the cause comes first. Nothing of
    the refused calls is left: no task file, no claim, a clean work tree."""
    w = Repo(init_repo(tmp_path / "repo"))
    w.ok("setup", f"--backend={backend}")
    w.ok("add", "kept")
    head = w.git("rev-parse", "HEAD")
    w.git("config", "commit.gpgSign", "true")
    w.git("config", "gpg.program", "false")
    for args in (("add", "refused"), ("take", "kept-plan")):
        proc = w.run(*args)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith("backlog: error: gpg failed to sign the data; fatal: failed to write commit"), (
            proc
        )
    assert w.git("rev-parse", "HEAD") == head and w.git("status", "--porcelain", "--untracked-files=all") == ""
    assert sorted(p.name for p in (w / "backlog/todo").iterdir()) == [".gitkeep", "kept-plan.md"]
    assert [p.name for p in (w / "backlog/doing").iterdir() if p.name != ".gitkeep"] == []


def test_detached_head_read_only_verbs_work(shared_world):
    w = shared_world
    detach(w)
    before = snapshot(w, "shared")
    assert w.ok("status").splitlines()[:4] == ["todo: 1", "doing: 1", "done: 1", "failed: 1"]
    assert "flying-plan" in w.ok("show", "flying-plan")
    assert "ready-plan" in w.ok("list")
    w.ok("where")
    assert snapshot(w, "shared") == before


@pytest.mark.parametrize("backend", ["maildir-git", "maildir-shared"])
def test_repository_without_commits(tmp_path, backend):
    """`git init` only: setup makes the first commit; the usual verbs work from there."""
    path = tmp_path / "fresh"
    path.mkdir()
    git(path, "init", "-q", "-b", "trunk")
    w = Repo(path)
    assert w.run("status").returncode == 1  # no backlog yet: a clear refusal
    w.ok("setup", f"--backend={backend}")
    assert git(path, "rev-list", "--count", "HEAD").strip() == "1"
    assert w.head_message() == f"chore(backlog): set up {backend} backlog"
    assert w.ok("status").splitlines()[:4] == ["todo: 0", "doing: 0", "done: 0", "failed: 0"]
    w.ok("add", "first")
    assert w.ok("take").strip() == "backlog/doing/first-plan.md"
    assert git(path, "status", "--porcelain") == ""


def test_json_error_is_one_object(shared_world):
    proc = shared_world.run("--json", "show", "../x", timeout=TIMEOUT)
    assert proc.returncode == 2
    error = proc.stderr.strip().removeprefix("backlog: ")
    assert json.loads(proc.stdout) == {"error": error, "code": 2, "kind": "invalid", "retryable": False}
    assert len(proc.stderr.splitlines()) == 1


def test_status_reports_an_unreadable_in_flight_task(shared_world):
    w = shared_world
    flying_file("bad.md", FRONTMATTER["timeout-soon"][0])(w)
    fifo_in("backlog/doing", "fifo.md")(w)
    before = snapshot(w, "shared")
    proc = w.run("status", timeout=TIMEOUT)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "doing/bad  UNREADABLE: backlog/doing/bad.md: invalid timeout: 'soon'" in proc.stdout
    assert "doing/fifo  UNREADABLE: backlog/doing/fifo.md: is not a regular file" in proc.stdout
    assert snapshot(w, "shared") == before


# -- a body that would read as a log -------------------------------------------------------------
# SPEC §2: the log is the file's trailing run that starts at a `---` line followed by log lines.
# A body given to `add` is description: what `add` writes must read back as that body, with an
# empty log, or `add` refuses (exit 2) and writes nothing.
BODY_LINES = st.sampled_from(
    ["prose", "", "---", "- 2026-01-01T00:00:00Z advanced to=done", "- 2026-01-01T00:00:00Z progress | x"]
    + ["- garbage", "```", "~~~", "  indented", "# heading", "---  ", "***"]
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(lines=st.lists(BODY_LINES, max_size=8))
@example(lines=["Some text.", "", "---", "", "- 2026-01-01T00:00:00Z advanced to=done"])
def test_what_add_accepts_reads_back_as_the_body_given(lines):
    from maildir_backlog.commands.add import _task_file
    from maildir_backlog.logline import is_divider
    from maildir_backlog.task import description, parse_task

    body = "\n".join(lines)
    data = _task_file([], "t", body)
    task = parse_task("t-plan", "t-plan.md", data)
    if task.log or task.unreadable:
        return  # add refuses this body (test_a_body_that_would_read_as_a_log_is_refused)
    kept = list(lines)  # what reads back: the body, less the trailing rules and blank lines the divider run takes
    while (kept and is_divider(kept[-1])) or (kept and not kept[-1].strip()):
        kept.pop()
    given = "\n".join(kept).strip("\n")
    assert description(data) == ("# t\n\n" + given if given.strip() else "# t"), (body, data)


def test_a_body_that_would_read_as_a_log_is_refused(shared_world, tmp_path):
    w = shared_world
    body = tmp_path / "body.md"
    body.write_text("Some text.\n\n---\n\n- 2026-01-01T00:00:00Z advanced to=done\n")
    head = w.git("rev-parse", "HEAD")
    proc = w.run("add", "forged", "--here", "--body-file", str(body), timeout=TIMEOUT)
    assert proc.returncode == 2 and "fenced code block" in proc.stderr, proc.stderr
    assert not (w / "backlog/todo/forged-plan.md").exists() and w.git("rev-parse", "HEAD") == head
    body.write_text("Some text.\n\n```\n---\n\n- 2026-01-01T00:00:00Z advanced to=done\n```\n")
    w.ok("add", "forged", "--here", "--body-file", str(body))
    shown = json.loads(w.ok("--json", "show", "forged-plan"))
    assert shown["log"] == [] and shown["description"].endswith("advanced to=done\n```")
