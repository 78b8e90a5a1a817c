"""Frozen value classes that are cheap to build.

Every value the policy core exchanges (jobs, running jobs, snapshots, actions, decisions) is a
frozen dataclass. The simulator builds several of them per job, and the ``__init__`` that
:mod:`dataclasses` writes for a frozen class sets each field through ``object.__setattr__``,
looked up afresh for every field: that made building values a tenth of a whole simulation.
:func:`faster_init` replaces that ``__init__`` with one that stores every field at once: into
the instance's ``__dict__`` (one ``update`` call), or through each field's own setter, bound
once, for a slotted class. Everything else is the dataclass's own: the signature, defaults,
default factories, ``__post_init__``, equality, hashing, ``repr``, ``replace()`` and pickling,
and instances are just as frozen.

mypyc (``setup.py``) compiles a plain ``@dataclass(frozen=True)`` to a native class whose
fields are C-level descriptors, but it keeps the ``__init__`` that :mod:`dataclasses` wrote,
in Python, setting each field through ``object.__setattr__``. :func:`faster_init` then binds
those descriptors' setters, as for slots. An ``__init__`` written out in the class body, which
mypyc compiles to direct stores, is faster still: :func:`faster_init` leaves a compiled one
alone, and in pure Python replaces it like any other, keeping it as ``__init__.__wrapped__``.
That is why :mod:`metaq_py.policy.model` declares its values with a plain
``@dataclass(frozen=True)`` (a slotted dataclass is a new class that mypyc cannot compile) and
calls :func:`faster_init` on them. A class that is never compiled may be slotted:
``@faster_init`` over ``@dataclass(frozen=True, slots=True)``.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from types import FunctionType
from typing import Any, TypeVar

T = TypeVar("T")


class _Factory:
    """The default of a parameter whose field has a default factory."""


_FACTORY = _Factory()


def compiled(cls: type) -> bool:
    """Whether ``cls`` is a native class that mypyc compiled."""
    return hasattr(cls, "__mypyc_attrs__")


def faster_init(cls: type[T]) -> type[T]:
    """Give the frozen dataclass ``cls`` a faster ``__init__`` (module docstring); return it."""
    made: Any = cls
    original = made.__dict__.get("__init__")
    if not isinstance(original, FunctionType):
        return cls  # native code that mypyc compiled from an __init__ written out
    # a slot and a compiled class's field are both set through the descriptor on the class
    slotted = "__slots__" in made.__dict__ or compiled(made)
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    params: list[str] = []
    body: list[str] = []
    for f in fields(made):
        if not f.init or f.kw_only:
            raise TypeError(f"{made.__name__}.{f.name}: faster_init() supports only plain "
                            "fields")
        if f.default is not MISSING:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            body.append(f"if {f.name} is _FACTORY: {f.name} = _factory_{f.name}()")
        else:
            params.append(f.name)
        if slotted:
            namespace[f"_set_{f.name}"] = made.__dict__[f.name].__set__
            body.append(f"_set_{f.name}(self, {f.name})")
    names = [f.name for f in fields(made)]
    if not slotted and names:
        body.append(f"self.__dict__.update({', '.join(f'{n}={n}' for n in names)})")
    if hasattr(made, "__post_init__"):
        body.append("self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n" + \
        "".join(f"    {line}\n" for line in body or ["pass"])
    exec(source, namespace)  # the source is built from the class's own field names only
    init = namespace["__init__"]
    init.__qualname__ = f"{made.__qualname__}.__init__"
    init.__module__ = made.__module__
    init.__wrapped__ = original
    made.__init__ = init
    return cls
