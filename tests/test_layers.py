"""The package's shape: no module over 450 lines (issue 18), so each one keeps to one job."""

from __future__ import annotations

from conftest import ROOT

MAX_LINES = 450


def test_no_module_over_450_lines():
    package = ROOT / "maildir_backlog"
    sizes = {str(path.relative_to(ROOT)): len(path.read_bytes().splitlines()) for path in package.rglob("*.py")}
    assert sizes, f"no modules found under {package}"
    over = {name: n for name, n in sorted(sizes.items()) if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split them by job): {over}"
