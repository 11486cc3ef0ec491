"""Git's settings for large repositories (`feature.manyFiles`, `core.splitIndex`): every claim is
a commit, and a commit against a large index is the floor of a claim's cost. `setup` turns the
missing ones on for this clone and says so; `maintain` only advises (docs/performance.md has the
measured effect)."""

from __future__ import annotations

from . import git


def turn_on(repo: git.Repo) -> list[str]:
    """Turn on the settings not configured yet when the index is large; one line saying so."""
    entries, missing = git.large_settings_missing(repo)
    if not missing:
        return []
    git.set_large_settings(repo, missing)
    return [
        f"large repository ({entries:,} files in the index): turned on {' and '.join(missing)} for this clone,"
        " which makes each commit cheaper (see docs/performance.md); `git config --unset KEY` undoes one"
    ]


def advice(repo: git.Repo) -> list[str]:
    """One note when the index is large and git's settings for many files are not configured."""
    entries, missing = git.large_settings_missing(repo)
    if not missing:
        return []
    how = " && ".join(f"git config {key} true" for key in missing)
    return [
        f"note: large repository ({entries:,} files in the index): `{how}` makes each commit (every claim)"
        " cheaper; see docs/performance.md"
    ]
