"""The project declaration, backlog/AGENTS.md (SPEC §3): backend, pipeline, defaults."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from maildir_backlog.errors import BacklogError, InvalidInput
from maildir_backlog.guide import render_declaration
from maildir_backlog.project import Pipeline, parse_declaration, parse_pipeline
from maildir_backlog.task import Defaults


def declaration(backend: str | None = None, pipeline: str | None = None, defaults: str | None = None) -> str:
    text = "# Backlog\n\nSome prose the tool ignores.\n\n## Notes\n\nmaildir-shared is mentioned here, not declared.\n"
    if backend is not None:
        text += f"\n## Backend\n\n{backend}\n"
    if defaults is not None:
        text += f"\n## Defaults\n\n{defaults}\n"
    if pipeline is not None:
        text += f"\n## Pipeline\n\n{pipeline}\n"
    return text


# -- backend -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "line, expected",
    [
        (None, "maildir-git"),
        ("maildir-shared", "maildir-shared"),
        ("`maildir-shared`", "maildir-shared"),
        ("maildir-git", "maildir-git"),
    ],
)
def test_backend(line, expected):
    assert parse_declaration(declaration(backend=line)).backend == expected


@pytest.mark.parametrize("name", ["github-issues", "jira", "gitea"])
@pytest.mark.parametrize("template", ["{}", "`{}`", "Our tasks live in {} (see the wiki)"])
def test_other_backends_are_not_supported(name, template):
    with pytest.raises(BacklogError) as info:
        parse_declaration(declaration(backend=template.format(name)))
    assert info.value.code == 1
    assert "not supported by this tool" in info.value.message
    assert name in info.value.message


# -- pipeline ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "line",
    [
        "inbox → todo → doing → reviewing → done",
        "`inbox` → `todo` → `doing` → `reviewing` → `done`",
        "inbox todo doing reviewing done",
        "`inbox` -> `todo` -> `doing` -> `reviewing` -> `done`",
    ],
)
def test_pipeline_decoration_and_classification(line):
    pipeline = parse_declaration(declaration(pipeline=line)).pipeline
    assert pipeline.piles == ("inbox", "todo", "doing", "reviewing", "done")
    assert pipeline.intake == ("inbox",)
    assert pipeline.in_flight == ("doing", "reviewing")
    assert pipeline.first == "inbox"
    assert pipeline.all_piles[-1] == "failed"
    assert [pipeline.next_pile(p) for p in pipeline.piles] == ["todo", "doing", "reviewing", "done", None]
    assert pipeline.is_in_flight("reviewing") and not pipeline.is_in_flight("todo")
    assert not pipeline.is_in_flight("done") and not pipeline.is_in_flight("inbox")


def test_default_pipeline():
    pipeline = parse_declaration(declaration()).pipeline
    assert pipeline.piles == ("todo", "doing", "done")
    assert pipeline.intake == () and pipeline.in_flight == ("doing",) and pipeline.first == "todo"


def test_pipeline_is_the_first_non_empty_line():
    text = "## Pipeline\n\n\ntodo → review → done\ninbox todo doing done\n"
    assert parse_declaration(text).pipeline.piles == ("todo", "review", "done")


@pytest.mark.parametrize(
    "line, problem",
    [
        ("inbox → doing → done", "must contain `todo`"),
        ("todo → doing → reviewing", "must end with `done`"),
        ("todo → doing → done → archive", "must end with `done`"),
        ("todo → doing → doing → done", "appears twice"),
        ("todo → doing → failed → done", "`failed`"),
    ],
)
def test_invalid_pipeline_names_the_line(line, problem):
    text = declaration(pipeline=line)
    number = text.splitlines().index(line) + 1
    with pytest.raises(InvalidInput) as info:
        parse_declaration(text)
    assert info.value.code == 2
    assert problem in info.value.message
    assert f"backlog/AGENTS.md:{number}" in info.value.message
    assert line in info.value.message


def test_invalid_setup_pipeline_names_the_option():
    with pytest.raises(InvalidInput, match="--pipeline"):
        parse_pipeline("todo doing", "--pipeline")


# -- defaults ------------------------------------------------------------------------------
def test_defaults():
    project = parse_declaration(declaration(defaults="- `timeout: 24h`\npriority: 500\n- other: ignored"))
    assert project.defaults == Defaults(500, timedelta(hours=24), "24h")
    assert parse_declaration(declaration()).defaults == Defaults()


@pytest.mark.parametrize("line", ["- `timeout: soon`", "- `priority: high`", "priority: 0", "- `timeout.doing: 3x`"])
def test_invalid_defaults_are_warnings_naming_the_line(line):
    project = parse_declaration(declaration(defaults=line))
    assert project.defaults == Defaults()
    assert len(project.warnings) == 1 and "AGENTS.md:" in project.warnings[0] and "ignoring" in project.warnings[0]


def test_defaults_with_trailing_prose_and_pile_budgets():
    """The bash tool's template: `` - `timeout: 7d` (house default) ``."""
    lines = (
        "- `timeout: 24h` (house default)\n- `priority: 5` (lower is sooner)\n- `timeout.reviewing: none` people review"
    )
    project = parse_declaration(declaration(defaults=lines))
    assert project.defaults == Defaults(5, timedelta(hours=24), "24h", (("reviewing", "none"),))
    assert project.warnings == ()


H24 = timedelta(hours=24)


@pytest.mark.parametrize(
    "line, expected",
    [
        ("- `timeout.doing`: none", Defaults(pile_timeouts=(("doing", "none"),))),
        ("- **timeout**: 1h", Defaults(timeout=timedelta(hours=1), timeout_text="1h")),
        ("* timeout = 24h", Defaults(timeout=H24, timeout_text="24h")),
        ("+ timeout=24h", Defaults(timeout=H24, timeout_text="24h")),
        ("- __priority__: 7", Defaults(priority=7)),
        ("1. `priority` = `7` (lower is sooner)", Defaults(priority=7)),
        ("| timeout | 24h |", Defaults(timeout=H24, timeout_text="24h")),
        ("| `timeout.reviewing` | `none` | people review |", Defaults(pile_timeouts=(("reviewing", "none"),))),
        ("- `timeout`: `24h` (house default)", Defaults(timeout=H24, timeout_text="24h")),
        ("- *Timeout*: 24h.", Defaults(timeout=H24, timeout_text="24h")),
        ("> timeout: 24h", Defaults(timeout=H24, timeout_text="24h")),
        ("- `timeout: 24h` (house default)", Defaults(timeout=H24, timeout_text="24h")),
    ],
)
def test_defaults_in_other_markdown_styles(line, expected):
    """SPEC §3: `## Defaults` lines are read in the usual markdown styles (list markers, code,
    emphasis, `=`, a table row) when what they set is unambiguous."""
    project = parse_declaration(declaration(defaults=line))
    assert (project.defaults, project.warnings) == (expected, ())


@pytest.mark.parametrize(
    "line",
    [
        "- timeout 24h",  # no separator
        "- **timeout**:",  # no value
        "- timeout: 1h, priority: 5",  # two settings on one line
        "The house default timeout: 24h.",  # a key in a sentence: which way is meant?
        "| timeout | soon |",
        "- `timeout.Doing`: none",  # not a pile name
    ],
)
def test_defaults_lines_that_name_a_key_but_do_not_parse_are_warnings_naming_the_line(line):
    project = parse_declaration(declaration(defaults=line))
    assert project.defaults == Defaults()
    assert len(project.warnings) == 1, project.warnings
    assert "AGENTS.md:11:" in project.warnings[0] and repr(line) in project.warnings[0], project.warnings


def test_defaults_prose_that_only_mentions_a_key_is_not_a_setting():
    lines = "Timeouts are generous here.\nReviews wait for people, so the timeout there is none.\n- `timeout: 24h`"
    project = parse_declaration(declaration(defaults=lines))
    assert (project.defaults, project.warnings) == (Defaults(timeout=H24, timeout_text="24h"), ())


@pytest.mark.parametrize("line", ["- prıorıty: 5", "- `tİmeout.doing: 1h`", "- Key: x", "- TİMEOUT: 1h"])
def test_a_defaults_key_is_ascii_in_any_case_and_a_look_alike_is_prose(line):
    """Under `re.IGNORECASE`, Python folds `ı` and `İ` to `i`: `prıorıty: 5` was read as a key and
    filed as a pile budget named `prıorıty`. A key is ASCII letters in any case (`PRIORITY: 5`
    sets the priority); a line keyed with other letters is prose."""
    project = parse_declaration(declaration(defaults=line))
    assert (project.defaults, project.warnings) == (Defaults(), ())
    assert parse_declaration(declaration(defaults="- PRIORITY: 5\n- TimeOut.doing: 1h")).defaults == Defaults(
        priority=5, pile_timeouts=(("doing", "1h"),)
    )


def test_a_defaults_key_set_twice_is_a_warning_and_the_first_wins():
    project = parse_declaration(declaration(defaults="- `timeout: 24h`\n- **timeout**: 1h\n- `timeout: 24h`"))
    assert project.defaults == Defaults(timeout=H24, timeout_text="24h")
    assert len(project.warnings) == 1 and "AGENTS.md:12:" in project.warnings[0], project.warnings


def test_render_round_trip():
    pipeline = Pipeline(("inbox", "todo", "doing", "reviewing", "done"))
    defaults = Defaults(5, timedelta(hours=2), "2h")
    project = parse_declaration(render_declaration("maildir-shared", pipeline, defaults))
    assert (project.backend, project.pipeline, project.defaults) == ("maildir-shared", pipeline, defaults)


# -- through the command -------------------------------------------------------------------
@pytest.mark.parametrize(
    "section, code, needle",
    [
        ("## Backend\n\ngithub-issues\n", 1, "not supported by this tool"),
        ("## Backend\n\njira\n", 1, "not supported by this tool"),
        ("## Pipeline\n\ntodo → doing\n", 2, "backlog/AGENTS.md:3"),
        ("## Pipeline\n\ntodo failed done\n", 2, "backlog/AGENTS.md:3"),
    ],
)
def test_bad_declaration_via_cli(gitbk, section, code, needle):
    (gitbk / "backlog/AGENTS.md").write_text(section)
    proc = gitbk.run("status")
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    proc = gitbk.run("--json", "status")
    assert json.loads(proc.stdout)["code"] == code


def test_defaults_applied_to_tasks(gitbk):
    agents = gitbk / "backlog/AGENTS.md"
    text = agents.read_text()
    assert "- `timeout: 7d`" in text and "- `priority: 999`" in text  # setup writes the section
    agents.write_text(text.replace("- `timeout: 7d`", "- `timeout: 24h`").replace("- `priority: 999`", "priority: 500"))
    gitbk.ok("add", "plain")
    gitbk.ok("add", "own", "--priority", "3", "--timeout", "2h")
    plain = json.loads(gitbk.ok("--json", "show", "plain-plan"))["frontmatter"]
    own = json.loads(gitbk.ok("--json", "show", "own-plan"))["frontmatter"]
    assert (plain["priority"], plain["timeout"]) == (500, "24h")
    assert (own["priority"], own["timeout"]) == (3, "2h")
    assert "timeout: 24h (default)" in gitbk.ok("show", "plain-plan")
    assert "plain-plan  priority 500" in gitbk.ok("list")
