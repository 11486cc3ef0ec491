"""The command's two doors answer alike (issue 31): `cli.quick` takes a well-formed call of a hot
verb without plumbum, plumbum's application (`cliapp`) takes the rest, and for every call either
could see the exit code, stdout, stderr and what the call left in the repository are the same.

Each call runs twice on the same copy of one prepared repository (same path, same frozen clock):
once as the command runs it (`cli.run(argv)`, the fast door first), once through plumbum alone
(`cli.run(argv, fast=False)`).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import bare_path, copy_repo, git
from freezegun import freeze_time
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maildir_backlog import cli, verbs
from maildir_backlog.errors import BacklogError

T0 = "2026-12-03 10:00:00"
STEPS = (("add", "a", "--here"), ("add", "b", "--here"), ("add", "c", "--here"), ("take", "a-plan"))
SLUGS = ("a-plan", "b-plan", "c-plan", "nope-plan")
NUMBERS = ("1", "2", "0", "10", "x", " 3", "1_0", "\uff13", "-1")  # an int switch's values: well formed or not
ODD = ("", "-", "--", "-x", "=x", "a b", "x=y", "--slug=", "--pr=", "--force=1", "-h", "--help", "--version")


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A maildir-shared backlog with three tasks, one of them (a-plan) claimed on main."""
    from conftest import GIT_IDENTITY, init_repo, ok

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        for name, value in GIT_IDENTITY.items():
            mp.setenv(name, value)
        path = init_repo(tmp_path_factory.mktemp("fastpath") / "repo")
        ok(path, "setup", "--backend=maildir-shared")
        for step in STEPS:
            ok(path, *step)
    return path


def run_door(cwd: Path, argv: list[str], fast: bool) -> tuple[int, str, str]:
    """`backlog ARGV` in-process in `cwd` (as tests/conftest.py's `backlog` runs it), through the
    fast door first or through plumbum alone."""
    saved = dict(os.environ), os.getcwd(), (sys.stdin, sys.stdout, sys.stderr)
    out, err = io.BytesIO(), io.BytesIO()
    streams = [io.TextIOWrapper(buffer, encoding="utf-8", write_through=True) for buffer in (out, err)]
    try:
        os.environ["PWD"] = str(cwd)
        os.chdir(cwd)
        sys.stdin = io.StringIO("")
        sys.stdout, sys.stderr = streams
        code = cli.run(["backlog", *argv], fast=fast)
    finally:
        for stream in streams:
            stream.flush()
            stream.detach()
        sys.stdin, sys.stdout, sys.stderr = saved[2]
        os.chdir(saved[1])
        os.environ.clear()
        os.environ.update(saved[0])
    return code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8")


def left(path: Path) -> tuple[str, ...]:
    """What a call left: the last commit's subject and tree, the work tree's state, the shared piles."""
    shared = path / ".git" / "backlog"
    files = sorted(
        f"{p.relative_to(shared)} {p.read_bytes()!r}"
        for p in shared.rglob("*.md")
        if p.is_file() and ".tmp" not in p.name
    )
    head = git(path, "log", "-1", "--format=%s %T")
    return (head, git(path, "status", "--porcelain", "--untracked-files=all"), *files)


def both(template: Path, where: Path, argv: list[str]) -> None:
    """The call through either door on the same copy of `template`: the same answer, the same
    state left. A call the fast door refuses takes the same code either way (plumbum's door), so
    only the calls it takes are run twice (and those whose value it could not read: a
    `--body-file` that is not there fails alike either way)."""
    try:
        if cli.quick(["backlog", *argv]) is None:
            return
    except BacklogError:
        pass
    seen = []
    with freeze_time(T0, ignore=["maildir_backlog.storage", "maildir_backlog.git", "maildir_backlog.gitcommit"]):
        for fast in (True, False):
            if where.exists():
                shutil.rmtree(where)
            copy_repo(template, where)
            seen.append((run_door(where, argv, fast), left(where)))
    assert seen[0] == seen[1], argv


def test_well_formed_calls_take_the_fast_door_and_answer_as_plumbum_does(template, tmp_path):
    where = tmp_path / "repo"
    calls = [
        ["take", "b-plan"],
        ["--json", "take"],
        ["-C", str(where), "progress", "tests pass", "--slug", "a-plan"],
        ["advance", "a-plan", "--pr", "https://example.invalid/pr/1"],
        ["--json", "advance", "--json", "a-plan"],
        ["status"],
        ["take", "nope-plan"],
        ["progress", "note"],
        ["add", "d", "--here"],
        ["--json", "add", "e", "followup", "--title", "Quick", "--timeout", "4h"],
        ["add", "a", "--here"],  # a-plan exists: refused the same way
        ["add", "f", "--priority", "2", "--here"],  # a whole number (ASCII digits): converted as plumbum's door does
        ["ready"],
        ["--json", "ready", "--limit", "2"],
        ["ready", "--limit=1", "--json"],
        ["ready", "--limit", "0"],  # refused by the verb, the same way through either door
        ["ready", "--limit", "007"],
    ]
    for argv in calls:
        assert cli.quick(["backlog", *argv]) is not None, argv
        both(template, where, argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["take", "a", "b"],  # one positional too many
        ["progress"],  # the note is missing
        ["advance"],
        ["take", "--force", "--force"],  # given twice
        ["--json", "--json", "status"],
        ["take", "--bogus"],
        ["take", "--", "-x"],
        ["progress", "-x"],
        ["advance", "a-plan", "--pr"],  # a value missing
        ["advance", "a-plan", "--pr", "--force"],  # a value led by '-'
        ["advance", "a-plan", "--pr=", "u"],
        ["progress", "--slug", "=a-plan", "n"],
        ["status", "--force"],  # another verb's switch
        ["add", "x", "nonsense"],  # not a category: plumbum names the valid ones
        ["add", "f", "--body-file", "-"],  # a value led by '-' (standard input)
        ["ready", "--limit", "x"],  # not a whole number: plumbum's door says so
        ["ready", "--limit", " 3"],  # other forms `int` reads are plumbum's door's too
        ["ready", "--limit", "1_0"],
        ["ready", "--limit", "\uff13"],  # a digit, not an ASCII one
        ["ready", "--limit=-1"],
        ["ready", "--limit"],
        ["ready", "--limit", "2", "--limit", "3"],
        ["-Cx", "status"],
        ["-C"],
        ["stat"],
        [],
        ["--help"],
        ["take", "-h"],
        ["--version"],
    ],
)
def test_what_the_fast_door_refuses_goes_to_plumbum(argv):
    assert cli.quick(["backlog", *argv]) is None


@pytest.mark.parametrize("name", sorted(verbs.BY_NAME))
def test_every_verb_answers_help_and_an_unknown_switch_alike(template, tmp_path, name):
    for argv in ([name, "--help"], [name, "--no-such-switch"], ["--json", name, "-q"]):
        assert cli.quick(["backlog", *argv]) is None
        answers = [run_door(tmp_path, argv, fast) for fast in (True, False)]
        assert answers[0] == answers[1] and answers[0][0] in (0, 2), argv


def _token(verb: str) -> st.SearchStrategy[str]:
    flags = [p.flag for p in verbs.BY_NAME[verb].params_of("cli") if not p.positional]
    return st.one_of(
        st.sampled_from(
            (*SLUGS, *ODD, *NUMBERS, "--json", "note", "https://example.invalid/pr/2", *flags, "--slug", "--pr")
        ),
        st.text(alphabet="ab-=- ./", max_size=4),
    )


@st.composite
def well_formed(draw: st.DrawFn, verb: str) -> list[str]:
    """A call the verb's row allows: its positionals (as many as it takes), each switch at most
    once, in any order, as `--name VALUE` or `--name=VALUE`."""
    params = verbs.BY_NAME[verb].params_of("cli")
    positionals = [p for p in params if p.positional]
    least = sum(1 for p in positionals if p.required)
    words = draw(st.lists(st.sampled_from((*SLUGS, "note", "a b")), min_size=least, max_size=len(positionals)))
    chosen = draw(st.lists(st.sampled_from([p for p in params if not p.positional]), unique=True))
    parts: list[list[str]] = [[word] for word in words]
    for p in chosen:
        value = draw(
            st.sampled_from(NUMBERS if p.kind == "int" else ("a-plan", "b-plan", "https://example.invalid/pr/2"))
        )
        joined = draw(st.booleans())
        parts.append([p.flag] if p.kind == "bool" else [f"{p.flag}={value}"] if joined else [p.flag, value])
    if draw(st.booleans()):
        parts.append(["--json"])
    order = draw(st.permutations(range(len(parts))))
    return [arg for i in order for arg in parts[i]]


@st.composite
def calls(draw: st.DrawFn) -> list[str]:
    verb = draw(st.sampled_from(cli.FAST))
    head = draw(st.sampled_from(([], ["--json"], ["-C", "."], ["--json", "-C", "."], ["-C", "-x"], ["-C", "."] * 2)))
    tail = draw(st.one_of(well_formed(verb), well_formed(verb), st.lists(_token(verb), max_size=4)))
    return [*head, verb, *tail]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=calls())
def test_generated_calls_answer_alike_through_either_door(template, tmp_path, argv):
    both(template, tmp_path / "repo", argv)


def test_the_fast_door_imports_no_plumbum_and_spawns_only_git(template, tmp_path):
    """A well-formed `status`, `take`, `add` and `ready` as real processes: plumbum is never imported (nor `uname -p`, which
    its import runs through `platform.uname()`)."""
    where = copy_repo(template, tmp_path / "repo").path
    probe = (
        "import json, os, subprocess, sys\n"
        "spawned = []\n"
        "real, spawn = subprocess.Popen.__init__, os.posix_spawnp\n"
        "def record(self, args, *a, **k):\n"
        "    spawned.append(args[0])\n"
        "    real(self, args, *a, **k)\n"
        "def spawning(path, args, *a, **k):\n"
        "    spawned.append(path)\n"
        "    return spawn(path, args, *a, **k)\n"
        "subprocess.Popen.__init__, os.posix_spawnp = record, spawning\n"
        "from maildir_backlog import cli\n"
        "code = cli.main(['backlog', *sys.argv[1:]])\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('plumbum', 'platform'))\n"
        "print(json.dumps([loaded, spawned, code]))\n"
    )
    env = {**os.environ, "PWD": str(where)}
    for argv in (["status"], ["take", "b-plan"], ["add", "zz", "--here"], ["--json", "ready", "--limit", "2"]):
        proc = subprocess.run([sys.executable, "-c", probe, *argv], cwd=where, env=env, capture_output=True, text=True)
        loaded, spawned, code = json.loads(proc.stdout.splitlines()[-1])
        assert (loaded, set(spawned), code) == ([], {"git"}, 0), (argv, proc.stderr)


def test_the_command_runs_a_hot_call_without_the_collector_and_ends_itself(template, tmp_path):
    """`cli.main` as the process's own call (issue 31): no cyclic collector during start-up, none
    through a hot verb's call (the fast door), on again through plumbum's door (`mcp` is a
    long-lived server); the process then ends with `os._exit`, its output flushed first, and a
    reader that closed the pipe early gets exit 1 and no traceback."""
    where = copy_repo(template, tmp_path / "repo").path
    probe = (
        "import gc, json, os, sys\n"
        "end = os._exit\n"
        "def report(code):\n"
        "    sys.stderr.write(json.dumps([gc.isenabled(), code]) + '\\n')\n"
        "    sys.stderr.flush()\n"
        "    end(code)\n"
        "os._exit = report\n"
        "from maildir_backlog import cli\n"
        "sys.argv = ['backlog', *sys.argv[1:]]\n"
        "cli.main()\n"
    )
    env = {**os.environ, "PWD": str(where)}
    for argv, collecting in ((["status"], False), (["ready", "--limit", "1"], False), (["list"], True)):
        proc = subprocess.run([sys.executable, "-c", probe, *argv], cwd=where, env=env, capture_output=True, text=True)
        assert json.loads(proc.stderr.splitlines()[-1]) == [collecting, 0], (argv, proc.stderr)
        assert proc.stdout.strip(), argv  # what it printed was flushed before the end
    reader = subprocess.Popen(
        [sys.executable, "-m", "maildir_backlog", "ready"],
        cwd=where,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.close()  # the reader goes away before the command prints
    err = reader.stderr.read().decode()
    assert reader.wait() == 1 and "Traceback" not in err, err


def test_the_command_defers_ipaddress_which_pathlib_would_import_and_a_use_still_finds_it(template, tmp_path):
    """`cli.main` as the process's own call puts a stand-in under `ipaddress` before anything is
    imported (`startup.defer_unused_imports`): `pathlib` imports `urllib.parse`, which imports it
    for one check no call makes (~1.5 ms of every call, session 29). After a hot call and after a
    plumbum one the real module is still unloaded; the first use of it (`urlsplit` of a bracketed
    host, `from ipaddress import ...`) imports it and answers as ever."""
    where = copy_repo(template, tmp_path / "repo").path
    probe = (
        "import json, os, sys\n"
        "def report(code):\n"
        "    held = sys.modules.get('ipaddress')\n"
        "    unloaded = held is not None and 'ip_address' not in vars(held)\n"
        "    from urllib.parse import urlsplit\n"
        "    host = urlsplit('http://[::1]:80/').hostname\n"
        "    from ipaddress import ip_address\n"
        "    sys.stderr.write(json.dumps([unloaded, host, str(ip_address(host)), code]) + '\\n')\n"
        "    sys.stderr.flush()\n"
        "    os.abort() if code else None\n"
        "os._exit = report\n"
        "from maildir_backlog import cli\n"
        "sys.argv = ['backlog', *sys.argv[1:]]\n"
        "cli.main()\n"
    )
    env = {**os.environ, "PWD": str(where), "PYTHONPATH": bare_path()}  # (-S below: nothing imported first)
    for argv in (["status"], ["add", "zz", "--here"], ["list"]):
        command = [sys.executable, "-S", "-c", probe, *argv]
        proc = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True)
        assert json.loads(proc.stderr.splitlines()[-1]) == [True, "::1", "::1", 0], (argv, proc.stderr)


REMOTE_SIDE = ("maildir_backlog.remote", "maildir_backlog.crossclone", "maildir_backlog.crosstask")
NEVER = (*REMOTE_SIDE, "dataclasses", "inspect")  # a call's records are named tuples: `dataclasses` imports `inspect`
NEVER += ("subprocess", "selectors")  # git is spawned by `git._spawn` (`subprocess` costs ~3 ms)
NEVER += ("typing",)  # the annotations' names come from `maildir_backlog.typed` (`typing` costs ~4 ms)
HISTORY = "maildir_backlog.history"  # what a claim (and a rename) backfills the ledger from
QUEUE = ("maildir_backlog.queue", "maildir_backlog.intake")  # the ranking and the intake branch


@pytest.mark.parametrize(
    ("argv", "unloaded"),
    [
        (["progress", "a note"], (*NEVER, HISTORY, *QUEUE)),
        (["status"], (*NEVER, HISTORY)),
        (["advance", "a-plan"], (*NEVER, HISTORY, *QUEUE)),
        (["add", "zz", "--here", "--priority", "2"], (*NEVER, HISTORY, *QUEUE, "maildir_backlog.moves", "frontmatter")),
        (["take", "b-plan"], NEVER),
    ],
)
def test_a_hot_call_without_a_remote_leaves_the_remote_side_unloaded(template, tmp_path, argv, unloaded):
    """What a call does not use it does not import (issue 31): on a backlog without a remote, no
    hot verb loads the remote's modules, the claims across clones (`crossclone`, `crosstask`),
    `dataclasses` or `inspect` (~11 ms), `subprocess` (~3 ms), `typing` (~4 ms), and only a claim loads the history it backfills the
    ledger from. A verb on one claim (`progress`, `advance`) loads no ranking and no intake branch
    (`queue`, `intake`), nor does `add --here` on the intake branch itself, with no remote; `add`
    reads its header's lines back with yaml alone, without python-frontmatter (~7 ms)."""
    where = copy_repo(template, tmp_path / "repo").path
    probe = (
        "import json, sys\n"
        "from maildir_backlog import cli\n"
        "code = cli.run(['backlog', *sys.argv[1:]])\n"
        "print(json.dumps([sorted(sys.modules), code]))\n"
    )
    env = {**os.environ, "PWD": str(where), "PYTHONPATH": bare_path()}  # (-S below: no `typing` from `site`)
    command = [sys.executable, "-S", "-c", probe, *argv]
    proc = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True)
    loaded, code = json.loads(proc.stdout.splitlines()[-1])
    assert code == 0, proc.stderr
    assert "maildir_backlog.state" in loaded  # the probe saw the call's modules
    assert [m for m in loaded if m in unloaded or m.startswith(tuple(f"{name}." for name in unloaded))] == []
