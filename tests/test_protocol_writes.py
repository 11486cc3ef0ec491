"""Every write is a declared step of the one move protocol (issue 28, items 1 and 6a).

* Over the AST: only `gitwrite` (and `gitcommit` with `gitplumbed`, the protocol's index-and-commit
  half, which run their commands through `gitwrite`) spells a git subcommand that writes; a git-running call
  elsewhere names its subcommand as a literal, so the check cannot be dodged by building it.
* Over the AST: the modules that may import `gitcommit`, `gitwrite` and `storage` are listed,
  exhaustively: a new module importing one of them fails here until it is added, on purpose.
* At run time: a `gitwrite` function called outside `change.run` raises, so the whole suite
  proves, whenever it runs, that nothing writes git outside the protocol.
* Each step type that writes git, the ledger or a hook is undone when a later step fails.
"""

from __future__ import annotations

import ast
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import ROOT, git

from maildir_backlog import change, gitwrite
from maildir_backlog import git as gitmod
from maildir_backlog.change import Change, Create
from maildir_backlog.ledger import Settled

PACKAGE = ROOT / "maildir_backlog"
# git subcommands that write a ref, an object, the index, the work tree, the config or the remote.
# `fetch` is not one: it writes only remote-tracking refs, a cache of the remote (docs/design.md).
WRITING = {
    "add", "am", "apply", "branch", "checkout", "cherry-pick", "clean", "commit", "commit-tree", "config",
    "gc", "hash-object", "merge", "mktree", "mv", "notes", "prune", "pull", "push", "read-tree", "rebase",
    "replace", "reset", "restore", "revert", "rm", "stash", "switch", "symbolic-ref", "tag", "update-index",
    "update-ref", "worktree", "write-tree",
}  # fmt: skip
# `config KEY` and `symbolic-ref -q …` and `worktree list` read: told apart by their arguments below
GIT_RUNNERS = {"run", "call", "_git", "_retrying", "_fed"}
WRITERS_OF_GIT = {"maildir_backlog/gitwrite.py", "maildir_backlog/gitcommit.py", "maildir_backlog/gitplumbed.py"}
RUNNER_MODULES = {"maildir_backlog/git.py", "maildir_backlog/gitwrite.py"}  # build git's argv themselves

# who may import what (6a): written as it is; keep it as small as honest
MAY_IMPORT = {
    "gitcommit": {"change"},
    "gitplumbed": {"gitcommit"},
    "gitwrite": {"change", "gitcommit", "gitplumbed", "remote.objects", "remote.protocol", "remote.transport", "steps"},
    "storage": {
        "attributes", "backend.base", "cache", "change", "gitcommit", "gitplumbed", "heal", "history", "hooks", "intake", "ledger", "mark", "migration",
        "migration.journal", "migration.plan", "migration.to_git", "precommit", "queue", "remote.protocol",
        "renaming", "repair.duplicates", "repair.layout_bucket", "repair.remote_reconcile", "scaffold", "steps",
    },
}  # fmt: skip


def _modules() -> list[tuple[str, Path, ast.Module]]:
    return [
        (path.relative_to(ROOT).as_posix(), path, ast.parse(path.read_text())) for path in sorted(PACKAGE.rglob("*.py"))
    ]


def _constants(tree: ast.Module) -> dict[str, list[ast.expr]]:
    """Module-level names bound to a tuple or list display (`QUIET_FETCH = ("fetch", …)`)."""
    found: dict[str, list[ast.expr]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple | ast.List):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = list(node.value.elts)
    return found


def _is_runner(call: ast.Call, runs_git_by_name: bool) -> bool:
    """Does `call` run git? `git.run(…)`, `git.call(…)`, `self._git(…)`, `_retrying(…)`, `_fed(…)`;
    a bare `run`/`call` only in a module that imports them from `git` (elsewhere `run` is `change.run`)."""
    func = call.func
    if isinstance(func, ast.Attribute):
        owner = func.value
        if isinstance(owner, ast.Name) and owner.id == "git" and func.attr in ("run", "call"):
            return True
        return func.attr in ("_git",)
    if isinstance(func, ast.Name):
        if func.id in ("run", "call"):
            return runs_git_by_name
        return func.id in ("_retrying", "_fed")
    return False


def _subcommand(call: ast.Call, constants: dict[str, list[ast.expr]]) -> tuple[str | None, list[str]]:
    """(git's subcommand, the literal arguments after it) of a git-running call; None when the
    subcommand is not a literal. The first argument is the directory (`self._git` has none), a
    repository for `_retrying`, the data for `_fed`; global options (`-c k=v`, `--no-optional-locks`)
    come before the subcommand."""
    func = call.func
    skip = 0 if isinstance(func, ast.Attribute) and func.attr == "_git" else 1
    if isinstance(func, ast.Name) and func.id == "_fed":
        skip = 2
    words: list[ast.expr] = []
    for arg in call.args[skip:]:
        if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name) and arg.value.id in constants:
            words += constants[arg.value.id]
        else:
            words.append(arg)
    literal: list[str] = []
    for word in words:
        if not (isinstance(word, ast.Constant) and isinstance(word.value, str)):
            break  # the rest is built at run time: the subcommand must come before it
        literal.append(word.value)
    i = 0
    while i < len(literal) and literal[i].startswith("-"):
        i += 2 if literal[i] == "-c" else 1
    if i >= len(literal):
        return None, []
    return literal[i], literal[i + 1 :]


def _writes(sub: str, rest: list[str], call: ast.Call) -> bool:
    if sub not in WRITING:
        return False
    if sub == "config":  # `config KEY` reads; `config KEY VALUE`, `--unset` write
        return len(call.args) > 3 or any(word.startswith("--") and word != "--get" for word in rest)
    if sub == "symbolic-ref":
        return "-q" not in rest
    if sub == "worktree":
        return rest[:1] != ["list"]
    return True


def test_only_gitwrite_spells_a_git_command_that_writes():
    """No module other than `gitwrite` (and `gitcommit` through it) passes a writing subcommand to
    a git-running call, nor a subcommand that is not a literal (outside the modules that run git)."""
    writes, hidden = [], []
    for rel, _path, tree in _modules():
        constants = _constants(tree)
        imports_runner = rel in RUNNER_MODULES or any(
            isinstance(node, ast.ImportFrom)
            and node.module == "git"
            and any(alias.name in ("run", "call") for alias in node.names)
            for node in ast.walk(tree)
        )
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not _is_runner(node, imports_runner):
                continue
            sub, rest = _subcommand(node, constants)
            where = f"{rel}:{node.lineno} {ast.unparse(node)[:90]}"
            if sub is None:
                if rel not in RUNNER_MODULES and not _forwards_own_args(tree, node):
                    hidden.append(where)
            elif _writes(sub, rest, node) and rel not in WRITERS_OF_GIT:
                writes.append(where)
    assert not writes, "git writes outside gitwrite (declare a step of change.Change):\n  " + "\n  ".join(writes)
    assert not hidden, "git calls whose subcommand is not a literal:\n  " + "\n  ".join(hidden)


def _forwards_own_args(tree: ast.Module, call: ast.Call) -> bool:
    """Is `call` a wrapper's forwarding of its own `*args` (`Transport._git`, `gitcommit._retrying`)?
    Its callers are checked instead, as git-running calls by the wrapper's name."""
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.args.vararg is not None and fn.name in GIT_RUNNERS:
            if any(node is call for node in ast.walk(fn)):
                return any(
                    isinstance(a, ast.Starred) and isinstance(a.value, ast.Name) and a.value.id == fn.args.vararg.arg
                    for a in call.args
                )
    return False


def test_the_check_sees_a_write():
    """The check above is not blind: it flags each form a write could take."""
    cases = {
        'git.run(top, "update-ref", "refs/x", sha)': True,
        'git.call(top, "-c", "a=b", "commit-tree", t)': True,
        'self._git("push", remote)': True,
        'git.call(top, *QUIET, "x")': False,  # fetch
        'git.call(top, "config", key)': False,
        'git.call(top, "config", key, value)': True,
        'git.run(top, "symbolic-ref", "-q", "HEAD")': False,
    }
    constants = _constants(ast.parse('QUIET = ("fetch", "-q")'))
    for source, wanted in cases.items():
        call = ast.parse(source).body[0].value  # type: ignore[attr-defined]
        assert _is_runner(call, False), source
        sub, rest = _subcommand(call, constants)
        assert sub is not None and _writes(sub, rest, call) is wanted, source
    built = ast.parse("git.call(top, *args)").body[0].value  # type: ignore[attr-defined]
    assert _subcommand(built, {})[0] is None


def _imports(rel: str, tree: ast.Module) -> set[str]:
    """The package modules `rel` imports (`from . import x`, `from .x import y`, `from .. import x`)."""
    parts = rel.removesuffix(".py").split("/")
    package = parts[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            found.update(names)
    return found


def test_only_the_listed_modules_import_the_writers():
    """6a: the contracts say what may. For `gitcommit`, `gitwrite` and `storage`, the set of
    package modules that import each is exactly the list above."""
    importers: dict[str, set[str]] = {name: set() for name in MAY_IMPORT}
    for rel, _path, tree in _modules():
        module = rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        found = _imports(rel, tree)
        for name in MAY_IMPORT:
            if f"maildir_backlog.{name}" in found and module != f"maildir_backlog.{name}":
                importers[name].add(module.removeprefix("maildir_backlog."))
    for name, allowed in MAY_IMPORT.items():
        extra = importers[name] - allowed
        assert not extra, f"modules importing {name} that are not allowed to (declare a change.Change): {extra}"
        stale = allowed - importers[name]
        assert not stale, f"the list for {name} names modules that no longer import it (shorten it): {stale}"


# -- at run time ---------------------------------------------------------------------------------
def test_a_git_write_outside_the_protocol_raises(tmp_path):
    git(tmp_path, "init", "-q")
    with pytest.raises(AssertionError, match="outside the move protocol"):
        gitwrite.blob(tmp_path, b"data")
    with pytest.raises(AssertionError, match="outside the move protocol"):
        gitwrite.update_ref(tmp_path, "refs/x", "0" * 40)
    assert not gitwrite.inside()
    with gitwrite.protocol():
        assert gitwrite.blob(tmp_path, b"data")  # inside: allowed
    assert not gitwrite.inside()


# -- each step undone when a later one fails ----------------------------------------------------
class Injected(Exception):
    pass


def _boom() -> None:
    raise Injected("a later step failed")


@pytest.fixture
def repo(tmp_path):
    top = tmp_path / "r"
    top.mkdir()
    git(top, "init", "-q", "-b", "main")
    (top / "a.txt").write_text("a\n")
    git(top, "add", "a.txt")
    git(top, "commit", "-q", "-m", "one")
    git(top, "branch", "intake")
    return gitmod.discover(top)


def _failing(repo: gitmod.Repo, *steps: change.Step) -> None:
    """Run `steps`, then a step that fails: everything must be undone."""
    boom = Create(repo.git_dir / "HEAD", b"", taken=_boom)  # always taken
    with pytest.raises(Injected):
        change.run(Change((*steps, boom)), repo)


def test_a_branch_commit_is_undone(repo):
    tip = git(repo.toplevel, "rev-parse", "intake").strip()
    _failing(repo, change.BranchCommit("intake", {"backlog/todo/x.md": b"x\n"}, "add(x)"))
    assert git(repo.toplevel, "rev-parse", "intake").strip() == tip
    change.run(Change((change.BranchCommit("intake", {"backlog/todo/x.md": b"x\n"}, "add(x)"),)), repo)
    assert git(repo.toplevel, "show", "intake:backlog/todo/x.md") == "x\n"


def test_a_record_restore_config_rename_and_executable_are_undone(repo):
    top = repo.toplevel
    ledger = top / ".git" / "ledger"
    entry = Settled("x", datetime(2026, 1, 1, tzinfo=UTC), "done", "main", "?", 0)
    (top / "a.txt").write_text("changed\n")
    hook = top / "hook"
    hook.write_text("#!/bin/sh\n")
    mode = hook.stat().st_mode
    written: list[str] = []
    _failing(
        repo,
        change.Record(ledger, entry, written),
        change.Restore(("a.txt",)),
        change.Config("feature.manyFiles", "true"),
        change.Rename(hook, top / "hook.old"),
        change.Executable(top / "hook.old"),
    )
    assert written == ["x"] and not (ledger / "x").exists()
    assert (top / "a.txt").read_text() == "changed\n"
    assert git(top, "config", "--default", "unset", "feature.manyFiles").strip() == "unset"
    assert hook.exists() and not (top / "hook.old").exists() and hook.stat().st_mode == mode


def test_the_memory_a_travel_and_a_change_elsewhere(repo, tmp_path):
    from maildir_backlog.remote import CLAIMS, Remote

    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo.toplevel, "remote", "add", "origin", str(bare))
    remote = Remote(repo, "origin")
    sha = git(repo.toplevel, "rev-parse", "HEAD").strip()
    _failing(repo, change.Memory(remote, CLAIMS, "x", sha))
    assert remote.mine(CLAIMS, "x") is None
    change.run(Change((change.Memory(remote, CLAIMS, "x", sha),)), repo)
    assert remote.mine(CLAIMS, "x") == sha
    git(repo.toplevel, "push", "-q", "origin", "main", "intake")
    expect = git(repo.toplevel, "rev-parse", "intake").strip()
    travel = change.Travel(remote, "intake", expect, {"backlog/todo/x.md": b"x\n"}, "add(x)", None, "pushing x")
    _failing(repo, travel)  # pushed, then pushed back
    assert git(bare, "rev-parse", "intake").strip() == expect
    change.run(Change((travel,)), repo)
    assert git(bare, "show", "intake:backlog/todo/x.md") == "x\n"
    other = tmp_path / "other"
    git(repo.toplevel, "worktree", "add", "-q", str(other), "intake")
    there = gitmod.discover(other)
    inner = Change((Create(other / "b.txt", b"b\n", "b.txt"),), "add b")
    _failing(repo, change.Then(inner, there))  # committed there: a change of its own, not undone
    assert git(other, "log", "-1", "--format=%s").strip() == "add b" and os.path.exists(other / "b.txt")
