"""The API's typed face (issue 32, 2): `Backlog`'s methods are written out with real signatures and
return types, each held here to its row of the verb table (`verbs/`), so that mypy checks the calls
users make; a run of mypy on a user's file shows it does. A verb without a written method (a new
one: written methods are not asked of it) is called, typed, through `Backlog.call(kernel, ...)`,
whose keywords mypy checks against the kernel function itself."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from conftest import ROOT

from maildir_backlog import api, verbs
from maildir_backlog.verbspec import Verb

ROWS = [verb for verb in verbs.VERBS if verb.api]


def written(verb: Verb):
    """The method written in `api.Backlog`'s body for `verb`, or None (a row without one gets a
    method made from the row at import, untyped: `api._method`)."""
    method = vars(api.Backlog).get(verb.method)
    return method if inspect.isfunction(method) and method.__code__.co_name == verb.method else None


def returns(verb: Verb) -> str:
    """The return type a row's method declares: its result class, or its shaping function's type."""
    shape = verb.shape()
    return shape.__name__ if isinstance(shape, type) else inspect.signature(shape).return_annotation


def method_source(verb: Verb) -> str:
    """The method to write in `api.Backlog` for `verb`, made from its row (what the failure prints)."""
    params, names = ["self"], []
    for p in list(verb.signature("api").parameters.values())[1:]:
        names.append(f"{p.name}={p.name}")
        if p.kind is p.VAR_POSITIONAL:
            params.append(f"*{p.name}: {p.annotation}")
        elif p.default is p.empty:
            params.append(f"{p.name}: {p.annotation}")
        else:
            params.append(f"{p.name}: {p.annotation} = {p.default!r}")
    shape = verb.shape()
    how = f"shaped({shape.__name__})" if isinstance(shape, type) else shape.__name__
    return (
        f"    def {verb.method}({', '.join(params)}) -> {returns(verb)}:\n"
        f"        return self._verb({verb.name!r}, {', '.join([how, *names])})\n"
    )


WRITTEN = [verb for verb in ROWS if written(verb) is not None]


@pytest.mark.parametrize("verb", WRITTEN, ids=[verb.name for verb in WRITTEN])
def test_each_written_method_is_as_its_row_says(verb):
    """A written method's parameters are the row's API parameters (name, kind, default, type) and
    its return type the row's result. One that drifted fails here with the method to write in
    `maildir_backlog/api.py`, class `Backlog`."""
    method = written(verb)
    paste = f"write this method in maildir_backlog/api.py, class Backlog:\n{method_source(verb)}"
    signature = inspect.signature(method)
    assert list(signature.parameters.values()) == list(verb.signature("api").parameters.values()), paste
    assert signature.return_annotation == returns(verb), paste
    assert method.__doc__ == verb.summary


def test_every_written_method_is_a_verb_and_every_verb_has_a_method():
    """No method is left behind by a renamed or dropped verb; every verb with a result has one
    (written, or made from its row), and is reached by `call` through its kernel function."""
    ours = {name for name, value in vars(api.Backlog).items() if inspect.isfunction(value) and name != "call"}
    made = {verb.method for verb in ROWS if written(verb) is None}
    assert {verb.method for verb in WRITTEN} | made <= ours
    assert all(api._row_of(verb.kernel()) is verb for verb in ROWS)


def test_mypy_checks_a_users_calls(tmp_path, monkeypatch):
    """mypy --strict (the project's own settings and cache, warm after the `mypy` gate) on a user's
    file: a wrong call of `take` (a misspelt keyword, an int slug, the result used without the None
    check) is three errors; the right file none."""
    mypy_api = pytest.importorskip("mypy.api")
    (tmp_path / "right.py").write_text(
        "from maildir_backlog import Backlog\n\n"
        "task = Backlog('.', claimer='agent-7').take(force=True)\n"
        "if task is not None:\n"
        "    print(task.slug.upper(), task.deadline)\n"
        "ready = [t.slug for t in Backlog().ready(limit=3)]\n",
        encoding="utf-8",
    )
    (tmp_path / "wrong.py").write_text(
        "from maildir_backlog import Backlog\n\ntask = Backlog('.').take(slug=3, forse=True)\nprint(task.slug)\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("MYPYPATH", str(ROOT))  # this checkout's package, whatever is installed
    config, cache = str(ROOT / "pyproject.toml"), str(ROOT / ".mypy_cache")
    files = [str(tmp_path / "right.py"), str(tmp_path / "wrong.py")]
    out, err, code = mypy_api.run(["--config-file", config, "--cache-dir", cache, "--no-error-summary", *files])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert code == 1 and not err, out + err
    # by file name: mypy's cache knows the two modules (`right`, `wrong`) from an earlier run's tmp_path
    stray = [line for line in errors if Path(line.split(":", 1)[0]).name != "wrong.py"]  # right.py's, the package's
    assert not stray, stray
    assert any('"forse"' in line for line in errors) and any('"slug"' in line for line in errors), out
    assert any('"Claim | None"' in line for line in errors), out


def test_mypy_checks_a_call_of_any_verb_through_its_kernel_function(tmp_path, monkeypatch):
    """`Backlog.call(kernel, ...)`, the typed door of a verb without a written method: mypy --strict
    checks the keywords against the kernel function (a misspelt one, a wrong type: two errors; the
    right file none), so a new verb needs no line in api.py to be checked."""
    mypy_api = pytest.importorskip("mypy.api")
    (tmp_path / "call_right.py").write_text(
        "from maildir_backlog import Backlog\n"
        "from maildir_backlog.commands import read\n\n"
        "listing = Backlog('.').call(read.list_pile, pile='done')\n"
        "first = Backlog('.').call(read.ready, limit=3)\n",
        encoding="utf-8",
    )
    (tmp_path / "call_wrong.py").write_text(
        "from maildir_backlog import Backlog\n"
        "from maildir_backlog.commands import read\n\n"
        "Backlog('.').call(read.list_pile, pil='done')\n"
        "Backlog('.').call(read.ready, limit='3')\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("MYPYPATH", str(ROOT))
    config, cache = str(ROOT / "pyproject.toml"), str(ROOT / ".mypy_cache")
    files = [str(tmp_path / "call_right.py"), str(tmp_path / "call_wrong.py")]
    out, err, code = mypy_api.run(["--config-file", config, "--cache-dir", cache, "--no-error-summary", *files])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert code == 1 and not err, out + err
    stray = [line for line in errors if Path(line.split(":", 1)[0]).name != "call_wrong.py"]
    assert not stray, stray
    assert len(errors) == 2, out
    assert any('"pil"' in line for line in errors) and any('"limit"' in line for line in errors), out


def test_call_runs_the_verb_of_a_kernel_function(shared):
    """At run time `call` finds the row by its kernel function and shapes the result as the row's
    method does; a function that is no verb's kernel, or a keyword the row does not pass, is a
    TypeError before anything runs."""
    from maildir_backlog.commands import claim, read

    shared.ok("add", "alpha")
    bl = api.Backlog(shared.path, claimer="agent-7")
    assert bl.call(read.list_pile, pile="todo") == bl.list("todo")
    took = bl.call(claim.take, slug="alpha-plan")
    assert isinstance(took, api.Claim) and took.claimer == "agent-7"
    with pytest.raises(TypeError, match="kernel function of no verb"):
        bl.call(len)
    with pytest.raises(TypeError, match="pil"):
        bl.call(read.list_pile, pil="x")
