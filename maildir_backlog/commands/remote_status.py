"""`backlog status --remote`: every clone's claims as the remote holds them (SPEC §8).

One listing of `refs/backlog/*`, one fetch of the claim commits, one `cat-file --batch`: each
claim with its pile, holder (claimer @ branch), age, budget and a STALE mark, and whether it
is this clone's own.
"""

from __future__ import annotations

from ..context import Context, Result
from ..errors import BacklogError
from ..state import Model


def remote_status(ctx: Context) -> Result:
    found = Model(ctx).remote_claims()
    if found is None:
        raise BacklogError(
            "no remote declared: add `remote: <git remote>` under `## Backend` in backlog/AGENTS.md"
            " (maildir-shared) to share claims across clones"
        )
    name, items, claimed, settled = found
    lines = [f"remote {name}: {claimed} claimed, {settled} settled"]
    for item in items:
        if "error" in item:
            lines.append(f"  {item['slug']}  UNREADABLE: {item['error']}")
            continue
        mark = "  STALE" if item["stale"] else ""
        mine = "  (this clone)" if item["this_clone"] else ""
        lines.append(
            f"  {item['pile']}/{item['slug']}  {item['claimer'] or '?'} @ {item['branch'] or '?'}"
            f"  age {item['age']} of {item['budget']}{mark}{mine}"
        )
    data = {"remote": name, "claims": items, "claimed": claimed, "settled": settled}
    return Result(data, lines)
