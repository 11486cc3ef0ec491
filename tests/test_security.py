"""Untrusted input (SPEC §3, docs/security.md): generated attacks, one strategy per entry point.

Entry points: a line of `backlog/AGENTS.md`, a task file (in the work tree and on the intake
branch), a ref on the git remote, and the arguments of the CLI, the Python API and the MCP tools.
After every attack the same invariants are checked:

- nothing outside the repository (and its shared root) changed: a sentinel directory beside it,
  which hostile symlinks point at, and HOME are fingerprinted before and after;
- no child process but git or gh was started, and no hostile value ever sat in an option position
  of one (seen by a Python audit hook on `subprocess.Popen` and `os.posix_spawn`, i.e. what was really executed);
- no traceback and no "internal error", exit code 0, 1, 2 or 3, one line per error;
- every other task stays claimable (`take good-plan` succeeds afterwards).

The default profile runs a few examples per entry point (well under 30 s in all);
`BACKLOG_ATTACKS=500 python -m pytest -q -n 0 tests/test_security.py` runs the long profile.
Every failure hypothesis shrank is kept below as an explicit regression case.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import GIT_IDENTITY, ROOT, backlog, copy_repo, git
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from maildir_backlog import schemagen

MARK = "PWN"
EXAMPLES = int(os.environ.get("BACKLOG_ATTACKS", "5"))
ATTACK = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="BACKLOG_ATTACKS" not in os.environ,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# -- what was executed ---------------------------------------------------------------------------
EXECUTED: list[list[str]] | None = None


def _audit(event: str, args: tuple) -> None:
    if EXECUTED is None:
        return
    if event in ("subprocess.Popen", "os.posix_spawn"):  # (program, argv, ...): git is spawned by `spawn.exchange`
        EXECUTED.append([str(args[0]), *map(str, args[1] or ())])
    elif event in ("os.system", "os.exec", "os.spawn"):
        EXECUTED.append([event, *map(str, args[:2])])


sys.addaudithook(_audit)


@contextmanager
def watching():
    global EXECUTED
    EXECUTED = []
    try:
        yield EXECUTED
    finally:
        EXECUTED = None


# What the MCP SDK's start-up runs in the server process whatever the input: the standard library's
# `platform` asks `uname -p` (fixed arguments). Nothing else but git and gh may ever run.
SDK_STARTUP = (["uname", "uname", "-p"], ["uname", "-p"])


def check_executed(executed: list[list[str]], allowed: tuple[list[str], ...] = ()) -> None:
    for argv in executed:
        if argv in allowed:
            continue
        program = os.path.basename(argv[0])
        assert program in ("git", "gh"), f"a process other than git or gh was started: {argv}"
        ended = False
        for arg in argv[1:]:
            if arg in ("--", "--end-of-options"):
                ended = True
            if not ended and arg.startswith("-") and MARK in arg:
                raise AssertionError(f"a hostile value in option position: {argv}")


# -- what changed outside -------------------------------------------------------------------------
def fingerprint(*roots: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_symlink():
                found[str(path)] = "link:" + os.readlink(path)
            elif path.is_file():
                found[str(path)] = hashlib.sha1(path.read_bytes()).hexdigest()
            else:
                found[str(path)] = "dir"
    return found


def check_output(proc) -> None:
    said = proc.stdout + proc.stderr
    assert "Traceback" not in said and "internal error" not in said, said
    assert proc.returncode in (0, 1, 2, 3), (proc.returncode, said)
    if proc.returncode:
        notices = ("backlog: warning: ", "backlog: layout: ")  # (a self-heal's clash is said too: SPEC §4)
        errors = [
            line for line in proc.stderr.splitlines() if line.startswith("backlog: ") and not line.startswith(notices)
        ]
        assert len(errors) == 1, proc.stderr


# -- the world an attack runs in -------------------------------------------------------------------
class World:
    """A fresh copy of a prepared maildir-shared repository with two good tasks, a bare remote
    (`origin`), and a sentinel directory beside them that nothing may change."""

    def __init__(self, template: Path) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="attack-"))
        self.outside = self.base / "outside"
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text("do not touch\n")
        (self.outside / "todo").mkdir()
        self.repo = copy_repo(template, self.base / "repo")
        self.remote = self.base / "remote.git"
        git(self.base, "init", "-q", "--bare", str(self.remote))
        self.repo.git("remote", "add", "origin", str(self.remote))
        self.before = fingerprint(self.outside, Path(os.environ["HOME"]))

    def run(self, *args: str, cwd: Path | None = None, input: str | None = None):
        with watching() as executed:
            proc = backlog(cwd or self.repo.path, *args, input=input)
        check_executed(executed)
        check_output(proc)
        return proc

    def commit_all(self, message: str = "attack") -> None:
        self.repo.git("add", "-A", "backlog")
        self.repo.git("commit", "-q", "--no-verify", "-m", message)

    def finish(self, claim: bool = True) -> None:
        """The invariants that hold after any attack."""
        assert fingerprint(self.outside, Path(os.environ["HOME"])) == self.before, "something outside changed"
        if claim:
            proc = self.run("take", "good-plan")
            assert proc.returncode == 0, proc.stderr
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture
def world(repo_templates):
    made: list[World] = []

    def make(backend: str = "maildir-shared", *steps: tuple[str, ...]) -> World:
        made.append(World(repo_templates(backend, ("add", "good"), ("add", "spare"), *steps)))
        return made[-1]

    yield make
    for w in made:
        shutil.rmtree(w.base, ignore_errors=True)


# -- hostile values --------------------------------------------------------------------------------
HOSTILE = [
    f"--upload-pack=touch {MARK}",
    f"--upload-pack=sh${{IFS}}-c${{IFS}}touch${{IFS}}{MARK}",
    f"-o{MARK}",
    f"--receive-pack={MARK}",
    f"--exec={MARK}",
    f"ext::sh -c touch% {MARK}",
    f"file:///tmp/{MARK}",
    f"ssh://-oProxyCommand={MARK}/x",
    f"../../{MARK}",
    f"/tmp/{MARK}",
    f"{MARK};touch x",
    f"$(touch {MARK})",
    f"`touch {MARK}`",
    f"origin --upload-pack={MARK}",
    f"\x1b]0;{MARK}\x07\x1b[2J",
    f"-{MARK}",
    "--",
    "--end-of-options",
    "@{-1}",
    f"{MARK}..x",
    "a" * 300 + MARK,
    f"{MARK}\nremote: --upload-pack=x",
]
values = st.one_of(
    st.sampled_from(HOSTILE),
    st.builds(
        lambda pre, mid: pre + mid + MARK,
        st.sampled_from(["-", "--", "", "../", "ext::", "/", "-c", "--config="]),
        st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
    ),
)


# -- 1. AGENTS.md ----------------------------------------------------------------------------------
SECTION_LINES = {
    "backend": ["- `remote: {v}`", "remote: {v}", "- `intake: {v}`", "intake: {v}"],
    "defaults": ["- `timeout: {v}`", "- `timeout.doing: {v}`", "priority: {v}", "- **timeout**: {v}"],
}


def with_line(text: str, section: str, line: str) -> str:
    heading = f"## {section.capitalize()}\n"
    if heading not in text:
        return text + f"\n{heading}\n{line}\n"
    head, _, rest = text.partition(heading)
    first, _, tail = rest.partition("\n\n")
    return f"{head}{heading}{first}\n{line}\n\n{tail}"


@ATTACK
@given(section=st.sampled_from(sorted(SECTION_LINES)), data=st.data(), value=values)
def test_attack_agents_md_line(world, section, data, value):
    w = world()
    line = data.draw(st.sampled_from(SECTION_LINES[section])).format(v=value)
    agents = w.repo / "backlog" / "AGENTS.md"
    agents.write_text(with_line(agents.read_text(), section, line))
    w.commit_all()
    procs = [w.run(verb) for verb in ("status", "ready", "list")]
    for verb in ("status", "ready", "list"):  # the same answers as --json: JSON, in their schemas
        procs.append(w.run("--json", verb))
        strict_json(procs[-1], verb)
    codes = {proc.returncode for proc in procs}
    if codes == {0}:
        proc = w.run("take", "good-plan")
        if proc.returncode == 2 and "names no remote configured in this clone" in proc.stderr:
            assert line.lstrip("- `").startswith("remote:"), line  # SPEC §3: the views answer, a writer refuses
        else:
            assert proc.returncode == 0, proc.stderr
        w.finish(claim=False)
    elif codes == {1}:  # a well-formed `intake:` branch that does not exist: an error naming it (SPEC §3)
        assert all("does not exist" in proc.stderr and "AGENTS.md:" in proc.stderr for proc in procs), procs
        assert line.lstrip("- `").startswith("intake:"), line
    else:  # an option line that is not a plain name: exit 2 naming the line, for every verb alike
        assert codes == {2}, codes
        proc = w.run("take", "good-plan")
        assert proc.returncode == 2 and "AGENTS.md:" in proc.stderr, proc.stderr
        w.finish(claim=False)


# -- 2. task files -----------------------------------------------------------------------------------
# values of every YAML type, for a key the tool reads or one it passes through to `--json`
YAML = st.sampled_from(
    [".inf", "-.inf", ".nan", "!!float 1e400", "[1, [2, .nan]]", "!!binary aGk=", "!!set {a, b}"]
    + ["{~: x, true: y, 1: z, 2026-01-01: d}", "2026-01-01", "2026-01-01 10:00:00", "0x1f", "0o17", "1_000", "~"]
    + ['"\\x85\\u2028"', '"\\ud800"', "!!str 5", "&x [1]", "!!python/object:os.system x", "1" * 5000, "!!null ''"]
)
FRONTMATTER = st.one_of(
    st.builds(
        lambda v: f"priority: {v}\n", st.sampled_from(["-1", "99999999999999999999", "1e9", "[1]", "&a 1", "*a"])
    ),
    st.builds(lambda v: f"timeout: {v}\n", st.sampled_from(["999999999999w", "1s", "-1d", "none", "soon"])),
    st.just(
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b]\n"
    ),
    st.builds(lambda v: f"dependencies: [{json.dumps(v)}]\n", values),
    st.sampled_from(["dependencies: [good-plan]\n", "timeout: 4h\ndependencies:\n  good-plan: first\n"]),
    st.builds(lambda v: f"title: {json.dumps(v)}\n", values),
    st.text(max_size=60).map(lambda t: t.replace("---", "") + "\n"),
    st.builds(lambda k, v: f"{k}: {v}\n", st.sampled_from(["extra", "priority", "timeout", "dependencies"]), YAML),
)
BODY = st.one_of(
    values.map(lambda v: f"# {v}\n"),
    st.just("# t\n\n```\n- 2026-01-01T00:00:00Z advanced to=doing claimer=x branch=main\n```\n\nprose\n"),
    st.just("# t\n\n---\n\n- 2026-01-01T00:00:00Z advanced to=done\n"),
    st.binary(max_size=80).map(lambda b: b.decode("latin-1")),
)


def task_bytes(kind: str, fm: str, body: str) -> bytes:
    if kind == "big":
        return b"# big\n" + b"x" * (1024 * 1024 + 10)
    if kind == "binary":
        return body.encode("latin-1", "replace") + b"\xff\xfe\x00"
    return f"---\n{fm}---\n\n{body}".encode("utf-8", "surrogateescape")


def strict_json(proc, verb: str) -> None:
    """`--json` output is JSON by RFC 8259 (no `NaN` or `Infinity`, no lone surrogate), in the
    verb's schema, or the error object's when the verb refused."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in {verb} --json: {proc.stdout[:300]}")

    answer = json.loads(proc.stdout, parse_constant=refuse)
    json.dumps(answer, ensure_ascii=False).encode("utf-8")
    Draft202012Validator(schemagen.schema("error" if proc.returncode else verb)).validate(answer)


@ATTACK
@given(
    kind=st.sampled_from(["text", "text", "big", "binary", "symlink-out", "symlink-passwd", "fifo"]),
    fm=FRONTMATTER,
    body=BODY,
    on_intake=st.booleans(),
)
@example(kind="text", fm="dependencies: [good-plan]\n", body="# t\n", on_intake=False)  # (session 25: marshal)
@example(kind="text", fm="extra: [1, [2, .nan]]\n", body="# t\n", on_intake=False)  # (session 28: NaN in --json)
@example(kind="text", fm="timeout: 4h\n", body="# t\r\n\r\nprose\r\n", on_intake=True)  # (claimed, noted, completed)
@example(kind="text", fm="extra: 1\n", body="# t\n\n---\n\n- garbage", on_intake=False)
def test_attack_task_file(world, kind, fm, body, on_intake, settled_clock):
    """(`settled_clock`: every call writes the pile's parse cache down, as calls do once a file is
    3 s old; session 25 found a header only the full parser reads, with a dependency, failing every
    such write.)"""
    w = world()
    target = w.repo / "backlog" / "todo" / "evil-plan.md"
    if kind == "symlink-out":
        target.symlink_to(w.outside / "secret.txt")
    elif kind == "symlink-passwd":
        target.symlink_to("/etc/passwd")
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.write_bytes(task_bytes(kind, fm, body))
    if kind != "fifo":
        w.commit_all()
    where = w.repo.path
    if on_intake and kind != "fifo":  # the same file reached through the intake branch's git objects
        w.repo.git("worktree", "add", "-q", "-b", "agent", str(w.base / "agent"), "HEAD~1")
        where = w.base / "agent"
    for verb in (("status",), ("ready", "--json"), ("list",), ("show", "evil-plan"), ("maintain", "--dry-run")):
        w.run(*verb, cwd=where)
    strict_json(w.run("--json", "show", "evil-plan", cwd=where), "show")
    w.run("take", cwd=where)  # auto-pick: may take either task, never fails on the bad one
    strict_json(w.run("--json", "take", "evil-plan", cwd=where), "take")
    doing = where / "backlog" / "doing" / "evil-plan.md"
    if doing.is_file() and not doing.is_symlink():  # claimed: a note and the completion, appended only
        for verb in (("progress", "--slug", "evil-plan", "a note"), ("advance", "evil-plan")):
            strict_json(w.run("--json", *verb, cwd=where), verb[0])
        final = next(p for p in (doing, where / "backlog" / "done" / "evil-plan.md") if p.exists())
        assert final.read_bytes().startswith(task_bytes(kind, fm, body)), "the spec is frozen (SPEC §2)"
    assert (w.outside / "secret.txt").read_text() == "do not touch\n"
    if not (w.repo / "backlog" / "doing" / "good-plan.md").exists():
        proc = w.run("take", "good-plan", cwd=where)
        assert proc.returncode == 0, proc.stderr
    w.finish(claim=False)


# -- 2b. file names in a pile ---------------------------------------------------------------------
# A pull request can add any name to a pile. What a reader of the output must never meet: a line
# the name began (a newline in it, then what looks like a report line of its own), a raw control
# character, JSON that does not parse; and the file is a user's: it stays, byte for byte.
FORGED = f"TIMED OUT: {MARK}.md (forged)"
NAME_PARTS = st.sampled_from(
    [
        f"x\n{FORGED}\n",
        f"\r{FORGED}",
        f"\n{MARK}",
        "\x1b[2J",
        "\t",
        "\x85",
        "\u2028",
        " ",
        "-",
        "--help",
        "-c",
        ":(glob)",
        "*",
        "[a-z]",
        "?",
        "\\",
        "UPPER",
        "é",
        "\udcff",  # a byte that is not UTF-8 (the name is written with surrogateescape)
        "..",
        "good-plan",
        "a" * 200,
    ]
)
NAMES = st.builds(
    lambda parts, end: "".join(parts) + end,
    st.lists(NAME_PARTS, min_size=1, max_size=3),
    st.sampled_from([".md", ".md", ".md", "", ".MD", ".md.orig"]),
)


def forged_lines(text: str) -> list[str]:
    """The lines of `text` a name with a line break in it began (`MARK` right after a newline)."""
    return [line for line in text.split("\n") if line.startswith((MARK, FORGED[:9]))]


@ATTACK
@given(
    names=st.lists(st.tuples(NAMES, st.sampled_from(["todo", "doing", "done", "failed"]), st.booleans()), max_size=3),
    elsewhere=st.booleans(),
    backend=st.sampled_from(["maildir-shared", "maildir-git"]),
)
@example(names=[(f"x\n{FORGED}\n.md", "todo", True)], elsewhere=False, backend="maildir-shared")  # (session 27)
@example(names=[("\x85.md", "todo", False)], elsewhere=False, backend="maildir-shared")  # (session 27: raw in --json)
@example(names=[("bad\udcff.md", "todo", True)], elsewhere=False, backend="maildir-git")  # (session 28)
def test_attack_file_names_in_a_pile(world, names, elsewhere, backend):
    """A file of any name in any pile, committed or not: every verb that reads the piles answers
    (exit 0, no traceback), prints each record on its own line with no raw control character,
    and leaves the file where it was; every good task stays claimable. `elsewhere`: the verbs run
    in a linked worktree on an older commit, so the committed names reach them through the intake
    branch's git objects."""
    w = world(backend)
    placed: dict[Path, bytes] = {}
    for name, pile, commit in names:
        raw = os.fsencode(name)
        if len(raw) > 250 or b"/" in raw or name in ("", ".", "..") or re.fullmatch(r"[a-z0-9][a-z0-9._-]*\.md", name):
            continue  # (a task's own name is a duplicate, not a hostile name: tests/test_exactly_once.py)
        target = w.repo / "backlog" / pile / name
        data = f"---\npriority: 1\n---\n\n# {MARK} title\n".encode()
        try:
            target.write_bytes(data)
        except OSError:  # (a name the file system refuses: nothing to attack with)
            continue
        placed[target] = data
        if commit and (pile != "doing" or backend == "maildir-git"):  # (maildir-shared's doing/: never tracked)
            w.repo.git("add", "-f", "--", f"backlog/{pile}/{name}")
    if w.repo.git("diff", "--cached", "--name-only").strip():
        w.repo.git("commit", "-q", "--no-verify", "-m", "names")
    where = w.repo.path
    if elsewhere:
        w.repo.git("worktree", "add", "-q", "-b", "agent", str(w.base / "agent"), "HEAD~1")
        where = w.base / "agent"
    calls = [
        ("status",),
        ("list",),
        ("--json", "list"),
        ("ready",),
        ("--json", "ready"),
        ("--json", "status"),
        ("maintain", "--dry-run"),
        ("maintain",),
        ("--json", "maintain", "--dry-run"),
        ("show", "good-plan"),
        ("take",),
        ("status",),
    ]
    for call in calls:
        proc = w.run(*call, cwd=where)
        assert proc.returncode == 0, (call, proc.stderr)
        said = proc.stdout + proc.stderr
        assert not forged_lines(said), (call, said)
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", said), (call, said)
        if call[0] == "--json":  # strict JSON (no lone surrogate: a byte that is not UTF-8 is the text `\\xff`)
            answer = json.loads(proc.stdout)  # in the verb's schema
            json.dumps(answer, ensure_ascii=False).encode("utf-8")
            Draft202012Validator(schemagen.schema(call[1])).validate(answer)
            if call[1] == "status" and not elsewhere:  # a file whose name is not a slug is no task: not counted
                piles = [t.parent.name for t in placed if t.name.endswith(".md") and not t.name.startswith(".")]
                assert answer["not_tasks"] == {p: piles.count(p) for p in answer["counts"] if p in piles}, answer
                assert answer["counts"]["todo"] == 2, answer
            if call[1] == "maintain" and not elsewhere:  # the janitor counts as status does: tasks, not files
                assert answer["ok"]["todo"] == 2, answer["ok"]
    for target, data in placed.items():
        assert target.read_bytes() == data, f"{target} changed"
    if not (w.repo / "backlog" / "doing" / "good-plan.md").exists():
        w.finish()
    else:
        w.finish(claim=False)


# -- 2c. the backlog's own entries --------------------------------------------------------------------
# A pull request can delete a pile, put a file where a directory was (or the reverse), or commit a
# symlink in place of any entry of backlog/: leading out, dangling, or to itself. Every verb then
# answers with exit 0 or one line naming the entry (never a traceback, never "internal error"),
# reads and writes nothing outside, and the good task is claimable once the entry is put back.
ENTRIES = ("todo", "doing", "done", "failed", "AGENTS.md", ".gitignore", ".gitattributes")
KINDS = ("missing", "file", "empty file", "directory", "link out", "link to itself", "dangling link", "nested")
LAYOUT_VERBS = (
    ("status",),
    ("list",),
    ("--json", "ready"),
    ("--json", "status"),
    ("--json", "list"),
    ("--json", "maintain", "--dry-run"),
    ("show", "good-plan"),
    ("take", "good-plan"),
    ("progress", "a note"),
    ("advance", "spare-plan"),
    ("add", "three"),
    ("maintain", "--dry-run"),
    ("maintain",),
)


def replace_entry(w: World, entry: str, kind: str) -> None:
    path = w.repo / "backlog" / entry
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    if kind == "file":
        path.write_text(f"{MARK}\n")
    elif kind == "empty file":
        path.write_bytes(b"")
    elif kind == "directory":
        path.mkdir()
        (path / "x.md").write_text("# x\n")
    elif kind == "link out":
        path.symlink_to(w.outside / ("todo" if entry in ENTRIES[:4] else "secret.txt"))
    elif kind == "link to itself":
        path.symlink_to(entry)
    elif kind == "dangling link":
        path.symlink_to(f"{MARK}-nowhere")
    elif kind == "nested":
        path.mkdir(exist_ok=True)
        (path / "sub").mkdir()
        (path / "sub" / "x.md").write_text("# x\n")


@ATTACK
@given(
    backend=st.sampled_from(["maildir-shared", "maildir-git"]),
    entry=st.sampled_from(ENTRIES),
    kind=st.sampled_from(KINDS),
)
@example(backend="maildir-git", entry="AGENTS.md", kind="link to itself")  # (session 27: internal error)
def test_attack_the_backlogs_own_entries(world, backend, entry, kind):
    w = world(backend, ("take", "spare-plan"))
    if kind == "nested" and entry not in ENTRIES[:4]:
        kind = "directory"
    before = w.repo.git("rev-parse", "HEAD").strip()
    replace_entry(w, entry, kind)
    w.repo.git("add", "-A", "-f", "backlog")
    if w.repo.git("diff", "--cached", "--name-only").strip():
        w.repo.git("commit", "-q", "--no-verify", "-m", "layout")
    for call in LAYOUT_VERBS:
        proc = w.run(*call)  # (check_output: no traceback, exit 0-3, one error line)
        if proc.returncode:
            assert "backlog" in proc.stderr, (call, proc.stderr)
        if call[0] == "--json":
            strict_json(proc, call[1])
    assert fingerprint(w.outside, Path(os.environ["HOME"])) == w.before, "something outside changed"
    # put the entry back (what the verbs made there stays): the queue goes on
    path = w.repo / "backlog" / entry
    shared_link = backend == "maildir-shared" and entry == "doing"  # (the next verb makes it anew)
    if shared_link or path.is_symlink() or (path.is_dir() != (entry in ENTRIES[:4])):
        replace_entry(w, entry, "missing")
    if w.repo.git("ls-tree", "--name-only", before, "--", f"backlog/{entry}").strip():  # (else: not tracked)
        w.repo.git("checkout", "-q", before, "--", f"backlog/{entry}")
    w.repo.git("add", "-A", "backlog")
    if w.repo.git("diff", "--cached", "--name-only").strip():
        w.repo.git("commit", "-q", "--no-verify", "-m", "undo")
    w.run("maintain")
    w.finish(claim=not (w.repo / "backlog" / "doing" / "good-plan.md").exists())


# -- 2d. links to a device that never ends ---------------------------------------------------------
# git stores a symlink as its target's text, so a pull request can commit any file the tool reads
# as a link to `/dev/zero`. A read through it never ends: memory runs out (session 29 found three:
# setup's `.gitignore` and hook, migrate's `.gitkeep`). Every verb below runs in one process per
# planted link, under a memory limit, and must end as anywhere else: exit 0-3, one line.
ZERO_PATHS = (
    ".gitignore",
    ".gitattributes",
    "AGENTS.md",
    "CLAUDE.md",
    ".githooks/post-checkout",  # (the user's `core.hooksPath` names a directory of the work tree)
    ".mcp.json",
    "backlog/AGENTS.md",
    "backlog/CLAUDE.md",
    "backlog/ROADMAP.md",
    "backlog/.gitattributes",
    "backlog/todo/evil-plan.md",
    "backlog/done/old-plan.md",
    "backlog/failed/bad-plan.md",
    "backlog/todo/.gitkeep",
    "backlog/done/2025/.gitkeep",  # (a flat layout's year folder: what `migrate --from-flat` flattens)
)
ZERO_VERBS = (
    ("status",),
    ("--json", "list"),
    ("--json", "ready"),
    ("show", "good-plan"),
    ("show", "evil-plan"),
    ("take", "good-plan"),
    ("progress", "a note"),
    ("advance", "good-plan"),
    ("add", "three", "--here"),
    ("edit", "spare-plan", "--set", "priority=3"),
    ("retry", "bad-plan", "again"),
    ("maintain", "--dry-run"),
    ("maintain",),
    ("check-deps",),
    ("prime",),
    ("where",),
    ("setup", "--hooks"),
    ("setup", "--agent", "claude"),
    ("migrate", "--to", "OTHER", "--dry-run"),
    ("migrate", "--from-flat", "--dry-run"),
)
ZERO_DRIVER = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))  # 2 GiB: a read through the link ends in MemoryError
from maildir_backlog import cli
import contextlib, io
answers = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.run(["backlog", *argv])
    answers.append([argv, code, out.getvalue(), err.getvalue()])
print(json.dumps(answers))
"""


# maildir-git reads fewer of them (no heal, tracked piles): where it reads one differently (a backend
# switch's `.gitignore`, the `.gitkeep`s, a tracked in-flight pile), both backends; else maildir-shared
ZERO_CASES = (
    [("maildir-shared", path) for path in ZERO_PATHS]
    + [("maildir-git", path) for path in (".gitignore", "backlog/todo/.gitkeep", "backlog/done/2025/.gitkeep")]
    + [("maildir-git", "backlog/todo/evil-plan.md")]
)


@pytest.mark.subprocess  # (its own process, under a memory limit: a failure must not take the worker's memory)
@pytest.mark.parametrize(("backend", "planted"), ZERO_CASES)
def test_a_committed_link_to_dev_zero_is_never_read_through(world, backend, planted):
    w = world(backend)
    w.repo.git("config", "core.hooksPath", ".githooks")
    link = w.repo / planted
    if link.is_symlink() or link.exists():
        link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to("/dev/zero")
    w.repo.git("add", "-A", "-f", "--", planted)
    w.repo.git("commit", "-q", "--no-verify", "-m", "a pull request's link")
    other = "maildir-git" if backend == "maildir-shared" else "maildir-shared"
    verbs = [[other if word == "OTHER" else word for word in argv] for argv in ZERO_VERBS]
    env = {**os.environ, "PWD": str(w.repo.path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", ZERO_DRIVER, json.dumps(verbs)],
        cwd=w.repo.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    for argv, code, out, err in json.loads(proc.stdout.splitlines()[-1]):
        check_output(subprocess.CompletedProcess(argv, code, out, err))
    assert fingerprint(w.outside, Path(os.environ["HOME"])) == w.before, "something outside changed"
    shutil.rmtree(w.base, ignore_errors=True)


OUT_DIRS = (".githooks", ".claude", ".codex", ".cursor", "backlog/todo", "backlog/done")
OUT_VERBS = (
    ("setup", "--hooks"),
    ("setup", "--agent", "claude"),
    ("setup", "--agent", "codex"),
    ("setup", "--agent", "cursor"),
    ("add", "three", "--here"),
    ("take", "good-plan"),
    ("maintain",),
)


@pytest.mark.subprocess
@pytest.mark.parametrize("planted", OUT_DIRS)
def test_a_committed_directory_link_leading_out_is_never_written_through(world, planted):
    """The directories the tool writes into, each a committed symlink to a directory outside the
    repository (session 29: the hooks directory under `core.hooksPath` was written through):
    whatever each verb answers, nothing outside changes."""
    w = world("maildir-shared")
    w.repo.git("config", "core.hooksPath", ".githooks")
    target = w.outside / "dir"
    target.mkdir()
    (target / "kept.txt").write_text("kept\n")
    w.before = fingerprint(w.outside, Path(os.environ["HOME"]))
    link = w.repo / planted
    if link.is_dir() and not link.is_symlink():
        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    w.repo.git("add", "-A", "-f", "--", planted)
    w.repo.git("commit", "-q", "--no-verify", "-m", "a pull request's link")
    env = {**os.environ, "PWD": str(w.repo.path), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", ZERO_DRIVER, json.dumps(OUT_VERBS)]
    proc = subprocess.run(command, cwd=w.repo.path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for argv, code, out, err in json.loads(proc.stdout.splitlines()[-1]):
        check_output(subprocess.CompletedProcess(argv, code, out, err))
    assert fingerprint(w.outside, Path(os.environ["HOME"])) == w.before, "something outside changed"
    shutil.rmtree(w.base, ignore_errors=True)


# -- 3. remote refs ------------------------------------------------------------------------------------
def declare_remote(w: World) -> None:
    agents = w.repo / "backlog" / "AGENTS.md"
    agents.write_text(with_line(agents.read_text(), "backend", "- `remote: origin`"))
    w.commit_all("declare the remote")
    w.repo.git("push", "-q", "origin", "main")


def plant(w: World, ref: str, kind: str, value: str) -> None:
    """Write a hostile object to the remote under `ref`, straight into the bare repository."""
    r = w.remote

    def obj(*args: str, stdin: bytes = b"") -> str:
        import subprocess

        return (
            subprocess.run(["git", *args], cwd=r, input=stdin, capture_output=True, check=True, env=dict(os.environ))
            .stdout.decode()
            .strip()
        )

    blob = obj("hash-object", "-w", "--stdin", stdin=value.encode("utf-8", "surrogateescape"))
    name = ref.rsplit("/", 1)[-1]
    entries = {
        "no-file": f"100644 blob {blob}\tother.md\n",
        "symlink": f"120000 blob {blob}\t{name}.md\n",
        "file": f"100644 blob {blob}\t{name}.md\n",
    }
    if kind == "blob":
        sha = blob
    else:
        if kind == "big":
            big = obj("hash-object", "-w", "--stdin", stdin=b"x" * (1024 * 1024 + 100))
            entry = f"100644 blob {big}\t{name}.md\n"
        else:
            entry = entries[kind]
        tree = obj("mktree", stdin=entry.encode())
        message = value.replace("\0", "") or "x"
        sha = obj("commit-tree", tree, "-m", message)
    obj("update-ref", ref, sha)


REF_NAMES = st.sampled_from(
    ["good-plan", "spare-plan", "other-plan", "-upload-pack", "x..y", "UPPER", "a" * 200, "evil.lock", "ok-plan"]
)


@ATTACK
@given(
    refs=st.lists(
        st.tuples(
            st.sampled_from(["claims", "settled", "other"]),
            REF_NAMES,
            st.sampled_from(["no-file", "symlink", "file", "blob", "big"]),
            values,
        ),
        min_size=1,
        max_size=4,
    )
)
@example(
    refs=[("claims", "ok-plan", "file", "--upload-pack=touch PWN")]
)  # (session 28: `pile: null` outside the schema)
def test_attack_remote_refs(world, refs):
    w = world()
    declare_remote(w)
    for kind, name, what, value in refs:
        if name == "good-plan":
            name = "ok-plan"  # good-plan must stay claimable: the remote may hold anything else
        ref = f"refs/backlog/{kind}/{name}"
        if git(w.remote, "check-ref-format", ref, check=False) == "" and not name.startswith("-"):
            try:
                plant(w, ref, what, value)
            except Exception:
                continue  # git itself refused the name
    for verb in (("status", "--remote"), ("ready",), ("maintain", "--dry-run")):
        w.run(*verb)
    for verb in (("status", "--remote"), ("status",), ("show", "spare-plan"), ("show", "other-plan"), ("ready",)):
        strict_json(w.run("--json", *verb), verb[0])  # what the remote says reaches --json as JSON
    w.run("take", "spare-plan")
    w.finish()


# -- 4. arguments: CLI, API, MCP -------------------------------------------------------------------------
VERBS = [
    ("add", "{v}"),
    ("add", "x", "--depends", "{v}"),
    ("add", "x", "--title", "{v}"),
    ("add", "x", "--timeout", "{v}"),
    ("take", "{v}"),
    ("show", "{v}"),
    ("list", "{v}"),
    ("rename", "spare-plan", "{v}"),
    ("retry", "{v}", "why"),
    ("edit", "{v}", "--set", "priority=1"),
    ("edit", "spare-plan", "--set", "title={v}"),
    ("edit", "spare-plan", "--set", "{v}"),
    ("progress", "{v}"),
    ("cancel", "{v}", "why"),
    ("advance", "{v}", "--pr", "{v}"),
    ("ready", "--limit", "{v}"),
    ("-C", "{v}", "status"),
    ("check-deps", "{v}"),
    ("setup", "--backend", "{v}"),
    ("migrate", "--to", "{v}", "--dry-run"),
]


@ATTACK
@given(calls=st.lists(st.tuples(st.sampled_from(VERBS), values, st.booleans()), min_size=1, max_size=4))
def test_attack_cli_arguments(world, calls):
    w = world()
    for verb, value, as_json in calls:
        args = [a.format(v=value) for a in verb]
        if "\0" in "".join(args):
            continue  # argv cannot carry NUL
        if not as_json:
            w.run(*args)
            continue
        name = "status" if args[0] == "-C" else args[0]
        proc = w.run("--json", *args)
        if proc.stdout.strip() or name in schemagen.names():  # (a verb without a --json object prints none)
            strict_json(proc, name)
    w.finish()


@ATTACK
@given(value=values, method=st.sampled_from(["take", "show", "add", "retry", "progress", "cancel", "list"]))
def test_attack_api_arguments(world, value, method):
    from maildir_backlog import api
    from maildir_backlog.errors import BacklogError

    w = world()
    bl = api.Backlog(w.repo.path)
    args = {"take": (value,), "show": (value,), "add": (value,), "retry": (value, "why"), "progress": (value,)}
    args |= {"cancel": (value, "why"), "list": (value,)}
    with watching() as executed:
        try:
            getattr(bl, method)(*args[method])
        except BacklogError:
            pass  # refused with an exit code: the API's error shape
    check_executed(executed)
    w.finish()


# the server runs in its own process: this wrapper (test code) gives it the same audit hook,
# writing what it executed to a file, then starts the real `python -m maildir_backlog mcp`
MCP_WRAPPER = """
import json, os, runpy, sys
log = open(os.environ["ATTACK_EXEC_LOG"], "a")
def hook(event, args):
    if event in ("subprocess.Popen", "os.posix_spawn"):
        log.write(json.dumps([str(args[0]), *map(str, args[1] or ())]) + "\\n"); log.flush()
    elif event in ("os.system", "os.exec", "os.spawn"):
        log.write(json.dumps([event]) + "\\n"); log.flush()
sys.addaudithook(hook)
sys.argv = ["backlog", "mcp"]
runpy.run_module("maildir_backlog", run_name="__main__")
"""

MCP_CALLS = [
    ("take", "slug"),
    ("show", "slug"),
    ("add", "slug"),
    ("retry", "slug"),
    ("progress", "note"),
    ("cancel", "slug"),
    ("list", "pile"),
]


def test_attack_mcp_arguments(world):
    """One real server (the SDK's client over stdio, in a thread of its own) for every example."""
    pytest.importorskip("mcp")
    import threading

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    w = world()
    log = w.base / "exec.log"
    env = {key: os.environ[key] for key in GIT_IDENTITY if key in os.environ}
    env.update(PYTHONPATH=str(ROOT), HOME=os.environ["HOME"], PATH=os.environ["PATH"], ATTACK_EXEC_LOG=str(log))
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    ready: asyncio.Future = asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop)
    ready.result()
    done = asyncio.Event()
    client_box: list = []

    async def serve():
        params = StdioServerParameters(command=sys.executable, args=["-c", MCP_WRAPPER], cwd=str(w.repo.path), env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            client_box.append(client)
            await done.wait()

    server = asyncio.run_coroutine_threadsafe(serve(), loop)

    async def call(tool: str, arguments: dict) -> str:
        while not client_box:
            await asyncio.sleep(0.01)
        result = await client_box[0].call_tool(tool, arguments)
        return "".join(getattr(c, "text", "") for c in result.content), bool(result.is_error)

    @settings(ATTACK, max_examples=EXAMPLES * 3)
    @given(calls=st.lists(st.tuples(st.sampled_from(MCP_CALLS), values), min_size=1, max_size=3))
    def attack(calls):
        for (tool, arg), value in calls:
            arguments = {arg: value} | ({"reason": "why"} if tool in ("retry", "cancel") else {})
            text, failed = asyncio.run_coroutine_threadsafe(call(tool, arguments), loop).result(timeout=60)
            assert "Traceback" not in text and "internal error" not in text, text
            answer = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in {tool}: {text[:200]}"))
            text.encode("utf-8")  # RFC 8259 text, in the tool's schema (or the error's)
            Draft202012Validator(schemagen.schema("error" if failed else tool)).validate(answer)

    try:
        attack()
    finally:
        loop.call_soon_threadsafe(done.set)
        server.result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
    executed = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    check_executed(executed, allowed=SDK_STARTUP)
    w.finish()


# -- regression cases: the attacks that worked, and the shrunk failures ----------------------------------
def test_remote_option_injection_never_runs_the_command(world):
    """The reported hole: `remote: --upload-pack=<command>` ran <command> on every `take`."""
    w = world()
    witness = w.base / "ran"
    agents = w.repo / "backlog" / "AGENTS.md"
    payload = f"--upload-pack=touch${{IFS}}{witness}"
    agents.write_text(with_line(agents.read_text(), "backend", f"- `remote: {payload}`"))
    w.commit_all()
    proc = w.run("take", "good-plan")
    assert proc.returncode == 2
    assert "AGENTS.md:" in proc.stderr and "option" in proc.stderr
    assert not witness.exists()
    assert not (w.repo / "backlog" / "doing" / "good-plan.md").exists()


def test_a_remote_that_is_a_url_or_unconfigured_is_exit_2_naming_the_line(world):
    w = world()
    agents = w.repo / "backlog" / "AGENTS.md"
    original = agents.read_text()
    for value, said in (("ext::sh -c touch% x", "URL"), ("nosuch", "configured"), ("origin evil", "plain")):
        agents.write_text(with_line(original, "backend", f"remote: {value}"))
        proc = w.run("take", "good-plan")
        assert proc.returncode == 2 and "AGENTS.md:" in proc.stderr and said in proc.stderr, proc.stderr
    w.finish(claim=False)


def test_git_never_gets_a_value_in_option_position():
    from maildir_backlog import argv
    from maildir_backlog.errors import InvalidInput

    for bad in (["ls-remote", "--upload-pack=x", "origin"], ["fetch", "-c", "core.sshCommand=x"], ["log", "-ox"]):
        with pytest.raises(InvalidInput):
            argv.checked("git", bad)
    assert argv.checked("git", ["ls-remote", "--end-of-options", "--upload-pack=x"])  # a value, after the end


def test_branch_names_follow_gits_own_rules(tmp_path):
    """`argv.branch_name_problem` agrees with `git check-ref-format` on refs/heads/<name>."""
    from maildir_backlog import argv

    for name in (
        "main",
        "feat/x",
        "a.b",
        "-x",
        "a..b",
        "a b",
        "a/",
        ".a",
        "a.lock",
        "a@{b",
        "@",
        "x~1",
        "ok_1",
        "a//b",
    ):
        # git itself refuses a branch named `-x` or `@` (`git branch` does), though the ref name is valid
        ok = subprocess_ok(tmp_path, f"refs/heads/{name}") and not name.startswith("-") and name != "@"
        assert (argv.branch_name_problem(name) is None) == ok, name


def subprocess_ok(cwd: Path, ref: str) -> bool:
    import subprocess

    return subprocess.run(["git", "check-ref-format", ref], cwd=cwd, capture_output=True).returncode == 0


def test_a_symlinked_pile_or_agents_md_leading_out_is_refused(world):
    w = world()
    todo = w.repo / "backlog" / "todo"
    shutil.rmtree(todo)
    todo.symlink_to(w.outside / "todo")
    (w.outside / "todo" / "lure-plan.md").write_text("# lure\n")
    w.before = fingerprint(w.outside, Path(os.environ["HOME"]))
    proc = w.run("take", "lure-plan")
    assert proc.returncode == 1 and "symlink" in proc.stderr
    assert (w.outside / "todo" / "lure-plan.md").exists()
    w.finish(claim=False)
    w = world()
    agents = w.repo / "backlog" / "AGENTS.md"
    agents.unlink()
    agents.symlink_to(w.outside / "secret.txt")
    proc = w.run("status")
    assert proc.returncode == 1 and "symlink" in proc.stderr
    w.finish(claim=False)


def test_a_claim_ref_without_its_task_file_is_reported_not_exit_3_forever(world):
    w = world()
    declare_remote(w)
    plant(w, "refs/backlog/claims/spare-plan", "no-file", "- 2026-01-01T00:00:00Z advanced to=doing")
    first = w.run("take", "spare-plan")
    again = w.run("take", "spare-plan")
    assert first.returncode != 3 or again.returncode != 3, (first.stderr, again.stderr)
    said = first.stderr + again.stderr
    assert "spare-plan" in said
    w.finish()


def test_control_characters_from_a_task_never_reach_the_terminal(world):
    w = world()
    (w.repo / "backlog" / "todo" / "ansi-plan.md").write_text("# title \x1b]0;owned\x07 \x1b[2J end\n")
    w.commit_all()
    for verb in (("list",), ("show", "ansi-plan"), ("ready",)):
        proc = w.run(*verb)
        assert "\x1b" not in proc.stdout + proc.stderr, verb
    w.finish()


def test_an_oversize_task_on_the_intake_branch_is_named_and_skipped(world):
    w = world()
    (w.repo / "backlog" / "todo" / "huge-plan.md").write_bytes(b"# huge\n" + b"x" * (1024 * 1024 + 1))
    w.commit_all()
    w.repo.git("worktree", "add", "-q", "-b", "agent", str(w.base / "agent"), "HEAD~1")
    proc = w.run("ready", cwd=w.base / "agent")
    assert proc.returncode == 0 and "huge-plan" in proc.stderr and "too large" in proc.stderr
    assert "good-plan" in proc.stdout
    w.finish()


def test_add_refuses_what_take_could_not_take_and_bad_utf8_on_stdin(world):
    import subprocess

    w = world()
    big = w.base / "big.md"
    big.write_bytes(b"x" * (1024 * 1024 + 1))
    proc = w.run("add", "huge", "--body-file", str(big))
    assert proc.returncode == 2 and "too large" in proc.stderr
    proc = w.run("add", "huge", "--body-file", "-", input="y" * (1024 * 1024 - 10))  # the file adds a few bytes
    assert proc.returncode == 2 and "too large" in proc.stderr
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    real = subprocess.run(
        [sys.executable, "-m", "maildir_backlog", "add", "latin", "--body-file", "-"],
        cwd=w.repo.path,
        input=b"caf\xe9\n",
        capture_output=True,
        env=env,
    )
    assert real.returncode == 2 and b"utf-8" in real.stderr and b"Traceback" not in real.stderr, real.stderr
    assert not (w.repo / "backlog" / "todo" / "latin-plan.md").exists()
    w.finish()


def test_declaration_bounds_and_symlinked_backlog_and_gitignore(world):
    w = world()
    agents = w.repo / "backlog" / "AGENTS.md"
    agents.write_text(agents.read_text() + "\n<!-- " + "x" * (256 * 1024) + " -->\n")
    proc = w.run("status")
    assert proc.returncode == 1 and "AGENTS.md" in proc.stderr and "larger than" in proc.stderr
    w.finish(claim=False)
    w = world()
    ignore = w.repo / ".gitignore"
    target = w.outside / "ignore"
    target.write_text(ignore.read_text() if ignore.exists() else "")
    w.before = fingerprint(w.outside, Path(os.environ["HOME"]))
    if ignore.exists():
        ignore.unlink()
    ignore.symlink_to(target)
    shutil.rmtree(w.repo / "backlog" / "doing", ignore_errors=True)
    (w.repo / "backlog" / "doing").unlink(missing_ok=True) if (w.repo / "backlog" / "doing").is_symlink() else None
    proc = w.run("status")  # the self-heal would add a line to .gitignore: refused, not written through
    assert ".gitignore" in proc.stderr and "symlink" in proc.stderr, proc.stderr
    w.finish(claim=False)


def test_priority_is_bounded(world):
    w = world()
    (w.repo / "backlog" / "todo" / "big-priority-plan.md").write_text("---\npriority: 99999999999999999999\n---\n# p\n")
    w.commit_all()
    proc = w.run("show", "big-priority-plan")
    assert proc.returncode == 2 and "priority" in proc.stderr
    assert w.run("ready").returncode == 0
    w.finish()


def test_regression_an_unconfigured_remote_is_said_by_every_verb(world):
    """Shrunk by the long profile: `- `remote: PWN` then `remote: --upload-pack=x`: status, ready
    and list answered 0 in silence while take answered 2. The remote is checked when the backlog
    opens; since SPEC §3 (version 4) the read-only verbs answer from local state with one warning
    naming the line, and a verb that needs the remote exits 2 with the same words."""
    w = world()
    agents = w.repo / "backlog" / "AGENTS.md"
    agents.write_text(with_line(agents.read_text(), "backend", "- `remote: PWN\nremote: --upload-pack=x`"))
    w.commit_all()
    for verb in ("status", "ready", "list", "take"):
        proc = w.run(verb)
        assert proc.returncode == (2 if verb == "take" else 0), (verb, proc.stderr)
        assert proc.stderr.count("AGENTS.md:") == 1 and "git remote add PWN" in proc.stderr, (verb, proc.stderr)
    w.finish(claim=False)


def test_the_tools_own_link_into_the_shared_root_is_not_refused(gitbk):
    """A maildir-git worktree that kept the in-flight symlink a maildir-shared branch made (it is
    gitignored, so a checkout of a branch whose pile holds no tracked file leaves it): while the
    shared pile holds a task in flight, every verb is refused naming it; once it holds none, the
    link is made this branch's directory again, what the shared pile holds left as it is; and a
    claim then commits (session 27: through the link, `take`
    wrote into the shared root, git could not commit it, and the claim was exit 3, "run this
    again", for ever). Any other symlinked pile is refused."""
    from conftest import common_dir

    gitbk.run("add", "x")
    doing = gitbk / "backlog" / "doing"
    shared = common_dir(gitbk.path) / "backlog" / "doing"
    shared.mkdir(parents=True, exist_ok=True)
    (shared / "other-plan.md").write_text("# claimed in a maildir-shared worktree\n")
    shutil.rmtree(doing)
    doing.symlink_to(shared)
    for verb in ("status", "take"):  # the shared pile holds a claim: nothing hides it, nothing changes
        proc = gitbk.run(verb)
        assert proc.returncode == 1 and "holds 1 task(s) in flight (other-plan.md)" in proc.stderr, proc.stderr
        assert doing.is_symlink()
    (shared / "other-plan.md").unlink()  # (settled from its worktree)
    (shared / "notes.txt").write_text("not a task\n")
    proc = gitbk.run("status")
    assert proc.returncode == 0, proc.stderr
    assert "backlog: layout: backlog/doing (the shared pile's link" in proc.stderr
    assert doing.is_dir() and not doing.is_symlink() and (doing / ".gitkeep").exists()
    assert (shared / "notes.txt").exists()
    proc = gitbk.run("take", "x-plan")
    assert proc.returncode == 0, proc.stderr
    assert gitbk.git("status", "--porcelain").strip() == ""
    assert gitbk.git("log", "-1", "--format=%s").startswith("advance(x-plan)")
    shutil.rmtree(doing)
    shutil.rmtree(shared)
    doing.symlink_to(shared)  # the link dangles: no task in flight there either
    proc = gitbk.run("status")
    assert proc.returncode == 0 and doing.is_dir() and not doing.is_symlink(), proc.stderr
    assert (doing / "x-plan.md").exists() and gitbk.git("status", "--porcelain").strip() == ""
    shutil.rmtree(doing)
    doing.symlink_to(gitbk.path.parent)
    proc = gitbk.run("status")
    assert proc.returncode == 1 and "symlink" in proc.stderr
