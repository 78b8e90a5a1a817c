"""``metaq status --prometheus``: a :class:`~metaq_py.report.status.QueueStatus` in the
Prometheus text exposition format (version 0.0.4), for node_exporter's textfile collector.

A site points the collector at a folder and has cron write ``metaq status --prometheus`` into a
``*.prom`` file there (written to a temporary name, then renamed, as node_exporter's
documentation asks). Every family is a gauge: the queue's state at one moment. The samples:

- ``metaq_tasks{state, folder}``: tasks per state and task folder;
- ``metaq_project_tasks{project, state}``: tasks per project (``-`` for none) and state;
- ``metaq_invalid_files``: waiting files that are not valid tasks;
- ``metaq_running_tasks{machine, job}``: tasks running now, per batch job;
- ``metaq_allocation_nodes``, ``metaq_allocation_idle_nodes``,
  ``metaq_allocation_seconds_left`` ``{machine, job}``: the live allocations (no
  ``seconds_left`` sample for one without a limit);
- ``metaq_notices{state}``: advance notices by state (``waiting``, ``due``, ``released``);
- ``metaq_status_problems``: lines and files ``status`` could not read.

Every label carries the queue's path (``queue``), so one collector can serve several queues.
Label values are escaped as the format defines (backslash, double quote, line feed); a user's
project name is a label value and cannot break the exposition.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from metaq_py.report.status import QueueStatus

__all__ = ["exposition"]

Sample = tuple[dict[str, str], float]


def _escape(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _family(name: str, doc: str, samples: Iterable[Sample]) -> list[str]:
    """One gauge family: its ``HELP`` and ``TYPE`` lines, then its samples."""
    lines = [f"# HELP {name} {doc}", f"# TYPE {name} gauge"]
    for labels, value in samples:
        inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        lines.append(f"{name}{{{inner}}} {_number(value)}")
    return lines


def _notice_state(state: str) -> str:
    """A notice's state as a label: ``in 5m`` (before its arrival) is ``waiting``."""
    return "waiting" if state.startswith("in ") else state


def exposition(status: QueueStatus) -> str:
    """``status`` in the text exposition format, ending with a line feed."""
    q = {"queue": status.queue}
    counts = status.counts
    jobs = Counter((r.machine, r.job) for r in status.running)
    notices = Counter(_notice_state(n.state) for n in status.notices)
    live = [({**q, "machine": a.machine or "", "job": a.job}, a) for a in status.allocations]
    lines = [
        *_family("metaq_tasks", "Tasks per state and task folder.",
                 (({**q, "state": s, "folder": f}, n)
                  for s, c in counts.states.items() for f, n in sorted(c.items()))),
        *_family("metaq_project_tasks", "Tasks per project and state.",
                 (({**q, "project": p, "state": s}, n)
                  for p, c in sorted(counts.projects.items()) for s, n in sorted(c.items()))),
        *_family("metaq_invalid_files", "Waiting files that are not valid tasks.",
                 [(q, len(counts.invalid))]),
        *_family("metaq_running_tasks", "Tasks running now, per batch job.",
                 (({**q, "machine": m, "job": j}, n) for (m, j), n in sorted(jobs.items()))),
        *_family("metaq_allocation_nodes", "Nodes of each live allocation.",
                 ((labels, a.nodes) for labels, a in live)),
        *_family("metaq_allocation_idle_nodes", "Idle nodes of each live allocation.",
                 ((labels, a.idle) for labels, a in live)),
        *_family("metaq_allocation_seconds_left", "Seconds left to each live allocation.",
                 ((labels, a.time_left) for labels, a in live if a.time_left is not None)),
        *_family("metaq_notices", "Advance notices by state.",
                 (({**q, "state": s}, n) for s, n in sorted(notices.items()))),
        *_family("metaq_status_problems", "Event-log lines and notice files status could "
                 "not read.", [(q, len(status.problems))]),
    ]
    return "\n".join(lines) + "\n"
