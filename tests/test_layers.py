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


# Files beside the piles that are no task's: the ledger's entries (written by `change.Settle`),
# the clone's backend mark (a `change.Write`), the parse and intake caches, the history's memo,
# a migration's journal, the skill file `prime --skill` writes.
BOOKKEEPING = {"storage.py", "change.py", "ledger.py", "mark.py", "cache.py", "history.py", "intake.py", "journal.py"}
WRITERS = {"write_file", "remove_file", "create_file", "replace_symlink", "Transaction"}


def test_every_writer_goes_through_the_one_move_protocol():
    """One move protocol (issue 18): a module that moves, names, creates or removes a task
    declares a `change.Change` and hands it to `change.run` (through `Backend.commit`); only
    `change` opens a `storage.Transaction` or calls the file primitives for the piles (an import
    contract keeps `gitcommit` to `change` too). The bookkeeping files above are no task's."""
    import ast

    found = []
    for path in sorted((ROOT / "maildir_backlog").rglob("*.py")):
        if path.name in BOOKKEEPING:
            continue
        for call in ast.walk(ast.parse(path.read_text())):
            node = call.func if isinstance(call, ast.Call) else None
            if isinstance(node, ast.Attribute) and node.attr in WRITERS:
                inner = node.value
                if isinstance(inner, ast.Name) and inner.id == "storage":
                    if path.name == "scaffold.py" and node.attr == "write_file":
                        continue  # `prime --skill DIR` writes DIR/SKILL.md: outside the backlog
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} storage.{node.attr}")
    assert not found, "writers outside the one move protocol (declare a change.Change):\n  " + "\n  ".join(found)
