"""Help that teaches: every verb's `--help` exits 0, shows an example, gives every option a
sentence with its valid values, and does not offer plumbum 2's `--completions` (which this CLI
does not support: the switch is unbound).

The project declares `plumbum>=1.8,<3`; run this file under both ends of that range, e.g.
`.ci/plumbum-floor` (a venv with plumbum 1.8.0) next to the regular run (plumbum 2.x)."""

from __future__ import annotations

import pytest
from conftest import backlog

from maildir_backlog import cliapp, verbs

VERBS = sorted(cliapp.Backlog("backlog")._subcommands)


def test_the_verbs_are_all_there():
    """The command's verbs are the table's rows (maildir_backlog/verbs/), nothing more or less."""
    assert set(VERBS) == set(verbs.BY_NAME)


@pytest.mark.parametrize("verb", [None] + VERBS)
def test_help_teaches(tmp_path, verb):
    args = [verb, "--help"] if verb else ["--help"]
    proc = backlog(tmp_path, *args)  # outside any repository: help needs none
    assert proc.returncode == 0, proc.stderr
    page = proc.stdout
    assert "Examples:" in page and "    backlog " in page.split("Examples:")[1]
    assert "Sets an attribute" not in page
    assert "--completions" not in page
    assert proc.stderr == ""


@pytest.mark.parametrize("verb", [None] + VERBS)
def test_completions_switch_is_absent(tmp_path, verb):
    args = [verb, "--completions", "bash"] if verb else ["--completions", "bash"]
    proc = backlog(tmp_path, *args)
    assert proc.returncode == 2 and "Unknown switch --completions" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_every_option_has_a_help_sentence():
    root = cliapp.Backlog("backlog")
    for name, sub in [("backlog", None)] + sorted(root._subcommands.items()):
        app = root if sub is None else sub.get()(f"backlog {name}")
        for switch, info in app._switches_by_name.items():
            if info.group == "Meta-switches":
                continue
            assert info.help and len(info.help) > 15, (name, switch)


def test_option_help_names_the_valid_values(tmp_path):
    pages = {verb: backlog(tmp_path, verb, "--help").stdout for verb in ("setup", "add", "migrate", "retry")}
    assert "maildir-shared" in pages["setup"] and "maildir-git" in pages["setup"]
    assert "s, m, h, d or w" in pages["add"] and ">= 1" in pages["add"]
    assert "maildir-shared or maildir-" in pages["migrate"]
    assert "timeout=3d" in pages["retry"]


@pytest.mark.parametrize("verb", [None] + VERBS)
def test_help_shows_no_leftovers_of_the_cli_library(tmp_path, verb):
    page = backlog(tmp_path, *([verb, "--help"] if verb else ["--help"])).stdout
    # `-C DIR:str` is plumbum's own notation for a switch's value, kept (its help is not rewritten)
    for leftover in ("=None]", ".; see", "for more info", "SPEC", "docs/", "README"):
        assert leftover not in page, (verb, leftover)
    usage = page.split("Usage:")[1].split("\n")[1]
    assert usage.startswith("    backlog") and not any(word.islower() and "=" in word for word in usage.split())
    if verb == "mcp":
        assert "--json" not in page  # the server speaks JSON-RPC; the flag would mean nothing
