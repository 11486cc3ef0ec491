"""A verb's `--json` schema made from its result's type: one generator, from a dataclass (the API's
`results.Reply` classes) or a TypedDict to a JSON Schema (draft 2020-12), in the shipped files'
notation (`schemas/<verb>.json`: two-space indent, `required` sorted, closed objects).

A field's Python type gives its JSON type; `Annotated[T, {...}]` adds keywords (a pattern, a
minimum, a description, an enum); a class's own docstring is its object's description. The MCP
server lists a verb without a shipped schema with the one made here from its row's result class
(`mcp_server.output_schema`); `python -m maildir_backlog.schemagen VERB` prints it, to ship it.
Imported only by the MCP server and the tests: never on a command's start-up.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
import types
import typing
from typing import Any

ISO = {
    "type": "string",
    "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$",
    "description": "ISO 8601 UTC, e.g. 2026-05-16T14:22:00Z",
}
_SIMPLE = {str: "string", int: "integer", bool: "boolean", float: "number", type(None): "null"}
SKIPPED = ("data", "warnings", "code")  # a Reply's own fields: the object itself, stderr, the exit code


def schema_of(result: type, verb: str) -> dict[str, Any]:
    """The whole schema of `verb`'s `--json` object, whose shape is the class `result`."""
    head = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://maildir-backlog.invalid/schemas/{verb}.json",
        "title": f"backlog {verb}",
    }
    return {**head, **object_of(result)}


def render(schema: dict[str, Any]) -> str:
    """The schema as a shipped file holds it."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def object_of(cls: type) -> dict[str, Any]:
    """A dataclass's or TypedDict's object: its fields, those without a default required."""
    hints = typing.get_type_hints(cls, include_extras=True)
    if dataclasses.is_dataclass(cls):
        fields = [f for f in dataclasses.fields(cls) if f.name not in SKIPPED]
        names = [f.name for f in fields]
        required = [
            f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
    else:  # a TypedDict
        names = list(hints)
        required = sorted(getattr(cls, "__required_keys__", names))
    out: dict[str, Any] = {"type": "object", "properties": {name: type_of(hints[name]) for name in names}}
    if required:
        out["required"] = sorted(required)
    out["additionalProperties"] = False
    doc = cls.__dict__.get("__doc__") or ""
    if doc and not doc.startswith(f"{cls.__name__}("):  # not the one dataclass writes
        out["description"] = " ".join(doc.split())
    return out


def type_of(hint: Any) -> dict[str, Any]:
    """A field's schema from its type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return {**type_of(args[0]), **args[1]}
    if hint is Any:
        return {}
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    if hint is datetime.datetime:
        return dict(ISO)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        kinds = [type_of(arg) for arg in args]
        if all(set(kind) == {"type"} and isinstance(kind["type"], str) for kind in kinds):
            return {"type": [kind["type"] for kind in kinds]}
        return {"anyOf": kinds}
    if origin in (list, tuple):
        return {"type": "array", "items": type_of(args[0])} if args else {"type": "array"}
    if origin is dict:
        values = type_of(args[1]) if args else {}
        return {"type": "object", "additionalProperties": values} if values else {"type": "object"}
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or hasattr(hint, "__required_keys__")):
        return object_of(hint)
    raise TypeError(f"no JSON Schema for the type {hint!r}")


def main(argv: list[str]) -> int:
    """`python -m maildir_backlog.schemagen VERB`: the schema made from VERB's result class."""
    from .verbs import BY_NAME

    if len(argv) != 1 or argv[0] not in BY_NAME:
        print("usage: python -m maildir_backlog.schemagen VERB", file=sys.stderr)
        return 2
    shape = BY_NAME[argv[0]].shape()
    if not isinstance(shape, type):
        print(f"{argv[0]}: its result is a function choosing between shapes; write its schema", file=sys.stderr)
        return 1
    print(render(schema_of(shape, argv[0])), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
