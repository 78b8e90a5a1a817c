"""The runner's event vocabulary: what each line of ``jobs/<jobid>/events.jsonl`` says.

``docs/events.md`` is the table readers (``metaq report``, ``metaq explain``, the Gantt plot)
work from; this module is the one place the runner writes them, so the names and fields in the
file always match that table. Every event has ``time`` (Unix seconds) and ``event``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from metaq_py.durations import format_duration
from metaq_py.queue.eventlog import EventLog
from metaq_py.words import counted

__all__ = ["EVENTS", "OUTCOMES", "EventWriter", "Narrator"]

EVENTS = ("runner-start", "runner-stop", "start", "end", "arrival", "preempt", "shrink",
          "expand", "reserve", "release", "checkpoint", "reclaim")
"""Every event name the runner writes."""

OUTCOMES = ("finished", "failed", "retry", "requeued", "preempted", "reclaimed", "cancelled")
"""The values of ``outcome`` in an ``end`` event."""


class EventWriter:
    """Writes this batch job's events (:meth:`write`), stamped with the runner's clock.

    With ``buffered``, events are kept until :meth:`flush` and then go to the file at once
    (one system call): the runner flushes once per wake-up, before it waits again, so a burst of
    starts and ends costs one write and the file is complete whenever the runner is idle.

    A failure to write (a full disk, a removed queue) is reported through ``warn`` once and
    never stops the runner: the tasks matter more than their log.
    """

    def __init__(self, log: EventLog, *, now: Callable[[], float],
                 warn: Callable[[str], None], buffered: bool = False,
                 narrator: Narrator | None = None) -> None:
        self.log = log
        self.narrator = narrator
        self._now = now
        self._warn = warn
        self._failed = False
        self._buffered = buffered
        self._pending: list[dict[str, Any]] = []

    def write(self, event: str, **fields: Any) -> None:
        """Write one event of the vocabulary (:data:`EVENTS`) with its ``fields``."""
        if event not in EVENTS:
            raise ValueError(f"{event!r} is not in the runner's event vocabulary")
        record = {"time": self._now(), "event": event, **fields}
        self._pending.append(record)
        if self.narrator is not None:
            self.narrator.heard(record)
        if not self._buffered:
            self.flush()

    def flush(self) -> None:
        """Write the events kept so far (they are dropped if the write fails)."""
        if not self._pending:
            return
        lines, self._pending = self._pending, []
        try:
            self.log.append_many(lines)
            self._failed = False
        except OSError as e:
            if not self._failed:
                self._warn(f"cannot write the event log {self.log.path}: {e.strerror}; "
                           f"the tasks go on, but '{lines[0]['event']}' and later events "
                           f"may be missing")
            self._failed = True


FAILURES_NAMED = 5
"""How many failed tasks the closing summary names (the rest are counted)."""


class Narrator:
    """What a person watching ``metaq run`` is told of its tasks: with ``verbose`` (``-v``,
    or METAQ's ``METAQ_VERBOSITY``), a line per start and per end as the events are
    written; always, a closing summary (:meth:`summary`) that names the tasks that failed.
    Tasks are named as people write them (``named``: ``todo/prop.sh[13]`` for an index of an
    array), while the events keep their identities."""

    def __init__(self, say: Callable[[str], None], *, verbose: bool,
                 named: Callable[[str], str]) -> None:
        self.say = say
        self.verbose = verbose
        self.named = named
        self.ended: Counter[str] = Counter()
        self.failed: list[str] = []

    def heard(self, e: dict[str, Any]) -> None:
        """Take note of the event ``e`` as it is written."""
        if e["event"] not in ("start", "end"):
            return
        task = self.named(str(e.get("task")))
        if e["event"] == "start":
            if self.verbose:
                hosts = ",".join(map(str, e.get("hosts") or ())) or "no host"
                self.say(f"started {task} on {hosts} (attempt {e.get('attempt')})")
            return
        outcome = str(e.get("outcome"))
        self.ended[outcome] += 1
        how = _how_it_ended(e)
        if outcome == "failed":
            cause = _cause(e)
            self.failed.append(task + (f" ({cause})" if cause else ""))
        if self.verbose:
            seconds = e.get("seconds")
            ran = f" after {_short(seconds)}" if isinstance(seconds, int | float) else ""
            self.say(f"{task} {how}{ran}" + {
                "retry": "; it goes back to wait for a retry",
                "requeued": "; it goes back to wait (not a failure)",
                "preempted": "; it goes back to wait (not a failure)"}.get(outcome, ""))

    def summary(self) -> str | None:
        """One line: how the attempts this runner started ended, naming the tasks that
        failed for good;
        ``None`` when none ended."""
        total = sum(self.ended.values())
        if not total:
            return None
        parts = [f"{n} {OUTCOME_PAST.get(o, o)}" for o, n in sorted(
            self.ended.items(), key=lambda item: OUTCOMES.index(item[0])
            if item[0] in OUTCOMES else len(OUTCOMES))]
        line = f"{counted(total, 'attempt')} ended: {', '.join(parts)}"
        if self.failed:
            named = "; ".join(self.failed[:FAILURES_NAMED])
            more = len(self.failed) - FAILURES_NAMED
            line += f". Failed: {named}" + (f"; and {more} more" if more > 0 else "") + \
                " ('metaq show <task>' tells each attempt and where its output is)"
        return line


OUTCOME_PAST = {"retry": "failed and will be retried", "requeued": "requeued",
                "preempted": "preempted", "reclaimed": "taken back by another job"}
"""An ``end``'s outcome in the closing summary, where its word alone would mislead."""


def _how_it_ended(e: dict[str, Any]) -> str:
    """``finished``, ``failed (exit code 3)``, ``failed (killed by SIGKILL)``, ..."""
    outcome = str(e.get("outcome"))
    word = "failed" if outcome == "retry" else outcome
    cause = _cause(e)
    return f"{word} ({cause})" if cause and word in ("failed", "cancelled") else word


def _cause(e: dict[str, Any]) -> str | None:
    """Why a run ended as it did: its signal, else its exit code, else its reason."""
    code, signal = e.get("exit_code"), e.get("signal")
    if signal:
        return f"killed by {signal}"
    if isinstance(code, int) and not isinstance(code, bool):
        return f"exit code {code}"
    return str(e["reason"]) if e.get("reason") else None


def _short(seconds: float) -> str:
    """A run time with its unit: tenths of a second under a minute, else hh:mm:ss."""
    return f"{seconds:.1f} s" if seconds < 59.95 else format_duration(round(seconds))
