"""`backlog migrate`: switch backend in either direction, or convert the older flat layout (SPEC §5).

Three migrations, each planned in full before anything is touched, then run as one transaction
ending in ONE commit that holds only backlog paths and `.gitignore` (`gitcommit.commit_paths`, so the
user's staged work stays staged and out of it):

* `--to maildir-shared` (from maildir-git): the tracked files of the in-flight piles (pipeline
  piles strictly between `todo` and `done`) move into `<common dir>/backlog/<pile>/`, bytes
  intact; their `.gitkeep` files and directories leave the tree; `.gitignore` gains a
  `backlog/<pile>` line per in-flight pile; the `## Backend` line of `backlog/AGENTS.md` becomes
  `maildir-shared`. After the commit the per-worktree symlinks are made by the backend's own
  self-heal. Other worktrees get their symlinks from the self-heal of the next verb they run,
  once they have the migration commit (merge it); a real `backlog/<pile>` directory that their
  branch still holds is emptied into the shared pile by that same self-heal.
* `--to maildir-git` (from maildir-shared): every task of the shared in-flight piles comes back
  as a tracked file `backlog/<pile>/<slug>.md` of THIS worktree's branch (the shared piles are
  clone-wide, so other worktrees see those tasks only after merging this branch); the symlinks
  become real directories with a `.gitkeep` (as `setup --backend=maildir-git` makes them);
  the `backlog/<pile>` lines leave `.gitignore` (deleted when nothing else is left in it); the
  Backend line becomes `maildir-git`. A task claimed on another branch usually still has its
  stale `todo/` copy on this branch (the claim's `git rm` lives on the claimer's branch): when
  the in-flight file provably extends that copy (starts with its bytes), the copy is removed in
  the same commit, exactly as the claim did on the claimer's branch; any other same-slug copy in
  a tracked pile is a clash and refuses the migration.
  Decision: the ledger and the locks stay in the shared root. maildir-git never reads the
  ledger, worktrees that have not merged the migration yet still run maildir-shared and rely on
  it for exactly-once, and a later migration back to maildir-shared finds it still right (a
  task retried meanwhile carries a newer `retried` line, which outranks its old entry). The
  emptied shared pile directories are left in place for the same reason.
* `--from-flat`: pending `backlog/*.md` (other than AGENTS.md, CLAUDE.md, ROADMAP.md) move to
  `backlog/todo/`; `backlog/done/<subdir>/…/*.md` (e.g. `done/2025/x.md`) are flattened into
  `backlog/done/` (a `.gitkeep` in such a subdirectory is dropped, anything else refuses);
  pipeline piles that are missing get a `.gitkeep`. Decision: when `backlog/AGENTS.md` is
  missing the migration scaffolds what `setup` would — AGENTS.md declaring `maildir-git` and the
  default pipeline `todo → doing → done`, the CLAUDE.md symlink, a ROADMAP.md skeleton — each
  only when absent; switch backend afterwards with `--to maildir-shared` if wanted.
  Every moved name must be `<valid slug>.md`; a bad one refuses the whole migration, naming it.

Refusals (exit 1, one line, nothing changed): detached HEAD; uncommitted changes under
`backlog/` or in `.gitignore`; no backlog set up (`--to` only); already on the target backend;
nothing to migrate; a name clash (the slug already at the destination or in flight in another
pile, two flat files flattening to one name); a file that is not a task where tasks must be.

Crash and failure safety: new copies are written first (exclusive create, temporary file,
fsync, link), edited files are replaced atomically, old copies are removed last; if anything
fails before the commit lands (e.g. a failing pre-commit hook) every step is undone in reverse
and the index entries of the migration's paths are put back as in HEAD. A crash leaves a task
in two places, never in none, and a journal (`<git dir>/backlog-migration.json`, written before
the first step, removed after the last) says what the migration leaves where: `recover`, run by
`backlog maintain` and at the start of the next `migrate`, undoes a migration killed before its
commit (paths back as in HEAD, the copies it made removed, symlinks put back) or finishes one
killed after it (the shared copies removed); only what the migration itself wrote is touched.
A byte-identical copy already at a destination (left by a run without a journal) is reused.
The moved slugs' locks are held during
the migration and the plan is re-made under them: a change in between is a Conflict (exit 3).
Still, migrate while no worker is running: a backend switch is a clone-wide event. The switch
records the clone's backend in the shared root (`mark.py`, before the commit), and every
worktree that still declares the old backend then moves nothing until it merges this branch
(`Backend.refuse_if_migrated`, SPEC §7.11).

`--dry-run` prints the same plan, one line per step (`move backlog/doing/x.md → <shared>/doing/x.md`),
and changes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...context import Result
from ...errors import InvalidInput
from ...migration import Plan, recover, run
from ...project import BACKENDS

__all__ = ["migrate", "recover"]


def migrate(cwd: Path | str, to: str | None = None, from_flat: bool = False, dry_run: bool = False) -> Result:
    if bool(to) == bool(from_flat):
        raise InvalidInput("migrate needs exactly one of --to BACKEND or --from-flat")
    if to is not None and to not in BACKENDS:
        raise InvalidInput(f"cannot migrate to {to!r}: use maildir-shared or maildir-git")
    done = run(cwd, to, dry_run)
    plan = done.plan
    if dry_run:
        lines = [*plan.lines, f'commit "{plan.message}"', "dry run: nothing changed"]
        return Result(_data(plan, dry_run=True), lines)
    lines = [
        *(f"recovered: {f}" for f in done.recovered),
        *plan.lines,
        f'committed "{plan.message}"',
        *(f"layout: {f}" for f in done.healed),
        *plan.notes,
    ]
    data = _data(plan, dry_run=False)
    data["layout"] = done.healed
    data["recovered"] = done.recovered
    return Result(data, lines)


def _data(plan: Plan, dry_run: bool) -> dict[str, Any]:
    return {
        "migration": plan.kind,
        "backend": plan.project.backend,
        "pipeline": list(plan.project.pipeline.piles),
        "dry_run": dry_run,
        "moves": [{"from": str(m.src), "to": str(m.dst)} for m in plan.moves],
        "created": [str(p) for p, _ in plan.creates] + [str(p) for p, _ in plan.links],
        "edited": [str(e.path) for e in plan.edits if e.new is not None],
        "removed": [str(p) for p, _ in plan.removes] + [str(e.path) for e in plan.edits if e.new is None],
        "commit": plan.message,
        "plan": plan.lines,
        "notes": plan.notes,
    }
