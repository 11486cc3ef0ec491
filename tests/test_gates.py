"""The gates (issue 32): CI (`.ci/run`) and pre-commit (`.pre-commit-config.yaml`) run the same
commands over the same paths, with the tools at the versions the `dev` extra of pyproject.toml
pins, so a gate that passes for one passes for the other and for the next person."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
FIX = (
    "the gates drifted apart: pyproject.toml's `dev` extra pins each tool (`name==version`),"
    " .pre-commit-config.yaml's hooks list the same pins in `additional_dependencies` (and the"
    " package's own requirements as pyproject.toml writes them), and .ci/run's `== gates` lines are the"
    " hooks' entries, in order. Change all three together"
)
TOOLS = {"ruff": "ruff", "mypy": "mypy", "lint-imports": "import-linter"}  # a gate's command → the package


def requirement(text: str) -> tuple[str, str]:
    """`name`, `specifier` of a requirement string, the name normalised (PEP 503)."""
    m = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*?)\s*", text)
    assert m is not None, text
    return re.sub(r"[-_.]+", "-", m[1]).lower(), m[2].replace(" ", "")


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins() -> dict[str, str]:
    return dict(requirement(r) for r in project()["optional-dependencies"]["dev"])


def hooks() -> list[dict]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    return [hook for repo in config["repos"] for hook in repo["hooks"]]


def command(line: str) -> list[str]:
    """A gate's command as words, whoever starts it: `python3 -m ruff …` is `ruff …`, and
    `… | xargs -0 … CMD` (the files fed by git) is CMD."""
    words = shlex.split(line.split("|")[-1])
    if words[0] == "xargs":
        words = words[next(i for i, w in enumerate(words[1:], 1) if not w.startswith("-")) :]
    if words[0] in ("python", "python3") and words[1] == "-m":
        words = words[2:]
    return words


def ci_lines() -> list[str]:
    """The gate lines of .ci/run: between its `== gates` and `== tests` echoes, comments left out."""
    text = (ROOT / ".ci" / "run").read_text()
    gates = text.split('echo "== gates"\n', 1)[1].split('echo "== tests"', 1)[0]
    return [line for line in gates.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_dev_tools_are_pinned_and_pre_commit_installs_the_same_pins():
    dev = pins()
    assert dev and all(spec.startswith("==") for spec in dev.values()), f"{FIX}: unpinned in dev: {dev}"
    runtime = dict(requirement(r) for r in project()["dependencies"] + project()["optional-dependencies"]["mcp"])
    seen: set[str] = set()
    for hook in hooks():
        assert hook["language"] == "python", f"{FIX}: hook {hook['id']} is not built from pins ({hook['language']})"
        for name, spec in map(requirement, hook.get("additional_dependencies", [])):
            want = dev.get(name, runtime.get(name))
            assert spec == want, f"{FIX}: hook {hook['id']} installs {name}{spec}, pyproject.toml says {name}{want}"
            seen.add(name)
        tool = TOOLS.get(command(hook["entry"])[0])
        if tool is not None:
            assert tool in map(lambda r: requirement(r)[0], hook.get("additional_dependencies", [])), (
                f"{FIX}: hook {hook['id']} runs {tool} without its pin"
            )
    assert {name for name in dev if name != "pre-commit"} <= seen, f"{FIX}: pinned but in no hook: {set(dev) - seen}"


def test_ci_and_pre_commit_run_the_same_gate_commands():
    given = ["FILES"]  # a hook given file names; in CI, the files git lists, through xargs
    from_hooks = [command(hook["entry"]) + ([] if hook.get("pass_filenames") is False else given) for hook in hooks()]
    from_ci = [command(line) + (given if "xargs" in line else []) for line in ci_lines()]
    assert from_ci == from_hooks, f"{FIX}:\n.ci/run:    {from_ci}\npre-commit: {from_hooks}"
    for hook, line in zip(hooks(), ci_lines(), strict=True):
        if "files" in hook:  # the files CI feeds a hook's command are the files pre-commit gives it
            assert hook["files"] == r"^backlog/.*\.md$" and "git ls-files -z -- 'backlog/*.md'" in line, (
                f"{FIX}: hook {hook['id']} checks {hook['files']}, .ci/run: {line}"
            )


def test_ruff_given_the_repository_checks_the_gates_paths():
    """`ruff check .` and `ruff format --check .` check what the gates check (`maildir_backlog tests
    bench`), no markdown: ruff's `include` names those trees, and the gates name them all."""
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["include"]
    trees = {pattern.split("/", 1)[0] for pattern in include}
    assert all(pattern.endswith("/**/*.py") for pattern in include), include
    for words in map(command, ci_lines()):
        if words[0] == "ruff":
            assert set(words[2:]) - {"--check"} == trees, f"{FIX}: ruff is given {words[2:]}, includes {trees}"


def test_pre_commit_accepts_the_config():
    """pre-commit itself reads both files (no hook runs, nothing is fetched); skipped where it is
    not installed (it is in the `dev` extra)."""
    exe = shutil.which("pre-commit")
    if exe is None:
        try:
            import pre_commit  # noqa: F401
        except ImportError:
            pytest.skip("pre-commit is not installed (pip install -e '.[dev]')")
        args = [sys.executable, "-m", "pre_commit"]
    else:
        args = [exe]
    for what, name in (("validate-config", ".pre-commit-config.yaml"), ("validate-manifest", ".pre-commit-hooks.yaml")):
        proc = subprocess.run([*args, what, name], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
