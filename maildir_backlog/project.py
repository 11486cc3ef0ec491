"""The project declaration, `backlog/AGENTS.md` (SPEC §3): backend, pipeline, defaults.

This module owns the pipeline: which piles exist, in which order, and what each one means.
"""

import os
import re
from collections.abc import Iterable
from pathlib import Path

from . import argv, limits
from .clock import parse_budget, parse_duration
from .errors import BacklogError, InvalidInput
from .task import Defaults
from .typed import NamedTuple

BACKENDS = ("maildir-shared", "maildir-git")
OTHER_BACKENDS = ("github-issues", "jira", "gitea", "linear", "gitlab")
FAILED = "failed"
DEFAULT_PIPELINE = ("todo", "doing", "done")
PILE_TOKEN = re.compile(r"[a-z][a-z0-9-]*")
CATEGORIES = ("plan", "followup", "task-list", "ideas")


class Pipeline(NamedTuple):
    piles: tuple[str, ...] = DEFAULT_PIPELINE
    # SPEC §4: in-flight piles are clone-wide whatever a branch's pipeline says. The clone's shared
    # in-flight piles this pipeline lacks (another branch's `reviewing/`), read from the shared
    # root by the backend (`with_clone_piles`): in flight here too, though no advance leads there
    elsewhere: tuple[str, ...] = ()

    @property
    def intake(self) -> tuple[str, ...]:
        return self.piles[: self.piles.index("todo")]

    @property
    def in_flight(self) -> tuple[str, ...]:
        """This pipeline's own in-flight piles (the ones its worktrees link to the shared root)."""
        return self.piles[self.piles.index("todo") + 1 : -1]

    @property
    def flying(self) -> tuple[str, ...]:
        """Every in-flight pile of the clone: this pipeline's, then those it lacks (`elsewhere`)."""
        return self.in_flight + self.elsewhere

    def with_clone_piles(self, names: Iterable[str]) -> "Pipeline":
        """This pipeline, knowing the shared root's piles `names` that it lacks (`elsewhere`)."""
        extra = tuple(sorted(n for n in names if n not in self.piles and n != FAILED and PILE_TOKEN.fullmatch(n)))
        return self._replace(elsewhere=extra) if extra != self.elsewhere else self

    @property
    def first(self) -> str:
        return self.piles[0]

    @property
    def all_piles(self) -> tuple[str, ...]:
        """Every pile the tool knows: the pipeline (the clone's other in-flight piles before
        `done`), then `failed`."""
        if self.elsewhere:
            return self.piles[:-1] + self.elsewhere + self.piles[-1:] + (FAILED,)
        return self.piles + (FAILED,)

    def next_pile(self, pile: str) -> str | None:
        if pile not in self.piles or pile == "done":
            return None
        return self.piles[self.piles.index(pile) + 1]

    def is_in_flight(self, pile: str) -> bool:
        return pile in self.in_flight or pile in self.elsewhere


class Project(NamedTuple):
    backend: str = "maildir-git"
    pipeline: Pipeline = Pipeline()
    defaults: Defaults = Defaults()
    warnings: tuple[str, ...] = ()  # lines of the declaration that were not understood
    intake: str | None = None  # `intake: <branch>` (SPEC §4); None: the main worktree's branch
    remote: str | None = None  # `remote: <git remote>` (SPEC §8); None: claims are per clone
    remote_where: str = "backlog/AGENTS.md"  # `path:line` of the `remote:` line, for its errors
    intake_where: str = "backlog/AGENTS.md"  # `path:line` of the `intake:` line, for its errors

    @property
    def shares_flight(self) -> bool:  # maildir-shared: the clone's claims, ledger and queue (`backend.open_backend`)
        return self.backend == "maildir-shared"


def parse_pipeline(line: str, where: str = "## Pipeline") -> Pipeline:
    piles = tuple(PILE_TOKEN.findall(line))
    problem = None
    if "todo" not in piles:
        problem = "must contain `todo`"
    elif not piles or piles[-1] != "done":
        problem = "must end with `done`"
    elif len(set(piles)) != len(piles):
        dup = next(p for p in piles if piles.count(p) > 1)
        problem = f"pile `{dup}` appears twice"
    elif FAILED in piles:
        problem = "`failed` is outside the pipeline and may not appear in it"
    elif piles.index("todo") > piles.index("done"):
        problem = "`todo` must come before `done`"
    if problem:
        raise InvalidInput(f"invalid pipeline in {where}: {problem}: {line.strip()!r}")
    return Pipeline(piles)


def _sections(text: str) -> dict[str, list[tuple[int, str]]]:
    sections: dict[str, list[tuple[int, str]]] = {}
    current = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            current = line[3:].strip().lower()
            sections.setdefault(current, [])
        elif current is not None:
            sections[current].append((number, line))
    return sections


def parse_declaration(text: str, path: str = "backlog/AGENTS.md") -> Project:
    sections = _sections(text)
    backend = "maildir-git"
    for number, line in sections.get("backend", []):
        if not line.strip():
            continue
        named = re.findall(r"[A-Za-z][A-Za-z0-9_-]*", line)
        known = [n for n in named if n in BACKENDS]
        if known:
            backend = known[0]
        else:
            others = [n for n in named if n.lower() in OTHER_BACKENDS]
            name = (others or named or [line.strip()])[0]
            raise BacklogError(
                f"{path}:{number}: backend {name!r} is not supported by this tool (supported: {', '.join(BACKENDS)})"
            )
        break
    pipeline = Pipeline()
    for number, line in sections.get("pipeline", []):
        if line.strip():
            pipeline = parse_pipeline(line, f"{path}:{number}")
            break
    defaults, warnings = _parse_defaults(sections.get("defaults", []), path)
    options = _parse_options(sections.get("backend", []), path)
    intake, intake_where = options.get("intake", (None, path))
    remote, remote_where = options.get("remote", (None, path))
    return Project(backend, pipeline, defaults, tuple(warnings), intake, remote, remote_where, intake_where)


# `intake: main`, `- `remote: origin``: the backend's options (maildir-shared), one per line. The
# value is the backticked span when the line has one (prose may follow it), else the rest of the line.
_OPTION_LINE = re.compile(r"^\s*(?:[-*]\s*)?(`?)\s*(intake|remote)\s*:\s*(.*)$")


def _parse_options(lines: list[tuple[int, str]], path: str) -> dict[str, tuple[str, str]]:
    """key → (value, `path:line`) of the Backend section's option lines. A value that is not a plain
    remote name or a valid branch name (an option, a URL, spaces) is exit 2 naming the line: these
    values reach git (SPEC §3, *Committed files are untrusted input*)."""
    options: dict[str, tuple[str, str]] = {}
    for number, line in lines:
        match = _OPTION_LINE.match(line)
        if not match or match.group(2) in options:
            continue
        tick, key, rest = match.groups()
        value = rest.split("`", 1)[0].strip() if tick else rest.strip()
        where = f"{path}:{number}"
        problem = argv.remote_name_problem(value) if key == "remote" else argv.branch_name_problem(value)
        if problem:
            raise InvalidInput(f"{where}: invalid `{key}:` value {argv.shown(value)}: {problem}")
        options[key] = (value, where)
    return options


# `## Defaults` lines, in the markdown styles people write them: `- `timeout: 24h` (house default)`,
# `priority: 500`, `- `timeout.doing`: none`, `- **timeout**: 1h`, `* timeout = 24h`, `1. …`, `> …`,
# a table row `| timeout | 24h |`. Markup (backticks, emphasis) goes first, then the line's lead.
_MARKUP = str.maketrans("", "", "`*_")
_LEAD = re.compile(r"(?:>\s*)*(?:(?:[-+]|[0-9]{1,9}[.)])\s+)?")
# A key is ASCII in any case (`Timeout`, `PRIORITY`): spelled as character classes, not with
# `re.IGNORECASE`, under which Python also folds `ı` and `İ` to `i` (a line keyed `prıorıty` is prose).
_KEY = r"(?:[Pp][Rr][Ii][Oo][Rr][Ii][Tt][Yy]|[Tt][Ii][Mm][Ee][Oo][Uu][Tt](?:\.[A-Za-z0-9-]+)?)"
_AT_START = re.compile(rf"({_KEY})(?![\w-])(\s*[:=]\s*)?(\S*)(.*)")
_SETTING = re.compile(rf"(?<![\w.-]){_KEY}\s*[:=]")  # a key used as a setting


def _defaults_line(line: str) -> tuple[str, str] | str | None:
    """(key, value) for a line that sets one default; a reason (str) for a line that names a key
    as a setting but cannot be read so unambiguously; None for anything else (prose)."""
    text = line.translate(_MARKUP).strip()
    if text.startswith("|"):  # a table row: its first cell is the key, its second the value
        cells = [cell.strip() for cell in text.strip("|").split("|")]
        text = f"{cells[0]}: {' '.join(cells[1:])}" if len(cells) > 1 else cells[0]
    lead = _LEAD.match(text)
    text = text[lead.end() :] if lead else text
    match = _AT_START.match(text)
    if match is None:
        if _SETTING.search(text):
            return "it names a default inside a sentence: write it as a line of its own, e.g. `- `timeout: 24h``"
        return None
    word, separator, value, rest = match.groups()
    key = word.split(".", 1)[0].lower() + word[len(word.split(".", 1)[0]) :]
    if separator is None:
        if not value and not rest.strip():
            return f"it names {key} but gives no value: write `{key}: <value>`"
        return f"no `:` or `=` after {key}"
    value = value.rstrip(".,;")
    if not value:
        return f"it names {key} but gives no value"
    if _SETTING.search(rest):
        return "several defaults on one line: write one per line"
    if key.startswith("timeout.") and not PILE_TOKEN.fullmatch(key.removeprefix("timeout.")):
        return f"{key.removeprefix('timeout.')!r} is not a pile name (lower case letters, digits and `-`)"
    return key, value


def _parse_defaults(lines: list[tuple[int, str]], path: str) -> tuple[Defaults, list[str]]:
    """The `## Defaults` section. A line that sets a known key unambiguously is applied (the first
    setting of a key wins); a line that names a known key as a setting but does not parse (a bad
    value, no value, two settings, a setting inside a sentence, a key set again to another value) is a warning
    naming the line, and the default stays. Prose that only mentions a key is prose."""
    unset = Defaults()  # (an instance: a named tuple's class holds its fields' accessors, not their defaults)
    priority, timeout, timeout_text = unset.priority, unset.timeout, unset.timeout_text
    piles: dict[str, str] = {}
    warnings: list[str] = []
    seen: dict[str, tuple[int, str]] = {}  # key → (line, value) of its first setting
    for number, line in lines:
        found = _defaults_line(line)
        if found is None:
            continue
        shown = argv.shown(line.strip(), 120)  # quoted, and bounded however long the line
        if isinstance(found, str):
            warnings.append(f"{path}:{number}: ignoring {shown}: {found}")
            continue
        key, value = found
        if key in seen:
            first, before = seen[key]
            if value != before:
                warnings.append(f"{path}:{number}: ignoring {shown}: {key} is already {before} (line {first})")
            continue
        try:
            if key == "priority":
                whole = limits.number(value, limits.PRIORITY_MAX)
                if whole is None or whole < 1:
                    raise InvalidInput(f"expected a whole number from 1 to {limits.PRIORITY_MAX:,}")
                priority = whole
            elif key == "timeout":
                timeout, timeout_text = parse_duration(value), value
            else:
                parse_budget(value)
                piles[key.removeprefix("timeout.")] = value
        except InvalidInput as exc:
            warnings.append(f"{path}:{number}: ignoring the default {key}: {exc.message} (in {shown})")
            continue
        seen[key] = (number, value)
    return Defaults(priority, timeout, timeout_text, tuple(sorted(piles.items()))), warnings


def load(path: Path, missing_ok: bool = False) -> Project:
    """Read and parse the declaration at `path` (the worktree's `backlog/AGENTS.md`).

    A missing file is "no backlog here" (or the defaults, with `missing_ok`)."""
    try:
        text = _read_declaration(path)
    except FileNotFoundError:
        if missing_ok:
            return Project()
        raise BacklogError(
            "no backlog here: backlog/AGENTS.md is missing (run `backlog setup --backend=...`)"
        ) from None
    except UnicodeDecodeError:
        raise InvalidInput("backlog/AGENTS.md: not valid UTF-8 text") from None
    except OSError as exc:
        raise BacklogError(f"backlog/AGENTS.md: cannot read it: {exc.strerror or exc}") from None
    return parse_declaration(text)


def _read_declaration(path: Path) -> str:
    """AGENTS.md's text: a regular file (a symlink leading out of the backlog is refused, never
    followed: the tool reads nothing outside the backlog) of bounded size."""
    if path.parent.is_symlink():
        raise BacklogError(f"backlog/: is a symlink ({os.readlink(path.parent)}); refusing to follow it")
    if path.is_symlink():
        try:
            target = path.resolve()
        except (OSError, RuntimeError):  # a loop (`RuntimeError` before Python 3.13)
            raise BacklogError(
                "backlog/AGENTS.md: is a symlink that leads back to itself; refusing to read it"
            ) from None
        if target.parent != path.parent.resolve():
            raise BacklogError(
                f"backlog/AGENTS.md: is a symlink leading out of backlog/ ({target}); refusing to read it"
            )
    if not os.path.lexists(path):
        raise FileNotFoundError(path)
    if not path.is_file():
        raise BacklogError("backlog/AGENTS.md: not a regular file; refusing to read it")
    return _bounded(path).decode("utf-8-sig")


def _bounded(path: Path) -> bytes:
    with path.open("rb") as handle:
        data = handle.read(limits.DECLARATION_BYTES + 1)
    if len(data) > limits.DECLARATION_BYTES:
        raise BacklogError(f"backlog/AGENTS.md: larger than {limits.DECLARATION_BYTES:,} bytes; refusing to read it")
    return data


def set_backend_line(data: bytes, backend: str) -> bytes:
    """AGENTS.md with its `## Backend` line naming `backend`; every other byte is kept.

    Edits the first non-empty line of the section (the one the tool reads), replacing the
    backend name in it; adds the line, or the whole section at the end, when missing.
    """
    text = data.decode("utf-8")
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    lines = text[len(bom) :].splitlines(keepends=True)
    first = lines[0] if lines else ""
    nl = "\r\n" if first.endswith("\r\n") else "\n"
    heading = None
    in_section = False
    for i, line in enumerate(lines):
        content = (line.splitlines() or [""])[0]
        ending = line[len(content) :]
        if content.startswith("## "):
            in_section = content[3:].strip().lower() == "backend"
            if in_section and heading is None:
                heading = i
            continue
        if in_section and content.strip():
            lines[i] = _naming(content, backend, i + 1) + ending
            return (bom + "".join(lines)).encode("utf-8")
    if heading is not None:
        if not lines[heading].endswith(("\n", "\r")):
            lines[heading] += nl
        lines.insert(heading + 1, nl + backend + nl)
    else:
        tail = "".join(lines)
        if tail and not tail.endswith(("\n", "\r")):
            lines.append(nl)
        lines.append(f"{nl if tail else ''}## Backend{nl}{nl}{backend}{nl}")
    return (bom + "".join(lines)).encode("utf-8")


def _naming(content: str, backend: str, number: int) -> str:
    """The Backend line `content` (line `number`) with the backend it names replaced by `backend`
    (and prose about the old one by this one's); refused when it names none."""
    for match in re.finditer(r"[A-Za-z][A-Za-z0-9_-]*", content):
        if match.group() in BACKENDS:
            head, tail = content[: match.start()], content[match.end() :]
            if re.search(r"[A-Za-z0-9]", tail.replace("`", "")):  # prose about the old backend
                closing = "`" if head.rstrip().endswith("`") else ""
                tail = f"{closing} — {BACKEND_PROSE[backend]}"
            return head + backend + tail
    raise BacklogError(f"backlog/AGENTS.md:{number}: no backend named on the Backend line; edit it by hand")


BACKEND_PROSE = {
    "maildir-shared": "in-flight piles live in the clone's shared root (`backlog where`); the others are tracked",
    "maildir-git": "every pile is tracked on each branch; every move is a commit",
}


def nearest_slug(name: str, known: set[str]) -> str | None:
    """The known slug `name` most likely means: the name with a category suffix first (the usual
    slip, `login-form` for `login-form-plan`: `add` appends the category), else the closest spelling."""
    import difflib

    suffixed = [f"{name}-{category}" for category in CATEGORIES if f"{name}-{category}" in known]
    close = suffixed or difflib.get_close_matches(name, sorted(known), n=1)
    return close[0] if close else None
