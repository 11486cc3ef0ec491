"""The state one janitor run shares between its buckets: what it found, which tasks its repairs
moved (or in a dry run would move), and where a task lives once other branches' stale copies
are set aside."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import git
from ..backend import Located
from ..context import Context
from ..errors import BacklogError
from ..task import is_slug
from .findings import Finding


@dataclass
class Sweep:
    ctx: Context
    dry_run: bool
    recovered: list[str] = field(default_factory=list)  # a migration killed midway, undone or finished
    findings: list[Finding] = field(default_factory=list)
    handled: set[str] = field(default_factory=set)  # slugs a fix moved (or would move) this run
    gone: set[tuple[str, str]] = field(default_factory=set)  # (slug, pile) copies removed (or that would be)
    modified: list[tuple[str, str, str]] = field(default_factory=list)  # (slug, pile, rel): tracked, edited in place

    def __post_init__(self) -> None:
        self.backend = self.ctx.backend
        self.pipeline = self.ctx.pipeline
        self.layout = self.ctx.layout
        self.shared_backend = self.backend.shares_flight
        self.order = {pile: i for i, pile in enumerate(self.pipeline.all_piles)}
        self.tracked_piles = [p for p in self.pipeline.all_piles if not self.backend.is_shared(p)]

    # -- reporting ----------------------------------------------------------------------------
    def add(
        self, bucket: str, path: str, detail: str, slug: str | None = None, fixed: bool = False, error: bool = False
    ) -> None:
        self.findings.append(Finding(bucket, path, detail, slug, fixed, error))

    def show(self, pile: str, slug: str) -> str:
        return self.backend.display(pile, slug)

    def would(self, done: str, planned: str) -> str:
        return f"would {planned}" if self.dry_run else done

    def branches(self) -> set[str]:
        """The local and remote-tracking branches (a claim naming none of them is orphaned)."""
        return git.branches(self.ctx.repo)

    # -- where a task is, minus other branches' stale copies ------------------------------------
    def located(self, slug: str, pile: str) -> Located:
        return Located(slug, pile, self.backend.task_path(pile, slug), self.backend.is_shared(pile))

    def tracked_rel(self, pile: str, slug: str) -> str:
        """The worktree-relative (git) path of the task's copy in a tracked pile."""
        return self.layout.rel(self.backend.task_path(pile, slug))

    def removed(self, slug: str, pile: str) -> bool:
        """Would a dry run's repairs have removed this copy?"""
        return self.dry_run and (slug, pile) in self.gone

    def listing(self) -> dict[str, list[str]]:
        where: dict[str, list[str]] = {}
        for pile in self.pipeline.all_piles:
            for slug in self.backend.slugs(pile):
                if is_slug(slug) and not self.removed(slug, pile):
                    where.setdefault(slug, []).append(pile)
        return where

    def _claim_branch(self, loc: Located, data: bytes | None = None) -> str | None:
        try:
            claim = self.backend.load(loc, data).claim_of_record()
        except (BacklogError, OSError):
            return None
        return claim.get("branch") if claim else None

    def stale(self, locs: list[Located], flying_data: bytes | None = None) -> set[str]:
        """Piles holding a stale branch copy (maildir-shared, claimed on another branch)."""
        if not self.shared_backend:
            return set()
        flying = [loc for loc in locs if loc.shared]
        if not flying or len(locs) < 2:
            return set()
        if self._claim_branch(flying[0], flying_data if len(flying) == 1 else None) == self.ctx.repo.branch:
            return set()
        return {loc.pile for loc in locs if not loc.shared and loc.pile != "done"}

    def live(self, slug: str) -> list[Located]:
        locs = [loc for loc in self.backend.locate(slug) if not self.removed(slug, loc.pile)]
        drop = self.stale(locs)
        return [loc for loc in locs if loc.pile not in drop]

    def single_in_flight(self, slug: str) -> Located | None:
        """The task's one live copy when it is in flight (None while a duplicate is unresolved);
        other branches' stale copies and copies this dry run removed do not count."""
        locs = self.live(slug)
        if len(locs) == 1 and self.pipeline.is_in_flight(locs[0].pile):
            return locs[0]
        return None
