"""Errors users see, each with its exit code and kind (SPEC §5 JSON, §7 exit codes).

Exit codes: 1 refused or failed (repeating will not help), 2 usage or invalid input, 3 lost a race
(retry now), 4 unavailable (the remote, a lock or the git index did not answer in time; nothing
changed; retry later). `kind` is one of KINDS (docs/json.md says what each means); an error that a
claim is in the way of carries `holder`, one about a task that left flight carries `settled`, so
every raise site says it once and the CLI, the MCP server and the API print the same object.
"""

import re
from datetime import datetime

from .typed import Any, NamedTuple, pattern

# the closed set of `kind` values of the JSON error object (docs/json.md, `schemagen.schema("error")`)
KINDS = (
    "usage",  # 2: the call itself is malformed (unknown verb or option, a missing argument)
    "invalid",  # 2: a value is invalid (a slug, a duration, a task file, an unknown dependency)
    "not-found",  # 1: the task (or the backlog) named does not exist
    "held",  # 1: a claim is in the way (`holder` says whose)
    "blocked",  # 1: a named claim of a task whose dependencies are not done (`--force` claims it anyway)
    "settled",  # 1: the task left flight (`settled` says how, where and when)
    "refused",  # 1: any other refusal: the state does not allow it (not in flight, stale, ...)
    "failed",  # 1: an outside tool failed or refused (a git hook, the file system, gh)
    "conflict",  # 3: lost a race with another process: retry now
    "unavailable",  # 4: the remote, a lock or the git index did not answer in time: retry later
    "interrupted",  # 130: Ctrl-C
    "internal",  # 1: a bug in this tool
)
RETRYABLE = (3, 4)


def _iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.strftime("%Y-%m-%dT%H:%M:%SZ")


class Holder(NamedTuple):
    """Whose claim is in the way: the claimer and branch of record, and since when."""

    claimer: str | None
    branch: str | None
    since: datetime | None = None

    def data(self) -> dict[str, str | None]:
        return {"claimer": self.claimer, "branch": self.branch, "since": _iso(self.since)}


class Ended(NamedTuple):
    """What became of a task that left flight: done, cancelled, failed or retried; where; when."""

    state: str
    branch: str | None
    at: datetime | None = None

    def data(self) -> dict[str, str | None]:
        return {"state": self.state, "branch": self.branch, "at": _iso(self.at)}


class BacklogError(Exception):
    """A refusal or failure: one line for the user, exit code 1. A subclass says its exit code and
    kind where it is declared: `class Conflict(BacklogError, code=3, kind="conflict")`."""

    code = 1
    kind = "refused"

    def __init_subclass__(cls, code: int | None = None, kind: str | None = None, **more: Any) -> None:
        super().__init_subclass__(**more)
        if code is not None:
            cls.code = code
        if kind is not None:
            cls.kind = kind

    def __init__(
        self, message: str, *, kind: str | None = None, holder: Holder | None = None, ended: Ended | None = None
    ) -> None:
        super().__init__(message)
        self.message = " ".join(str(message).split())  # always one line
        if kind is not None:
            assert kind in KINDS, kind  # noqa: S101 (a literal of the code, never input: a typo fails in tests)
            self.kind = kind
        self._holder, self._ended = holder, ended

    @property
    def holder(self) -> Holder | None:
        return self._holder

    @property
    def ended(self) -> Ended | None:
        return self._ended

    @property
    def retryable(self) -> bool:
        return self.code in RETRYABLE

    def payload(self) -> dict[str, Any]:
        """The JSON error object (`schemagen.schema("error")`)."""
        return error_object(self.message, self.code, self.kind, self.holder, self.ended)


def error_object(
    message: str, code: int, kind: str, holder: Holder | None = None, ended: Ended | None = None
) -> dict[str, Any]:
    data: dict[str, Any] = {"error": " ".join(message.split()), "code": code, "kind": kind}
    data["retryable"] = code in RETRYABLE
    if holder is not None:
        data["holder"] = holder.data()
    if ended is not None:
        data["settled"] = ended.data()
    return data


class InvalidInput(BacklogError, code=2, kind="invalid"):
    """Usage errors and invalid input (bad slug, bad frontmatter, bad pipeline): exit 2."""


class Usage(InvalidInput, kind="usage"):
    """The call itself is malformed (an unknown verb or option, a missing argument): exit 2."""


class NotFound(BacklogError, kind="not-found"):
    """The task named exists nowhere this tool looks: exit 1."""


class Held(BacklogError, kind="held"):
    """A claim is in the way (`holder`): a refusal, exit 1. `lifecycle.locked_change` makes it a
    lost race (Conflict, exit 3, same message and holder) when the claim appeared while the caller
    waited for the task's lock."""


class Blocked(BacklogError, kind="blocked"):
    """A named claim of a task whose dependencies are not all done: a refusal, exit 1."""


class LeftFlight(BacklogError, kind="settled"):
    """The task left flight (`ended`: done, cancelled or failed, on which branch, when): exit 1."""


class Conflict(BacklogError, code=3, kind="conflict"):
    """Lost a race with another process; retrying may succeed: exit 3."""


class Unavailable(BacklogError, code=4, kind="unavailable"):
    """The remote could not be reached or answered too late, or a lock or the git index stayed
    busy past the wait: nothing changed; retry later: exit 4."""


class Busy(Unavailable):
    """A lock another process holds did not come free in time: exit 4 (auto-pick stops instead of
    trying every other candidate against the same wait)."""


# --------------------------------------------------------------------------- printing safely
# What a file or a ref says is printed, never obeyed (SPEC §3): the CLI's lines and JSON, and
# the MCP server's JSON, are escaped here.

_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_SURROGATE = pattern("[\ud800-\udfff]")  # (compiled on first use, ~0.8 ms: only a name that is not UTF-8 holds one)


def _bytes_escaped(text: str, backslash: str) -> str:
    """`text` with each lone surrogate written as `escaped_byte` says, after `backslash`."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # (encoding is ~3 ms over 6 MB)
        return _SURROGATE.sub(lambda found: backslash + escaped_byte(found.group()), text)
    return text


def json_safe(text: str) -> str:
    """JSON text with what the encoder leaves raw and a terminal may obey (DEL and the C1 controls:
    `\\x9b` is CSI) written as `\\u` escapes: the same value to every reader. A byte of a file's
    name that is not UTF-8 (held as a lone surrogate, `surrogateescape`) is written as the text
    `\\xff`, as `terminal_safe` prints it: a lone surrogate is JSON that strict parsers refuse.
    Looked for by substring (~6 ms over 6 MB) and only in text that is not ASCII (`isascii` is a
    flag's read)."""
    if "\x7f" in text or (not text.isascii() and any(chr(code) in text for code in range(0x80, 0xA0))):
        text = re.sub("[\x7f-\x9f]", lambda found: f"\\u{ord(found.group()):04x}", text)
    return _bytes_escaped(text, "\\\\")


def escaped_byte(char: str) -> str:
    """A character as `terminal_safe` writes it, without its backslash: `x1b` for a control, `xff`
    for the byte 0xff of a name that is not UTF-8 (`surrogateescape`'s U+DCFF), `ufffd` for any
    other lone surrogate."""
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"x{code - 0xDC00:02x}"
    return "ufffd" if 0xD800 <= code <= 0xDFFF else f"x{code:02x}"


def terminal_safe(line: str) -> str:
    """One printed line, with every control character but tab escaped (`\\x1b`, `\\x0a`): what a
    task file says (a title, a note, a reason) is printed, never obeyed by the terminal (SPEC §3),
    and a name with a line break in it (a file a pull request added to a pile) stays inside its
    own record, never begins a line of its own that reads like another (`LAYOUT: ...`, `TIMED
    OUT: ...`). A byte of a name that is not UTF-8 prints as `\\xff`, as `bytes_shown` says
    it. Every caller prints one line per call: a verb's result is a list of lines."""
    return _CONTROL.sub(lambda m: "\\" + escaped_byte(m.group()), _bytes_escaped(line, "\\"))


def bytes_shown(shown: str) -> str:
    """A `repr` of a name with its bytes that are not UTF-8 (`surrogateescape`'s `\\udcff`) written
    as `\\xff`, as the printed line writes them (`terminal_safe`): one name, one spelling."""
    if "\\udc" not in shown:
        return shown
    return re.sub(r"(?<!\\)((?:\\\\)*)\\udc([89a-f][0-9a-f])", r"\1\\x\2", shown)
