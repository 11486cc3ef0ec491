"""What a verb's declaration is made of (the rows are in `verbs/`): its parameters, its MCP tool,
and the one way every face calls its kernel function.

A face (the command, the Python API, the MCP server) reads a `Verb` and builds its door from it:
the command's switches and positionals, the API's method and signature, the tool's input schema.
No face knows a verb by name. Imports nothing at module level but the standard library (not
`inspect`: `signature` imports it), `limits` and `errors`, so the command's start-up stays cheap. A
row names its kernel function by a typed reference that imports nothing until the verb runs
(`lambda: claim.take`, `claim` a `Lazy` module to the interpreter and the real module to mypy:
`modules`), so a call imports only its own verb's command module. The three records are named
tuples: as frozen dataclasses they cost every call ~8 ms to make.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from . import limits
from .errors import BacklogError, InvalidInput
from .typed import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

if TYPE_CHECKING:
    import inspect

    from .context import Context

T = TypeVar("T")
Ref = Callable[[], T]  # a row's typed reference: what it names, imported when called

Face = Literal["cli", "api", "mcp"]
Kind = Literal["str", "int", "bool", "list", "pairs", "files"]
EVERY: frozenset[Face] = frozenset(("cli", "api", "mcp"))
_JSON_TYPES = {"str": "string", "int": "integer", "bool": "boolean"}


class Param(NamedTuple):
    """One parameter: the kernel function's keyword (`key`, default `name`), the API's and the
    tool's argument `name`, the command's positional (NAME) or switch (`--name`, or `switch`).

    `kind`: str, int, bool (a flag), list (a repeatable switch; an array), pairs (`--set K=V`
    repeated; a mapping in the API and the tool, `K=V` items for the kernel), files (the command's
    trailing file names). `enum` closes the values; `enum_of` names closed values the project
    declares, known only once a backlog is opened (`piles`: its pipeline, then failed): the MCP
    server makes them an enum when it starts (the rows stay static). `help` is one sentence (with the valid values)
    for the command's page and the tool's description (`tool_help` when the tool speaks of it
    otherwise, e.g. `body` is text there, a file on the command line: `read` turns the switch's
    text into the value). `slug`: the value names a task, checked once at the door (`Verb.call`)
    and handed to the kernel as a `task.Slug`, which no layer below checks again."""

    name: str
    help: str
    kind: Kind = "str"
    positional: bool = False
    required: bool = False
    enum: tuple[str, ...] = ()
    enum_of: Literal["", "piles"] = ""
    minimum: int | None = None
    maximum: int | None = None
    argname: str = ""
    switch: str = ""
    read: Callable[[str], Any] | None = None
    faces: frozenset[Face] = EVERY
    tool_help: str = ""
    key: str = ""
    slug: bool = False

    @property
    def flag(self) -> str:
        """The command's switch: `--dry-run` for `dry_run`, unless `switch` says otherwise."""
        return self.switch or "--" + self.name.replace("_", "-")

    @property
    def empty(self) -> Any:
        """The value when not given: False for a flag, an empty list or mapping, else None."""
        return {"bool": False, "list": (), "pairs": None, "files": ()}.get(self.kind)

    @property
    def annotation(self) -> str:
        """The API's type for it, as text (what `help()` and `inspect.signature` show)."""
        typed = {"list": "Iterable[str]", "pairs": "Mapping[str, str]", "files": "str"}.get(self.kind, self.kind)
        return typed if self.required or self.kind in ("bool", "list", "files") else f"{typed} | None"

    def json_schema(self, closed: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
        """The tool's input property: typed, described, closed values as an enum (`closed`: the
        project's closed sets by name, for `enum_of`)."""
        described = self.tool_help or self.help
        if self.kind == "list":
            items: dict[str, Any] = {"type": "string", "enum": list(self.enum)} if self.enum else {"type": "string"}
            return {"type": "array", "items": items, "description": described}
        if self.kind == "pairs":
            return {"type": "object", "additionalProperties": {"type": "string"}, "description": described}
        schema: dict[str, Any] = {"type": _JSON_TYPES[self.kind], "description": described}
        if self.enum:
            schema["enum"] = list(self.enum)
        elif self.enum_of and closed and self.enum_of in closed:
            schema["enum"] = list(closed[self.enum_of])
        if self.kind == "bool":
            schema["default"] = False
        for bound in ("minimum", "maximum"):
            if getattr(self, bound) is not None:
                schema[bound] = getattr(self, bound)
        return schema

    def for_kernel(self, value: Any) -> Any:
        """The value as the kernel function takes it (pairs: `K=V` items; a list: a list)."""
        if self.kind == "pairs":
            items = value.items() if isinstance(value, Mapping) else ((item, None) for item in value or ())
            return [key if v is None else f"{key}={v}" for key, v in items]
        if self.kind in ("list", "files"):
            return list(value or ())
        return value


class Tool(NamedTuple):
    """The verb as an MCP tool: its title and description, its hints, and the arguments it always
    passes (`preset`, e.g. prime's `tools`).

    `reaches` says what the verb may talk to beyond this clone, for the open-world hint: `remote`
    (the default) the project's git remote, when `## Backend` declares one (SPEC §8: claims,
    settlements, progress, retries and rescues are pushed there, added tasks travel through it,
    and the views read it); `forge` GitHub too, whatever the project (`advance`'s `pr: auto` asks
    `gh`); `clone` nothing but this clone."""

    title: str
    description: str
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    reaches: Literal["clone", "remote", "forge"] = "remote"
    preset: Mapping[str, Any] = MappingProxyType({})


class Verb(NamedTuple):
    """One verb, declared once.

    `run` refers to the kernel function (`lambda: claim.take`: a `Ref`, imported when the verb
    runs), called with the opened backlog (`opens="context"`) or the directory (`opens="path"`),
    then the parameters by keyword. `before` (same notation) refers to a function
    `before(path, **arguments)` that runs before the backlog is opened and returns more keywords
    (maintain's recovery of a migration); `heal_unless` names the flag that opens it without the
    layout self-heal. `result` refers to (imported on first use: the command never loads the API's
    classes) what turns the kernel's Result into the API's value: a reply class of `results` (the
    verb's one shape) or a function choosing between shapes; a verb without one has no API method.
    `schema`: the verb prints a `--json` object; `reply` refers to its type (a `shapes.Schema`;
    default: the `result` class), from which `schemagen` makes its JSON Schema (`schemagen.schema`:
    no schema file is committed). `reports_layout`: the verb reports layout repairs
    itself (so the command does not print them on stderr). A reference that leads nowhere fails
    this verb alone, naming its row (`BrokenRow`)."""

    name: str
    summary: str
    examples: tuple[str, ...]
    run: Ref[Callable[..., Any]]
    params: tuple[Param, ...] = ()
    result: Ref[Any] | None = None
    tool: Tool | None = None
    opens: Literal["context", "path"] = "context"
    before: Ref[Callable[..., dict[str, Any]]] | None = None
    heal_unless: str = ""
    schema: bool = True
    reports_layout: bool = False
    reply: Ref[Any] | None = None

    @property
    def method(self) -> str:
        """The API's method name (`check_deps` for `check-deps`)."""
        return self.name.replace("-", "_")

    @property
    def api(self) -> bool:
        return self.result is not None

    def kernel(self) -> Callable[..., Any]:
        """The kernel function, imported now (`BrokenRow` naming this row when it leads nowhere)."""
        return self.follow(self.run, "run")

    def shape(self) -> Any:
        """What `result` refers to: a reply class or a function of a Result (`BrokenRow` as above)."""
        if self.result is None:
            raise BrokenRow(f"verb table: the row of `{self.name}` has no result: the verb has no API method")
        return self.follow(self.result, "result")

    def follow(self, ref: Ref[T], column: str) -> T:
        """`ref()`, or `BrokenRow` naming this row and column when its module or name is missing."""
        try:
            return ref()
        except (ImportError, AttributeError) as exc:
            raise BrokenRow(f"verb table: the row of `{self.name}` is broken ({column}: {exc})") from None

    def params_of(self, face: Face) -> tuple[Param, ...]:
        return tuple(p for p in self.params if face in p.faces)

    def signature(self, face: Face) -> inspect.Signature:
        """The API method's signature (self first), or the command's positionals (for `main`)."""
        import inspect  # plumbum's door and the API's: the fast door never needs it

        kinds, cli = inspect.Parameter, face == "cli"
        out = [kinds("self", kinds.POSITIONAL_OR_KEYWORD)]
        for p in self.params_of(face):
            if cli and not p.positional:
                continue
            typed = {} if cli else {"annotation": p.annotation}  # plumbum would call annotations as validators
            if p.kind == "files":
                out.append(kinds(p.name, kinds.VAR_POSITIONAL, **typed))
            elif p.required:
                out.append(kinds(p.name, kinds.POSITIONAL_OR_KEYWORD, **typed))
            else:
                out.append(kinds(p.name, kinds.POSITIONAL_OR_KEYWORD, default=None if cli else p.empty, **typed))
        return inspect.Signature(out)

    def input_schema(self, closed: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
        """The MCP tool's input schema: every argument described, none beyond them; `closed`: the
        project's closed sets (`Param.enum_of`), when the server knows them."""
        params = [p for p in self.params_of("mcp") if self.tool is None or p.name not in self.tool.preset]
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {p.name: p.json_schema(closed) for p in params},
            "additionalProperties": False,
        }
        required = [p.name for p in params if p.required]
        if required:
            schema["required"] = required
        return schema

    def call(self, path: str, arguments: Mapping[str, Any], opener: Callable[[bool], Context]) -> Any:
        """Run the kernel function: `arguments` by parameter name (absent: the parameter's empty
        value); `opener(heal)` opens the backlog the way the face wants it (printing or keeping
        its warnings)."""
        given = {p.name: arguments.get(p.name, p.empty) for p in self.params}
        keywords = {(p.key or p.name): p.for_kernel(given[p.name]) for p in self.params}
        if self.before is not None:
            keywords.update(self.follow(self.before, "before")(path, **given))
        kernel = self.kernel()
        if self.opens == "path":
            return kernel(path, **keywords)
        ctx = opener(not (self.heal_unless and given.get(self.heal_unless)))
        return kernel(ctx, **self.checked(keywords))

    def checked(self, keywords: dict[str, Any]) -> dict[str, Any]:
        """`keywords` with each slug (`Param.slug`) validated, once, here: the kernel gets a
        `task.Slug` (exit 2 otherwise). Checked after the backlog is opened, as the kernel did."""
        for p in self.params:
            key = p.key or p.name
            if p.slug and keywords[key] is not None:
                from .task import validate_slug  # (imported with the kernel anyway; not at start-up)

                keywords[key] = validate_slug(keywords[key])
        return keywords


class BrokenRow(BacklogError):
    """A row of the verb table whose reference leads nowhere (a module or function renamed or
    gone) or whose schema cannot be read: that verb fails, naming its row; no other verb does."""

    kind = "internal"


class Lazy:
    """A module imported at its first attribute's use: what a row's reference (`lambda:
    claim.take`) reads at run time. To mypy the name is the module itself (`modules`)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"Lazy({self._name!r})"


def modules(package: str, *names: str) -> tuple[Any, ...]:
    """`Lazy` modules `package.name` for each name: the run-time half of a table module's
    `if TYPE_CHECKING: from package import name, ...` (tests/test_verbs.py holds the two halves
    to each other)."""
    return tuple(Lazy(f"{package}.{name}") for name in names)


def read_body_file(source: str) -> str:
    """`add --body-file`'s `read`: the text of the file (`-`: stdin), UTF-8, at most a task file's
    size (more could never be taken: limits.TASK_BYTES), else exit 2 in one line."""
    shown = "stdin" if source == "-" else source
    try:
        if source == "-":
            stream = getattr(sys.stdin, "buffer", None)
            raw = stream.read(limits.TASK_BYTES + 1) if stream is not None else sys.stdin.read().encode()
        else:
            with open(source, "rb") as handle:
                raw = handle.read(limits.TASK_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read --body-file {shown}: {exc.strerror or exc}") from None
    if len(raw) > limits.TASK_BYTES:
        raise InvalidInput(f"--body-file {shown}: {limits.too_large(len(raw))}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"--body-file {shown}: not valid utf-8 text (byte {exc.start})") from None
