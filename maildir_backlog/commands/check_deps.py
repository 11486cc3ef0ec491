"""`backlog check-deps FILE…`: the pre-commit hook of SPEC §5.

Every dependency of each given task file must name a task that exists: in some pile (the shared
in-flight piles included), in the index (a task staged in the same commit counts), or — on
maildir-shared — in the ledger of settled tasks (it existed, and was finished on some branch).

Which files are checked: task files `backlog/<pile>/<slug>.md` of a known pile (the pipeline of
`backlog/AGENTS.md`, or the default pipeline when there is no declaration yet, plus `failed`).
Everything else is ignored: files outside `backlog/`, AGENTS.md, CLAUDE.md, ROADMAP.md, files in
other directories, and files that no longer exist (a deletion being committed). The file's
content is read from the work tree, as pre-commit presents it (it stashes unstaged changes).
The layout self-heal does not run: a hook must not change the tree it checks.

Failures are printed on stderr, one `backlog: …` line each (plus an indented hint), and the exit
code is 1; a file whose frontmatter is invalid is one such line too.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..context import Result
from ..errors import BacklogError
from ..precommit import commit_at
from ..project import CATEGORIES
from ..task import SLUG_RE, parse_task


def hint(dep: str, known: set[str]) -> str:
    """How to author a missing dependency, minding that `add` appends `-<category>`."""
    near = [f"{dep}-{c}" for c in CATEGORIES if f"{dep}-{c}" in known]
    if near:
        return f"did you mean {' or '.join(near)}? (`backlog add` appends -<category> to the slug)"
    for category in CATEGORIES:
        base = dep.removesuffix(f"-{category}")
        if base != dep and SLUG_RE.fullmatch(base):
            return f"author it with: backlog add {base} {category}"
    return (
        f"author it with: backlog add {dep} (that creates {dep}-plan, since add appends -<category>:"
        f" name the dependency {dep}-plan)"
    )


def check_deps(cwd: Path | str, files: list[str]) -> Result:
    cwd = Path(os.path.abspath(cwd))
    commit = commit_at(cwd)
    proj = commit.project
    targets = commit.targets(cwd, files)  # (rel, slug)

    errors: list[str] = []
    invalid: list[dict[str, str]] = []
    unresolved: list[dict[str, str]] = []
    known: set[str] | None = None
    for rel, slug in targets:
        try:
            data = commit.read(rel)
            task = parse_task(slug, rel, data, proj.defaults)
        except BacklogError as exc:
            invalid.append({"file": rel, "error": exc.message})
            errors.append(f"backlog: {exc.message}")
            continue
        except OSError as exc:
            invalid.append({"file": rel, "error": exc.strerror or str(exc)})
            errors.append(f"backlog: {rel}: cannot read it: {exc.strerror or exc}")
            continue
        if not task.dependencies:
            continue
        if known is None:
            known = commit.known_slugs()
        for dep in task.dependencies:
            if dep in known:
                continue
            advice = hint(dep, known)
            unresolved.append({"file": rel, "slug": dep, "hint": advice})
            errors.append(f"backlog: unresolved dep in {rel}: {dep}")
            errors.append(f"  {advice}")
    result: dict[str, object] = {
        "checked": [rel for rel, _slug in targets],
        "unresolved": unresolved,
        "invalid": invalid,
        "ok": not errors,
    }
    return Result(result, stderr=errors, code=1 if errors else 0)
