"""The two backends (SPEC §4): maildir-git tracks every pile on each branch; maildir-shared keeps
the in-flight piles in the clone's shared root, symlinked from each worktree, with a ledger of
settled tasks. `open_backend` (in `__init__`) picks one when the project is read.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import git, ledger
from ..change import Change, Crash, Create, Dirs, Remove, Step, Unlink, run
from ..errors import BacklogError
from ..heal import Healer
from ..layout import BOOKKEEPING, Layout, pile_rel
from ..ledger import Settled
from ..project import Project
from .base import BaseBackend


class GitBackend(BaseBackend):
    """maildir-git: every pile is tracked on each branch; every move is a commit. The shared
    code's defaults are this backend's: nothing shared, no ledger; the one layout to heal is a
    pile that is still the shared pile's link (`heal`)."""

    name = "maildir-git"
    shares_flight = False

    def heal(self, dry_run: bool = False) -> list[str]:
        """A pile that is this tool's own link into the shared root (`refuse_symlinks` found it: a
        maildir-shared branch made it, gitignored, and a checkout of this branch, whose pile holds
        no tracked file, left it) becomes this branch's directory again. Through the link a move
        would write into the shared root, where git cannot commit it (a claim was exit 3, "run this
        again", for ever). The link is removed, never what it points at: the clone's shared piles
        and their claims stay as they are; the branch's tracked files of the pile come back as the
        index holds them. While the shared pile holds tasks in flight, nothing is changed and the
        verb is refused, naming them: a maildir-git branch would hide them (its claims are its
        own), and a move through the link cannot be committed."""
        said = []
        for pile in sorted(self.own_links):
            link = self.layout.tracked_pile(pile)
            if held := sorted(self.in_shared_root(pile)):  # (where the link leads)
                raise BacklogError(
                    f"{pile_rel(pile)}: is the shared pile's link a maildir-shared branch left, and the shared"
                    f" pile holds {len(held)} task(s) in flight ({held[0]}"
                    f"{', ...' if len(held) > 1 else ''}) while backlog/AGENTS.md here declares maildir-git:"
                    " settle them from their worktrees, or run `backlog migrate --to maildir-git` there"
                )
            said.append(
                f"{pile_rel(pile)} (the shared pile's link a maildir-shared branch left;"
                " this branch's directory in its place)"
            )
            if dry_run:
                continue
            blobs = {p: git.blob(self.repo, f":{p}") for p in git.tracked(self.repo, pile_rel(pile) + "/")}
            # (one git cannot read back whole, over its size bound, stays missing: never written short)
            kept = [Create(self.repo.toplevel / p, data) for p, data in blobs.items() if data is not None]
            run(Change((Unlink(link), Dirs(link), *kept)), self.repo)
            self.own_links.discard(pile)
        return said


class SharedBackend(BaseBackend):
    """maildir-shared: in-flight piles live in `<common dir>/backlog/`, symlinked from each worktree."""

    name = "maildir-shared"
    shares_flight = True

    def __init__(self, repo: git.Repo, project: Project) -> None:
        # SPEC §4: in-flight piles are clone-wide; a shared pile this branch's pipeline lacks
        # (another branch's `reviewing/`) is in flight here too (`Pipeline.elsewhere`)
        pipeline = project.pipeline.with_clone_piles(_shared_piles(Layout.of(repo).shared_root))
        super().__init__(repo, project if pipeline is project.pipeline else project._replace(pipeline=pipeline))

    def is_shared(self, pile: str) -> bool:
        return self.pipeline.is_in_flight(pile)

    def settled(self, slug: str) -> Settled | None:
        return ledger.lookup(self.layout.ledger, slug)

    def settled_names(self) -> set[str]:
        return ledger.names(self.layout.ledger)

    def settle(self, entry: Settled) -> None:
        ledger.record(self.layout.ledger, entry)

    def unsettle(self, slug: str) -> None:
        ledger.remove(self.layout.ledger, slug)

    def where(self) -> dict[str, str]:
        result = super().where()
        result["ledger"] = str(self.layout.ledger)
        result["locks"] = str(self.layout.locks)
        return result

    def heal(self, dry_run: bool = False) -> list[str]:
        """The layout self-heal (SPEC §4): `heal.Healer.heal`."""
        return Healer(self.repo, self.layout, self.pipeline).heal(dry_run)

    def stale_copies(self, slug: str, data: bytes) -> Change | None:
        """Before an in-flight task (content `data`) settles into this worktree, this branch's
        stale copies of it go: committed here before another branch claimed it, they would
        otherwise sit beside the settled copy (and `retry` would see the task in two piles).

        The caller holds the task's lock. Only clean tracked copies outside
        `done/` whose bytes are a prefix of `data` go, in one commit of their own (put back if it
        fails). None when there are none.
        """
        locs = [loc for loc in self.locate(slug) if not loc.shared and loc.pile != "done"]
        if not locs:
            return None
        changed = git.status_codes(self.repo, *(self.rel(loc.path) for loc in locs))
        steps: list[Step] = []
        piles: list[str] = []
        for loc in locs:
            if self.rel(loc.path) in changed:
                continue  # uncommitted changes: not ours to drop
            old = self._read_or_none(loc.path)
            if old is not None and data.startswith(old):
                steps.append(Remove(loc.path, old, self.rel(loc.path)))
                piles.append(f"{loc.pile}/")
        if not steps:
            return None
        shown = ", ".join(piles)
        message = f"settle({slug}) drop the stale {shown} cop{'ies' if len(piles) > 1 else 'y'} of this branch"
        return Change((*steps, Crash("stale:removed")), message, after=(Crash("stale:committed"),))


def _shared_piles(root: Path) -> list[str]:
    """The names of the directories in the shared root (the piles, and the bookkeeping, whose
    names start with a dot: `Pipeline.with_clone_piles` keeps only pile names). One listing."""
    try:
        with os.scandir(root) as found:
            return [e.name for e in found if e.name not in BOOKKEEPING and e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []
