"""Frozen value classes that are cheap to build.

Every value the policy core exchanges (jobs, running jobs, snapshots, actions, decisions) is a
frozen, slotted dataclass. The simulator builds several of them per job, and the ``__init__``
that :mod:`dataclasses` writes for a frozen class sets each field through
``object.__setattr__``, looked up afresh for every field: that made building values a tenth
of a whole simulation. :func:`value` is ``dataclass(frozen=True, slots=True)`` with that
``__init__`` replaced by one that calls each slot's own setter, bound once when the class is
made. Everything else is the dataclass's own: the signature, defaults, default factories,
``__post_init__``, equality, hashing, ``repr``, ``replace()`` and pickling, and instances are
just as frozen.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")


class _Factory:
    """The default of a parameter whose field has a default factory."""


_FACTORY = _Factory()


@dataclass_transform(frozen_default=True)
def value(cls: type[T]) -> type[T]:
    """``@dataclass(frozen=True, slots=True)`` with a faster ``__init__`` (module docstring)."""
    made: Any = dataclass(frozen=True, slots=True)(cls)
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    params: list[str] = []
    body: list[str] = []
    for f in fields(made):
        if not f.init or f.kw_only:
            raise TypeError(f"{made.__name__}.{f.name}: value() supports only plain fields")
        namespace[f"_set_{f.name}"] = getattr(made, f.name).__set__
        if f.default is not MISSING:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            body.append(f"if {f.name} is _FACTORY: {f.name} = _factory_{f.name}()")
        else:
            params.append(f.name)
        body.append(f"_set_{f.name}(self, {f.name})")
    if hasattr(made, "__post_init__"):
        body.append("self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n" + \
        "".join(f"    {line}\n" for line in body or ["pass"])
    exec(source, namespace)  # the source is built from the class's own field names only
    init = namespace["__init__"]
    init.__qualname__ = f"{made.__qualname__}.__init__"
    init.__module__ = made.__module__
    made.__init__ = init
    return made
