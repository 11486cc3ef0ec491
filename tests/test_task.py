"""maildir_backlog.task, .clock, .logline: slugs, log lines, durations, frontmatter read and written, byte-exact appends (SPEC §1–§2)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from freezegun import freeze_time

from maildir_backlog.clock import format_duration, format_ts, now_utc, parse_duration, parse_ts
from maildir_backlog.errors import InvalidInput
from maildir_backlog.logline import (
    LOG_KINDS,
    TEXT_REQUIRED,
    LogEntry,
    append_line,
    make_entry,
    parse_log_line,
    read_log,
    render_log_line,
    split_log,
)
from maildir_backlog.task import Defaults, description, parse_task, validate_slug

T0 = datetime(2026, 5, 16, 14, 22, tzinfo=timezone.utc)


def entry(kind, fields=None, text=None, minutes=0):
    return make_entry(kind, fields, text, now=T0 + timedelta(minutes=minutes))


def count_dividers_after_description(data: bytes) -> int:
    """Divider lines after the frontmatter (if any)."""
    lines = data.decode("utf-8").lstrip("\ufeff").split("\n")
    start = 0
    if lines[0].rstrip(" \t\r") == "---":
        start = next(i for i in range(1, len(lines)) if lines[i].rstrip(" \t\r") == "---") + 1
    return sum(1 for line in lines[start:] if line.rstrip(" \t\r") == "---")


# --------------------------------------------------------------------------- slugs


@pytest.mark.parametrize("slug", ["a", "0", "fix-login", "v1.2_beta", "a" * 128, "x-plan", "9.9", "a.b"])
def test_good_slugs(slug):
    assert validate_slug(slug) == slug


@pytest.mark.parametrize(
    "slug",
    [
        "../x",
        "a/b",
        "A B",
        "-x",
        "",
        "a" * 129,
        "a" * 300,
        "a\x00b",
        "café",
        "a..b",
        "..",
        ".x",
        "_x",
        "Upper",
        "a b",
        "a\nb",
        "abc\n",
        "a\\b",
        "x/",
        " a",
        None,
        7,
    ],
)
def test_bad_slugs(slug):
    with pytest.raises(InvalidInput) as exc:
        validate_slug(slug)
    msg = exc.value.message
    assert msg.startswith("invalid slug '")
    assert "lower-case letters, digits" in msg and "no '..'" in msg
    assert "\x00" not in msg and "\n" not in msg
    assert exc.value.code == 2


def test_bad_slug_message_escapes_nul_and_truncates():
    with pytest.raises(InvalidInput) as nul:
        validate_slug("a\x00b")
    assert "a\\x00b" in nul.value.message
    with pytest.raises(InvalidInput) as long:
        validate_slug("b" * 300)
    msg = long.value.message
    shown = msg.split("'")[1]
    assert len(shown) == 60 and shown.endswith("...")


# --------------------------------------------------------------------------- timestamps


def test_ts_round_trip_and_bad():
    assert format_ts(T0) == "2026-05-16T14:22:00Z"
    assert parse_ts("2026-05-16T14:22:00Z") == T0
    assert (
        format_ts(datetime(2026, 5, 16, 16, 22, 5, 999, tzinfo=timezone(timedelta(hours=2)))) == "2026-05-16T14:22:05Z"
    )
    for bad in [
        "",
        "2026-05-16 14:22:00Z",
        "2026-05-16T14:22:00",
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "２０２６-05-16T14:22:00Z",
        None,
    ]:
        with pytest.raises(InvalidInput):
            parse_ts(bad)


@freeze_time("2026-05-16 14:22:07.654321")
def test_now_utc_whole_seconds():
    assert now_utc() == datetime(2026, 5, 16, 14, 22, 7, tzinfo=timezone.utc)


# --------------------------------------------------------------------------- log lines


@freeze_time("2026-05-16 14:22:00")
def test_make_entry_uses_clock():
    e = make_entry("progress", text="hello")
    assert e.ts == T0 and e.ts.tzinfo is not None
    assert render_log_line(e) == "- 2026-05-16T14:22:00Z progress | hello"


SAMPLES = {
    "advanced": [
        ({"to": "doing", "claimer": "conductor:austin-v3", "branch": "feat/foo"}, None),
        ({"to": "done"}, "PR=https://example.invalid/pull/123?a=b"),
    ],
    "progress": [(None, "auth prototype | passing locally")],
    "cancelled": [(None, "superseded by x")],
    "failed": [(None, "timeout: budget=7d (default), claimed=2026-05-16T14:22:00Z, claimer=a")],
    "rescued": [({"claimer": "me@host", "branch": "main"}, None)],
    "retried": [({}, "flaky CI, trying again — café")],
    "released": [({}, None), ({"by": "lead"}, "out of time today")],
}


def test_samples_cover_every_kind():
    assert set(SAMPLES) == set(LOG_KINDS)


@pytest.mark.parametrize("kind,fields,text", [(k, f, t) for k, v in SAMPLES.items() for f, t in v])
def test_log_line_round_trip(kind, fields, text):
    e = entry(kind, fields, text)
    line = render_log_line(e)
    assert "\n" not in line and line.startswith("- 2026-05-16T14:22:00Z " + kind)
    assert parse_log_line(line) == e
    assert parse_log_line(line + "  \r") == e
    for key, value in (fields or {}).items():
        assert e.get(key) == value
    assert e.get("nope") is None and e.get("nope", "d") == "d"


def test_rendered_grammar():
    e = entry("advanced", {"to": "doing", "claimer": "a", "branch": "b"}, "x")
    assert render_log_line(e) == "- 2026-05-16T14:22:00Z advanced to=doing claimer=a branch=b | x"
    assert render_log_line(entry("rescued")) == "- 2026-05-16T14:22:00Z rescued"


def test_multiline_note_folded():
    e = entry("progress", text="  first line\r\nsecond\tline\n\n third\u2028fourth\x00 ")
    assert e.text == "first line second line third fourth"
    assert parse_log_line(render_log_line(e)) == e


@pytest.mark.parametrize("kind", sorted(TEXT_REQUIRED))
@pytest.mark.parametrize("text", [None, "", "   ", "\n\r\t"])
def test_empty_note_or_reason_refused(kind, text):
    with pytest.raises(InvalidInput) as exc:
        entry(kind, text=text)
    word = "note" if kind == "progress" else "reason"
    assert exc.value.message.startswith(f"empty {word}:")


def test_text_optional_kinds_accept_no_text():
    assert entry("advanced", {"to": "doing"}).text is None
    assert entry("advanced", {"to": "done"}, "  ").text is None


@pytest.mark.parametrize("text", ["", "   ", "\n\r\t"])
def test_a_released_reason_is_optional_but_never_empty_when_given(text):
    assert entry("released").text is None
    with pytest.raises(InvalidInput) as exc:
        entry("released", text=text)
    assert exc.value.message.startswith("empty reason:")


def test_field_values_never_contain_spaces():
    e = entry("advanced", {"to": "doing", "claimer": "Jane  Doe\t@ host", "branch": "", "x": None})
    assert e.fields == (("to", "doing"), ("claimer", "Jane-Doe-@-host"))
    assert parse_log_line(render_log_line(e)) == e


def test_make_entry_programming_errors():
    with pytest.raises(ValueError):
        make_entry("finished", now=T0)
    with pytest.raises(ValueError):
        make_entry("advanced", {"bad key": "x"}, now=T0)


def test_lone_surrogate_refused():
    with pytest.raises(InvalidInput):
        entry("progress", text="bad \udcff bytes")


@pytest.mark.parametrize(
    "line",
    [
        "",
        "---",
        "- hello",
        "# title",
        "- 2026-05-16T14:22:00Z",
        "- 2026-05-16T14:22:00Z finished",
        "- 2026-05-16T14:22:00Z progress some note without a bar",
        "- 2026-05-16T14:22:00Z advancedto=x",
        "- 2026-02-30T14:22:00Z progress | x",
        "-2026-05-16T14:22:00Z progress | x",
        "* 2026-05-16T14:22:00Z rescued",
        "- 2026-05-16T14:22:00Z progress | a\nb",
        "  - 2026-05-16T14:22:00Z rescued",
    ],
)
def test_not_log_lines(line):
    assert parse_log_line(line) is None


def test_tolerant_log_lines():
    assert parse_log_line("- 2026-05-16T14:22:00Z rescued claimer=a\r") == LogEntry(
        T0, "rescued", (("claimer", "a"),), None
    )
    assert parse_log_line("- 2026-05-16T14:22:00Z advanced to=done |").text is None


# --------------------------------------------------------------------------- durations


@pytest.mark.parametrize(
    "text,expected",
    [
        ("30s", timedelta(seconds=30)),
        ("45m", timedelta(minutes=45)),
        ("24h", timedelta(hours=24)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        (" 3d ", timedelta(days=3)),
    ],
)
def test_parse_duration(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text", ["0d", "-3h", "soon", "5", "3x", "", "3D", "1.5h", "3 d", "d", "99999999999999999w", 5, None]
)
def test_parse_duration_bad(text):
    with pytest.raises(InvalidInput) as exc:
        parse_duration(text)
    assert "invalid duration" in exc.value.message and str(text).strip() in exc.value.message


@pytest.mark.parametrize(
    "td,text",
    [
        (timedelta(days=3, hours=4, minutes=5), "3d 4h"),
        (timedelta(minutes=45), "45m"),
        (timedelta(seconds=12), "12s"),
        (timedelta(0), "0s"),
        (timedelta(hours=-2, minutes=-30), "-2h 30m"),
        (timedelta(days=3, minutes=5), "3d"),
        (timedelta(days=14), "14d"),
        (timedelta(seconds=59.9), "59s"),
    ],
)
def test_format_duration(td, text):
    assert format_duration(td) == text


# --------------------------------------------------------------------------- parse_task

SPEC_EXAMPLE = b"""---
priority: 2
timeout: 3d
dependencies:
  schema-migration: "needs the new claim format"
arc: storage
---

# Title

Free description: problem, decisions, phases, acceptance.

---

- 2026-05-16T14:22:00Z advanced to=doing claimer=conductor:austin-v3 branch=feat/foo
- 2026-05-16T16:45:00Z progress | auth prototype passing locally
- 2026-05-17T11:03:00Z advanced to=done | PR=https://example.invalid/pull/123
"""


def test_parse_spec_example():
    t = parse_task("foo-plan", "backlog/done/foo-plan.md", SPEC_EXAMPLE)
    assert t.priority == 2 and t.timeout == timedelta(days=3) and t.timeout_text == "3d" and not t.timeout_is_default
    assert t.dependencies == {"schema-migration": "needs the new claim format"}
    assert t.meta["arc"] == "storage"
    assert t.title == "Title"
    assert t.has_log_divider and [e.kind for e in t.log] == ["advanced", "progress", "advanced"]
    assert t.log[2].text == "PR=https://example.invalid/pull/123"
    assert t.claim_of_record() == t.log[0]
    assert t.clock_start() == datetime(2026, 5, 17, 11, 3, tzinfo=timezone.utc)
    assert t.last_event() == t.log[2]
    assert t.data is SPEC_EXAMPLE


def test_defaults_applied_and_overridden():
    plain = parse_task("a", "a.md", b"# Just a title\n\nbody\n")
    assert (plain.priority, plain.timeout, plain.timeout_text, plain.timeout_is_default) == (
        999,
        timedelta(days=7),
        "7d",
        True,
    )
    assert plain.meta == {} and plain.dependencies == {} and plain.log == [] and not plain.has_log_divider
    assert plain.title == "Just a title" and plain.claim_of_record() is None and plain.clock_start() is None
    assert plain.last_event() is None

    project = Defaults(priority=500, timeout=timedelta(hours=24), timeout_text="24h")
    t = parse_task("a", "a.md", b"---\nowner: me\n---\nbody\n", project)
    assert (t.priority, t.timeout, t.timeout_text, t.timeout_is_default) == (500, timedelta(hours=24), "24h", True)
    t = parse_task("a", "a.md", b"---\npriority: 1\ntimeout: 90m\n---\nbody\n", project)
    assert (t.priority, t.timeout, t.timeout_text, t.timeout_is_default) == (1, timedelta(minutes=90), "90m", False)
    t = parse_task("a", "a.md", b"---\npriority:\ntimeout:\n---\n", project)
    assert (t.priority, t.timeout_text) == (500, "24h")
    assert parse_task("a", "a.md", b"---\n---\n").meta == {}


@pytest.mark.parametrize(
    "fm,expected",
    [
        ("dependencies:\n  a: why\n  b:\n", {"a": "why", "b": ""}),
        ("dependencies:\n  - a\n  - b.c\n", {"a": "", "b.c": ""}),
        ("dependencies: [a, b]\n", {"a": "", "b": ""}),
        ("dependencies: {a: why, b: null}\n", {"a": "why", "b": ""}),
        ("dependencies: []\n", {}),
        ("dependencies:\n", {}),
        ("dependencies: ['123']\n", {"123": ""}),
    ],
)
def test_dependencies_forms(fm, expected):
    assert parse_task("t", "t.md", f"---\n{fm}---\nbody\n".encode()).dependencies == expected


@pytest.mark.parametrize(
    "fm,needle",
    [
        ("dependencies: 7\n", "7"),
        ("dependencies: nope\n", "nope"),
        ("dependencies: [../etc]\n", "../etc"),
        ("dependencies: {Bad Slug: x}\n", "Bad Slug"),
        ("dependencies: [123]\n", "123"),
        ("dependencies: {a: [1, 2]}\n", "a"),
    ],
)
def test_dependencies_refused(fm, needle):
    with pytest.raises(InvalidInput) as exc:
        parse_task("t", "backlog/todo/t.md", f"---\n{fm}---\n".encode())
    assert exc.value.message.startswith("backlog/todo/t.md: invalid dependencies:")
    assert needle in exc.value.message


@pytest.mark.parametrize(
    "fm,start",
    [
        ("priority: high\n", "invalid priority: 'high' (expected a whole number >= 1)"),
        ("priority: 0\n", "invalid priority: 0"),
        ("priority: -1\n", "invalid priority: -1"),
        ("priority: true\n", "invalid priority: True"),
        ("priority: 2.5\n", "invalid priority: 2.5"),
        ("timeout: soon\n", "invalid timeout: 'soon' ("),
        ("timeout: 5\n", "invalid timeout: 5 ("),
        ("timeout: 0d\n", "invalid timeout: '0d' ("),
        ("priority: [1\n", "invalid frontmatter: "),
        ("a: b: c\n", "invalid frontmatter: "),
        ("\tx: 1\n", "invalid frontmatter: "),
        ("a: *nope\n", "invalid frontmatter: "),
        ("d: 2026-02-30\n", "invalid frontmatter: "),
        ("x: !!python/object:os.system {}\n", "invalid frontmatter: "),
        ("- a\n- b\n", "invalid frontmatter: "),
        ("just text\n", "invalid frontmatter: "),
        ("a: 1\n# no closing line\n", "invalid frontmatter: no closing"),
    ],
)
def test_invalid_frontmatter_names_file_and_field(fm, start):
    data = f"---\n{fm}".encode() if "no closing" in start else f"---\n{fm}---\nbody\n".encode()
    with pytest.raises(InvalidInput) as exc:
        parse_task("t", "backlog/todo/t.md", data)
    msg = exc.value.message
    assert msg.startswith("backlog/todo/t.md: " + start), msg
    assert "\n" not in msg and "Traceback" not in msg and exc.value.code == 2


def test_yaml_error_points_at_file_line():
    data = b"---\npriority: 2\nbad: [unclosed\nother: 1\n---\n"
    with pytest.raises(InvalidInput) as exc:
        parse_task("t", "t.md", data)
    msg = exc.value.message
    assert "line " in msg


def test_unknown_keys_kept_and_odd_yaml():
    data = (
        b"---\nbase: &b {x: 1}\nderived: *b   # a comment\nlist:\n    -   1\n    -   2\n"
        b'owner: "someone"\npriority: 3\n---\nbody\n'
    )
    t = parse_task("t", "t.md", data)
    assert t.meta["derived"] == {"x": 1} and t.meta["list"] == [1, 2] and t.priority == 3


def test_bom_tolerated():
    data = (
        b"\xef\xbb\xbf---\r\npriority: 4\r\n---\r\n# Hi\r\n\r\n---\r\n\r\n- 2026-05-16T14:22:00Z rescued claimer=a\r\n"
    )
    t = parse_task("t", "t.md", data)
    assert t.priority == 4 and t.title == "Hi" and len(t.log) == 1 and t.log[0].get("claimer") == "a"
    assert t.data.startswith(b"\xef\xbb\xbf")
    new = append_line(data, entry("progress", text="x"))
    assert new.startswith(data) and new.endswith(b"progress | x\r\n")
    assert len(parse_task("t", "t.md", new).log) == 2


def test_non_utf8_and_nul_refused():
    with pytest.raises(InvalidInput) as exc:
        parse_task("t", "backlog/todo/t.md", b"# caf\xe9\n")
    assert exc.value.message == "backlog/todo/t.md: not valid UTF-8 text"
    with pytest.raises(InvalidInput) as exc:
        parse_task("t", "backlog/todo/t.md", b"# title\x00\n")
    assert exc.value.message == "backlog/todo/t.md: binary file, not a task"
    with pytest.raises(InvalidInput):
        parse_task("t", "t.md", "\ufeff# hi".encode("utf-16"))
    with pytest.raises(InvalidInput):
        append_line(b"\xff\xfe", entry("rescued"))


def test_parse_task_validates_slug():
    with pytest.raises(InvalidInput) as exc:
        parse_task("../x", "t.md", b"body\n")
    assert exc.value.message.startswith("t.md: invalid slug")


# --------------------------------------------------------------------------- the log region


@pytest.mark.parametrize(
    "text,has_divider",
    [
        ("# t\n\n---\n", True),
        ("# t\n\n---", True),
        ("# t\n---\n\n\n", True),
        ("# t\n", False),
        ("", False),
        ("# t\n---\nprose\n", False),
        ("# t\n---\n- 2026-05-16T14:22:00Z rescued\nprose\n", True),
        ("---\na: 1\n---\n", False),
        ("---\na: 1\n---\n---\n", True),
        ("# t\n---  \r\n\r\n", True),
        ("# t\n---\nprose\n---\n- 2026-05-16T14:22:00Z rescued\n", True),
        ("# t\n----\n", False),
    ],
)
def test_split_log(text, has_divider):
    offset, found = split_log(text)
    assert found is has_divider
    if not found:
        assert offset == len(text)
    else:
        assert text[:offset].rstrip(" \r\n").endswith("---")
        unreadable = parse_task("t", "t.md", text.encode()).unreadable
        assert all(not line.strip() or parse_log_line(line) or line in unreadable for line in text[offset:].split("\n"))


def test_title_only_from_description():
    data = b"---\na: 1\n---\nno heading\n## sub\n# Real\n# Second\n---\n"
    assert parse_task("t", "t.md", data).title == "Real"
    assert parse_task("t", "t.md", b"body\n---\n").title is None


# --------------------------------------------------------------------------- append_line: byte-exactness

CRLF_TRAILING = (
    b"---  \r\npriority: 2   \r\ntimeout: 3d\r\n---\r\n\r\n# Crlf task   \r\n\r\nSome text.  \r\nTrailing tab\t\r\n"
)
ODD_YAML = b"""---
# a comment
defaults: &defs
    priority:   5
    nested:
          - x
          -   y
task:
  <<: *defs
timeout:    "2d"    # quoted, commented
dependencies: { a : "one", b: ~ }
---
# Odd

Intro.

---

Prose after a horizontal rule, so this is not a log.
- 2026-05-16T14:22:00Z progress | looks like a log line but is description
"""
FRESH = b"---\npriority: 3\n---\n\n# Fresh\n\nDo it.\n\n---\n"
NO_NEWLINE = b"# No divider\n\nno trailing newline"

CASES = {
    "crlf": CRLF_TRAILING,
    "odd-yaml": ODD_YAML,
    "fresh": FRESH,
    "no-newline": NO_NEWLINE,
    "empty": b"",
    "frontmatter-only": b"---\na: 1\n---",
    "divider-no-newline": b"# x\n\n---",
    "bom-no-frontmatter": b"\xef\xbb\xbf# x\n",
    "ends-with-cr": b"# x\r",
    "log-then-prose": b"# x\n---\n- 2026-05-16T14:22:00Z rescued\nprose\n",
}


@pytest.mark.parametrize("name", list(CASES))
def test_append_line_is_byte_exact(name):
    old = CASES[name]
    before = parse_task("t", "t.md", old)
    entries = [
        entry("advanced", {"to": "doing", "claimer": "me", "branch": "b"}, minutes=0),
        entry("progress", text="halfway\nthere", minutes=1),
        entry("advanced", {"to": "done"}, "PR=https://x.invalid/1", minutes=2),
    ]
    data = old
    for e in entries:
        new = append_line(data, e)
        assert new.startswith(data)
        assert new.startswith(old)
        data = new
    assert count_dividers_after_description(data) == count_dividers_after_description(old) + (
        0 if before.has_log_divider else 1
    )
    after = parse_task("t", "t.md", data)
    assert after.log == before.log + entries
    assert after.has_log_divider
    assert (after.meta, after.priority, after.timeout, after.dependencies, after.title) == (
        before.meta,
        before.priority,
        before.timeout,
        before.dependencies,
        before.title,
    )
    added = data[len(old) :]
    if name in ("crlf", "ends-with-cr"):
        assert b"\r\n" in added and data.count(b"\n") == data.count(b"\r\n")  # still all CRLF
    else:
        assert b"\r" not in added


def test_append_specific_shapes():
    e = entry("rescued", {"claimer": "me"})
    line = b"- 2026-05-16T14:22:00Z rescued claimer=me"
    assert append_line(FRESH, e) == FRESH + line + b"\n"
    assert append_line(NO_NEWLINE, e) == NO_NEWLINE + b"\n\n---\n\n" + line + b"\n"
    assert append_line(b"# t\n", e) == b"# t\n\n---\n\n" + line + b"\n"
    assert append_line(b"# t\n---", e) == b"# t\n---\n" + line + b"\n"
    assert append_line(CRLF_TRAILING, e) == CRLF_TRAILING + b"\r\n---\r\n\r\n" + line + b"\r\n"
    assert append_line(ODD_YAML, e) == ODD_YAML + b"\n---\n\n" + line + b"\n"
    assert append_line(b"", e) == b"\n---\n\n" + line + b"\n"
    assert append_line(b"# t\r", e) == b"# t\r\n\r\n---\r\n\r\n" + line + b"\r\n"
    assert append_line(b"# t\n---\r", e) == b"# t\n---\r\n" + line + b"\n"


def test_odd_yaml_parses():
    t = parse_task("t", "t.md", ODD_YAML)
    assert t.meta["task"]["priority"] == 5 and t.timeout_text == "2d"
    assert t.dependencies == {"a": "one", "b": ""} and not t.has_log_divider and t.log == []


def test_append_refuses_unclosed_frontmatter():
    with pytest.raises(InvalidInput):
        append_line(b"---\npriority: 2\n", entry("rescued"))


# --------------------------------------------------------------------------- claim of record and the clock


def task_with(*entries: LogEntry):
    data = b"# t\n"
    for e in entries:
        data = append_line(data, e)
    return parse_task("t", "t.md", data)


def test_claim_of_record_latest_advanced_with_claimer_or_rescued():
    claim = entry("advanced", {"to": "doing", "claimer": "a", "branch": "x"}, minutes=0)
    hop = entry("advanced", {"to": "reviewing"}, minutes=10)
    note = entry("progress", text="n", minutes=20)
    rescue = entry("rescued", {"claimer": "b", "branch": "y"}, minutes=30)
    reclaim = entry("advanced", {"to": "doing", "claimer": "c", "branch": "z"}, minutes=40)
    assert task_with(claim, hop, note).claim_of_record() == claim
    assert task_with(claim, hop, rescue, note).claim_of_record() == rescue
    assert task_with(claim, rescue, reclaim, hop).claim_of_record() == reclaim
    assert task_with(hop).claim_of_record() is None


def test_clock_start_ignores_progress():
    claim = entry("advanced", {"to": "doing", "claimer": "a"}, minutes=0)
    t = task_with(claim, entry("progress", text="n", minutes=50))
    assert t.clock_start() == T0
    assert t.last_event().kind == "progress"
    t = task_with(claim, entry("advanced", {"to": "reviewing"}, minutes=5), entry("progress", text="n", minutes=9))
    assert t.clock_start() == T0 + timedelta(minutes=5)
    t = task_with(claim, entry("rescued", {"claimer": "b"}, minutes=7), entry("progress", text="n", minutes=9))
    assert t.clock_start() == T0 + timedelta(minutes=7)


# -- one frontmatter grammar: `retry --set` edits the block every reader sees ------------------
@pytest.mark.parametrize("closing", ["---", "----", "-----"])
def test_set_frontmatter_field_finds_the_block_every_reader_finds(closing):
    from maildir_backlog.task import parse_task
    from maildir_backlog.task import set_field as set_frontmatter_field

    data = f"---\ntimeout: 1h\npriority: 2\n{closing}\n\n# T\n\n---\n\n- 2026-05-16T14:22:00Z failed | x\n".encode()
    new = set_frontmatter_field(data, "timeout", "1d")
    task = parse_task("x", "x.md", new)
    assert task.timeout_text == "1d" and task.priority == 2
    assert new == data.replace(b"timeout: 1h", b"timeout: 1d")  # no other byte moved


def test_set_frontmatter_field_adds_a_key_and_a_block():
    from maildir_backlog.task import set_field as set_frontmatter_field

    assert set_frontmatter_field(b"---\npriority: 2\n-----\n# T\n", "timeout", "1d") == (
        b"---\npriority: 2\ntimeout: 1d\n-----\n# T\n"
    )
    assert set_frontmatter_field(b"# T\r\n", "timeout", "1d") == b"---\r\ntimeout: 1d\r\n---\r\n\r\n# T\r\n"


# --------------------------------------------------------------------------- reading what the bash tool wrote

BASH = Path(__file__).parent / "fixtures" / "bash"
BASH_FILES = sorted(p.name for p in BASH.glob("*-plan.md"))


def bash_task(name: str, data: bytes | None = None):
    return parse_task(name.removesuffix(".md"), name, BASH.joinpath(name).read_bytes() if data is None else data)


def ts(text: str) -> datetime:
    return parse_ts(text)


def test_bash_fixtures_present():
    assert len(BASH_FILES) >= 9


def test_bash_several_dividers_are_one_log():
    t = bash_task("review-me-plan.md")
    assert [(e.kind, e.get("to"), e.text) for e in t.log] == [
        ("advanced", "doing", None),
        ("advanced", "reviewing", None),
        ("progress", None, "ref note"),
    ]
    claim = t.claim_of_record()
    assert claim is not None and (claim.get("claimer"), claim.get("branch")) == ("root@vm", "main")
    assert claim.ts == ts("2026-11-30T22:58:34Z")
    assert t.clock_start() == ts("2026-11-30T22:58:34Z") and t.clock_entry().get("to") == "reviewing"
    assert t.has_log_divider and t.unreadable == [] and t.generation == 0
    assert (t.title, t.meta, t.priority) == ("review-me", {}, 999)  # no frontmatter at all
    assert description(t.data) == "# review-me\n\n[problem, decisions, phases, acceptance]"


def test_bash_completed_task_with_three_dividers():
    t = bash_task("completed-plan.md")
    assert count_dividers_after_description(t.data) == 3
    assert [e.kind for e in t.log] == ["advanced", "progress", "advanced", "advanced"]
    assert t.log[-1].get("to") == "done" and t.log[-1].text == "PR=https://example.invalid/pull/7"
    claim = t.claim_of_record()
    assert (claim.get("claimer"), claim.get("branch")) == ("alice@laptop", "feat/login")
    assert t.clock_start() == ts("2026-11-29T11:00:00Z")
    assert t.unreadable == [] and t.generation == 0


def test_bash_retried_and_retaken():
    t = bash_task("retaken-plan.md")
    assert len(t.log) == 8 and t.generation == 2
    assert [e.kind for e in t.log].count("failed") == 2
    claim = t.claim_of_record()
    assert (claim.get("claimer"), claim.get("branch"), claim.ts) == ("root@vm", "main", ts("2026-11-30T20:00:00Z"))
    assert t.clock_start() == ts("2026-11-30T20:00:00Z")
    assert t.log[5].text == "timeout: budget=7d"  # ` | ` first: a `key=value` inside the reason stays prose
    assert t.unreadable == []


def test_bash_spaced_claimer():
    t = bash_task("spaced-claimer-plan.md")
    claim = t.claim_of_record()
    assert claim.fields == (("to", "doing"), ("claimer", "conductor:austin-v3"), ("branch", "main"))
    assert [e.kind for e in t.log] == ["advanced", "progress"] and t.unreadable == []


@pytest.mark.parametrize(
    "line,fields,text",
    [
        (
            "- 2026-05-16T14:22:00Z advanced to=doing claimer=conductor:austin v3 branch=main",
            (("to", "doing"), ("claimer", "conductor:austin-v3"), ("branch", "main")),
            None,
        ),
        (
            "- 2026-05-16T14:22:00Z rescued claimer=a  b\tc branch=feat/x budget=3d | why",
            (("claimer", "a-b-c"), ("branch", "feat/x"), ("budget", "3d")),
            "why",
        ),
        (
            "- 2026-05-16T14:22:00Z rescued claimer=x branch=y z branch=main",  # up to the last ` branch=`
            (("claimer", "x-branch=y-z"), ("branch", "main")),
            None,
        ),
        (
            "- 2026-05-16T14:22:00Z advanced to=doing claimer=me branch=main",
            (("to", "doing"), ("claimer", "me"), ("branch", "main")),
            None,
        ),
    ],
)
def test_spaced_claimer_runs_up_to_branch(line, fields, text):
    e = parse_log_line(line)
    assert e is not None and e.fields == fields and e.text == text and e.ts == T0


@pytest.mark.parametrize(
    "line",
    [
        "- 2026-05-16T14:22:00Z advanced to=doing claimer=a b",  # no ` branch=` after it
        "- 2026-05-16T14:22:00Z advanced to=doing claimer=a b branch=main c",  # the branch value has no spaces
        "- 2026-05-16T14:22:00Z advanced to doing claimer=a b branch=main",  # other fields stay strict
        "- 2026-05-16T14:22:00Z advanced to=doing claimer=  branch=main x",
    ],
)
def test_spaced_claimer_still_strict_elsewhere(line):
    assert parse_log_line(line) is None


def test_bash_multiline_note_and_reason():
    t = bash_task("multiline-note-plan.md")
    assert [e.text for e in t.log] == [
        None,
        "parser done; next: the writer (indented detail) second paragraph of the same note",
        "one-liner",
    ]
    assert t.unreadable == []
    t = bash_task("cancelled-plan.md")
    assert t.log[-1].kind == "cancelled" and t.log[-1].text == "superseded by the new parser see review-me for the rest"


def test_bash_file_with_frontmatter():
    t = bash_task("with-frontmatter-plan.md")
    assert (t.priority, t.timeout_text, t.dependencies) == (2, "3d", {"review-me-plan": "needs the review"})
    assert t.title == "with-frontmatter" and len(t.log) == 1 and t.claim_of_record().get("branch") == "main"


def test_bash_unreadable_lines_do_not_hide_the_log():
    t = bash_task("unreadable-plan.md")
    assert [(e.kind, e.text) for e in t.log] == [("advanced", None), ("progress", "after the garbage")]
    assert t.unreadable == [
        "- garbage here",
        "- 2026-11-31T25:00:00Z progress | bad timestamp",
        "continued text of the bad line",
    ]
    assert t.claim_of_record().get("claimer") == "root@vm" and t.clock_start() == ts("2026-11-30T21:00:00Z")
    assert read_log(t.data) == t.log


def test_bash_fresh_task_has_an_empty_log():
    t = bash_task("fresh-plan.md")
    assert t.has_log_divider and t.log == [] and t.unreadable == []


def crlf(data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


@pytest.mark.parametrize("name", BASH_FILES)
def test_bash_crlf_reads_the_same(name):
    lf = bash_task(name)
    cr = bash_task(name, crlf(lf.data))
    assert (cr.log, cr.unreadable, cr.has_log_divider, cr.title) == (
        lf.log,
        lf.unreadable,
        lf.has_log_divider,
        lf.title,
    )


# The log's rule (logline.file_layout): where it starts, what a continuation is, what is unreadable.
L1 = "- 2026-05-16T14:22:00Z advanced to=doing claimer=a branch=b"
L2 = "- 2026-05-16T14:23:00Z progress | note"
L3 = "- 2026-05-16T14:24:00Z advanced to=done"


@pytest.mark.parametrize(
    "body,kinds,texts,unreadable",
    [
        # no log: prose (or a line that is no log line) first after the divider
        ("---\n\nSome prose.\n", None, None, None),
        ("---\n- a markdown list\n" + L2 + "\n", None, None, None),
        ("---\n\n---\nprose\n" + L2 + "\n", None, None, None),
        (L1 + "\n" + L2 + "\n", None, None, None),  # no divider at all
        # the log starts at the first divider whose first line is a log line
        ("---\nprose\n\n---\n" + L1 + "\n", ["advanced"], [None], []),
        ("---\n\n---\n\n" + L1 + "\n", ["advanced"], [None], []),
        ("---\n\n", [], [], []),
        # continuation lines join a note or reason, across blank lines, not across a divider
        (
            "---\n" + L2 + "\nmore\n\n  and  more\n" + L3 + "\n",
            ["progress", "advanced"],
            ["note more and more", None],
            [],
        ),
        ("---\n- 2026-05-16T14:23:00Z progress |\nthe note\n", ["progress"], ["the note"], []),
        ("---\n" + L2 + "\n---\nafter a divider\n", ["progress"], ["note"], ["after a divider"]),
        # what is not a continuation is unreadable, and the log goes on after it
        ("---\n" + L1 + "\nafter a claim\n" + L2 + "\n", ["advanced", "progress"], [None, "note"], ["after a claim"]),
        (
            "---\n" + L2 + "\n- a list item\ntail\n" + L3 + "\n",
            ["progress", "advanced"],
            ["note", None],
            ["- a list item", "tail"],
        ),
        ("---\n" + L2 + "\n  - indented\n----\n", ["progress"], ["note"], ["  - indented", "----"]),
        (
            "---\n" + L1 + "\n\nA prose paragraph after the log.\n",
            ["advanced"],
            [None],
            ["A prose paragraph after the log."],
        ),
        # an example of the log inside a fenced code block is description, never the log
        ("```\n---\n\n" + L1 + "\n```\n\nProse after the example.\n", None, None, None),
        ("```\n---\n" + L1 + "\n" + L2 + "\n```\n", None, None, None),  # the fence is the last thing
        ("```markdown\n---\n" + L1 + "\n```", None, None, None),  # no newline at the end
        ("~~~ md\n---\n" + L1 + "\n~~~\n", None, None, None),
        ("````\n```\n---\n" + L1 + "\n```\n---\n" + L2 + "\n````\n", None, None, None),  # a fence in a fence
        ("   ```\n---\n" + L1 + "\n   ```\n", None, None, None),
        # a real log after a fenced example is found
        ("```\n---\n" + L1 + "\n```\n\n---\n\n" + L2 + "\n", ["progress"], ["note"], []),
        # an opening fence that never closes is no fence: a log after it is never lost
        ("```\nprose\n\n---\n" + L1 + "\n", ["advanced"], [None], []),
    ],
)
def test_log_rule(body, kinds, texts, unreadable):
    for data in (
        ("# t\n\n" + body).encode(),
        crlf(("# t\n\n" + body).encode()),
        ("---\npriority: 1\n---\n# t\n" + body).encode(),
    ):
        t = parse_task("t", "t.md", data)
        assert t.title == "t"
        if kinds is None:
            assert (t.has_log_divider, t.log, t.unreadable) == (False, [], [])
        else:
            assert t.has_log_divider
            assert [e.kind for e in t.log] == kinds and [e.text for e in t.log] == texts
            assert t.unreadable == unreadable


@pytest.mark.parametrize("name", BASH_FILES)
@pytest.mark.parametrize("newline", ["lf", "crlf"])
def test_append_to_bash_files_adds_no_divider(name, newline):
    old = BASH.joinpath(name).read_bytes()
    old = crlf(old) if newline == "crlf" else old
    before = bash_task(name, old)
    e = entry("progress", text="from the new tool", minutes=0)
    new = append_line(old, e)
    nl = b"\r\n" if newline == "crlf" else b"\n"
    assert new == old + render_log_line(e).encode() + nl  # every earlier byte kept, no divider
    after = bash_task(name, new)
    assert after.log == before.log + [e] and after.unreadable == before.unreadable
    assert count_dividers_after_description(new) == count_dividers_after_description(old)
    again = append_line(new, entry("advanced", {"to": "done"}, minutes=1))
    assert again.startswith(new) and count_dividers_after_description(again) == count_dividers_after_description(old)


@pytest.mark.parametrize(
    "old",
    [
        b"# t\n\nThe log looks like this:\n\n```\n---\n\n" + L1.encode() + b"\n```\n\nProse after it.\n",
        b"# t\n\nThe log looks like this:\n\n```\n---\n\n" + L1.encode() + b"\n" + L2.encode() + b"\n```\n",
        b"# t\r\n\r\n~~~\r\n---\r\n" + L1.encode() + b"\r\n~~~",
    ],
)
def test_a_fenced_example_of_the_log_is_description(old):
    """SPEC §2: the log is the trailing run of log lines, blank lines and dividers; an example in a
    fenced code block (with prose after it, or as the last thing in the file) is not one. The
    first append writes a divider, and the spec's bytes are kept as they are."""
    t = parse_task("t", "t.md", old)
    assert (t.has_log_divider, t.log, t.unreadable, t.claim_of_record()) == (False, [], [], None)
    assert description(old).endswith(("Prose after it.", "```", "~~~"))
    e = entry("advanced", {"to": "doing", "claimer": "me", "branch": "main"})
    new = append_line(old, e)
    assert new.startswith(old)
    assert count_dividers_after_description(new) == count_dividers_after_description(old) + 1
    after = parse_task("t", "t.md", new)
    assert after.log == [e] and after.unreadable == [] and after.claim_of_record() == e
    assert description(new) == description(old)
    again = append_line(new, entry("progress", text="n", minutes=1))
    assert count_dividers_after_description(again) == count_dividers_after_description(new)


@pytest.mark.parametrize(
    "old",
    [b"# t\n\ntext\n", b"# t\n\n---\n\nprose after a rule\n", b"# t\n---\n- not a log\n", b"# t\r\n---\r\nprose\r\n"],
)
def test_append_without_a_log_adds_exactly_one_divider(old):
    e = entry("rescued", {"claimer": "me"})
    new = append_line(old, e)
    assert new.startswith(old)
    assert count_dividers_after_description(new) == count_dividers_after_description(old) + 1
    t = parse_task("t", "t.md", new)
    assert t.log == [e] and t.unreadable == []
    assert count_dividers_after_description(append_line(new, e)) == count_dividers_after_description(new)
