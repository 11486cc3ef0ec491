"""The `backlog` command: parse, call a verb, print, map errors to exit codes. Nothing else.

Two doors lead to a verb, and both end in `clicall.Call`. The fast door (`quick`) takes only a
well-formed call of a hot verb (`FAST`), read from the verb's row of the table without importing
plumbum: plumbum and what it imports are most of a call's start-up. Everything else (help, a
version, an error, an unknown or repeated switch, any other verb) goes to plumbum's application
(`cliapp`), so both doors answer every call the same (`tests/test_fastpath.py` checks it).
"""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False  # (not `typing`'s: this module imports nothing at its top but these three)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, NoReturn

    from .clicall import Call
    from .verbspec import Param, Verb

FAST = ("take", "progress", "advance", "status", "add", "ready")  # the verbs agents call most, between two edits


def main(argv: list[str] | None = None) -> int:
    """The command: run the verb `argv` names (default: this process's arguments), return its exit
    code. Run as the process's command (no `argv`), it starts without the cyclic garbage collector
    and ends the process itself (`_end`).

    Start-up is imports, and imports make objects by the ten thousand (every function, class and
    constant of ~45 modules): the collector ran ~20 times over them in a `progress`, ~4-5 ms of a
    ~60 ms call, to find nothing to free. So `main` turns it off before anything is imported (this
    module imports nothing at its top). A call through the fast door (a hot verb: one short
    process) runs to its end without it: its work makes no reference cycles, so the collector
    only walks what reference counting frees anyway (at 100,000 tasks, `ready --json` and an
    auto-pick with no cache ran ~7 % faster without it, at the same peak memory). Plumbum's door
    turns it back on (`_collecting`): `mcp` is a long-lived server."""
    if argv is not None:
        return run(argv)
    gc.disable()
    from .startup import defer_unused_imports

    defer_unused_imports()  # (`ipaddress`, which `pathlib` would import through `urllib.parse`)
    try:
        code = run(None)
    finally:
        gc.freeze()  # (if the call raised: the interpreter's final collection skips what it made)
    _end(code)


def _end(code: int) -> NoReturn:
    """End the process with `code` once what it printed is flushed, without the interpreter's
    teardown: that frees every object the imports made, one by one, and runs a final collection,
    for memory the process gives back at once (measured: 2-3 % of a `progress`). Safe here because
    the call is over: every git it started was waited for, every file it wrote is closed and
    renamed into place, and nothing in this package registers an exit handler or starts a thread.
    Output that cannot be written out (a reader gone, a full disk) makes the exit code 1, as
    during the call."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        code = code or 1
    os._exit(code)


def run(argv: list[str] | None, fast: bool = True) -> int:
    """The call `main` makes, without what only the process's own call adds (the collector off, the
    end by `os._exit`); `fast=False` sends every call through plumbum's door."""
    from .errors import BacklogError, error_object

    ahead = argv is None  # the process's own call: its repository is looked up while it imports
    argv = list(sys.argv if argv is None else argv)
    argv[0] = "backlog"
    want_json = "--json" in argv[1:]
    _escaping_streams()
    try:
        return _call(argv, fast, ahead)
    except BacklogError as exc:
        return _fail(exc.payload(), want_json)
    except KeyboardInterrupt:
        return _fail(error_object("interrupted", 130, "interrupted"), want_json)
    except BrokenPipeError:
        return 1
    except OSError as exc:  # the file system refused (read-only, full, not a directory): say where
        if os.environ.get("BACKLOG_DEBUG"):
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(error_object(f"{where}{exc.strerror or exc}", 1, "failed"), want_json)
    except Exception as exc:  # a bug: still one line, never a traceback
        if os.environ.get("BACKLOG_DEBUG"):
            raise
        return _fail(error_object(f"internal error: {type(exc).__name__}: {exc}", 1, "internal"), want_json)


def _escaping_streams() -> None:
    """A file name with odd bytes prints escaped, never crashes."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def _call(argv: list[str], fast: bool, ahead: bool = False) -> int:
    """The call through the fast door when it takes it, else through plumbum's. `ahead`: start
    the git that finds the repository before the verb's modules are imported (`git.discover_soon`;
    only in the process's own call: in-process calls share the module's state)."""
    parsed = quick(argv) if fast else None
    if parsed is not None:
        call, values = parsed
        if ahead:
            from . import git

            git.discover_soon(call.cwd)  # (its git runs while the verb's modules are imported)
        return call.run(values)
    _collecting()
    from . import cliapp

    return cliapp.run(argv)


def _collecting() -> None:
    """The cyclic collector back on, if `main` turned it off: every object made so far moves to the
    permanent generation (`gc.freeze`), so it collects only what comes next."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def quick(argv: Sequence[str]) -> tuple[Call, dict[str, Any]] | None:
    """A well-formed call of a verb of `FAST`, parsed from its row (`Verb.params_of("cli")`), as
    plumbum's door would parse it: the call and the values for its kernel function. None for
    anything this door does not take (the caller hands it to plumbum): a switch it does not know
    for the verb or given twice, a value missing or led by `-` or `=`, a whole number not written
    in ASCII digits, `--`, `-CDIR`, too few or too many positionals, any other verb."""
    from .clicall import Call, logical_cwd, option
    from .verbs import BY_NAME

    args = list(argv[1:])
    root = _root_switches(args)
    if root is None:
        return None
    want_json, directory, at = root
    if at == len(args) or args[at] not in FAST:
        return None
    verb = BY_NAME[args[at]]
    params = verb.params_of("cli")
    switches = {p.flag: p for p in params if not p.positional}
    read = _verb_args(verb, switches, args[at + 1 :])
    if read is None:
        return None
    given, tail = read
    values = _positionals([p for p in params if p.positional], tail)
    if values is None:
        return None
    values.update({p.name: option(p, _given(p, given)) for p in switches.values()})
    return Call(verb, directory or logical_cwd(), want_json or "--json" in given), values


def _root_switches(args: list[str]) -> tuple[bool, str | None, int] | None:
    """The root's switches (`--json`, `-C DIR`, each once) leading `args`: (--json, the directory,
    where the verb's name is); None for anything else led by `-`."""
    at, want_json, directory = 0, False, None
    while at < len(args) and args[at].startswith("-"):
        if args[at] == "--json" and not want_json:
            want_json, at = True, at + 1
        elif args[at] == "-C" and directory is None and at + 1 < len(args) and _plain(args[at + 1]):
            directory, at = args[at + 1], at + 2
        else:
            return None
    return want_json, directory, at


def _verb_args(verb: Verb, switches: dict[str, Param], args: list[str]) -> tuple[dict[str, Any], list[str]] | None:
    """The verb's switches given (name → value; `--json` under its flag) and its positionals, in
    order; None for a switch this door does not take."""
    given: dict[str, Any] = {}
    tail: list[str] = []
    rest = iter(args)
    for arg in rest:
        if not arg.startswith("-"):
            tail.append(arg)
            continue
        flag, eq, value = arg.partition("=")
        if flag == "--json" and verb.schema and not eq and "--json" not in given:
            given["--json"] = True
            continue
        param = switches.get(flag)
        if param is None or param.name in given or param.kind not in ("bool", "str", "int"):
            return None
        if param.kind == "bool":
            if eq:
                return None
            given[param.name] = True
            continue
        if not eq:
            value = next(rest, "")
        if not _plain(value) or not _allowed(param, value) or (param.kind == "int" and not _digits(value)):
            return None
        given[param.name] = value
    return given, tail


def _positionals(positionals: list[Param], tail: list[str]) -> dict[str, Any] | None:
    """The positionals' values by name; None when this door does not take them (files, too few,
    too many, a value outside a closed set)."""
    if any(p.kind == "files" for p in positionals) or len(tail) > len(positionals):
        return None
    if len(tail) < sum(1 for p in positionals if p.required):
        return None
    if not all(_allowed(p, value) for p, value in zip(positionals, tail, strict=False)):
        return None
    return {p.name: value for p, value in zip(positionals, tail, strict=False)}


def _allowed(param: Param, value: str) -> bool:
    """A value inside the parameter's closed set, if it has one (plumbum's door names the valid
    values of any other; a set the project declares, `enum_of`, is left to that door)."""
    return not param.enum_of and (not param.enum or value in param.enum)


def _digits(value: str) -> bool:
    """A whole number this door takes: ASCII digits only (plumbum's door reads the rest, `int`'s
    other forms and its errors included: ` 3`, `1_0`, `x`)."""
    return value.isascii() and value.isdigit()


def _plain(value: str) -> bool:
    """A switch's value this door takes: not empty, not led by `-` or `=` (plumbum reads those its own ways)."""
    return bool(value) and not value.startswith(("-", "="))


def _given(param: Param, given: dict[str, Any]) -> Any:
    """The switch's value as plumbum's door holds it: absent, a flag is False and a repeatable
    switch an empty list (this door takes neither a list nor pairs given)."""
    absent = {"bool": False, "list": [], "pairs": []}.get(param.kind)
    return given.get(param.name, absent)


def _fail(error: dict[str, Any], want_json: bool) -> int:
    """Print the error object (--json) and the one line on stderr; return the exit code."""
    from .errors import json_safe, terminal_safe

    if want_json:
        import json  # (only a --json call's error prints it: no call pays the import for this)

        print(json_safe(json.dumps(error, ensure_ascii=False)))  # (as the answers are: no lone surrogate)

    print(terminal_safe(f"backlog: {error['error']}"), file=sys.stderr)
    return int(error["code"])
