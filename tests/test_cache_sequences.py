"""The parse cache never changes the answer: a generated sequence of what people and tools do to
a pile's files (write one anew or in place, often at the same size; set its time back, to the
same old time as before, or write it keeping an old time; remove it; rename one over another;
edit AGENTS.md's default priority; tear or flip a byte of the cache file itself), with the cache's
bounds on its log and on the entries of files that left drawn small or as shipped, and its window
for files changed lately drawn as shipped (nothing of this sequence written down) or none (this
file system's clock is fine-grained), and after every step the summaries and titles read through
the cache the pile has kept since the start equal those read with no cache at all (`cache.py`:
the stamp is the file's inode, size, mtime and ctime).

`BACKLOG_CACHE_EXAMPLES=300` searches longer.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from conftest import Repo, copy_repo, set_aside
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_cache import DEPS, KEYS, VALUES, backend_of, frontmatter_lines

from maildir_backlog import cache

EXAMPLES = int(os.environ.get("BACKLOG_CACHE_EXAMPLES", "30"))
SLUGS = ("a-plan", "b-plan")
# several of one size: an edit in place that keeps the size, then the old time set back
BODIES = (
    "---\npriority: 3\n---\n\n# A\n",
    "---\npriority: 4\n---\n\n# A\n",
    "---\npriority: 4\n---\n\n# B\n",
    "---\npriority: [\n---\n\n# A\n",
    "---\npriority: 2\ndependencies:\n  x-plan: why\n---\n# D\n",
    "---\npriority: 2\ndependencies:\n  y-plan: why\n---\n# D\n",
    "# no header\n\nbody\n",
    # read by the full parser, with dependencies (session 25: its `task.Slug` strings, which marshal
    # refused, failed every call that wrote the pile down)
    "---\ntimeout: 4h\ndependencies: [x-plan]\n---\n# T\n",
    "---\ntimeout: 4h\ndependencies: [y-plan]\n---\n# T\n",
)
WIDEST = len(BODIES) + 2  # (a body's index, taken modulo BODIES + the example's generated headers)
DEFAULTS = ("`priority: 999`", "`priority: 1`")  # the Defaults section's, which a file that gives none has
OLD = (10**18, 10**18, 10**18 + 7)  # times long past, one most often (the ctime is the write's, whatever the mtime)

step = st.one_of(
    st.tuples(st.just("copy"), st.sampled_from(SLUGS), st.integers(0, WIDEST - 1), st.booleans()),
    st.tuples(st.just("write"), st.sampled_from(SLUGS), st.integers(0, WIDEST - 1), st.booleans()),
    st.tuples(st.just("age"), st.sampled_from(SLUGS), st.integers(0, len(OLD) - 1), st.booleans()),
    st.tuples(st.just("rm"), st.sampled_from(SLUGS), st.just(0), st.booleans()),
    st.tuples(st.just("mv"), st.sampled_from(SLUGS), st.integers(0, len(SLUGS) - 1), st.booleans()),
    st.tuples(st.just("default"), st.just(""), st.just(0), st.booleans()),
    st.tuples(st.just("tear"), st.just(""), st.integers(0, 99), st.booleans()),
)


def apply(todo: Path, op: tuple[str, str, int, bool], bodies: tuple[str, ...] = BODIES) -> None:
    kind, slug, n, flag = op
    path = todo / f"{slug}.md"
    if kind == "tear":  # the cache file cut short (flag) or one byte of it changed, at n% of its length
        where = cache_file(todo)
        if where.exists():
            data = bytearray(where.read_bytes())
            at = len(data) * n // 100
            if flag:
                del data[at:]
            elif data:
                data[min(at, len(data) - 1)] ^= 0x20
            where.write_bytes(bytes(data))
    elif kind == "default":  # AGENTS.md's default priority edited: from one of DEFAULTS to the other
        agents = todo.parent / "AGENTS.md"
        text = agents.read_text()
        now = next(d for d in DEFAULTS if d in text)
        agents.write_text(text.replace(now, DEFAULTS[1 - DEFAULTS.index(now)]))
    elif kind == "copy":  # written with an old time kept (`cp -p`, rsync -t, an unpacked archive)
        apply(todo, ("write", slug, n, flag), bodies)
        os.utime(path, ns=(OLD[0], OLD[0]))
    elif kind == "write":
        if flag:  # in place: the same inode
            with open(path, "w", encoding="utf-8") as f:
                f.write(bodies[n % len(bodies)])
        else:  # a new file renamed over it, as editors and git do
            tmp = todo / f".tmp-{slug}"
            tmp.write_text(bodies[n % len(bodies)], encoding="utf-8")
            os.replace(tmp, path)
    elif kind == "age":
        if path.exists():
            os.utime(path, ns=(OLD[n], OLD[n]))
    elif kind == "rm":
        path.unlink(missing_ok=True)
    elif path.exists() and SLUGS[n] != slug:
        os.replace(path, todo / f"{SLUGS[n]}.md")


def cache_file(todo: Path) -> Path:
    return backend_of(Repo(todo.parent.parent))[1].parse_cache("todo")


def answers(repo_path: Path) -> tuple[object, object]:
    """(summaries and titles through the pile's cache, the same with none); the cache is left as
    the first read left it, so that it keeps growing step by step."""
    backend, layout = backend_of(Repo(repo_path))
    titles: dict[str, str | None] = {}
    cached = (backend.summaries("todo", titles), titles)
    fresh_titles: dict[str, str | None] = {}
    with set_aside(layout.parse_cache("todo")):
        fresh = (backend.summaries("todo", fresh_titles), fresh_titles)
    return cached, fresh


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(step, min_size=1, max_size=14),
    slack=st.sampled_from([0, 1, cache.SLACK]),
    window=st.sampled_from([0, 0, cache.RACY_NS]),
    headers=st.lists(st.lists(st.tuples(KEYS, VALUES, DEPS), max_size=4), max_size=2),
)
# found by this test in session 20 (3 runs in 5 at 30 examples): a file that gives no priority,
# cached, then AGENTS.md's default priority changed: the cache kept the old default (the cache's
# header line now holds the default priority, so a change reads every file again)
@example(steps=[("copy", "a-plan", 6, False), ("default", "", 0, False)], slack=cache.SLACK, window=0, headers=[])
# found by this test in session 23, as the log's lines were first written: a byte changed in a log
# line's error field was read back as that file's summary (each log line now ends in its CRC-32)
@example(
    steps=[("copy", "a-plan", 3, False), ("age", "a-plan", 0, False), ("tear", "", 78, False)],
    slack=1,
    window=0,
    headers=[],
)
# found in session 25 by the suite under three workers (see BODIES): a dependency the full parser read
@example(steps=[("copy", "a-plan", 7, False)], slack=cache.SLACK, window=0, headers=[])
def test_the_parse_cache_never_changes_the_answer(steps, slack, window, headers, repo_templates):
    """`headers`: frontmatters generated as tests/test_cache.py's differential test makes them, each
    a body the steps may write (beside BODIES)."""
    bodies = BODIES + tuple("\n".join(["---", *frontmatter_lines(h, False), "---", "", "# G", ""]) for h in headers)
    base = Path(tempfile.mkdtemp(prefix="parse-cache-"))
    shipped, cache.SLACK = cache.SLACK, slack  # (module constants, set back below)
    shipped_window, cache.RACY_NS = cache.RACY_NS, window  # (0: the `settled_clock` fixture's rule)
    try:
        path = copy_repo(repo_templates("maildir-git"), base / "repo").path
        todo = path / "backlog" / "todo"
        for n, op in enumerate(steps):
            apply(todo, op, bodies)
            cached, fresh = answers(path)
            assert cached == fresh, (steps[: n + 1], cached, fresh)
    finally:
        cache.SLACK, cache.RACY_NS = shipped, shipped_window
        shutil.rmtree(base, ignore_errors=True)
