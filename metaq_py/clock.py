"""The clock is an object, so the runner and the simulator share one core.

As in SimPy, where ``Environment`` keeps simulated time and ``RealtimeEnvironment`` is a small
subclass tied to the wall clock, :class:`Clock` is the simulated clock that only moves when a
driver advances it, and :class:`WallClock` is the real one. The policy never sees either: it is
handed ``now`` inside a snapshot. Drivers take a clock as a parameter, which is what lets tests
run the live loop on a fake clock and the simulator run in real time.
"""

from __future__ import annotations

import time


class Clock:
    """Simulated time in seconds. It moves only forward, and only when told to."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance_to(self, t: float) -> None:
        """Move to ``t``. Time never goes backwards: a smaller ``t`` is a driver bug."""
        if t < self._now:
            raise ValueError(f"the clock cannot go back from {self._now} to {t}")
        self._now = t

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass. On a simulated clock this is instantaneous."""
        self.advance_to(self._now + max(0.0, seconds))


class WallClock(Clock):
    """Real time: epoch seconds from the system clock.

    ``now`` never goes backwards even if the system clock is stepped back (NTP, an
    administrator): it is the epoch time at start plus the monotonic time elapsed since, so a
    clock jump on the batch node cannot make a lease look stale or a deadline move.
    """

    def __init__(self) -> None:
        self._epoch0 = time.time()
        self._mono0 = time.monotonic()
        super().__init__(self._epoch0)

    def now(self) -> float:
        return self._epoch0 + (time.monotonic() - self._mono0)

    def advance_to(self, t: float) -> None:
        self.sleep(t - self.now())

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)
