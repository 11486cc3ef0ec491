"""Git's settings for large repositories (`feature.manyFiles`, `core.splitIndex`): every claim is
a commit, and a commit against a large index is the floor of a claim's cost. `setup` turns the
missing ones on for this clone and says so; `maintain` only advises (docs/performance.md has the
measured effect)."""

from __future__ import annotations

from . import git
from .change import Change, Config, run

# feature.manyFiles: index version 4 and the untracked cache; core.splitIndex: a commit rewrites
# only the entries that changed, not the whole index
LARGE_SETTINGS = (("feature.manyFiles", "true"), ("core.splitIndex", "true"))


def missing_settings(repo: git.Repo) -> tuple[int, list[str]]:
    """(index entries, the LARGE_SETTINGS keys not configured at all) when the index holds at
    least `git.LARGE_INDEX` entries; (entries, []) otherwise. A value the user set, whatever it
    is, is theirs: only an unset key counts as missing."""
    entries = git.index_entries(repo)
    if entries < git.LARGE_INDEX:
        return entries, []
    return entries, [key for key, _ in LARGE_SETTINGS if git.call(repo.toplevel, "config", key)[0] != 0]


def turn_on(repo: git.Repo) -> list[str]:
    """Turn on the settings not configured yet when the index is large; one line saying so."""
    entries, missing = missing_settings(repo)
    if not missing:
        return []
    run(Change(tuple(Config(key, value) for key, value in LARGE_SETTINGS if key in missing)), repo)
    return [
        f"large repository ({entries:,} files in the index): turned on {' and '.join(missing)} for this clone,"
        " which makes each commit cheaper (see docs/performance.md); `git config --unset KEY` undoes one"
    ]


def advice(repo: git.Repo) -> list[str]:
    """One note when the index is large and git's settings for many files are not configured."""
    entries, missing = missing_settings(repo)
    if not missing:
        return []
    how = " && ".join(f"git config {key} true" for key in missing)
    return [
        f"note: large repository ({entries:,} files in the index): `{how}` makes each commit (every claim)"
        " cheaper; see docs/performance.md"
    ]
