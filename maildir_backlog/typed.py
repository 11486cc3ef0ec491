"""What the code's type annotations need while it runs, without importing `typing`.

Importing `typing` costs a hot call ~4 ms (a tenth of a `progress`), and a record declared with
`typing.NamedTuple` another ~20 µs over the `collections.namedtuple` it makes (docs/design.md,
*What a hot call imports*). The modules a hot call loads import these names from here instead:
the type checker sees `typing`'s own (the `TYPE_CHECKING` branch), the interpreter the stand-ins
below, which do at run time what this code asks of `typing`'s:

* `NamedTuple`: `class X(NamedTuple): a: int; b: str = ""` is the `collections.namedtuple("X",
  ("a", "b"), defaults=("",))` `typing` would make, with the class body's docstring, methods and
  properties, and its annotations kept as written (never evaluated);
* `Protocol` and `TypedDict`: plain base classes (a protocol is only checked statically; a typed
  dict is a dict);
* `cast` returns its value; `overload` returns the function (the last definition, the
  implementation, is the one kept);
* `TypeVar` returns its name; `Any` is `object`; `ClassVar`, `Literal`, `NoReturn` and `Unpack`
  are a form that any subscript or union leaves as it is.

Nothing here is a private part of `typing` or `collections`; `tests/test_typed.py` holds each
stand-in against `typing`'s own, and `tests/test_fastpath.py` checks that no hot call imports
`typing`.
"""

import collections

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any as Any
    from typing import ClassVar as ClassVar
    from typing import Literal as Literal
    from typing import NamedTuple as NamedTuple
    from typing import NoReturn as NoReturn
    from typing import Protocol as Protocol
    from typing import TypedDict as TypedDict
    from typing import TypeVar as TypeVar
    from typing import Unpack as Unpack
    from typing import cast as cast
    from typing import overload as overload
else:
    _COPIED_BY_NAMEDTUPLE = frozenset({"__module__", "__annotations__"})
    # what `typing.NamedTuple` refuses in a class body: the named tuple's own machinery
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults"})
    _PROHIBITED |= {"_make", "_replace", "_asdict", "_source"}

    class _RecordMaker(type):
        """The metaclass of `NamedTuple` below: a class declared on it becomes a named tuple."""

        def __new__(mcls, name, bases, ns):
            if len(bases) != 1:
                raise TypeError("a NamedTuple record has no other base")
            annotations = ns.get("__annotations__", {})
            fields = tuple(annotations)
            defaults = [ns[field] for field in fields if field in ns]
            if any(field not in ns for field in fields[len(fields) - len(defaults) :]):
                raise TypeError(f"a field without a default follows one with a default in {name}")
            if (bad := _PROHIBITED.intersection(ns)) or "__classcell__" in ns:
                raise AttributeError(f"cannot set {sorted(bad or ['__classcell__'])[0]} in a NamedTuple record {name}")
            record = collections.namedtuple(name, fields, defaults=defaults, module=ns["__module__"])
            record.__annotations__ = dict(annotations)
            for key, value in ns.items():
                if key not in _COPIED_BY_NAMEDTUPLE and key not in fields:
                    setattr(record, key, value)
            return record

    NamedTuple = type.__new__(_RecordMaker, "NamedTuple", (), {"__module__": __name__})  # (not through `__new__`)

    class Protocol:
        """A structural type: checked by the type checker only."""

    class TypedDict(dict):
        """A dict whose keys the type checker knows."""

        def __init_subclass__(cls, total=True, **kwargs):
            super().__init_subclass__(**kwargs)

    class _Form:
        """`ClassVar`, `Literal`, `NoReturn`, `Unpack`: only ever read by the type checker."""

        def __getitem__(self, _item):
            return self

        def __or__(self, _other):
            return self

        __ror__ = __or__

    Any = object
    ClassVar = Literal = NoReturn = Unpack = _Form()

    def cast(_type, value):
        return value

    def overload(function):
        return function

    def TypeVar(name, *_constraints, **_options):
        return name
