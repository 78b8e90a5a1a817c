"""The policy's values: the hot ones write their __init__ out, and it must match their fields.

Pure Python and the compiled build run the same written-out ``__init__`` (tests/test_build.py
compares them).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError, fields, replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py import build as which_build
from metaq_py.policy import model
from metaq_py.policy.model import Decision, Job, Kind, Running, Start
from metaq_py.policy.snapshot import Snapshot
from metaq_py.policy.spans import Spans

# Whether the values come from their Python source is read from the import system (the
# module's file), not from metaq_py.build(), the code under test; which must agree with it.
PURE = str(model.__file__).endswith(".py")
pytestmark = pytest.mark.skipif(not PURE, reason="these tests read the Python source of the "
                                "values; this run imports a compiled build")


def test_the_build_says_what_the_import_system_loaded() -> None:
    assert (which_build() == "pure Python") == PURE

HOT = (Job, Running, Snapshot, Start, Decision)
INITS = [pytest.param(cls, cls.__init__, id=cls.__name__) for cls in HOT]


def build(cls: type, init: Callable[..., None], *args: object, **kwargs: object) -> Any:
    """An instance of ``cls`` made by ``init``."""
    value = object.__new__(cls)
    init(value, *args, **kwargs)
    return value


def test_the_hot_values_write_their_init_out() -> None:
    for cls in HOT:
        assert cls.__init__.__qualname__ == f"{cls.__name__}.__init__"
        assert inspect.getsourcefile(cls.__init__) == inspect.getsourcefile(cls)


@pytest.mark.parametrize(("cls", "init"), INITS)
def test_an_init_takes_the_fields_in_order_with_their_defaults(cls: type, init) -> None:
    params = list(inspect.signature(init).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in fields(cls)]
    for p, f in zip(params, fields(cls), strict=True):
        if f.default is not MISSING:
            assert p.default == f.default, f.name
        elif f.default_factory is not MISSING:
            assert p.default is None, f.name  # None stands for a new empty mapping
        else:
            assert p.default is inspect.Parameter.empty, f.name


def _one_of_each(cls: type) -> dict[str, object]:
    """A distinct value for every field of ``cls``, valid for its __init__."""
    job = Job("j", Kind.MALLEABLE, 4, 60.0, 1.0, min_size=2)
    return {
        Job: dict(id="j", kind=Kind.MALLEABLE, size=4, walltime=60.0, submit=1.0, min_size=2,
                  runtime=30.0, priority=3, rank=5, setup=7.0, checkpoint_interval=11.0,
                  checkpoint_cost=13.0, notice="n"),
        Running: dict(job=job, nodes=(0, 1), start=2.0, end=62.0, true_end=32.0,
                      last_checkpoint=12.0, borrowed="n"),
        Snapshot: dict(now=5.0, total=8, free=Spans.full(8), running={}, waiting=[job],
                       reserved={"n": Spans.full(8)}, notices={}, owed={"x": (1,)}, end=99.0,
                       borrowers={"n": {"j"}}, ordered=True, ending=[], ending_true=[],
                       ondemand_waiting=0),
        Start: dict(job="j", nodes=(0, 1), borrowed="n"),
        Decision: dict(actions=(Start("j", (0,)),), wake=9.0),
    }[cls]


@pytest.mark.parametrize(("cls", "init"), INITS)
def test_an_init_stores_every_field_and_stays_frozen(cls: type, init) -> None:
    given_values = _one_of_each(cls)
    value = build(cls, init, **given_values)
    for name, v in given_values.items():
        assert getattr(value, name) is v, name
    assert build(cls, init, *given_values.values()) == value  # positional, in field order
    name = fields(cls)[0].name
    with pytest.raises(FrozenInstanceError):
        setattr(value, name, None)
    assert replace(value) == value


@pytest.mark.parametrize(("cls", "init"), [p for p in INITS if p.values[0] is Snapshot])
def test_left_out_mappings_are_new_and_empty(cls: type, init) -> None:
    one = build(cls, init, now=0.0, total=1, free=Spans.full(1), running={}, waiting=[])
    two = build(cls, init, now=0.0, total=1, free=Spans.full(1), running={}, waiting=[])
    none = build(cls, init, 0.0, 1, Spans.full(1), {}, [], None, None, None, 1.0, None)
    for name in ("reserved", "notices", "owed", "borrowers"):
        assert getattr(one, name) == {} and getattr(one, name) is not getattr(two, name)
        assert getattr(none, name) == {}, name


@pytest.mark.parametrize(("cls", "init"), [p for p in INITS if p.values[0] is Job])
@given(size=st.integers(1, 50), min_size=st.integers(-2, 60))
def test_a_job_defaults_min_size_to_size_and_rejects_a_bad_one(cls: type, init, size: int,
                                                               min_size: int) -> None:
    if min_size == 0 or 1 <= min_size <= size:
        job = build(cls, init, "j", Kind.RIGID, size, 1.0, 0.0, min_size=min_size)
        assert job.min_size == (size if min_size == 0 else min_size)
    else:
        with pytest.raises(ValueError, match="need 1 <= min_size <= size"):
            build(cls, init, "j", Kind.RIGID, size, 1.0, 0.0, min_size=min_size)


def test_slowdown_is_linear_by_default_and_amdahl_with_a_serial_fraction() -> None:
    linear = Job(id=1, kind=Kind.MALLEABLE, size=8, min_size=1, walltime=800.0, submit=0.0)
    assert linear.slowdown(2) == 4.0 and linear.time_at(2, False) == 3200.0
    amdahl = Job(id=2, kind=Kind.MALLEABLE, size=8, min_size=1, walltime=800.0, submit=0.0,
                 serial=0.1)
    # T(n) = T1 (0.1 + 0.9 / n): T(2) / T(8) = 0.55 / 0.2125
    assert amdahl.slowdown(2) == pytest.approx(0.55 / 0.2125)
    assert amdahl.time_at(2, False) == pytest.approx(800.0 * 0.55 / 0.2125)
    assert amdahl.slowdown(8) == pytest.approx(1.0) and amdahl.time_at(8, False) == 800.0
    with pytest.raises(ValueError, match="only a malleable job has a serial fraction"):
        Job(id=3, kind=Kind.RIGID, size=8, walltime=800.0, submit=0.0, serial=0.1)
    with pytest.raises(ValueError, match=r"in \[0, 1\), got 1.0"):
        Job(id=4, kind=Kind.MALLEABLE, size=8, walltime=800.0, submit=0.0, serial=1.0)
