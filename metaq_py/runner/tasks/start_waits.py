"""When the launcher hands its starts to the starter threads: while starts on the loop's
thread are seen to wait.

A start on the loop's thread waits for its child's ``exec``. With a CPU free that comes at
once, and handing starts to another thread would cost more (about 0.5 ms of CPU per start in
thread switches) than it saves; on a node whose CPUs are all busy the child first waits to be
scheduled, and the loop would wait with it. So :class:`StartWaits` keeps a running average of
each loop start's wall time beyond its CPU time, and says the node is busy while that average
is at least :attr:`StartWaits.busy_wait`. While the starters are in use it takes a look once a
second (:data:`PROBE`): the next :data:`PROBES` starts are made on the loop's thread, once no
start is with the starters (their thread switches would lengthen the waits measured), and their
mean wait is the new average. The load average, used before, counts the runner's own threads
and tasks, and took a runner busy with short tasks for a busy node (see ``docs/model.md``).
"""

from __future__ import annotations

import math

__all__ = ["CLIP", "PROBE", "PROBES", "SMOOTHING", "START_WAIT", "StartWaits"]

START_WAIT = 0.0025
"""Seconds a start on the loop's thread may wait, on average, before starts go to the starter
threads: its wall time beyond its CPU time, mostly its child's wait for a CPU before the
``exec``. On the 2-core development machine: 0.6 to 1.7 ms with both CPUs free (it varies from
run to run), 3.8 ms with one taken by other work, 13 ms with both (see docs/model.md)."""

PROBE = 1.0
"""Seconds between two looks, while the starter threads are in use, at whether a start on the
loop's thread still waits."""

PROBES = 8
"""Starts on the loop's thread that one such look takes (their waits are averaged: most starts
wait as little on a busy node as on an idle one, and a few wait a whole time slice)."""

SMOOTHING = 0.1
"""The weight of the last start in the running average of the waits (a single wait may be
a whole time slice of another process)."""

CLIP = 2.0
"""The most a single wait counts for, in :attr:`StartWaits.busy_wait`s. On the idle 2-core
development machine one start in 250 or so waits 12 to 30 ms, a whole time slice of another
process (a few of them together while the queue watcher starts), and unclipped one such wait
lifted the average over the threshold by itself: 4 to 22% of the starts were handed over, each
costing the loop a thread switch (10,000 no-op tasks: 1.69-1.72 ms a task, against 1.49-1.50
clipped, with none handed over). A node whose CPUs are all busy makes nearly every start wait
that long and stays over the threshold: with both CPUs taken by `yes`, 97% of the starts
were still handed over; with one, 38-55%."""


class StartWaits:
    """The waits of the starts made on the loop's thread, and the rule they feed (see the
    module text). The launcher calls :meth:`busy` before each start, :meth:`measured` after
    each start it made itself, and :meth:`handed` / :meth:`taken_back` around each start it
    gave a starter thread."""

    def __init__(self, busy_wait: float = START_WAIT) -> None:
        self.busy_wait = busy_wait
        """The average wait from which starts go to the starter threads (0: all of them,
        whatever the wait; infinite: none)."""
        self.waited = 0.0
        """The running average of the waits of the starts on the loop's thread (seconds)."""
        self.with_starters = 0
        """Starts handed to the starter threads and not yet taken back."""
        self.handed_over = 0
        """Starts handed to the starter threads since the runner began (the rest were made on
        the loop's thread)."""
        self._look_at = -math.inf
        """When the last look began (``-inf``: the starts are not handed over)."""
        self._look: list[float] | None = None
        """The waits of the look under way (``None``: none is)."""

    def busy(self, now: float) -> bool:
        """Whether the next start goes to a starter thread."""
        if self.busy_wait <= 0:
            return True
        if self._look is not None or self.waited < self.busy_wait:
            return False
        if self._look_at == -math.inf:  # busy from now: the first look a second later
            self._look_at = now
            return True
        if now - self._look_at >= PROBE and self.with_starters == 0:
            self._look_at = now
            self._look = []
            return False
        return True

    def measured(self, waited: float) -> None:
        """Take the wait of a start made on the loop's thread into the running average, or
        into the look under way."""
        waited = min(waited, CLIP * self.busy_wait)
        look = self._look
        if look is None:
            self.waited += SMOOTHING * (waited - self.waited)
            return
        look.append(waited)
        if len(look) == PROBES:
            self.waited = sum(look) / PROBES
            self._look = None
            if self.waited < self.busy_wait:
                self._look_at = -math.inf

    def handed(self) -> None:
        """A start goes to a starter thread."""
        self.with_starters += 1
        self.handed_over += 1

    def taken_back(self) -> None:
        """A start made by a starter thread is back with the loop."""
        self.with_starters -= 1
