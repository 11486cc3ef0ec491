"""maildir_backlog.cache: the parse cache (kept by stamp, appended, rewritten when dead lines pile
up) and the quick frontmatter reader, which must agree with the full parser wherever it answers."""

from __future__ import annotations

import marshal
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from maildir_backlog import cache, header, project
from maildir_backlog import git as g
from maildir_backlog.backend import open_backend
from maildir_backlog.errors import BacklogError
from maildir_backlog.layout import Layout
from maildir_backlog.task import Defaults, parse_task

DEFAULT = Defaults().priority


def full(slug: str, data: bytes) -> tuple[int, tuple[str, ...], bool]:
    """(priority, dependencies, invalid?) as the full parser sees the file."""
    try:
        task = parse_task(slug, f"{slug}.md", data)
    except BacklogError:
        return (0, (), True)
    return (task.priority, tuple(task.dependencies), False)


def agrees(slug: str, text: str) -> bool:
    data = text.encode("utf-8")
    got = header.quick(slug, data, DEFAULT)
    if got is None:
        return True  # not its form: the full parser decides
    return (got.priority, got.dependencies, got.error is not None) == full(slug, data)


COMMON = [
    '---\npriority: 2\ndependencies:\n  a-task: "needs a first"\n  b.c: plain reason\narc: storage\n---\n\n# T\n\n---\n',
    "---\npriority: 1\n---\n# t\n",
    "# no frontmatter\n\nbody\n",
    "",
    "---\n---\n",
    "---\n\ntitle: 'a quoted: title'\n---\nx\n",
    "---\ndependencies:\n---\n",
    "---\npriority:\n---\n",
]


def test_the_common_forms_are_read_quickly_and_agree():
    for text in COMMON:
        assert header.quick("x-task", text.encode(), DEFAULT) is not None, text
        assert agrees("x-task", text), text


# forms the quick reader must leave to the full parser (or read the same): YAML's surprises
SURPRISES = [
    "---\npriority: 0\n---\n",
    "---\npriority: '3'\n---\n",
    "---\npriority: 3.0\n---\n",
    "---\npriority: 0x10\n---\n",
    "---\npriority: 1_000\n---\n",
    "---\npriority: 99999999999\n---\n",
    "---\ndependencies:\n  yes: why\n---\n",
    "---\ndependencies:\n  2024-01-01: why\n---\n",
    "---\ndependencies:\n  a: yes\n---\n",
    "---\ndependencies:\n  a: 12\n---\n",
    "---\ndependencies:\n  a: x\n   b: y\n---\n",
    "---\ndependencies:\n  - a\n---\n",
    "---\ndependencies: [a]\n---\n",
    "---\nwhen: 2026-13-45\n---\n",
    "---\ntimeout: 2x\n---\n",
    "---\ntimeout.doing: off\n---\n",
    "---\narc: &a x\nb: *a\n---\n",
    "---\npriority: 2\npriority: 3\n---\n",
    "---\npriority: 2 # two\n---\n",
    "---\nkey:value\n---\n",
    "---\n  indented: 1\n---\n",
    "---\npriority: 2\n",
    '---\ntitle: "a\\x85b"\n---\n',
    '---\ntitle: "a\x85b"\n---\n',
    "---\ntitle: a\u2028b\n---\n",
    "---\ntitle: !!python/object x\n---\n",
    "---\r\npriority: 2\r\n---\r\n",
    "\ufeff---\npriority: 2\n---\n",
    "---\ttab\npriority: 2\n---\n",
    "---\npriority: 2\n-----\nlog\n",
    "---\non: 1\n---\n",
    "---\n...\n---\n",
]


def test_yaml_surprises_are_left_to_the_full_parser_or_agree():
    for text in SURPRISES:
        assert agrees("x-task", text), text


def test_bad_slug_or_bytes_never_read_quickly():
    assert header.quick("Bad Slug", b"---\npriority: 2\n---\n", DEFAULT) is None
    assert header.quick("x", b"---\npriority: 2\n---\n\x00", DEFAULT) is None
    assert header.quick("x", b"\xff\xfe", DEFAULT) is None


KEYS = st.sampled_from(["priority", "dependencies", "arc", "title", "on", "timeout", "x_y", "Null", "a-b"])
VALUES = st.one_of(
    st.sampled_from(["", "1", "7", "0", "-1", "yes", "null", "~", "1.5", "2026-01-01", "a: b", "[a]", "{}", "|"]),
    st.sampled_from(['"q"', "'q'", '"a\\"b"', "'it''s'", "plain text", "x #c", "&a", "*a", "!!str x"]),
    st.text(alphabet="abc019 ._-:#'\"\\\x85\u2028é", max_size=8),
    st.sampled_from(["4h", "1d12h", "0h", "1h30", "1:30", "1e5", "4H", "10_0", "1.5h"]),  # durations, and near misses
)
DEPS = st.lists(
    st.tuples(
        st.sampled_from(["  ", "   ", " ", "  - "]),
        st.sampled_from(["a", "b-c", "on", "1x", "x.y", "A", "a..b"]),
        VALUES,
    ),
    max_size=3,
)


def frontmatter_lines(fields, blank: bool) -> list[str]:
    """The lines between the fences for generated (key, value, dependencies) fields."""
    lines = []
    for key, value, deps in fields:
        lines.append(f"{key}:{' ' + value if value else ''}")
        for indent, dep, reason in deps:
            lines.append(f"{indent}{dep}:{' ' + reason if reason else ''}")
        if blank:
            lines.append("")
    return lines


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(KEYS, VALUES, DEPS), max_size=5), st.sampled_from(["---", "----", "--- "]), st.booleans())
def test_the_quick_reader_never_disagrees_with_the_full_parser(fields, close, blank):
    text = "\n".join(["---", *frontmatter_lines(fields, blank), close, "", "# title", ""])
    assert agrees("x-task", text), text


# -- the cache file --------------------------------------------------------------------------
def aged(*paths):
    """Files whose mtime is long past (their ctime cannot be set back: the tests that need them
    cached take the `settled_clock` fixture too)."""
    for n, path in enumerate(paths):
        os.utime(path, ns=(10**18 + n, 10**18 + n))


def kept(path) -> cache.Kept:
    """The cache file at `path` as `cache.py` reads it (its own header taken as the expected one)."""
    head = path.read_bytes().split(b"\n", 1)[0].decode("utf-8", "surrogateescape").rsplit("\t", 4)[0]
    got = cache._load(path, head, True)
    assert got is not None, path
    return got


def log_lines(path) -> int:
    return kept(path).lines


def backend_of(repo):
    r = g.discover(repo.path)
    return open_backend(r, project.load(Layout.of(r).agents)), Layout.of(r)


def test_a_call_appends_only_what_changed_and_piles_keep_their_own_file(repo, settled_clock):
    repo.ok("setup", "--backend=maildir-git", "--pipeline", "todo doing doing-review done")
    todo = repo / "backlog/todo"
    for i in range(5):
        (todo / f"t{i}.md").write_text(f"---\npriority: {i + 1}\n---\n# t{i}\n")
    (repo / "backlog/doing-review/r.md").write_text("# r\n")
    aged(*todo.iterdir(), repo / "backlog/doing-review/r.md")
    backend, layout = backend_of(repo)
    assert {s: v.priority for s, v in backend.summaries("todo").items()} == {f"t{i}": i + 1 for i in range(5)}
    path = layout.parse_cache("todo")
    first = path.read_bytes()
    backend.summaries("doing-review")
    assert path.read_bytes() == first  # another pile's call leaves this file alone
    assert layout.parse_cache("doing-review").exists()
    backend.summaries("todo")
    assert path.read_bytes() == first  # nothing changed: nothing written
    (todo / "t1.md").write_text("---\npriority: 9\ndependencies:\n  t0: first\n---\n# t1\n")
    aged(todo / "t1.md")
    got = backend.summaries("todo")
    assert got["t1"].priority == 9 and got["t1"].dependencies == ("t0",)
    after = path.read_bytes()
    assert after.startswith(first) and after.count(b"\n") == first.count(b"\n") + 1  # one line appended


def test_dependencies_the_full_parser_read_are_written_down_and_the_call_answers(repo, settled_clock):
    """Session 25, found by the suite under three workers (`test_janitor.py`'s 2,000-task chain ran
    past the 3 s window): the full parser gives a dependency as `task.Slug`, a str subclass, which
    marshal refuses. Every call that wrote such a pile down ended in `internal error: ValueError:
    unmarshallable object` (exit 1): `take`, `ready`, `maintain`, once the files were 3 s old."""
    repo.ok("setup", "--backend=maildir-git")
    todo = repo / "backlog/todo"
    (todo / "base.md").write_text("---\npriority: 1\n---\n# base\n")
    (todo / "flow.md").write_text("---\npriority: 2\ndependencies: [base]\n---\n# flow\n")  # (a flow list)
    (todo / "timed.md").write_text("---\ntimeout: 4h\ndependencies:\n  base: first\n---\n# timed\n")
    assert header.parsed("flow", (todo / "flow.md").read_bytes(), 999) is None  # (the full parser's)
    aged(*todo.glob("*.md"))
    assert repo.ok("--json", "ready").count('"slug"') == 1  # only base is ready
    backend, layout = backend_of(repo)
    written = kept(layout.parse_cache("todo"))
    assert {written.rests[written.rest_of[at]][1] for at in written.at.values()} >= {("base",)}
    assert repo.ok("take").strip() == "backlog/doing/base.md"


def cached_pile(repo, files: dict[str, str]):
    """A maildir-git pile of `files` (slug → text), long unchanged, read once through its cache:
    (its directory, the backend, the cache file)."""
    repo.ok("setup", "--backend=maildir-git")
    todo = repo / "backlog/todo"
    for slug, text in files.items():
        (todo / f"{slug}.md").write_text(text)
    aged(*todo.glob("*.md"))
    backend, layout = backend_of(repo)
    backend.summaries("todo")
    return todo, backend, layout.parse_cache("todo")


def test_a_claim_writes_nothing_and_files_that_left_are_dropped_at_a_quarter(repo, monkeypatch, settled_clock):
    """A file that leaves the pile (a claim) costs the cache no write; the snapshot is written
    anew once the entries of files that left pass a quarter of the live ones (plus `SLACK`)."""
    monkeypatch.setattr(cache, "SLACK", 2)
    todo, backend, path = cached_pile(repo, {f"t{i:02}": f"---\npriority: {i + 1}\n---\n" for i in range(12)})
    first = path.read_bytes()
    for i in range(4):  # 4 gone of 8 live: 4 <= 2 + 8 // 4
        (todo / f"t{i:02}.md").unlink()
        assert set(backend.summaries("todo")) == {f"t{j:02}" for j in range(i + 1, 12)}
        assert path.read_bytes() == first
    (todo / "t04.md").unlink()  # 5 gone of 7 live: past the bound
    assert set(backend.summaries("todo")) == {f"t{j:02}" for j in range(5, 12)}
    assert kept(path).at.keys() == {f"t{j:02}.md" for j in range(5, 12)} and kept(path).snapshot == 7


def test_a_snapshot_that_is_not_whole_is_no_snapshot(repo, settled_clock):
    """The snapshot's parts are checked against the CRC-32 in the header line: other bytes (a
    disk's error, a hand's edit, even a well-formed snapshot of other summaries) make every file
    a miss, never a wrong summary, and the next snapshot is whole again."""
    _todo, backend, path = cached_pile(repo, {n: f"---\npriority: {p}\n---\n# {n}\n" for n, p in (("a", 3), ("b", 4))})
    whole = path.read_bytes()
    first, rest = whole.split(b"\n", 1)
    head, size_a, crc_a, size_b, crc_b = first.decode().rsplit("\t", 4)
    names, stamps, rest_of, rests = marshal.loads(rest[: int(size_a)])  # noqa: S302 (the cache this test wrote)
    other = marshal.dumps((names, stamps, rest_of, [(9, *r[1:]) for r in rests]))  # well formed, but not its bytes
    forged = f"{head}\t{len(other)}\t{crc_a}\t{size_b}\t{crc_b}\n".encode() + other + rest[int(size_a) :]

    def flipped(at: int) -> bytes:
        data = bytearray(whole)
        data[at] ^= 0x01
        return bytes(data)

    # well formed but not the bytes of its CRC (every priority 9), then a byte changed in the
    # summaries' part, then one in the titles'
    for data in (forged, flipped(len(first) + 6), flipped(len(whole) - 3)):
        path.write_bytes(data)
        titles: dict = {}
        got = backend.summaries("todo", titles)
        assert {s: v.priority for s, v in got.items()} == {"a": 3, "b": 4} and titles == {"a": "a", "b": "b"}
        assert kept(path).at.keys() == {"a.md", "b.md"}


def test_a_torn_line_is_a_miss_and_dead_lines_are_compacted(repo, settled_clock):
    repo.ok("setup", "--backend=maildir-git")
    todo = repo / "backlog/todo"
    (todo / "a.md").write_text("---\npriority: 3\n---\n")
    aged(todo / "a.md")
    backend, layout = backend_of(repo)
    backend.summaries("todo")
    path = layout.parse_cache("todo")
    with open(path, "a") as f:
        f.write("a.md\t1\t2")  # a crash in the middle of an append
    (todo / "b.md").write_text("---\npriority: 4\n---\n")
    aged(todo / "b.md")
    assert {s: v.priority for s, v in backend.summaries("todo").items()} == {"a": 3, "b": 4}
    assert backend.summaries("todo")["b"].priority == 4
    for n in range(cache.SLACK + 10):  # every edit adds a line; the file is rewritten before it grows past 2x
        (todo / "a.md").write_text(f"---\npriority: {n + 1}\n---\n" + "x" * (n % 7))
        os.utime(todo / "a.md", ns=(n, n))
        assert backend.summaries("todo")["a"].priority == n + 1
    assert log_lines(path) <= cache.SLACK + 1  # the log is folded into a new snapshot before it grows past
    assert len(kept(path).at) <= 2 + cache.SLACK + 1


def test_a_name_holding_a_tab_is_read_every_call_and_never_a_hit_for_another(repo, settled_clock):
    """A cache line's key is five tab-separated fields: a file whose name holds a tab matches no
    line (read at every call, right each time) and its line never vouches for a file `a`."""
    repo.ok("setup", "--backend=maildir-git")
    todo = repo / "backlog/todo"
    (todo / "a.md").write_text("---\npriority: 3\n---\n")
    (todo / "a\tb.md").write_text("---\npriority: 7\n---\n")
    aged(todo / "a.md", todo / "a\tb.md")
    backend, _layout = backend_of(repo)
    for n in range(3):
        got = backend.summaries("todo")
        assert got["a"].priority == 3 and "invalid slug" in (got["a\tb"].error or ""), n
        (todo / "a.md").write_text(f"---\npriority: {3 + n}\n---\n")
        (todo / "a.md").write_text("---\npriority: 3\n---\n")  # rewritten as it was: a new stamp
        aged(todo / "a.md")


def test_a_cache_line_never_vouches_for_a_changed_file(repo, settled_clock):
    repo.ok("setup", "--backend=maildir-git")
    todo = repo / "backlog/todo"
    (todo / "a.md").write_text("---\npriority: 3\n---\n")
    backend, layout = backend_of(repo)
    backend.summaries("todo")
    (todo / "a.md").write_text("---\npriority: [\n---\n")  # invalid now
    got = backend.summaries("todo")["a"]
    assert got.error is not None and "invalid frontmatter" in got.error
    assert backend.summaries("todo")["a"].error == got.error  # the error is cached too


def test_the_older_caches_are_removed(repo, settled_clock):
    """The JSON file of every pile (before version 1) and the pile's tab-separated file (versions
    1 to 3) go when the pile's snapshot is first written."""
    repo.ok("setup", "--backend=maildir-git")
    (repo / "backlog/todo/a.md").write_text("# a\n")
    aged(repo / "backlog/todo/a.md")
    backend, layout = backend_of(repo)
    layout.cache.write_text("{}")
    tsv = layout.parse_cache("todo").with_suffix(".tsv")
    tsv.parent.mkdir(parents=True, exist_ok=True)
    tsv.write_text("backlog-cache 3\tx\t999\n")
    assert layout.old_parse_caches("todo") == (layout.cache, tsv)
    backend.summaries("todo")
    assert not layout.cache.exists() and not tsv.exists()
    assert kept(layout.parse_cache("todo")).at.keys() == {"a.md"}


def yaml_meta(lines: list[str]):
    """The frontmatter between the fences as YAML reads it (python-frontmatter, as `parse_task`
    does without the quick reader); None when YAML refuses it."""
    from maildir_backlog import task as t

    try:
        return t._load_meta("\n".join(["---", *lines, "---"]), "x.md")
    except BacklogError:
        return None


def meta_agrees(lines: list[str]) -> bool:
    from maildir_backlog.task import quick_meta

    got = quick_meta(lines)
    return got is None or got == yaml_meta(lines)


def test_the_quick_frontmatter_is_what_yaml_reads():
    """What `parse_task` uses before YAML (a claimed task's timeout included) is YAML's own reading."""
    from maildir_backlog.task import quick_meta

    for text in [*COMMON, "---\ntimeout: 4h\npriority: 3\narc: 7\n---\n", "---\ntimeout: 1d12h\n---\n"]:
        lines = text.split("\n")
        if lines[0] == "---" and "---" in lines[1:]:
            between = lines[1 : lines.index("---", 1)]
            assert quick_meta(between) is not None, text
            assert meta_agrees(between), text
    for text in SURPRISES:
        assert meta_agrees(text.split("\n")[1:-2]), text
    for value in ("1:30", "1.5h", "10_0", "4H", "1e5", "-4h", "4h ", "0x1h"):  # YAML's numbers, near durations
        assert meta_agrees([f"timeout: {value}"]), value


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(KEYS, VALUES, DEPS), max_size=5), st.booleans())
def test_the_quick_frontmatter_never_disagrees_with_yaml(fields, blank):
    lines = frontmatter_lines(fields, blank)
    assert meta_agrees(lines), lines


def test_a_file_gone_since_the_listing_is_skipped_and_the_rest_read(repo, settled_clock):
    """The stamps are read in bulk; one file gone between the listing and its `lstat` sends the
    call the careful way (a file at a time), which skips it."""
    repo.ok("setup", "--backend=maildir-git")
    todo = repo / "backlog/todo"
    for name, priority in (("a", 3), ("b", 4)):
        (todo / f"{name}.md").write_text(f"---\npriority: {priority}\n---\n")
    _backend, layout = backend_of(repo)

    def parse(slug, path):
        return header.parsed(slug, open(path, "rb").read(), 5) or header.Parsed(
            header.Summary(0, (), "unreadable"), None
        )

    where = layout.parse_cache("todo")
    for _ in range(2):  # parsed, then from the cache
        got = cache.summaries(where, todo, ["a.md", "gone.md", "b.md"], parse)
        assert {s: v.priority for s, v in got.items()} == {"a": 3, "b": 4}


def test_a_file_changed_within_a_clock_tick_is_read_until_it_is_older(repo, monkeypatch):
    """A file system's clock moves in ticks (milliseconds on Linux, seconds elsewhere): two
    writes of one size in one tick leave the stamp as it was. So a file changed in the last
    `RACY_NS` is read on every call and cached only once it is older."""
    repo.ok("setup", "--backend=maildir-git")
    a = repo / "backlog/todo/a.md"
    a.write_text("---\npriority: 3\n---\n")
    backend, layout = backend_of(repo)
    assert backend.summaries("todo")["a"].priority == 3
    tick = os.lstat(a).st_mtime_ns
    with open(a, "r+") as f:  # in place, same size, same inode, and (set back) the same time
        f.write("---\npriority: 4\n---\n")
    os.utime(a, ns=(tick, tick))
    assert backend.summaries("todo")["a"].priority == 4
    assert not layout.parse_cache("todo").exists()  # nothing cached yet
    monkeypatch.setattr(cache, "RACY_NS", 0)  # (as if 3 s had passed: its mtime and ctime are old now)
    assert backend.summaries("todo")["a"].priority == 4
    assert kept(layout.parse_cache("todo")).at.keys() == {"a.md"}


def test_a_file_that_kept_an_old_time_is_new_by_its_ctime(repo):
    """A copy that keeps its source's old mtime (`cp -p`, `rsync -t`, an unpacked archive) was
    just changed all the same: its ctime says so. A second such copy of the same size in the
    same tick of a coarse clock (a second on some file systems) would leave every field of the
    stamp as it was, so the file is read, not written down, until its ctime is old too. (This
    file system's clock is fine-grained: the test checks the rule, not a collision.)"""
    repo.ok("setup", "--backend=maildir-git")
    a = repo / "backlog/todo/a.md"
    a.write_text("---\npriority: 3\n---\n")
    os.utime(a, ns=(10**18, 10**18))  # an old mtime; the ctime is now
    backend, layout = backend_of(repo)
    assert backend.summaries("todo")["a"].priority == 3
    assert not layout.parse_cache("todo").exists()  # nothing written down yet
