"""The simulated clock moves only when told; the wall clock follows real time monotonically."""

import time

import pytest

from metaq_py.clock import Clock, WallClock


def test_simulated_clock_moves_only_forward_when_told():
    clock = Clock(100.0)
    assert clock.now() == 100.0
    clock.advance_to(150.5)
    assert clock.now() == 150.5
    clock.sleep(10)
    assert clock.now() == 160.5
    with pytest.raises(ValueError, match="cannot go back"):
        clock.advance_to(160.0)
    assert clock.now() == 160.5


def test_simulated_sleep_takes_no_real_time():
    clock = Clock()
    t0 = time.monotonic()
    clock.sleep(3600)
    assert clock.now() == 3600
    assert time.monotonic() - t0 < 60  # a real sleep would take an hour; any load, seconds


def test_wall_clock_tracks_epoch_time_and_never_goes_back():
    clock = WallClock()
    assert abs(clock.now() - time.time()) < 1.0
    readings = [clock.now() for _ in range(1000)]
    assert readings == sorted(readings)
    before = clock.now()
    clock.sleep(0.05)
    assert clock.now() - before >= 0.05
