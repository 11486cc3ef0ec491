"""The pull request of the current branch, through the GitHub CLI (`advance --pr auto`).

The older bash tool recorded the PR link on completion by itself (`gh pr view`); here it is asked
for explicitly, and a missing `gh` or a branch without a pull request is said plainly.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import argv, git
from .errors import BacklogError


def pull_request_url(cwd: Path) -> str:
    import shutil  # (here, not at the top: only `--pr auto` runs gh; no other call pays for these)
    import subprocess

    gh = shutil.which("gh", path=os.environ.get("PATH"))
    if gh is None:
        raise BacklogError("--pr auto needs the GitHub CLI (gh), which is not installed: pass --pr URL instead")
    done = subprocess.run(  # noqa: S603 (no shell; the arguments passed argv.checked)
        [gh, *argv.checked("gh", ["pr", "view", "--json", "url", "--jq", ".url"])],
        cwd=str(cwd),
        env=git.live_env(),
        input=b"",
        capture_output=True,
        check=False,
    )
    code, out, err = done.returncode, done.stdout.decode("utf-8", "ignore"), done.stderr.decode("utf-8", "ignore")
    url = out.strip()
    if code != 0 or not url or any(c.isspace() for c in url):
        said = " ".join((err or out).split()) or f"gh exited {code}"
        raise BacklogError(f"--pr auto: gh found no pull request for this branch ({said}): pass --pr URL instead")
    return url
