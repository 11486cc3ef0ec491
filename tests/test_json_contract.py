"""The JSON contract (SPEC §5 JSON; docs/json.md): every verb's `--json` object, produced by the
real command in a real repository, validates against the verb's schema, made from its row's type
(`schemagen.schema`); failures validate against the error object's; and a renamed or dropped field
fails validation. The scenario runs every verb of the table: the steps written here, then, for a
verb they do not run (a new one), its row's first example (`Contract.example`)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT, Repo, backdate, common_dir, task_lock
from jsonschema import Draft202012Validator, FormatChecker

from maildir_backlog import schemagen
from maildir_backlog.verbs import VERBS as TABLE
from maildir_backlog.verbspec import Verb

VERBS = [verb.name for verb in TABLE if verb.schema]  # every verb with a --json object (verbs/)
ISO = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"


def schema(name: str) -> dict:
    return schemagen.schema(name)


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(schema(name), format_checker=FormatChecker())


def valid(name: str, data: dict) -> bool:
    return validator(name).is_valid(data)


class Contract:
    """Runs `backlog --json VERB …` and checks the exit code and the schema; keeps every output.
    `command` runs the command (default: the repository's, in this process), `rows` the table
    the verbs' schemas are made from (default: the package's)."""

    def __init__(self, repo, command: Callable | None = None, rows: dict[str, Verb] | None = None):
        self.repo = repo
        self.command = command or repo.run
        self.rows = rows
        self.seen: dict[str, list[dict]] = {}

    def __call__(self, verb: str, *args: str, code: int = 0) -> dict:
        proc = self.command("--json", verb, *args)
        assert proc.returncode == code, (verb, args, proc.returncode, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert proc.stdout.count("\n") == 1, proc.stdout
        data = json.loads(proc.stdout)
        made = schemagen.schema_for(self.rows[verb]) if self.rows and verb in self.rows else schema(verb)
        errors = [e.message for e in Draft202012Validator(made, format_checker=FormatChecker()).iter_errors(data)]
        assert not errors, (verb, args, errors, data)
        self.seen.setdefault(verb, []).append(data)
        return data

    def example(self, row: Verb) -> dict:
        """A verb the written steps do not run: its row's first example that is one plain call
        (`backlog [--json] VERB ARGS`, no pipe, glob or redirection), run with `--json`, against
        its schema. A row without one fails, saying what to do."""
        for line in row.examples:
            words = [word for word in shlex.split(line, comments=True) if word != "--json"]
            if words[:2] == ["backlog", row.name] and not set("|<>*$;&").intersection(line.split("#")[0]):
                return self(row.name, *words[2:])
        raise AssertionError(
            f"`{row.name}`: no example of its row is one plain `backlog {row.name} …` call: give the row one"
            " that runs in this scenario (or write its steps in test_every_verb_matches_its_schema)"
        )


def test_every_schema_is_made_and_valid():
    """Every verb with a --json object has a schema, made from its row's type (no file: a new verb's
    schema is its row's), valid draft 2020-12; `python -m maildir_backlog.schemagen` prints one, or
    writes them all into a directory, as the same text."""
    assert schemagen.names() == [*VERBS, "error"]
    for name in schemagen.names():
        body = schema(name)
        Draft202012Validator.check_schema(body)
        assert body["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert body["$id"] == f"https://maildir-backlog.invalid/schemas/{name}.json"
    assert not (ROOT / "maildir_backlog" / "schemas").exists()  # nothing to keep in step by hand
    assert "schemas/" not in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_the_generator_prints_and_writes_the_schemas(tmp_path, capsys):
    assert schemagen.main(["take"]) == 0
    assert capsys.readouterr().out == schemagen.render(schema("take"))
    assert schemagen.main(["--write", str(tmp_path / "s")]) == 0
    written = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert written == sorted(f"{name}.json" for name in schemagen.names())
    assert (tmp_path / "s" / "error.json").read_text(encoding="utf-8") == schemagen.render(schema("error"))
    assert schemagen.main(["nope"]) == 2 and "usage:" in capsys.readouterr().err


@pytest.mark.parametrize("backend", ["maildir-shared", "maildir-git"])
def test_every_verb_matches_its_schema(repo, backend):
    run = Contract(repo)
    other = "maildir-git" if backend == "maildir-shared" else "maildir-shared"
    setup = run("setup", f"--backend={backend}", "--pipeline", "todo doing reviewing done")
    assert setup["linked"] == [] and "post-checkout" in setup["hook"]
    assert run("setup", "--hooks").keys() == {"hook"}
    connected = run("setup", "--agent", "codex")
    assert connected["mode"] == "install" and sorted(connected["committed"]) == [".codex/config.toml", "AGENTS.md"]
    assert {item["state"] for item in run("setup", "--agent", "codex", "--check")["items"]} == {"installed"}
    run("add", "alpha", "--priority", "1", "--timeout", "2h", "--title", "Alpha work")
    run("add", "beta", "--depends", "alpha-plan:needs alpha")
    run("add", "gamma", "--priority", "5")
    run("add", "late", "--timeout", "1h", "--priority", "9")
    ready = run("ready")
    assert [t["slug"] for t in ready["tasks"]][:2] == ["alpha-plan", "gamma-plan"]
    edited = run("edit", "late-plan", "--set", "priority=9", "--set", "title=Late work")
    assert edited["changed"] == ["title"] and edited["committed"] == ["here"] and edited["where"] == "here"
    assert run("edit", "late-plan", "--set", "title=Late work")["committed"] == []  # nothing changed

    took = run("take")
    assert took["slug"] == "alpha-plan" and took["pile"] == "doing" and took["title"] == "Alpha work"
    assert took["description"] == "# Alpha work" and took["claimer"] == "tester" and took["branch"] == "main"
    assert took["budget_seconds"] == 7200 and isinstance(took["budget_seconds"], int)
    assert took["frontmatter"] == {"priority": 1, "timeout": "2h", "dependencies": {}}
    assert took["deadline"] > took["since"]
    run("progress", "half way")
    shown = run("show", "alpha-plan")
    assert shown["budget_seconds"] == 7200 and shown["deadline"] == took["deadline"]
    status = run("status")
    flying = status["in_flight"][0]
    assert flying["budget_seconds"] == 7200 and flying["deadline"] == took["deadline"]
    assert isinstance(flying["age_seconds"], int) and flying["budget"] == "2h" and isinstance(flying["age"], str)
    run("list")
    run("list", "doing")
    run("where")
    hop = run("advance", "alpha-plan")
    assert hop["pile"] == "reviewing" and hop["budget_seconds"] == 7200
    done = run("advance", "alpha-plan", "--pr", "https://example.invalid/pull/1")
    assert done["pile"] == "done" and done["budget_seconds"] is None and done["deadline"] is None

    run("take", "gamma-plan")
    released = run("release", "gamma-plan", "back to the queue")
    assert released["pile"] == "todo" and released["where"] == "here"
    run("take", "gamma-plan")
    run("fail", "gamma-plan", "it broke")
    run("retry", "gamma-plan", "try again", "--set", "priority=2")
    claimed = run("advance", "gamma-plan")  # out of todo: the claim, in take's shape
    assert claimed["pile"] == "doing" and claimed["frontmatter"]["priority"] == 2
    run("cancel", "gamma-plan", "not needed")

    run("take", "late-plan")
    backdate(repo.path, "late-plan", seconds=7200)
    rescued = run("rescue", "late-plan")
    assert rescued["rescued"] is True and rescued["budget_seconds"] == 3600
    run("maintain", "--dry-run")
    run("maintain")
    run("check-deps", "backlog/todo/beta-plan.md")
    renamed = run("rename", "beta-plan", "beta-two-plan")
    assert renamed["new"] == "beta-two-plan" and renamed["paths"] == ["backlog/todo/beta-two-plan.md"]
    run("take")  # beta: its dependency is done now
    assert run("take") == {"slug": None, "message": "no available tasks"}
    assert run("ready") == {"tasks": [], "remote": None}
    run("migrate", "--to", other, "--dry-run")
    prime = run("prime")
    assert prime["pipeline"] == ["todo", "doing", "reviewing", "done"] and prime["claimer"] == "tester"
    for verb in TABLE:  # a verb the steps above do not run yet: its row's example
        if verb.schema and verb.name not in run.seen:
            run.example(verb)
    assert sorted(run.seen) == sorted(VERBS)


ERROR_CASES = [
    (1, ["take", "no-such-plan"]),
    (1, ["status"], "outside"),
    (2, ["show", "../x"]),
    (2, ["add"]),
    (2, ["frobnicate"]),
    (2, ["list", "nope"]),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: " ".join(c[1]) + (" (outside)" if len(c) > 2 else ""))
def test_errors_match_the_error_schema(shared, tmp_path, case):
    code, args = case[0], case[1]
    where = tmp_path if len(case) > 2 else shared.path
    from conftest import backlog

    proc = backlog(where, "--json", *args)
    assert proc.returncode == code, proc.stderr
    data = json.loads(proc.stdout)
    assert valid("error", data), data
    assert data["code"] == code and "\n" not in data["error"]


def test_a_lost_race_is_exit_3_in_the_error_shape(shared):
    """`take SLUG` passes its first look, waits for the task's lock, and meanwhile someone else
    claims the task: the re-check under the lock says so, exit 3 (retryable)."""
    shared.ok("add", "race")
    todo = shared / "backlog/todo/race-plan.md"
    lock = common_dir(shared.path) / "backlog" / ".locks" / "race-plan.lock"
    with task_lock(shared.path, "race-plan"):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc = subprocess.Popen(
            [sys.executable, "-m", "maildir_backlog", "--json", "take", "race-plan"],
            cwd=shared.path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not _holds(proc.pid, lock):  # it opened the lock: past its first look
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        data = todo.read_bytes() + b"- 2026-05-16T14:22:00Z advanced to=doing claimer=other branch=other\n"
        (shared / "backlog/doing/race-plan.md").write_bytes(data)
        todo.unlink()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    body = json.loads(out)
    assert valid("error", body) and body["code"] == 3 and "already in flight" in body["error"]
    assert body["kind"] == "conflict" and body["retryable"] is True  # a lost race: retry now
    assert body["holder"] == {"claimer": "other", "branch": "other", "since": "2026-05-16T14:22:00Z"}


def _fds(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []


def _holds(pid: int, path: Path) -> bool:
    """Whether process `pid` has `path` open (a descriptor it closes while this looks is skipped:
    the process opens and closes files all the time, each module it imports for one)."""
    for fd in _fds(pid):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path.resolve()):
                return True
        except OSError:
            continue
    return False


# -- a renamed or dropped field fails -------------------------------------------------------
def _objects(body: dict) -> list[dict]:
    return body.get("oneOf", [body])


@pytest.mark.parametrize("name", VERBS + ["error"])
def test_every_schema_is_an_object_at_its_root(name):
    """An MCP tool's output schema must be `type: object` at the root (a bare `oneOf` makes the SDK
    refuse to list the tools): a verb with two shapes says `type: object` beside its `oneOf`."""
    body = schema(name)
    assert body["type"] == "object", name
    assert all(shape["type"] == "object" for shape in _objects(body)), name


@pytest.mark.parametrize("name", VERBS + ["error"])
def test_schemas_are_closed_and_list_their_required_keys(name):
    for shape in _objects(schema(name)):
        assert shape["type"] == "object" and shape["additionalProperties"] is False, name
        optional = {
            "migrate": {"layout", "recovered"},
            "prime": {"skill", "remote"},  # remote: only when the declared remote is not configured here
            "error": {"holder", "settled"},
            "show": {"settled", "remote_record"},  # remote_record: only when the remote was reached
            "where": {"remote"},
            "ready": {"remote"},  # the MCP tool and the API's list of tasks do not carry it (yet)
        }.get(name, set())
        assert set(shape["required"]) == set(shape["properties"]) - optional, name


SAMPLES = {
    "take": {
        "slug": "a-plan",
        "path": "backlog/doing/a-plan.md",
        "pile": "doing",
        "title": "a",
        "description": "# a",
        "frontmatter": {"priority": 999, "timeout": "7d", "dependencies": {}},
        "claimer": "me",
        "branch": "main",
        "budget": "7d (default)",
        "budget_seconds": 604800,
        "deadline": "2026-05-23T14:22:00Z",
        "since": "2026-05-16T14:22:00Z",
        "rescued": False,
        "blocked_by": [],
    },
    "status": {
        "counts": {"todo": 1},
        "backend": "maildir-git",
        "in_flight": [],
        "stale": [],
        "not_tasks": {},
        "remote": None,
    },
    "error": {"error": "no task x in any pile", "code": 1, "kind": "not-found", "retryable": False},
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_renaming_or_dropping_any_field_fails(name):
    sample = SAMPLES[name]
    assert valid(name, sample)
    for key in sample:
        renamed = {(k + "_renamed" if k == key else k): v for k, v in sample.items()}
        assert not valid(name, renamed), f"{name}: renaming {key} still validates"
        dropped = {k: v for k, v in sample.items() if k != key}
        assert not valid(name, dropped), f"{name}: dropping {key} still validates"


def test_durations_are_seconds_and_times_iso():
    take = dict(SAMPLES["take"])
    assert not valid("take", {**take, "budget_seconds": "7d"})
    assert not valid("take", {**take, "deadline": "2026-05-23 14:22"})
    assert valid("take", {**take, "budget_seconds": None, "deadline": None})


def test_the_claim_is_one_shape_in_take_advance_and_rescue():
    """`take`, `rescue` and `advance` out of todo return the same object (views.claimed)."""
    meta = ("$schema", "$id", "title")
    rescue = {k: v for k, v in schema("rescue").items() if k not in meta}
    assert schema("take")["oneOf"][0] == schema("advance")["oneOf"][0] == rescue


def test_status_remote_matches_its_schema(tmp_path):
    """`status --remote` (SPEC §8): every clone's claims as the remote holds them."""
    from test_remote import World, make_world

    world: World = make_world(tmp_path / "w", ["alpha", "beta"])
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", world.url, str(clone)], check=True, capture_output=True)
    run = Contract(Repo(clone))
    run("take", "alpha")
    remote = run("status", "--remote")
    assert remote["remote"] == "origin" and remote["claimed"] == 1
    claim = remote["claims"][0]
    assert claim["slug"] == "alpha" and claim["this_clone"] is True and isinstance(claim["budget_seconds"], int)
    assert "counts" in run("status")
