"""The fields a verb sets on a task (SPEC §5: `add --depends`, `retry --set`, `edit --set`): how a
`KEY=VALUE` item is read, and the rule that a dependency names a task of the clone. One place owns
each rule: the verbs call these, and the values themselves are judged by the one reader of a task
file (`task.parse_task`: a priority, a duration, a budget), after the writer (`task.set_field`,
PyYAML's `safe_dump`) set them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from . import limits
from .argv import shown
from .context import Context
from .errors import InvalidInput
from .project import nearest_slug
from .state import Model
from .task import FieldValue, validate_slug
from .typed import pattern

PILE_KEY = "timeout.<pile>"  # in a list of allowed keys: every `timeout.<pile>`
SET_KEY_RE = pattern(r"[A-Za-z_][A-Za-z0-9_-]*|timeout\.[a-z][a-z0-9-]*")  # keys `retry --set` writes


def did_you_mean(name: str, known: set[str]) -> str:
    """` (did you mean x-plan?)` for the closest known slug (`project.nearest_slug`), else how to
    go on."""
    near = nearest_slug(name, known)
    return f" (did you mean {near}?)" if near else ": add that task first, or check the slug (`backlog list`)"


def refuse_unknown(ctx: Context, names: Iterable[str], label: str) -> None:
    """A dependency must name a task the clone knows, in any pile, on the intake branch or in the
    ledger (`state.Model.known_slugs`): exit 2 otherwise, naming it after `label` (`--depends`), with a
    did-you-mean. The clone is listed only when there is a name to look up."""
    names = list(names)
    if not names:
        return
    known = Model(ctx).known_slugs()
    for name in names:
        if name not in known:
            raise InvalidInput(f"{label} {name}: no task {name} anywhere in this clone{did_you_mean(name, known)}")


def parse_sets(items: Iterable[str], keys: Sequence[str] | None = None) -> list[tuple[str, FieldValue]]:
    """`--set KEY=VALUE` items as typed fields (`typed_field`), in order. A malformed item
    is refused (exit 2) naming it; with `keys`, so is a key outside them (PILE_KEY stands for every
    `timeout.<pile>`), naming the keys there are."""
    edits: list[tuple[str, FieldValue]] = []
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not SET_KEY_RE.fullmatch(key):
            raise InvalidInput(
                f"invalid --set {shown(item)}: expected KEY=VALUE (priority, timeout, timeout.<pile>, dependencies, …)"
            )
        if not value.strip() or "\n" in value or "\r" in value:
            raise InvalidInput(f"invalid --set {shown(item)}: the value of {key} must be one line with some text")
        if keys is not None and key not in keys and not (key.startswith("timeout.") and PILE_KEY in keys):
            raise InvalidInput(f"invalid --set {shown(item)}: unknown key {key!r} (the keys are {', '.join(keys)})")
        try:
            edits.append((key, typed_field(key, value)))
        except InvalidInput as exc:
            raise InvalidInput(f"invalid --set {shown(item)}: {exc.message}") from None
    return edits


def sets(ctx: Context, items: Iterable[str], keys: Sequence[str] | None = None) -> list[tuple[str, FieldValue]]:
    """`parse_sets`, and every dependency they name names a task of the clone (`refuse_unknown`)."""
    edits = parse_sets(items, keys)
    deps = [name for key, value in edits if key == "dependencies" and isinstance(value, dict) for name in value]
    refuse_unknown(ctx, deps, "--set dependencies")
    return edits


def typed_field(key: str, text: str) -> FieldValue:
    """A field's value from its text (`retry --set KEY=TEXT`): `priority` a whole number (else the
    text, which the parser then refuses naming the field), `dependencies` `SLUG[:REASON]` items
    separated by commas (`none`: no dependencies), anything else (`timeout`, `timeout.<pile>`,
    unknown keys) the text itself, a string."""
    text = text.strip()
    if key == "priority" and limits.number(text, limits.NUMBER_MAX) is not None:
        return int(text)  # (bounded: `parse_task` then checks it against PRIORITY_MAX)
    if key == "dependencies":
        deps: dict[str, str] = {}
        for item in [] if text == "none" else text.split(","):
            name, _, reason = item.partition(":")
            try:
                deps[validate_slug(name.strip())] = " ".join(reason.split())
            except InvalidInput as exc:
                raise InvalidInput(f"invalid dependencies {text!r}: {exc.message}") from None
        return deps
    return text
