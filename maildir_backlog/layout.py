"""Every path the tool uses, in one place.

A clone has one *shared root* (`<common dir>/backlog/`) that all its worktrees see, and each
worktree has its own `backlog/` directory and its own git dir. Nothing else in the package
builds a path from strings: ask a `Layout`.

    <worktree>/backlog/                  the backlog directory (tracked)
    <worktree>/backlog/AGENTS.md         the project declaration (CLAUDE.md links to it)
    <worktree>/backlog/<pile>/<slug>.md  a task in a tracked pile (or the symlink to a shared pile)
    <worktree>/backlog/.gitattributes    keeps task files byte for byte (no line-ending conversion)
    <worktree>/.gitignore                holds `backlog/<pile>` for every shared pile
    <common dir>/backlog/<pile>/         a shared (in-flight) pile, maildir-shared
    <common dir>/backlog/.locks/         per-task flock files (`<slug>.lock`, `.layout.lock`)
    <common dir>/backlog/.ledger/        the ledger of settled tasks (one file per slug)
    <common dir>/backlog/.history/       branch trees already read into the ledger (scanned.json)
    <common dir>/backlog/.clone/backend  the backend the clone last migrated to (`migrate --to`)
    <common dir>/backlog/.clone/prune-ripe  settled refs the janitor's last prune found ripe
    <git dir>/backlog-cache/<pile>.cache the parse cache of this worktree, one file per pile (cache.py)
    <git dir>/backlog-intake-cache.json  parsed intake-branch tasks, by blob, name, branch, default
    <git dir>/backlog-added-times.json   when git recorded each todo task (auto-pick's ties)
    <git dir>/backlog-own-commits        the verbs' own plumbed commits: parent, commit, what each may add
    <git dir>/backlog-line-endings       this worktree's checkout was looked over for converted copies
    <git dir>/backlog-index.lock         serializes this worktree's backlog commits
    <git dir>/backlog-migration.json     the journal of a running migration (+ `.lock`)
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from .typed import NamedTuple, Protocol

BACKLOG = "backlog"
AGENTS = "AGENTS.md"
CLAUDE = "CLAUDE.md"
ROADMAP = "ROADMAP.md"
DOCS = (AGENTS, CLAUDE, ROADMAP)
GITKEEP = ".gitkeep"
GITATTRIBUTES = ".gitattributes"  # in backlog/: no line-ending conversion there (attributes.py)
GITIGNORE = ".gitignore"  # at the worktree's top: holds `backlog/<pile>` for every shared pile
LOCKS = ".locks"
LEDGER = ".ledger"
HISTORY = ".history"
CLONE = ".clone"
BOOKKEEPING = (LOCKS, LEDGER, HISTORY, CLONE)
TASK_SUFFIX = ".md"


class RepoDirs(Protocol):
    @property
    def toplevel(self) -> Path: ...
    @property
    def common_dir(self) -> Path: ...
    @property
    def git_dir(self) -> Path: ...


def display(pile: str, slug: str) -> str:
    """The path a user sees for a task, relative to the worktree (through the symlink for shared piles)."""
    return f"{BACKLOG}/{pile}/{slug}{TASK_SUFFIX}"


def pile_rel(pile: str) -> str:
    """`backlog/<pile>`, relative to the worktree (a pathspec, a .gitignore line)."""
    return f"{BACKLOG}/{pile}"


def every_pile_pathspec(slug: str) -> str:
    """A git pathspec for `<slug>.md` in every pile of the worktree: `:(glob)backlog/*/<slug>.md`."""
    return f":(glob){BACKLOG}/*/{slug}{TASK_SUFFIX}"


def parse_task_rel(rel: str) -> tuple[str, str] | None:
    """(pile, slug) for a worktree-relative `backlog/<pile>/<slug>.md`, else None (slug not validated)."""
    parts = PurePosixPath(rel).parts
    if len(parts) != 3 or parts[0] != BACKLOG or not parts[2].endswith(TASK_SUFFIX):
        return None
    return parts[1], parts[2][: -len(TASK_SUFFIX)]


def parse_settled_rel(rel: str) -> tuple[str, str] | None:
    """(top pile, slug) for `backlog/<pile>/<slug>.md` or a task in a folder below it, such as the
    older flat layout's `backlog/done/<year>/<slug>.md`; else None (slug not validated)."""
    parts = PurePosixPath(rel).parts
    if len(parts) < 3 or parts[0] != BACKLOG or not parts[-1].endswith(TASK_SUFFIX):
        return None
    return parts[1], parts[-1][: -len(TASK_SUFFIX)]


class Layout(NamedTuple):
    toplevel: Path
    common_dir: Path
    git_dir: Path

    @classmethod
    def of(cls, repo: RepoDirs) -> Layout:
        return cls(repo.toplevel, repo.common_dir, repo.git_dir)

    # -- the worktree -------------------------------------------------------------------------
    @property
    def root(self) -> Path:
        return self.toplevel / BACKLOG

    @property
    def agents(self) -> Path:
        return self.root / AGENTS

    @property
    def gitattributes(self) -> Path:
        return self.root / GITATTRIBUTES

    @property
    def gitignore(self) -> Path:
        return self.toplevel / GITIGNORE

    def tracked_pile(self, pile: str) -> Path:
        return self.root / pile

    def rel(self, path: Path) -> str:
        return path.relative_to(self.toplevel).as_posix()

    # -- the shared root ----------------------------------------------------------------------
    @property
    def shared_root(self) -> Path:
        return self.common_dir / BACKLOG

    def shared_pile(self, pile: str) -> Path:
        return self.shared_root / pile

    @property
    def locks(self) -> Path:
        return self.shared_root / LOCKS

    def task_lock(self, slug: str) -> Path:
        return self.locks / f"{slug}.lock"

    @property
    def layout_lock(self) -> Path:
        return self.locks / ".layout.lock"

    @property
    def ledger(self) -> Path:
        return self.shared_root / LEDGER

    @property
    def history(self) -> Path:
        """The root trees whose settled tasks are known to the ledger (history.py)."""
        return self.shared_root / HISTORY / "scanned.json"

    @property
    def ripe(self) -> Path:
        """The `settled/` refs the janitor's last prune found ripe, `<slug> <commit>` a line: it
        deletes only those that the next run finds ripe again (repair/remote_bucket.py)."""
        return self.shared_root / CLONE / "prune-ripe"

    @property
    def backend_mark(self) -> Path:
        """The backend the clone last migrated to, and on which branch (`backend`)."""
        return self.shared_root / CLONE / "backend"

    # -- this worktree's git dir --------------------------------------------------------------
    @property
    def cache(self) -> Path:
        """The parse cache of earlier versions (one JSON file for every pile): removed when found."""
        return self.git_dir / "backlog-cache.json"

    def parse_cache(self, pile: str) -> Path:
        return self.git_dir / "backlog-cache" / f"{pile}.cache"

    def old_parse_caches(self, pile: str) -> tuple[Path, ...]:
        """The parse caches of earlier versions: removed when the pile's is first written."""
        return self.cache, self.git_dir / "backlog-cache" / f"{pile}.tsv"

    @property
    def intake_cache(self) -> Path:
        return self.git_dir / "backlog-intake-cache.json"

    @property
    def added_cache(self) -> Path:
        return self.git_dir / "backlog-added-times.json"  # columns (-cache.json: the older form)

    @property
    def line_endings_checked(self) -> Path:
        """Present once `maintain` looked this worktree's checkout over for files git had converted
        (`attributes.converted`), with the rule in place: no checkout converts one after that."""
        return self.git_dir / "backlog-line-endings"

    @property
    def own_commits(self) -> Path:
        """The commits this worktree's verbs made through plumbing, each with its parent and the
        paths it may have added (`gitplumbed._note`): what the added times need not read again."""
        return self.git_dir / "backlog-own-commits"

    @property
    def index_lock(self) -> Path:
        return self.git_dir / "backlog-index.lock"

    @property
    def git_index_lock(self) -> Path:
        """git's own lock on this worktree's index: held while a git command (a merge, a checkout)
        writes the work tree and then the index."""
        return self.git_dir / "index.lock"

    @property
    def journal(self) -> Path:
        return self.git_dir / "backlog-migration.json"

    @property
    def journal_lock(self) -> Path:
        return self.git_dir / "backlog-migration.lock"
