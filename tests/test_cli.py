"""The `backlog` command (SPEC §5): add, the read verbs, --json, -C, usage errors, slug validation."""

from __future__ import annotations

import json
import os

import pytest
from conftest import GIT_IDENTITY, Repo, backlog, git, init_repo
from test_janitor import write_task
from test_setup import state

from maildir_backlog.verbs import VERBS

BAD_SLUGS = ["../x", "a/b", "A B", "-x", ""]


def head_files(repo) -> list[str]:
    return git(repo.path, "show", "--name-only", "--format=", "HEAD").split()


def one_line_error(proc, code: int) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr, proc.stdout)
    assert "Traceback" not in proc.stderr and "Usage:" not in proc.stderr + proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("backlog: ")


@pytest.fixture(scope="module")
def busy(tmp_path_factory) -> Repo:
    """A maildir-shared backlog with a task in every pile; read-only tests share it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        for key, value in GIT_IDENTITY.items():
            mp.setenv(key, value)
        repo = Repo(init_repo(tmp_path_factory.mktemp("busy") / "repo"))
        repo.ok("setup", "--backend=maildir-shared")
        for slug in ("flying", "finished", "broken", "waiting"):
            repo.ok("add", slug)
        for slug in ("flying", "finished", "broken"):
            repo.ok("take", f"{slug}-plan")
        repo.ok("advance", "finished-plan")
        repo.ok("fail", "broken-plan", "it broke")
    return repo


# -- add -----------------------------------------------------------------------------------
def test_add_creates_and_commits(anybk):
    assert anybk.ok("add", "x").strip() == "backlog/todo/x-plan.md"
    assert anybk.head_message() == "add(x-plan)"
    assert head_files(anybk) == ["backlog/todo/x-plan.md"]
    assert (anybk / "backlog/todo/x-plan.md").read_text() == "# x\n\n---\n\n"
    assert anybk.ok("add", "x", "followup").strip() == "backlog/todo/x-followup.md"
    assert anybk.head_message() == "add(x-followup)"
    data = json.loads(anybk.ok("--json", "add", "x", "task-list"))
    assert data == {
        "slug": "x-task-list",
        "pile": "todo",
        "path": "backlog/todo/x-task-list.md",
        "branch": "main",
        "where": "here",
    }
    assert git(anybk.path, "status", "--porcelain", "--untracked-files=all") == ""


def test_add_bad_category(shared):
    before = state(shared)
    one_line_error(shared.run("add", "x", "chores"), 2)
    assert state(shared) == before


@pytest.mark.parametrize("pile", ["todo", "done", "failed", "doing"])
def test_add_refuses_a_slug_existing_in_any_pile(shared, pile):
    if pile == "todo":
        shared.ok("add", "y")
    else:  # shared/`doing` goes through the symlink into the shared root
        (shared / f"backlog/{pile}/y-plan.md").write_text("# y\n")
    before = state(shared, locks=False)
    proc = shared.run("add", "y")
    one_line_error(proc, 1)
    assert "y-plan already exists" in proc.stderr and f"{pile}/" in proc.stderr
    assert state(shared, locks=False) == before


def test_add_all_options_round_trip(anybk, tmp_path):
    for dep in ("a", "b", "c"):  # a dependency must name a task (SPEC §5 add)
        write_task(anybk, "todo", dep, f"# {dep}\n\n---\n\n")
    body = tmp_path / "body.md"
    body.write_text("## Problem\n\nSomething: with a colon.\n\n## Acceptance\n\n- it works\n")
    out = anybk.ok(
        "add",
        "feat",
        "--priority",
        "3",
        "--timeout",
        "2h",
        "--depends",
        "a:why",
        "--depends",
        'b:needs "quotes": and # hash',
        "--depends",
        "c",
        "--title",
        "A real title",
        "--body-file",
        str(body),
    )
    assert out.strip() == "backlog/todo/feat-plan.md"
    text = (anybk / "backlog/todo/feat-plan.md").read_text()
    assert "## Problem\n\nSomething: with a colon.\n" in text and text.endswith("\n---\n\n")
    data = json.loads(anybk.ok("--json", "show", "feat-plan"))
    assert data["title"] == "A real title" and data["pile"] == "todo" and data["log"] == []
    fm = data["frontmatter"]
    assert (fm["priority"], fm["timeout"]) == (3, "2h")
    assert fm["dependencies"] == {"a": "why", "b": 'needs "quotes": and # hash', "c": ""}
    assert "feat-plan  priority 3  blocked by a, b, c" in anybk.ok("list")


def test_add_refuses_a_dependency_naming_no_task_with_a_did_you_mean(shared):
    """SPEC §5 add: a dependency that names no task anywhere in the clone is refused (exit 2,
    nothing written), with the close match: the usual slip is a missing `-plan`."""
    shared.ok("add", "login-form")
    before = state(shared)
    for depends, hint in (
        ("login-form:needs the form", "(did you mean login-form-plan?)"),
        ("login-from-plan", "(did you mean login-form-plan?)"),
        ("zzz-unheard-of", "add that task first"),
    ):
        proc = shared.run("--json", "add", "api", "--depends", depends)
        assert proc.returncode == 2, proc.stderr
        data = json.loads(proc.stdout)
        assert data["kind"] == "invalid" and data["retryable"] is False
        name = depends.partition(":")[0]
        assert data["error"].startswith(f"--depends {name}: no task {name} anywhere in this clone"), data
        assert hint in data["error"], data
        assert state(shared) == before


def test_add_accepts_a_dependency_known_anywhere_in_the_clone(shared):
    """In flight in the shared pile, done, failed, or only on the intake branch."""
    b = shared.worktree("b1")  # branched before the tasks below: it knows them through the clone
    for slug in ("flying", "finished", "broken"):
        shared.ok("add", slug)
        shared.ok("take", f"{slug}-plan")
    shared.ok("advance", "finished-plan")
    shared.ok("fail", "broken-plan", "no")
    shared.ok("add", "waiting")  # in todo/ of the intake branch (main) only, seen from b1
    for slug in ("flying", "finished", "broken", "waiting"):
        b.ok("add", f"needs-{slug}", "--depends", f"{slug}-plan")
        shared.ok("add", f"also-{slug}", "--depends", f"{slug}-plan")


def test_add_body_from_stdin(shared):
    shared.ok("add", "s", "ideas", "--body-file", "-", input="from stdin\n\nsecond paragraph\n")
    text = (shared / "backlog/todo/s-ideas.md").read_text()
    assert text == "# s\n\nfrom stdin\n\nsecond paragraph\n\n---\n\n"
    data = json.loads(shared.ok("--json", "show", "s-ideas"))
    assert data["title"] == "s" and data["frontmatter"]["priority"] == 999


@pytest.mark.parametrize(
    "args",
    [
        ["--priority", "0"],
        ["--priority", "high"],
        ["--priority", "-1"],
        ["--timeout", "soon"],
        ["--timeout", "0d"],
        ["--depends", "Bad:x"],
        ["--depends", "../up"],
        ["--body-file", "/nonexistent/body"],
    ],
)
def test_add_invalid_options_write_nothing(shared, args):
    before = state(shared)
    one_line_error(shared.run("add", "x", *args), 2)
    assert state(shared) == before


# -- reading verbs -------------------------------------------------------------------------
def test_status(busy):
    lines = busy.ok("status").splitlines()
    assert lines[:4] == ["todo: 1", "doing: 1", "done: 1", "failed: 1"]
    assert lines[4].split()[:4] == ["doing/flying-plan", "tester", "@", "main"]
    data = json.loads(busy.ok("--json", "status"))
    assert data["counts"] == {"todo": 1, "doing": 1, "done": 1, "failed": 1}
    assert [(t["slug"], t["claimer"], t["branch"], t["stale"]) for t in data["in_flight"]] == [
        ("flying-plan", "tester", "main", False)
    ]


@pytest.mark.parametrize(
    "pile, slug",
    [
        (None, "waiting-plan"),
        ("todo", "waiting-plan"),
        ("doing", "flying-plan"),
        ("done", "finished-plan"),
        ("failed", "broken-plan"),
    ],
)
def test_list(busy, pile, slug):
    """Readiness only for piles before the claim point (SPEC §5 list): a claimed, finished or
    failed task is neither `ready` nor blocked."""
    args = ["list"] + ([pile] if pile else [])
    before_claim = pile in (None, "todo")
    assert busy.ok(*args).splitlines() == [f"{slug}  priority 999" + ("  ready" if before_claim else "")]
    data = json.loads(busy.ok("--json", *args))
    assert data["pile"] == (pile or "todo") and [t["slug"] for t in data["tasks"]] == [slug]
    assert data["tasks"][0]["ready"] is (True if before_claim else None)


def test_list_of_an_intake_pile_shows_readiness_and_done_does_not(repo):
    repo.ok("setup", "--backend=maildir-git", "--pipeline", "inbox todo doing done")
    repo.ok("add", "base")
    repo.ok("add", "top", "--depends", "base-plan")
    assert repo.ok("list", "inbox").splitlines() == [
        "base-plan  priority 999  ready",
        "top-plan  priority 999  blocked by base-plan",
    ]
    for _ in range(3):  # inbox → todo → doing → done
        repo.ok("advance", "base-plan")
    assert repo.ok("list", "done").splitlines() == ["base-plan  priority 999"]
    assert json.loads(repo.ok("--json", "list", "done"))["tasks"][0]["ready"] is None
    assert repo.ok("list", "inbox").splitlines() == ["top-plan  priority 999  ready"]


def test_list_unknown_pile(busy):
    proc = busy.run("list", "nope")
    one_line_error(proc, 2)
    assert "todo, doing, done, failed" in proc.stderr


def test_show(busy):
    out = busy.ok("show", "flying-plan")
    assert out.startswith("backlog/doing/flying-plan.md  (doing)\n")
    assert "claim: tester @ main since" in out and "advanced to=doing claimer=tester branch=main" in out
    data = json.loads(busy.ok("--json", "show", "broken-plan"))
    assert data["pile"] == "failed" and [e["kind"] for e in data["log"]] == ["advanced", "failed"]
    assert data["log"][-1]["text"] == "it broke" and data["claim"]["claimer"] == "tester"
    one_line_error(busy.run("show", "nope"), 1)


def test_where(busy):
    common = busy / ".git"
    data = json.loads(busy.ok("--json", "where"))
    assert data["backend"] == "maildir-shared" and data["shared_root"] == str(common / "backlog")
    assert data["piles"]["doing"] == str(common / "backlog/doing")
    assert data["piles"]["todo"] == str(busy / "backlog/todo")
    out = busy.ok("where")
    assert f"shared root: {common / 'backlog'}" in out and f"doing: {common / 'backlog/doing'}" in out


# -- --json on every verb: exactly one object on stdout ------------------------------------
JSON_CASES = [
    ("add", ["add", "j"], 0),
    ("add-dup", ["add", "j"], 1),
    ("take", ["take", "j-plan"], 0),
    ("take-none", ["take"], 0),
    ("take-conflict", ["take", "j-plan"], 1),  # held before it looked: refused naming the holder
    ("progress", ["progress", "half way"], 0),
    ("progress-empty", ["progress", " "], 2),
    ("rescue-early", ["rescue", "j-plan"], 1),
    ("advance", ["advance", "j-plan", "--pr", "https://example.invalid/1"], 0),
    ("advance-done", ["advance", "j-plan"], 1),
    ("add-k", ["add", "k"], 0),
    ("take-k", ["take", "k-plan"], 0),
    ("cancel", ["cancel", "k-plan", "not needed"], 0),
    ("cancel-again", ["cancel", "k-plan", "again"], 1),
    ("add-f", ["add", "f"], 0),
    ("take-f", ["take", "f-plan"], 0),
    ("fail", ["fail", "f-plan", "broke"], 0),
    ("retry", ["retry", "f-plan", "try again"], 0),
    ("retry-done", ["retry", "j-plan", "no"], 1),
    ("status", ["status"], 0),
    ("show", ["show", "f-plan"], 0),
    ("show-missing", ["show", "zzz"], 1),
    ("show-bad", ["show", "../x"], 2),
    ("list", ["list", "done"], 0),
    ("list-bad", ["list", "nope"], 2),
    ("where", ["where"], 0),
    ("maintain", ["maintain", "--dry-run"], 0),
    ("migrate-dry", ["migrate", "--to", "maildir-git", "--dry-run"], 0),
    ("migrate-bad", ["migrate"], 2),
    ("check-deps", ["check-deps", "backlog/todo/f-plan.md"], 0),
    ("setup-again", ["setup", "--backend=maildir-shared"], 1),
    ("unknown-verb", ["frobnicate"], 2),
    ("usage", ["add"], 2),
]


def test_json_on_every_verb(shared):
    for name, args, code in JSON_CASES:
        proc = shared.run("--json", *args)
        assert proc.returncode == code, (name, proc.returncode, proc.stderr)
        assert proc.stdout.endswith("\n") and proc.stdout.count("\n") == 1, (name, proc.stdout)
        data = json.loads(proc.stdout)
        assert isinstance(data, dict), name
        assert "internal error" not in proc.stderr, (name, proc.stderr)
        if code:
            assert data["code"] == code and isinstance(data["error"], str) and data["error"], name
        else:
            assert "error" not in data, (name, data)


def test_json_on_errors_outside_a_repo(tmp_path):
    proc = backlog(tmp_path, "--json", "status")
    assert proc.returncode == 1
    assert json.loads(proc.stdout) == {
        "error": "not inside a git repository",
        "code": 1,
        "kind": "refused",
        "retryable": False,
    }
    proc = backlog(tmp_path, "--json", "setup", "--backend=maildir-git")
    assert json.loads(proc.stdout)["code"] == 1


# -- where the command runs ----------------------------------------------------------------
def test_dash_c_and_subdirectories(shared, tmp_path):
    (shared / "deep/er").mkdir(parents=True)
    sub = Repo(shared / "deep/er")
    assert sub.ok("add", "from-sub").strip() == "backlog/todo/from-sub-plan.md"
    assert (shared / "backlog/todo/from-sub-plan.md").exists()
    assert "todo: 1" in sub.ok("status")
    assert "todo: 1" in backlog(tmp_path, "-C", str(shared.path), "status").stdout
    assert "todo: 1" in backlog(tmp_path, "-C", str(shared / "deep"), "status").stdout
    rel = os.path.relpath(shared.path, tmp_path)
    assert backlog(tmp_path, "--json", "-C", rel, "show", "from-sub-plan").returncode == 0
    one_line_error(backlog(tmp_path, "-C", str(tmp_path / "missing"), "status"), 1)


def test_outside_a_git_repository(tmp_path):
    proc = backlog(tmp_path, "status")
    one_line_error(proc, 1)
    assert "not inside a git repository" in proc.stderr


def test_bare_repository(tmp_path):
    git(tmp_path, "init", "-q", "--bare", "bare.git")
    for args in (["status"], ["setup", "--backend=maildir-shared"]):
        proc = backlog(tmp_path / "bare.git", *args)
        one_line_error(proc, 1)
        assert "bare repository" in proc.stderr
    assert not (tmp_path / "bare.git/backlog").exists()


def test_no_backlog_yet(repo):
    proc = repo.run("add", "x")
    one_line_error(proc, 1)
    assert "backlog setup" in proc.stderr


# -- usage errors --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        [],
        ["frobnicate"],
        ["--bogus", "status"],
        ["add"],
        ["add", "x", "plan", "extra"],
        ["add", "--priority", "high", "x"],
        ["add", "x", "--priority"],
        ["show"],
        ["cancel", "x"],
        ["status", "extra"],
        ["list", "todo", "doing"],
        ["take", "--nope"],
        ["retry", "x", "why", "--set", "novalue"],
        ["migrate", "--to", "jira"],
    ],
    ids=lambda a: " ".join(a) or "no-verb",
)
def test_usage_errors(busy, args):
    before = state(busy)
    proc = busy.run(*args)
    one_line_error(proc, 2)
    assert proc.stdout == ""
    assert state(busy) == before


# -- slug validation: refused before anything is touched -----------------------------------
def slug_call(verb):
    """`verb` called with `s` as its slug (the table's `slug` parameter), its other required
    positionals filled: every verb that takes a slug is in this test as soon as it is in the table."""

    def build(s):
        args = [verb.name]
        for p in verb.params_of("cli"):
            if p.name == "slug" and not p.positional:
                args += [p.flag, s]
            elif p.positional and (p.required or p.name == "slug"):
                args.append(s if p.name == "slug" else "words")
        return args

    return build


SLUG_VERBS = {verb.name: slug_call(verb) for verb in VERBS if any(p.name == "slug" for p in verb.params_of("cli"))}
SLUG_VERBS["add-category-sep"] = lambda s: ["add", "--", s]
SLUG_VERBS["add-depends"] = lambda s: ["add", "ok", "--depends", s]


@pytest.mark.parametrize("verb", SLUG_VERBS)
def test_slug_validation(busy, verb):
    before = state(busy)
    for slug in BAD_SLUGS:
        for prefix in ([], ["--json"]) if slug == BAD_SLUGS[0] else ([],):
            proc = busy.run(*prefix, *SLUG_VERBS[verb](slug))
            assert proc.returncode == 2, (verb, slug, proc.stderr)
            assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
            if prefix:
                assert json.loads(proc.stdout)["code"] == 2
            elif slug != "-x" or verb == "add-category-sep":
                assert "invalid slug" in proc.stderr, (verb, slug, proc.stderr)
        assert state(busy) == before, (verb, slug)


def test_help_and_version(tmp_path):
    for args in (["--help"], ["add", "--help"], ["--version"]):
        proc = backlog(tmp_path, *args)
        assert proc.returncode == 0 and proc.stderr == "", (args, proc.stderr)
    assert "Usage:" in backlog(tmp_path, "add", "--help").stdout


def test_json_after_the_verb(shared):
    assert json.loads(shared.ok("add", "late", "--json"))["slug"] == "late-plan"
    assert json.loads(shared.ok("status", "--json"))["counts"]["todo"] == 1
    proc = shared.run("show", "nope", "--json")
    assert proc.returncode == 1 and json.loads(proc.stdout)["code"] == 1
