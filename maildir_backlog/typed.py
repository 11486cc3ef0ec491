"""What the code's type annotations need while it runs, without importing `typing`.

Importing `typing` costs a hot call ~4 ms (a tenth of a `progress`), and a record declared with
`typing.NamedTuple` another ~20 µs over the `collections.namedtuple` it makes (docs/design.md,
*What a hot call imports*). The modules a hot call loads import these names from here instead:
the type checker sees `typing`'s own (the `TYPE_CHECKING` branch), the interpreter the stand-ins
below, which do at run time what this code asks of `typing`'s:

* `NamedTuple`: `class X(NamedTuple): a: int; b: str = ""` is the named tuple `typing` would make
  (`collections.namedtuple("X", ("a", "b"), defaults=("",))`), with the class body's docstring,
  methods and properties, and its annotations kept as written (never evaluated). It is made
  without `collections.namedtuple`, which compiles source for each class's `__new__` (~45 µs a
  record, ~55 records a call: session 29): one `__new__` is compiled per number of fields and
  renamed for each record (`CodeType.replace`), and the methods are shared;
* `Protocol` and `TypedDict`: plain base classes (a protocol is only checked statically; a typed
  dict is a dict);
* `cast` returns its value; `overload` returns the function (the last definition, the
  implementation, is the one kept);
* `TypeVar` returns its name; `Any` is `object`; `ClassVar`, `Literal`, `NoReturn` and `Unpack`
  are a form that any subscript or union leaves as it is;
* `pattern(source)` is `re.Pattern` to the type checker and, while the code runs, a pattern
  compiled on its first use (each method, once read, is kept on it), so that a call does not
  compile the expressions it never uses (~0.1 ms each; an `add` left ten of twenty unused).

Nothing here is a private part of `typing`, `collections` or the interpreter; `tests/test_typed.py` holds each
stand-in against `typing`'s own, and `tests/test_fastpath.py` checks that no hot call imports
`typing`.
"""

import re

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

    def pattern(source: str) -> re.Pattern[str]:
        return re.compile(source)
else:
    from operator import itemgetter

    _COPIED_BY_NAMEDTUPLE = frozenset({"__module__", "__annotations__"})
    # what `typing.NamedTuple` refuses in a class body: the named tuple's own machinery
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults"})
    _PROHIBITED |= {"_make", "_replace", "_asdict", "_source"}
    _FUNCTION = type(lambda: None)
    _NEW_GLOBALS = {"_tuple_new": tuple.__new__}
    _NEW_CODE: dict = {}  # arity: the compiled `__new__` every record with that many fields renames

    def _new_code(arity):
        """`def __new__(_cls, f0, f1): return _tuple_new(_cls, (f0, f1))`, compiled once per arity."""
        code = _NEW_CODE.get(arity)
        if code is None:
            names = "".join(f"f{i}, " for i in range(arity))
            space: dict = {}
            exec(f"def __new__(_cls, {names}):\n    return _tuple_new(_cls, ({names}))\n", _NEW_GLOBALS, space)  # noqa: S102
            code = _NEW_CODE[arity] = space["__new__"].__code__
        return code

    def _make(cls, iterable):
        record = tuple.__new__(cls, iterable)
        if len(record) != len(cls._fields):
            raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(record)}")
        return record

    def _replace(self, /, **changes):
        record = self._make(map(changes.pop, self._fields, self))
        if changes:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}")
        return record

    def _repr(self):
        shown = ", ".join(f"{field}={value!r}" for field, value in zip(self._fields, self, strict=True))
        return f"{self.__class__.__name__}({shown})"

    def _asdict(self):
        return dict(zip(self._fields, self, strict=True))

    def _getnewargs(self):
        return tuple(self)

    def _record(name, fields, defaults, module):
        """The class `collections.namedtuple(name, fields, defaults=defaults, module=module)` makes,
        made without compiling source per class: its `__new__` is the compiled one of its arity,
        its arguments renamed (`CodeType.replace`), and its methods are shared by every record."""
        for field in fields:
            if field.startswith("_"):
                raise ValueError(f"Field names cannot start with an underscore: {field!r}")
        code = _new_code(len(fields)).replace(co_varnames=("_cls", *fields), co_qualname=f"{name}.__new__")
        new = _FUNCTION(code, _NEW_GLOBALS, "__new__", tuple(defaults) or None)  # (its qualname is the code's)
        space = {
            "__doc__": f"{name}({', '.join(fields)})",
            "__slots__": (),
            "__module__": module,
            "_fields": fields,
            "_field_defaults": dict(zip(fields[len(fields) - len(defaults) :], defaults, strict=True)),
            "__new__": new,
            "__match_args__": fields,
            "_make": classmethod(_make),
            "_replace": _replace,
            "__repr__": _repr,
            "_asdict": _asdict,
            "__getnewargs__": _getnewargs,
        }
        for index, field in enumerate(fields):
            space[field] = property(itemgetter(index), doc=f"Alias for field number {index}")
        return type(name, (tuple,), space)

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
            record = _record(name, fields, defaults, ns["__module__"])
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

    class pattern:
        """A regular expression compiled on its first use."""

        def __init__(self, source):
            self.pattern = source

        def __getattr__(self, name):  # (asked only for what is not kept yet)
            value = getattr(re.compile(self.pattern), name)  # (`re` keeps the compiled one)
            setattr(self, name, value)
            return value

        def __repr__(self):
            return f"pattern({self.pattern!r})"
