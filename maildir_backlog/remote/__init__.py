"""Claims across clones (SPEC §8): the git remote as the lock server.

State on the remote lives under `refs/backlog/`:

    refs/backlog/claims/<slug>    while the task is in flight on some clone
    refs/backlog/settled/<slug>   once it left flight (done, cancelled, failed), or was retried

Each ref points to a commit made with plumbing (`hash-object -w`, `mktree`, `commit-tree`: no branch,
work tree or index is touched) whose tree is the one file `<slug>.md` as of that event and whose
message is the event's log line (its subject; a `Backlog-Nonce:` trailer makes every commit unique,
see `commit`). A commit's parent is the value it replaces (a claim starts with none, a settlement's
parent is the last claim commit), so every update of a claim is a fast-forward and `git log` of a
ref on the remote tells the task's story across clones.

A pushed ref update with an expected old value is a compare-and-swap the server makes under its ref
lock, and `git push --atomic` applies several updates together or none (git >= 2.4 on the server):

    claim    claims/<slug>: none → C                   `--force-with-lease=<ref>:` (empty: must not exist),
                                                       then one listing: a `settled/<slug>` that appeared
                                                       since the slug was chosen undoes the claim; then
                                                       the default branch's tip: done/ or failed/ there
                                                       undoes it too (what makes `prune` safe)
    update   claims/<slug>: M → C                      expected: what this clone last wrote (a rescue:
                                                       the value it read)
    settle   settled/<slug> := S, claims/<slug>: M → ∅ atomically; the claim's lease guards both
    release  claims/<slug>: M → ∅                      expected: what this clone last wrote; no
                                                       `settled/` record (the task is claimable again)
    retry    settled/<slug>: V → R                     expected: the value read

**What this clone last wrote** is kept in local refs, `refs/backlog-mine/{claims,settled}/<slug>`
(in the common dir, so every worktree of the clone shares them; they also keep the commits safe
from `git gc`). Each update writes that memory *before* its push: a crash then leaves the memory one
step ahead at most, and the remote's value says what happened: equal to the memory (the push
landed), equal to the memory's parent (it did not), anything else (another clone acted).
`maintain` repairs from that (`repair/remote_reconcile.py`).

**Order.** Every remote update comes before the local change it describes (`Backend.apply` calls
the step first, inside its transaction, and a local failure afterwards pushes the compensating
update): the remote is never behind this clone, so no claim exists that the remote does not know.

**Failures.** A rejected update (a stale lease, a ref that already exists, a lost race on the
server's ref lock) is `Lost`, a `Conflict` (exit 3) naming who holds the task now; an unreachable
remote or one that does not answer in time is `Unreachable` (exit 4: nothing changed, retry later);
failed authentication or a server that refuses the namespace is `RemoteError` (exit 1); each is
one line naming the remote and the next step.
"""

from .objects import TIP
from .protocol import Remote
from .records import (
    CLAIMS,
    KINDS,
    MINE,
    NAMESPACE,
    SETTLED,
    Listing,
    Lost,
    Record,
    RemoteError,
    Unreachable,
    Update,
    blob_id,
    mine_ref,
    ref,
)
from .transport import TIMEOUT_ENV, TIMEOUT_SECONDS, exchange_timeout

__all__ = [
    "CLAIMS",
    "KINDS",
    "MINE",
    "NAMESPACE",
    "SETTLED",
    "TIMEOUT_ENV",
    "TIMEOUT_SECONDS",
    "TIP",
    "Listing",
    "Lost",
    "Record",
    "Remote",
    "RemoteError",
    "Unreachable",
    "Update",
    "blob_id",
    "exchange_timeout",
    "mine_ref",
    "ref",
]
