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


# the backend's readers: where a copy is, which piles hold what, what the ledger says
READERS = {"locate", "in_flight", "slugs", "summaries", "settled", "settled_names", "pile_dir", "where"}


def test_commands_ask_the_read_model():
    """One read model (issue 18): a command learns where a task is and what became of it from
    `state` only, never from the backend's listings or the ledger (an import contract keeps the
    intake branch, the history, the cache and the queue away from them too). The janitor
    (`commands/maintain`) is the one exception: it repairs what the read model hides."""
    import ast

    found = []
    for path in sorted((ROOT / "maildir_backlog" / "commands").rglob("*.py")):
        if "maintain" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in READERS:
                inner = node.value
                if isinstance(inner, ast.Attribute) and inner.attr == "backend":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} backend.{node.attr}")
    assert not found, "commands read the backend themselves (ask `state`):\n  " + "\n  ".join(found)
