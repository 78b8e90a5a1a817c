"""value(): a frozen slotted dataclass whose faster __init__ behaves exactly like the usual one."""

from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError, dataclass, field, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.policy.value import value


@value
class Fast:
    a: int
    b: str = "x"
    c: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.a < 0:
            raise ValueError("a must be >= 0")


@dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: str = "x"
    c: list[int] = field(default_factory=list)


@given(a=st.integers(0, 10**6), b=st.text(max_size=5), c=st.lists(st.integers(), max_size=3))
def test_same_fields_as_the_dataclass_init(a: int, b: str, c: list[int]) -> None:
    for args, kwargs in (((a,), {}), ((a, b), {}), ((a,), {"c": c}), ((), {"a": a, "b": b})):
        fast, plain = Fast(*args, **kwargs), Plain(*args, **kwargs)
        assert (fast.a, fast.b, fast.c) == (plain.a, plain.b, plain.c)


def test_defaults_factories_post_init_and_frozen() -> None:
    one, two = Fast(1), Fast(1)
    assert one.c == [] and one.c is not two.c  # a fresh list each time
    assert one == two and one != Fast(2)
    with pytest.raises(FrozenInstanceError):
        one.a = 2  # type: ignore[misc]
    with pytest.raises(ValueError, match="a must be"):
        Fast(-1)
    with pytest.raises(TypeError):
        Fast()  # type: ignore[call-arg]
    assert replace(one, b="z") == Fast(1, "z")
    assert pickle.loads(pickle.dumps(Fast(3, "q", [1]))) == Fast(3, "q", [1])
    assert not hasattr(one, "__dict__")
    assert repr(one) == "Fast(a=1, b='x', c=[])"
