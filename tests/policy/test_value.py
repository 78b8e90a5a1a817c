"""faster_init(): frozen dataclasses whose faster __init__ behaves exactly like the
usual one, slotted or not."""

from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError, dataclass, field, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.policy.value import compiled, faster_init


def declared(name: str) -> type:
    """A new class named ``name`` with the same fields and checks, to be made a dataclass."""

    class Declared:
        a: int
        b: str = "x"
        c: list[int] = field(default_factory=list)

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("a must be >= 0")

    Declared.__name__ = Declared.__qualname__ = name
    return Declared


Fast = faster_init(dataclass(frozen=True, slots=True)(declared("Fast")))
FastDict = faster_init(dataclass(frozen=True)(declared("FastDict")))


FAST = pytest.mark.parametrize("fast", [Fast, FastDict], ids=["slotted", "dict"])


@dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: str = "x"
    c: list[int] = field(default_factory=list)


@given(a=st.integers(0, 10**6), b=st.text(max_size=5), c=st.lists(st.integers(), max_size=3))
def test_same_fields_as_the_dataclass_init(a: int, b: str, c: list[int]) -> None:
    for args, kwargs in (((a,), {}), ((a, b), {}), ((a,), {"c": c}), ((), {"a": a, "b": b})):
        plain = Plain(*args, **kwargs)
        for cls in (Fast, FastDict):
            fast = cls(*args, **kwargs)
            assert (fast.a, fast.b, fast.c) == (plain.a, plain.b, plain.c)


@FAST
def test_defaults_factories_post_init_and_frozen(fast: type[Fast]) -> None:
    """The same checks for the slotted and the dict class."""
    one, two = fast(1), fast(1)
    assert one.c == [] and one.c is not two.c  # a fresh list each time
    assert one == two and one != fast(2)
    with pytest.raises(FrozenInstanceError):
        one.a = 2  # type: ignore[misc]
    with pytest.raises(ValueError, match="a must be"):
        fast(-1)
    with pytest.raises(TypeError):
        fast()  # type: ignore[call-arg]
    assert replace(one, b="z") == fast(1, "z")
    assert pickle.loads(pickle.dumps(fast(3, "q", [1]))) == fast(3, "q", [1])
    assert hasattr(one, "__dict__") == (fast is FastDict)
    assert repr(one) == f"{fast.__name__}(a=1, b='x', c=[])"
    assert not compiled(fast)  # this test module is never compiled
