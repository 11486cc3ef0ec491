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
# a migration's journal, the skill file `prime --skill` writes, the notes of the plumbed commits.
BOOKKEEPING = {"storage.py", "change.py", "ledger.py", "mark.py", "cache.py", "history.py", "intake.py", "journal.py"}
PROTOCOL = {"steps.py"}  # the executors of `change`'s steps: the protocol itself
WRITERS = {"write_file", "remove_file", "create_file", "replace_symlink", "Transaction"}


def test_every_writer_goes_through_the_one_move_protocol():
    """One move protocol (issue 18): a module that moves, names, creates or removes a task
    declares a `change.Change` and hands it to `change.run` (through `Backend.commit`); only
    `change` and its steps' executors (`steps`) open a `storage.Transaction` or call the file
    primitives for the piles (an import contract keeps `gitcommit` to `change` too). The
    bookkeeping files above are no task's."""
    import ast

    found = []
    for path in sorted((ROOT / "maildir_backlog").rglob("*.py")):
        if path.name in BOOKKEEPING | PROTOCOL:
            continue
        for call in ast.walk(ast.parse(path.read_text())):
            node = call.func if isinstance(call, ast.Call) else None
            if isinstance(node, ast.Attribute) and node.attr in WRITERS:
                inner = node.value
                if isinstance(inner, ast.Name) and inner.id == "storage":
                    if path.name == "scaffold.py" and node.attr == "write_file":
                        continue  # `prime --skill DIR` writes DIR/SKILL.md: outside the backlog
                    if path.name == "gitplumbed.py" and node.attr == "write_file":
                        continue  # the notes of its own commits (`Layout.own_commits`), trimmed: no task's
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} storage.{node.attr}")
    assert not found, "writers outside the one move protocol (declare a change.Change):\n  " + "\n  ".join(found)


def test_the_read_model_is_one_object_without_forwarders():
    """Issue 28 (6b): commands ask one `state.Model`; the read model has no module-level functions
    (the old forwarders), and none of its methods only passes its own arguments on to a function of
    a lower module (what a command may ask there, it asks there: `context`, `lifecycle`, …)."""
    import ast

    found = []
    for path in sorted((ROOT / "maildir_backlog" / "state").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                found.append(f"{path.name}: module-level {node.name}()")
            if not isinstance(node, ast.ClassDef):
                continue
            for method in (m for m in node.body if isinstance(m, ast.FunctionDef)):
                body = [s for s in method.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                call = body[0].value if len(body) == 1 and isinstance(body[0], (ast.Return, ast.Expr)) else None
                if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
                    continue
                owner = call.func.value
                params = [a.arg for a in method.args.args[1:]]
                passed = [ast.unparse(a) for a in call.args] + [ast.unparse(k.value) for k in call.keywords]
                to_module = isinstance(owner, ast.Name) and owner.id != "self" and passed == ["self.ctx", *params]
                if to_module or (ast.unparse(owner).startswith("self.ctx.") and passed == params):
                    found.append(f"{path.name}: {node.name}.{method.name} only calls {ast.unparse(call.func)}")
    assert not found, "forwarders in the read model:\n  " + "\n  ".join(found)


def _layers() -> dict[str, int]:
    """Each module of the import-linter `layers` contract, by its rank (0: the top)."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    return {name.strip(): rank for rank, entry in enumerate(layers) for name in entry.split("|")}


def _rank(module: str, ranks: dict[str, int]) -> int | None:
    parts = module.split(".")
    return next((ranks[".".join(parts[:n])] for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in ranks), None)


def test_take_reads_top_down(shared, monkeypatch):
    """Issue 28 (6c), `take SLUG` followed through the code (docs/design.md, "take, top-down"):
    its slug is validated once, at the verb table's door (`verbspec.Verb.call`), and the layers
    below trust the `task.Slug` they get; and the slug climbs back up (a call into a module of a
    higher layer than the caller's, e.g. a callback) at most 5 times (2 now: `locked_change`'s
    check and body)."""
    import sys

    from maildir_backlog import task as task_module

    shared.ok("add", "alpha")
    slug, real, checked, ranks, climbs = "alpha-plan", task_module.validate_slug, [], _layers(), []

    def counting(value):
        if value == slug:
            checked.append(sys._getframe(1).f_globals["__name__"])
        return real(value)

    for name, module in list(sys.modules.items()):
        if name.startswith("maildir_backlog") and getattr(module, "validate_slug", None) is real:
            monkeypatch.setattr(module, "validate_slug", counting)

    def follow(frame, event, _arg):  # a call that carries the slug (an argument, or a closure's)
        if event != "call" or not frame.f_globals.get("__name__", "").startswith("maildir_backlog."):
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount] + code.co_freevars
        if not any(frame.f_locals.get(n) == slug for n in names):
            return
        caller = frame.f_back
        while caller is not None and not caller.f_globals.get("__name__", "").startswith("maildir_backlog."):
            caller = caller.f_back
        if caller is None:
            return
        here, there = _rank(caller.f_globals["__name__"], ranks), _rank(frame.f_globals["__name__"], ranks)
        if here is not None and there is not None and there < here:
            climbs.append(f"{caller.f_globals['__name__']} -> {frame.f_globals['__name__']}.{code.co_name}")

    sys.setprofile(follow)
    try:
        taken = shared.run("take", slug)
    finally:
        sys.setprofile(None)
    assert taken.returncode == 0, taken.stderr
    assert checked == ["maildir_backlog.verbspec"], checked
    assert len(climbs) <= 5, climbs
