"""The one place that decides what the tool may put on a git or `gh` command line.

Committed files and remote refs are untrusted input (SPEC §3): a `remote:` line, a branch named in
a log line, a slug listed by `git ls-remote`. Two rules keep every value out of option position,
whoever wrote it:

1. Each call site puts the values it passes after `--end-of-options` (revisions, remotes,
   refspecs) or `--` (paths), wherever git accepts them.
2. `checked` is run on every argument list just before the process starts (`git.run`,
   `git.call`, `forge`): an argument that begins with `-` before the end of options must be an
   option this module lists, by name. So a value that starts with `-` and reached option position
   by a mistake at a call site is refused (InvalidInput, exit 2), never run. The test suite runs
   every git command through it, so a new option is added here on purpose, in review.

No shell is ever involved: plumbum passes the list to `execve` as it is.

Values get their own validators here too: `remote_name` (the syntax; `git.configured_remote`
adds "configured in this clone") and `branch_name` (git's own rules for a ref name, as
`git check-ref-format` applies them to `refs/heads/<name>`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .errors import InvalidInput, bytes_shown
from .typed import pattern

END_OF_OPTIONS = "--end-of-options"
END_OF_PATHS = "--"

# Every option the tool passes to git or gh, by name (the part before `=`). Nothing that can run
# a program (`--upload-pack`, `--receive-pack`, `--exec`, `-o`, `--config`, `core.*` through `-c`)
# is here, and `-c` values are literals of the code (remote/objects.py, IDENTITY), checked below.
OPTIONS = frozenset(
    {
        "-A",
        "-c",
        "-d",
        "-e",
        "-l",
        "-m",
        "-p",
        "-q",
        "-r",
        "-t",
        "-u",
        "-w",
        "-z",
        "--atomic",
        "--auto",
        "--batch",
        "--batch-check",
        "--cached",
        "--diff-filter",
        "--eol",
        "--force",
        "--force-with-lease",
        "--format",
        "--get-regexp",
        "--git-common-dir",
        "--git-dir",
        "--git-path",
        "--ignore-unmatch",
        "--is-bare-repository",
        "--jq",
        "--json",
        "--long",
        "--max-count",
        "--name-only",
        "--no-auto-maintenance",
        "--no-edit",
        "--no-optional-locks",
        "--no-recurse-submodules",
        "--no-renames",
        "--no-tags",
        "--no-verify",
        "--no-write-fetch-head",
        "--only",
        "--path-format",
        "--porcelain",
        "--quiet",
        "--remove",
        "--revs-only",
        "--short",
        "--show-toplevel",
        "--stdin",
        "--symbolic-full-name",
        "--unset",
        "--untracked-files",
        "--verify",
    }
)
TAKES_VALUE = frozenset({"-m", "-c", "-p"})  # the next argument is the option's value, not an option
# what `-c` may set (compiled on first use)
CONFIG_VALUES = pattern(r"user\.(name|email)=[A-Za-z0-9@._ -]+|core\.safecrlf=false")


def checked(program: str, args: Sequence[str]) -> tuple[str, ...]:
    """`args` unchanged when no value sits in option position; else InvalidInput naming it."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in (END_OF_OPTIONS, END_OF_PATHS):
            break
        if arg.startswith("-"):
            name = arg.split("=", 1)[0]
            if name not in OPTIONS:
                raise InvalidInput(f"refusing to pass {shown(arg)} to {program}: it would be read as an option")
            if arg in TAKES_VALUE:
                i += 1
                if arg == "-c" and (i >= len(args) or not CONFIG_VALUES.fullmatch(args[i])):
                    raise InvalidInput(f"refusing to pass -c {shown(args[i] if i < len(args) else '')} to {program}")
        i += 1
    return tuple(args)


# a remote's name as AGENTS.md may give it: a plain name (`origin`, `team/upstream`), never a URL,
# a path, an option or anything with spaces; `git.configured_remote` then asks that it is configured
REMOTE_NAME = pattern(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")  # (compiled on first use)


def remote_name_problem(name: str) -> str | None:
    """Why `name` cannot be a remote's name (None when it can)."""
    if name.startswith("-"):
        return "it starts with '-' (it would be read as an option)"
    if "://" in name or ":" in name or "@" in name:
        return "it is a URL; name a remote configured in this clone (`git remote -v` lists them)"
    if not REMOTE_NAME.fullmatch(name) or ".." in name or name.endswith((".lock", ".")) or len(name) > 100:
        return "it is not a plain remote name (letters, digits, '.', '_', '-', '/')"
    return None


# git's rules for a ref name (`git help check-ref-format`), applied to `refs/heads/<name>`
_REF_BAD_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def branch_name_problem(name: str) -> str | None:
    """Why `name` is not a valid branch name by git's rules (None when it is)."""
    if not name or len(name) > 200:
        return "it is empty or too long"
    if name.startswith("-"):
        return "it starts with '-'"
    if name == "HEAD" or name == "@" or "@{" in name:
        return "it is a revision expression, not a branch name"
    if _REF_BAD_CHARS.search(name):
        return "it contains a space, a control character or one of ~ ^ : ? * [ \\"
    if ".." in name or "//" in name or name.endswith(("/", ".")) or name.startswith("/"):
        return "it contains '..' or '//', or starts or ends with '/' or ends with '.'"
    for part in name.split("/"):
        if part.startswith(".") or part.endswith(".lock"):
            return "a part of it starts with '.' or ends with '.lock'"
    return None


def shown(value: str, limit: int = 60) -> str:
    """A value read from input, quoted for an error message: repr, at most `limit` characters."""
    text = bytes_shown(repr(value))
    return text if len(text) <= limit else text[: limit - 4] + "...'"
