"""Every verb's `--json` schema made from its type: one generator, from a TypedDict (the verbs'
shapes, `shapes/`) or a dataclass (a `results.Reply` class) to a JSON Schema (draft 2020-12), in
one notation (two-space indent, `required` sorted, closed objects unless `shape` says otherwise).

A field's Python type gives its JSON type; `Annotated[T, Json(...)]` adds keywords (a pattern, a
minimum, a description, a const); `NotRequired` leaves a key out of `required`; `shapes.shape`
gives an object its description and more. A verb's schema comes from its row (`schema_for`: its
`reply`, else its result class), so a new verb's schema is its row's and nothing else: no schema
file is committed or shipped. Readers of the contract (docs/json.md) ask here: `schema(name)` (a
verb's, or the error object's: "error"), `python -m maildir_backlog.schemagen NAME` prints it,
`... --write DIR` writes every one as `DIR/<name>.json`. The MCP server lists each tool's output
schema from here. Imported by the MCP server and the tests: never on a command's start-up.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .shapes import OPTIONS, Options, Schema
from .verbspec import BrokenRow, Verb

ISO_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"
ISO = {"type": "string", "pattern": ISO_PATTERN, "description": "ISO 8601 UTC, e.g. 2026-05-16T14:22:00Z"}
_SIMPLE = {str: "string", int: "integer", bool: "boolean", float: "number", type(None): "null"}
SKIPPED = ("data", "warnings", "code")  # a Reply's own fields: the object itself, stderr, the exit code
HEAD = "https://json-schema.org/draft/2020-12/schema"


def schema_of(reply: Any, verb: str) -> dict[str, Any]:
    """The whole schema of `verb`'s `--json` object: `reply` a `Schema`, or a class (a plain
    `backlog <verb>` title)."""
    title, typed = (reply.title, reply.type) if isinstance(reply, Schema) else (f"backlog {verb}", reply)
    head = {"$schema": HEAD, "$id": f"https://maildir-backlog.invalid/schemas/{verb}.json", "title": title}
    if typing.get_origin(typed) in (typing.Union, types.UnionType):
        return {**head, "type": "object", "oneOf": [object_of(arg) for arg in typing.get_args(typed)]}
    return {**head, **object_of(typed)}


def render(schema: Mapping[str, Any]) -> str:
    """The schema as text (what `--write` writes and the command prints)."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def object_of(cls: type) -> dict[str, Any]:
    """A dataclass's or TypedDict's object: its fields (a TypedDict's `NotRequired` ones, a
    dataclass's with a default, optional), then `shape`'s options."""
    hints = typing.get_type_hints(cls, include_extras=True)
    if dataclasses.is_dataclass(cls):
        fields = [f for f in dataclasses.fields(cls) if f.name not in SKIPPED]
        names = [f.name for f in fields]
        missing = dataclasses.MISSING
        required = [f.name for f in fields if f.default is missing and f.default_factory is missing]
        doc = cls.__dict__.get("__doc__") or ""
        options = Options(" ".join(doc.split()) if not doc.startswith(f"{cls.__name__}(") else "")
    else:  # a TypedDict
        names, required = list(hints), list(getattr(cls, "__required_keys__", hints))
        options = OPTIONS.get(cls, Options())
    out: dict[str, Any] = {"type": "object", "properties": {name: type_of(hints[name]) for name in names}}
    out["required"] = sorted(required)
    if options.closed:
        out["additionalProperties"] = False
    if options.description:
        out["description"] = options.description
    return {**out, **options.extra}


def type_of(hint: Any) -> dict[str, Any]:
    """A field's schema from its type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return {**type_of(args[0]), **args[1].keywords}
    if origin in (typing.Required, typing.NotRequired):
        return type_of(args[0])
    if hint is Any:
        return {}
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    if hint is datetime.datetime:
        return dict(ISO)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return _union_of(args)
    if origin in (list, tuple) or hint is dict or origin is dict:
        return _container_of(hint, origin, args)
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or hasattr(hint, "__required_keys__")):
        return object_of(hint)
    raise TypeError(f"no JSON Schema for the type {hint!r}")


def _union_of(args: tuple[Any, ...]) -> dict[str, Any]:
    """`A | B`: a list of simple types when every member is one, else `anyOf`."""
    kinds = [type_of(arg) for arg in args]
    if all(set(kind) == {"type"} and isinstance(kind["type"], str) for kind in kinds):
        return {"type": [kind["type"] for kind in kinds]}
    return {"anyOf": kinds}


def _container_of(hint: Any, origin: Any, args: tuple[Any, ...]) -> dict[str, Any]:
    """A list or tuple (an array of its first argument), or a dict (an object of its values)."""
    if origin in (list, tuple):
        items = type_of(args[0]) if args else {}
        return {"type": "array", "items": items} if items else {"type": "array"}
    values = type_of(args[1]) if args else {}
    return {"type": "object", "additionalProperties": values} if values else {"type": "object"}


def schema_for(verb: Verb) -> dict[str, Any]:
    """The verb's schema, made from its row (once per process and row: do not change it): its
    `reply` (a `shapes.Schema`), else its result class; `BrokenRow` naming the row when neither
    leads to a type this generator knows (made again at the next ask)."""
    return _once(verb.name, verb, lambda: _made_for(verb))


def _made_for(verb: Verb) -> dict[str, Any]:
    if verb.reply is not None:
        typed = verb.follow(verb.reply, "reply")
    else:
        typed = verb.shape()
        if not isinstance(typed, type):
            raise BrokenRow(
                f"verb table: the row of `{verb.name}` is broken (no reply type, and its result is a function,"
                " not a class to make a schema from)"
            )
    try:
        return schema_of(typed, verb.name)
    except (TypeError, NameError) as exc:
        raise BrokenRow(f"verb table: the row of `{verb.name}` is broken (its reply's schema: {exc})") from None


def names() -> list[str]:
    """Every name with a schema: each verb of the table with a `--json` object, then "error" (the
    error object of every verb)."""
    from .verbs import VERBS

    return [*(verb.name for verb in VERBS if verb.schema), "error"]


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of `name`'s `--json` object (a verb of the table, `verbs/`), or of the error
    object (`"error"`), made from its type (once per process and row: do not change it); KeyError
    for a name with none."""
    from .verbs import BY_NAME

    if name == "error":
        from .shapes.care import ERROR

        return _once(name, ERROR, lambda: schema_of(ERROR, "error"))
    if name in BY_NAME and BY_NAME[name].schema:
        return schema_for(BY_NAME[name])
    raise KeyError(f"no schema named {name!r} (names: {', '.join(names())})")


def _once(name: str, row: Any, make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`make()` for `name`, kept while `name` is this `row` (a row replaced at run time is made anew)."""
    made = _MADE.get(name)
    if made is None or made[0] is not row:
        made = _MADE[name] = (row, make())
    return made[1]


_MADE: dict[str, tuple[Any, dict[str, Any]]] = {}  # by name: the row it was made from, the schema


def main(argv: list[str]) -> int:
    """`python -m maildir_backlog.schemagen NAME`: print NAME's schema (a verb, or `error`);
    `--write DIR`: write every one as `DIR/<name>.json`."""
    if len(argv) == 2 and argv[0] == "--write":
        folder = Path(argv[1])
        folder.mkdir(parents=True, exist_ok=True)
        for name in names():
            (folder / f"{name}.json").write_text(render(schema(name)), encoding="utf-8")
        return 0
    if len(argv) != 1 or argv[0] not in names():
        print(f"usage: python -m maildir_backlog.schemagen --write DIR | NAME ({' | '.join(names())})", file=sys.stderr)
        return 2
    print(render(schema(argv[0])), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
