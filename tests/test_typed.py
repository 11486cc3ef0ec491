"""`maildir_backlog.typed`'s stand-ins against `typing`'s own: a record declared on either is the
same named tuple (fields, defaults, methods, docstring, pickling, refusals), and the other
stand-ins do at run time what the code asks of `typing`'s (docs/design.md, *What a hot call
imports*)."""

from __future__ import annotations

import pickle
import sys
import typing

import pytest

from maildir_backlog import typed

BODY = '''
class Rec(Base):
    """A record."""

    a: int
    b: "str | None"
    c: tuple[int, ...] = ()
    d: dict[str, int] | None = None

    @property
    def double(self) -> int:
        return self.a * 2

    @classmethod
    def make(cls, a: int) -> "Rec":
        return cls(a, None)

    def shown(self) -> str:
        return f"{self.a}/{self.b}"
'''


def declare(base: object, body: str = BODY, name: str = "Rec") -> type:
    space: dict[str, object] = {"Base": base, "__name__": __name__}
    exec(body, space)  # noqa: S102 (the test's own class body, declared on each base)
    record = space[name]
    assert isinstance(record, type)
    return record


@pytest.fixture(params=["typing", "typed"])
def Rec(request):
    record = declare(typing.NamedTuple if request.param == "typing" else typed.NamedTuple)
    record.__qualname__ = "Rec"
    globals()["Rec"] = record  # where pickle looks it up
    yield record
    del globals()["Rec"]


def test_a_record_on_either_base_is_the_same_named_tuple():
    theirs, ours = declare(typing.NamedTuple), declare(typed.NamedTuple)
    assert type(ours) is type and ours.__bases__ == (tuple,)
    for attr in ("_fields", "_field_defaults", "__doc__", "__module__", "__name__", "__match_args__"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert list(ours.__annotations__) == list(theirs.__annotations__)
    for record in (ours, theirs):
        one = record(1, "x")
        assert one == (1, "x", (), None) and one.double == 2 and one.shown() == "1/x"
        assert record.make(3) == (3, None, (), None)
        assert one._replace(b="y").b == "y" and one._asdict() == {"a": 1, "b": "x", "c": (), "d": None}
        assert record._make([1, 2, 3, 4]).d == 4
        assert repr(one) == "Rec(a=1, b='x', c=(), d=None)"
        with pytest.raises(TypeError):
            record()  # `a` and `b` have no default
        with pytest.raises(AttributeError):
            one.a = 2  # immutable
    assert ours(1, "x") == theirs(1, "x") and hash(ours(1, "x")) == hash(theirs(1, "x"))


def test_a_record_refuses_a_bad_call_as_typing_s_does():
    """Session 29 makes records without `collections.namedtuple` (no source compiled per class):
    the same calls are refused with the same words, for records of every size."""
    theirs, ours = declare(typing.NamedTuple), declare(typed.NamedTuple)
    calls = [
        lambda r: r(),
        lambda r: r(1),
        lambda r: r(1, 2, 3, 4, 5),
        lambda r: r(1, "x", e=1),
        lambda r: r(1, "x", a=2),
        lambda r: r._make([1]),
        lambda r: r(1, "x")._replace(z=1),
    ]
    for call in calls:
        with pytest.raises((TypeError, ValueError)) as mine:
            call(ours)
        with pytest.raises((TypeError, ValueError)) as typings:
            call(theirs)
        assert (type(mine.value), str(mine.value)) == (type(typings.value), str(typings.value))
    for size in range(12):
        body = "class Wide(Base):\n" + "".join(f"    f{i}: int = {i}\n" for i in range(size)) + "    pass\n"
        wide, typings_wide = declare(typed.NamedTuple, body, "Wide"), declare(typing.NamedTuple, body, "Wide")
        assert wide() == typings_wide() == tuple(range(size)) and wide._fields == typings_wide._fields
        assert repr(wide(*range(10, 10 + size))) == repr(typings_wide(*range(10, 10 + size)))
        assert [getattr(wide(), f) for f in wide._fields] == list(range(size))


def test_a_record_pickles(Rec):
    one = Rec(1, "x", (2,), {"k": 1})
    assert pickle.loads(pickle.dumps(one)) == one  # noqa: S301 (its own bytes)


@pytest.mark.parametrize(
    "body",
    [
        "class Rec(Base):\n    a: int = 1\n    b: int\n",  # a field without a default after one with
        "class Rec(Base):\n    a: int\n    def _replace(self): pass\n",  # the named tuple's own machinery
        "class Rec(Base):\n    a: int\n    __slots__ = ()\n",
        "class Rec(Base):\n    _a: int\n",  # a field named with an underscore
    ],
)
def test_what_typing_refuses_is_refused(body):
    for base in (typing.NamedTuple, typed.NamedTuple):
        with pytest.raises((TypeError, AttributeError, ValueError)):
            declare(base, body)


def test_the_other_stand_ins():
    class Shape(typed.Protocol):
        def area(self) -> float: ...

    class Square(Shape):
        def area(self) -> float:
            return 4.0

    assert Square().area() == 4.0

    class Options(typed.TypedDict, total=False):
        quiet: bool

    given = Options(quiet=True)
    assert isinstance(given, dict) and given == {"quiet": True}
    assert typed.cast("list[int]", given) is given
    assert typed.TypeVar("T") == "T"
    assert typed.overload(len) is len
    for form in (typed.ClassVar, typed.Literal, typed.NoReturn, typed.Unpack):
        assert form["a", "b"] is form and (form | None) is form and (None | form) is form
    assert (typed.Any | None) == (object | None)


def test_the_type_checker_sees_typing():
    """mypy reads the `TYPE_CHECKING` branch: each name there is `typing`'s own, under its own name."""
    source = open(typed.__file__, encoding="utf-8").read()
    for name in ("Any", "ClassVar", "Literal", "NamedTuple", "NoReturn", "Protocol", "TypedDict", "TypeVar", "Unpack"):
        assert f"    from typing import {name} as {name}\n" in source, name
        assert hasattr(typing, name)
    assert (
        "    from typing import cast as cast\n" in source and "    from typing import overload as overload\n" in source
    )


def test_importing_typed_imports_no_typing():
    import subprocess

    probe = "import sys, maildir_backlog.typed; print('typing' in sys.modules)"
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_pattern_is_compiled_on_first_use_and_answers_as_re_s():
    """`typed.pattern` (session 29): nothing is compiled at import; each method, once asked for,
    is the compiled pattern's own, kept on the stand-in."""
    import re

    source = r"([a-z]+)=([0-9]*)"
    lazy, compiled = typed.pattern(source), re.compile(source)
    assert vars(lazy) == {"pattern": source}  # nothing compiled yet
    for text in ("a=1", "ab=", "A=1", " a=1 b=2"):
        for method in ("match", "fullmatch", "search", "findall"):
            mine, theirs = getattr(lazy, method)(text), getattr(compiled, method)(text)
            assert (mine.groups() if isinstance(mine, re.Match) else mine) == (
                theirs.groups() if isinstance(theirs, re.Match) else theirs
            )
        assert lazy.sub("-", text) == compiled.sub("-", text)
    assert lazy.fullmatch.__self__ is re.compile(source) and "fullmatch" in vars(lazy)
