"""One task file (SPEC §2): slug grammar, frontmatter reading (YAML, bounded), the Task model.

The log and its line grammar are in `logline`, timestamps and durations in `clock`. Every
frontmatter value the tool writes is emitted by PyYAML (`field_lines`: `yaml.safe_dump`).

Everything here is pure: bytes in, values out. Every bad input raises `InvalidInput`; nothing
from yaml, the codec or `datetime` escapes the public functions.
"""

import re
from datetime import datetime, timedelta

from . import limits
from .clock import DURATION_HINT, Budget, parse_budget, parse_duration, show
from .errors import InvalidInput
from .logline import FileLayout, LogEntry, claim_of_record, decode, file_layout, generation, replace_field
from .typed import Any, NamedTuple, pattern

# --------------------------------------------------------------------------- slugs

SLUG_PATTERN = r"[a-z0-9][a-z0-9._-]{0,127}"  # (and no `..`: `is_slug`)
SLUG_RE = re.compile(f"^{SLUG_PATTERN}$")


def is_slug(name: str) -> bool:
    """Is `name` a valid slug (the pattern, and no `..`)? For names read from git, a listing or a
    directory, where an invalid one is skipped rather than refused."""
    return bool(SLUG_RE.fullmatch(name)) and ".." not in name


class Slug(str):
    """A slug already validated: what `validate_slug` returns. A verb's slug is validated once, at
    the door (`verbspec.Verb.call`); every layer below (`Backend.locate`, `parse_task`, …) sees
    the type and trusts it: `validate_slug` is not called on it again."""

    __slots__ = ()


def validate_slug(slug: str) -> Slug:
    if isinstance(slug, Slug):
        return slug
    if not isinstance(slug, str) or not is_slug(slug):
        raise InvalidInput(
            f"invalid slug '{show(slug)}': use lower-case letters, digits, '.', '_', '-' (max 128, no '..')"
        )
    return Slug(slug)


# The common frontmatter, read without YAML (`quick_meta`): only forms whose YAML meaning is beyond
# doubt (no tags, anchors, flows, block scalars, escapes, comments, tabs, CRs; no value YAML 1.1
# would read as a bool, null, number or date where a text is meant). Anything else returns None
# and YAML decides; tests/test_cache.py checks the two agree wherever the quick reader answers.
_KEY = pattern(r"([A-Za-z_][A-Za-z0-9_-]*):(?: +(.*))?")
_DEP = pattern(r"( +)([a-z][a-z0-9._-]*):(?: +(.*))?")
_INT = pattern(r"[1-9][0-9]{0,9}")
# a duration: `4h`, `1d12h` (text to YAML: no dot, colon or sign); not `0x1f`, YAML 1.1's hex int 31
_DURATION = pattern(r"(?!0x)(?:[0-9]+[a-z]+)+")  # (compiled on first use)
_PLAIN = pattern(r"[A-Za-z][A-Za-z0-9 ._/()-]*")
# quoted: no control, C1 (NEL breaks a YAML line), line or paragraph separator, BOM, non-character (compiled on use)
_DQ = pattern('"[^"\\\\\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]*"')
_SQ = pattern("'[^'\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]*'")
_WORDS = frozenset(  # YAML 1.1's booleans and nulls, as PyYAML resolves them
    ("yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE")
    + ("on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL")
)
_NOT_TEXT = object()


def _text(value: str) -> object:
    """What YAML reads `value` (a stripped scalar) as when it is surely a string (None: empty), else _NOT_TEXT."""
    if not value:
        return None
    if _PLAIN.fullmatch(value):
        return _NOT_TEXT if value in _WORDS or value.endswith(" ") else value
    return value[1:-1] if _DQ.fullmatch(value) or _SQ.fullmatch(value) else _NOT_TEXT


def quick_meta(lines: list[str]) -> dict[str, Any] | None:
    """The frontmatter between its fences (`lines`) as YAML reads it, for the common forms only
    (None otherwise): what `parse_task` uses before it imports YAML at all."""
    meta: dict[str, Any] = {}
    deps: dict[str, Any] | None = None  # the dependencies mapping being read
    indent = ""
    for line in lines:
        if not line.strip(" "):
            continue
        if "\t" in line or "\r" in line or "#" in line or line.endswith(" "):
            return None
        if line.startswith(" "):
            if deps is None or (found := _dependency(line, deps, indent)) is None:
                return None
            indent = found
            meta["dependencies"] = deps
            continue
        m = _KEY.fullmatch(line)
        if m is None:
            return None
        key, value = m.group(1), m.group(2) or ""
        if key in meta or key in _WORDS:
            return None
        deps = {} if key == "dependencies" and not value else None  # (null unless entries follow)
        if _INT.fullmatch(value):
            meta[key] = int(value)
        elif (text := value if key == "timeout" and _DURATION.fullmatch(value) else _text(value)) is not _NOT_TEXT:
            meta[key] = text
        else:
            return None
    return meta


def _dependency(line: str, deps: dict[str, Any], indent: str) -> str | None:
    """Read one `  slug: reason` line under `dependencies:` into `deps`: its indent (every entry
    has the first one's), or None when it is not in the common form (or names a slug twice)."""
    m = _DEP.fullmatch(line)
    if m is None or (indent and m.group(1) != indent):
        return None
    if (dep := m.group(2)) in _WORDS or dep in deps or not SLUG_RE.fullmatch(dep) or ".." in dep:
        return None
    if (reason := _text(m.group(3) or "")) is _NOT_TEXT:
        return None
    deps[dep] = reason
    return m.group(1)


# --------------------------------------------------------------------------- frontmatter

_HANDLER: Any = None
_LOADER: Any = None


def load_yaml(text: str) -> Any:
    """`text` read by the fast safe loader, its whole numbers bounded (`_bounded_int`). yaml is
    imported on first use, not at import (~15-25 ms; most calls read no frontmatter), and
    python-frontmatter is not (a field's write reads its lines back with this: `field_lines`)."""
    global _LOADER
    import yaml

    if _LOADER is None:
        _LOADER = type("Loader", (getattr(yaml, "CSafeLoader", yaml.SafeLoader),), {})
        _LOADER.add_constructor("tag:yaml.org,2002:int", _bounded_int)
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 (CSafeLoader or SafeLoader: no objects)


def yaml_handler() -> Any:
    """The frontmatter handler, built (and python-frontmatter imported) on first use."""
    global _HANDLER
    if _HANDLER is None:
        from frontmatter.default_handlers import YAMLHandler

        class _Handler(YAMLHandler):
            """Split where `file_layout` did (given only the frontmatter block), each line ended
            as python-frontmatter's own split ends it; load with `load_yaml`."""

            def split(self, text: str) -> tuple[str, str]:
                return "".join(line + "\n" for line in text.split("\n")[1:-1]), ""

            def load(self, fm: str, **kwargs: object) -> dict[str, Any]:
                if (data := load_yaml(fm)) is None:
                    return {}
                if not isinstance(data, dict):
                    raise InvalidInput(f"invalid frontmatter: expected key: value lines, got a {type(data).__name__}")
                return data

        _HANDLER = _Handler()
    return _HANDLER


def _bounded_int(loader: Any, node: Any) -> object:
    """YAML's whole number, bounded before it is converted (SPEC §3: numbers are bounded): one
    longer than any number the tool reads (`limits.NUMBER_MAX`) stays the text it is, which the
    field's own check then refuses, named (a 10,000-digit priority is never given to `int()`)."""
    from yaml.constructor import SafeConstructor

    text = loader.construct_scalar(node)
    if isinstance(text, str) and len(text) > len(str(limits.NUMBER_MAX)) + 2:  # (a sign, a 0x)
        return text
    return SafeConstructor.construct_yaml_int(loader, node)


def _yaml_problem(exc: Exception) -> str:
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None)
    if not problem:
        return " ".join(str(exc).split()) or type(exc).__name__
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:  # the frontmatter's first line is line 2 of the file
        return f"{problem} (line {mark.line + 2}, column {mark.column + 1})"
    return str(problem)


def _expands_too_much(value: object, budget: int) -> bool:
    """Does `value` hold more than `budget` nodes and characters, counted as printed? YAML
    aliases can make a few bytes expand to gigabytes (or to a cycle, which never ends)."""
    stack = [value]
    while stack:
        item = stack.pop()
        budget -= 1 + (len(item) if isinstance(item, str) else 0)
        if budget < 0:
            return True
        if isinstance(item, dict):
            stack.extend((*item.keys(), *item.values()))
        elif isinstance(item, list | tuple | set):
            stack.extend(item)
    return False


def _load_meta(block: str, path: str) -> dict[str, Any]:
    import frontmatter

    try:
        meta: dict[str, Any]
        meta, _ = frontmatter.parse(block, handler=yaml_handler())
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from None
    except Exception as exc:  # yaml errors, bad dates (ValueError), absurd nesting (RecursionError)
        raise InvalidInput(f"{path}: invalid frontmatter: {_yaml_problem(exc)}") from None
    if _expands_too_much(meta, limits.YAML_EXPANSION * len(block) + 1024):
        raise InvalidInput(f"{path}: invalid frontmatter: it expands far beyond its size (YAML aliases)")
    return meta


# --------------------------------------------------------------------------- frontmatter writing
# Each field is emitted by `yaml.safe_dump` (block style, one line per scalar, in the order given)
# and put in place by `logline.replace_field`: the rest of the file keeps its bytes.

FieldValue = int | str | dict[str, str]
_SURROGATE = pattern("[\ud800-\udfff]")  # compiled on first use: only a write of a field asks
_DUMP: dict[str, Any] = {"sort_keys": False, "allow_unicode": True, "default_flow_style": False, "width": 1 << 30}


def field_lines(key: str, value: FieldValue) -> list[str]:
    """The frontmatter lines of one top-level field as `yaml.safe_dump` writes it (`priority: 2`,
    `timeout.doing: none`, `dependencies:` then `  slug: 'a: reason'`), read back by the reader
    (`load_yaml`) as exactly `value` first. Where PyYAML's plain or single-quoted form would
    not read back whole (a NEL folds into a space), the field is double-quoted, with escapes."""
    import yaml

    if isinstance(value, dict):  # plain str for the dumper (a `Slug` is a subclass it refuses)
        value = {str(name): str(reason) for name, reason in value.items()}
    texts = [str(value)] if not isinstance(value, dict) else [*value, *value.values()]
    if any(_SURROGATE.search(text) for text in texts):
        raise InvalidInput("not valid text (a lone surrogate cannot be written as UTF-8)")
    value = value if isinstance(value, dict) else int(value) if isinstance(value, int) else str(value)
    for style in (None, '"'):
        dumped: str = yaml.safe_dump({key: value}, default_style=style, **_DUMP)
        if load_yaml(dumped) == {key: value}:
            return dumped.removesuffix("\n").split("\n")
    raise InvalidInput(f"{key}: {show(value)} cannot be written as YAML that reads back the same")


def header(fields: list[tuple[str, FieldValue]]) -> str:
    """A frontmatter block (`---`, the fields, `---`) for a new task file; "" without fields."""
    lines = "".join(line + "\n" for key, value in fields for line in field_lines(key, value))
    return f"---\n{lines}---\n" if fields else ""


def set_field(data: bytes, key: str, value: FieldValue, path: str = "task file") -> bytes:
    """`data` with one top-level frontmatter field set to `value` (`field_lines`, in place:
    `logline.replace_field`); no other byte changes."""
    return replace_field(data, key, field_lines(key, value), path)


# --------------------------------------------------------------------------- tasks


class Defaults(NamedTuple):
    priority: int = 999
    timeout: timedelta = timedelta(days=7)
    timeout_text: str = "7d"
    pile_timeouts: tuple[tuple[str, str], ...] = ()  # the project's `timeout.<pile>` lines, validated


class Task(NamedTuple):
    slug: str
    path: str
    data: bytes
    meta: dict[str, Any]
    priority: int
    timeout: timedelta
    timeout_text: str
    timeout_is_default: bool
    dependencies: dict[str, str]
    log: list[LogEntry]
    has_log_divider: bool
    title: str | None
    pile_timeouts: dict[str, str]  # frontmatter `timeout.<pile>`, validated
    defaults: Defaults
    unreadable: list[str]  # log lines that are no entry (`file_layout`), raw, in order

    @property
    def generation(self) -> int:
        return generation(self.log)

    def clock_entry(self) -> LogEntry | None:
        """The line that started the timeout clock: the latest `advanced` or `rescued`."""
        for entry in reversed(self.log):
            if entry.kind in ("advanced", "rescued"):
                return entry
        return None

    def budget_in(self, pile: str) -> Budget:
        """The budget rule (SPEC §2): the task's `timeout.<pile>`, the project's `timeout.<pile>`,
        the task's `timeout`, the project's `timeout`, 7d."""
        if pile in self.pile_timeouts:
            text = self.pile_timeouts[pile]
            return Budget(parse_budget(text), text, False)
        project = dict(self.defaults.pile_timeouts)
        if pile in project:
            return Budget(parse_budget(project[pile]), project[pile], True)
        return Budget(self.timeout, self.timeout_text, self.timeout_is_default)

    def claim_of_record(self) -> LogEntry | None:
        return claim_of_record(self.log)

    def clock_start(self) -> datetime | None:
        entry = self.clock_entry()
        return None if entry is None else entry.ts

    def last_event(self) -> LogEntry | None:
        return self.log[-1] if self.log else None


def _dependencies(value: object, path: str) -> dict[str, str]:
    def bad(why: str) -> InvalidInput:
        return InvalidInput(f"{path}: invalid dependencies: {why}")

    def slug(key: object) -> str:
        if not isinstance(key, str):
            raise bad(f"{show(key)} is not a slug (quote it)")
        try:
            return validate_slug(key)
        except InvalidInput as exc:
            raise bad(exc.message) from None

    if value is None:
        return {}
    if isinstance(value, list):
        return {slug(item): "" for item in value}
    if isinstance(value, dict):
        deps = {}
        for key, reason in value.items():
            if reason is not None and not isinstance(reason, str):
                raise bad(f"the reason for '{show(key)}' must be text, got {show(reason)}")
            deps[slug(key)] = reason or ""
        return deps
    raise bad(f"{show(value)} (expected a map slug: reason, or a list of slugs)")


def parse_task(slug: str, path: str, data: bytes, defaults: Defaults = Defaults()) -> Task:
    path = str(path)
    try:
        if not isinstance(slug, Slug):  # a Slug was validated at the verb's door: trusted
            validate_slug(slug)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from None
    layout = _layout(data, path)
    lines, fm_close = layout.lines, layout.fm_close
    meta = quick_meta(lines[1:fm_close]) if fm_close > 0 else {}
    if meta is None:  # not in the common form: YAML decides
        meta = _load_meta("\n".join(lines[: fm_close + 1]), path)
    priority = _priority(meta.get("priority"), defaults, path)  # (each field checked in this order)
    raw_timeout = meta.get("timeout")
    timeout, timeout_text = _timeout(raw_timeout, defaults, path)
    pile_timeouts = _pile_timeouts(meta, path)
    end = layout.divider if layout.divider >= 0 else len(lines)
    return Task(
        slug=slug,
        path=path,
        data=data,
        meta=meta,
        priority=priority,
        timeout=timeout,
        timeout_text=timeout_text,
        timeout_is_default=raw_timeout is None,
        dependencies=_dependencies(meta.get("dependencies"), path),
        log=layout.log,
        has_log_divider=layout.divider >= 0,
        title=_title(lines[fm_close + 1 : end]),
        pile_timeouts=pile_timeouts,
        defaults=defaults,
        unreadable=layout.unreadable,
    )


def _layout(data: bytes, path: str) -> FileLayout:
    """The file's layout (`logline.file_layout`), its error named by `path`."""
    text = decode(data, path)
    try:
        return file_layout(text)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from None


def _priority(value: object, defaults: Defaults, path: str) -> int:
    if value is None:
        return defaults.priority
    if type(value) is not int or value < 1:
        raise InvalidInput(f"{path}: invalid priority: {_quoted(value)} (expected a whole number >= 1)")
    if value > limits.PRIORITY_MAX:
        raise InvalidInput(f"{path}: invalid priority: {value} (expected a whole number <= {limits.PRIORITY_MAX})")
    return value


def _timeout(value: object, defaults: Defaults, path: str) -> tuple[timedelta, str]:
    """The task's `timeout` and its text as written; the project's default without one."""
    if value is None:
        return defaults.timeout, defaults.timeout_text
    try:
        if not isinstance(value, str):
            raise InvalidInput("not text")
        return parse_duration(value), value.strip()
    except InvalidInput:
        raise InvalidInput(f"{path}: invalid timeout: {_quoted(value)} ({DURATION_HINT})") from None


def _pile_timeouts(meta: dict[str, Any], path: str) -> dict[str, str]:
    """The frontmatter's `timeout.<pile>` fields: pile → the budget as written (stripped)."""
    pile_timeouts: dict[str, str] = {}
    for key, value in meta.items():
        if isinstance(key, str) and key.startswith("timeout."):
            try:
                if not isinstance(value, str):
                    raise InvalidInput("not text")
                parse_budget(value)
            except InvalidInput:
                raise InvalidInput(f"{path}: invalid {key}: {_quoted(value)} ({DURATION_HINT}, or none)") from None
            pile_timeouts[key.removeprefix("timeout.")] = value.strip()
    return pile_timeouts


def _title(body: list[str]) -> str | None:
    """The first `# ` heading with text in the description's lines, stripped."""
    return next((line[2:].strip() for line in body if line.startswith("# ") and line[2:].strip()), None)


def description(data: bytes, path: str = "task file") -> str:
    """The markdown between the frontmatter and the log (title line included), without the
    blank lines around it and with `\\n` line endings: what an agent reads to start work.

    >>> description(b"---\\na: 1\\n---\\n\\n# Fix it\\n\\nWhy.\\n\\n---\\n\\n- 2026-05-16T14:22:00Z progress | x\\n")
    '# Fix it\\n\\nWhy.'
    """
    layout = _layout(data, path)
    end = layout.divider if layout.divider >= 0 else len(layout.lines)
    body = [line.rstrip("\r") for line in layout.lines[layout.fm_close + 1 : end]]
    return "\n".join(body).strip("\n")


def _quoted(value: object) -> str:
    """'high' for text, 2.5 / True / [1, 2] for anything else."""
    return f"'{show(value)}'" if isinstance(value, str) else show(value)
