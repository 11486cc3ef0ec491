"""The API's typed face (issue 32, 2): `Backlog`'s methods are written out with real signatures and
return types, each held here to its row of the verb table (`verbs/`), so that mypy checks the calls
users make; a run of mypy on a user's file shows it does."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from conftest import ROOT

from maildir_backlog import api, verbs
from maildir_backlog.verbspec import Verb

ROWS = [verb for verb in verbs.VERBS if verb.api]


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


@pytest.mark.parametrize("verb", ROWS, ids=[verb.name for verb in ROWS])
def test_each_method_is_written_out_as_its_row_says(verb):
    """The method's parameters are the row's API parameters (name, kind, default, type) and its
    return type the row's result. A row without a written method (or one that drifted) fails here
    with the method to paste into `maildir_backlog/api.py`, class `Backlog` (in the table's order)."""
    written = vars(api.Backlog).get(verb.method)
    paste = f"write this method in maildir_backlog/api.py, class Backlog:\n{method_source(verb)}"
    assert written is not None and inspect.isfunction(written), paste
    signature = inspect.signature(written)
    assert list(signature.parameters.values()) == list(verb.signature("api").parameters.values()), paste
    assert signature.return_annotation == returns(verb), paste
    assert written.__doc__ == verb.summary


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
