"""A campaign as one HTML page (``metaq report --html FILE``): progress per project and per
array, the allocations as Gantt charts with their idle gaps, utilisation, failures by outcome
and exit code, the slowest runs, retries, the on-demand record and resource use per project.

A page for 10^5 tasks stays small: at most :data:`GANTTS` allocations are drawn (those that
held the most node time; ``metaq gantt JOBID`` draws any other), each with at most
:data:`ROWS` hosts, and when an allocation ran more than :data:`MARKS` tasks, the tasks that
follow each other on a host closer than a pixel apart are drawn as one span that says how
many it holds (failed runs apart from the others). Tables keep their first
:data:`~metaq_py.report.html.campaign.TOP` rows and say how many there were.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from metaq_py.durations import format_duration
from metaq_py.report.accounting import OUTCOMES
from metaq_py.report.html.campaign import TOP, Campaign
from metaq_py.report.html.page import Section, Sort, cards, esc, note, page, table
from metaq_py.report.html.svg import PALETTE, Bar, GanttBar, Series, bars, gantt, legend, lines
from metaq_py.report.timeline import Timeline

__all__ = ["GANTTS", "MARKS", "ROWS", "campaign_html"]

GANTTS = 8
ROWS = 48
MARKS = 1500
KIND_COLOURS = {"rigid": "#2f6db3", "malleable": "#3a9a5b", "ondemand": "#e07b39"}
OUTCOME_COLOURS = {"finished": "#3a9a5b", "failed": "#b5443c", "retry": "#e07b39",
                   "requeued": "#7b5ea7", "preempted": "#d16ba5", "reclaimed": "#5f6b77",
                   "cancelled": "#8c6d3f"}


When = Callable[[float], str]


def _clock(span: tuple[float, float] | None) -> When:
    """The ticks of the time axes, as fine as the campaign's span needs: seconds for a
    campaign of minutes, dates for one of weeks (local time)."""
    length = 0.0 if span is None else span[1] - span[0]
    form = "%H:%M:%S" if length < 3 * 3600 else "%m-%d %H:%M" if length < 4 * 86400 \
        else "%Y-%m-%d"
    return lambda t: time.strftime(form, time.localtime(t))


def _moment(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _dur(seconds: float) -> str:
    return format_duration(round(seconds)) if seconds >= 1 else f"{seconds:.2f} s"


def campaign_html(c: Campaign, *, queue: str, generated: float) -> str:
    """The page of campaign ``c`` of the queue at ``queue``."""
    span = c.span
    when = _clock(span)
    told = (f"{_moment(span[0])} to {_moment(span[1])}" if span else "no events yet")
    subtitle = (f"queue {queue} · {c.report.jobs} batch jobs · {told} · written "
                f"{_moment(generated)} ({time.strftime('%Z', time.localtime(generated))})")
    sections = [
        Section("overview", "Overview", _overview(c)),
        Section("progress", "Progress", _progress(c, when)),
        Section("allocations", "Allocations", _allocations(c, when)),
        Section("utilisation", "Utilisation", _utilisation(c, when)),
        Section("failures", "Failures", _failures(c)),
        Section("slowest", "Slowest tasks", _slowest(c)),
        Section("retries", "Retries", _retries(c)),
        Section("ondemand", "On-demand", _ondemand(c)),
        Section("projects", "Resources per project", _projects(c)),
    ]
    if c.problems:
        shown = c.problems[:TOP]
        more = len(c.problems) - len(shown)
        sections.append(Section("problems", "Problems", note(
            f"{len(c.problems)} event-log lines or jobs were left out"
            + (f" (the first {len(shown)} below)" if more else "") + ".")
            + "<ul>" + "".join(f"<li>{esc(p)}</li>" for p in shown) + "</ul>"))
    return page("metaq campaign report", subtitle, sections)


def _overview(c: Campaign) -> str:
    tasks = c.tasks()
    finished = sum(1 for o in tasks.values() if o == "finished")
    failed = sum(1 for o in tasks.values() if o == "failed")
    od = c.report.ondemand
    return cards([
        (f"{c.report.jobs:,}", "batch jobs"), (f"{len(tasks):,}", "tasks run"),
        (f"{finished:,}", "tasks finished"), (f"{failed:,}", "tasks failed"),
        (f"{len(c.runs):,}", "runs (attempts)"), (f"{c.report.node_hours:,.1f}", "node-hours"),
        (f"{c.report.gpu_hours:,.1f}", "GPU-hours"), (f"{od.preemptions:,}", "preemptions"),
    ])


def _progress(c: Campaign, when: When) -> str:
    out = []
    for by, what in (("project", "per project"), ("array", "per array")):
        groups = c.progress(by)
        if not groups:
            out.append(note(f"Progress {what}: no {by} in the runs."))
            continue
        series = [Series(f"{g.name} finished", PALETTE[i % len(PALETTE)],
                         [(t, float(done)) for t, done, _ in g.points])
                  for i, g in enumerate(groups)]
        out.append(f"<h3>Tasks finished {what}</h3>")
        out.append(legend([(s.colour, f"{g.name} ({g.tasks:,} tasks)")
                           for s, g in zip(series, groups, strict=True)]))
        out.append(lines(series, x_text=when, y_text=lambda v: f"{v:,.0f}",
                         y_label="tasks finished"))
    return "".join(out)


def _allocations(c: Campaign, when: When) -> str:
    if not c.timelines:
        return note("No batch job has run metaq here yet.")
    chosen = sorted(c.timelines, key=lambda t: -(len(t.hosts) * (t.stop - t.start)))[:GANTTS]
    out = [legend([*((col, kind) for kind, col in KIND_COLOURS.items()), ("#b5443c", "failed"),
                   ("#fbeaea", "idle")])]
    left = len(c.timelines) - len(chosen)
    if left:
        out.append(note(f"The {len(chosen)} allocations that held the most node time; "
                        f"{left} more are not drawn ('metaq gantt JOBID' draws any)."))
    for tl in sorted(chosen, key=lambda t: t.start):
        out.append(_gantt(tl, when))
    return "".join(out)


def _gantt(tl: Timeline, when: When) -> str:
    hosts = list(tl.hosts[:ROWS])
    row = {h: i for i, h in enumerate(hosts)}
    span = max(tl.stop - tl.start, 1e-9)
    merge = span / 900 if len(tl.bars) > MARKS else 0.0
    spans: list[GanttBar] = []
    by_host: dict[str, list] = {h: [] for h in hosts}
    for b in tl.bars:
        if b.host in by_host:
            by_host[b.host].append(b)
    for host, host_bars in by_host.items():
        host_bars.sort(key=lambda b: b.start)
        i = 0
        while i < len(host_bars):
            j = i
            failed = host_bars[i].outcome == "failed"
            while j + 1 < len(host_bars) and host_bars[j + 1].start - host_bars[j].end < merge \
                    and (host_bars[j + 1].outcome == "failed") == failed:
                j += 1
            first, last = host_bars[i], host_bars[j]
            if i == j:
                tip = (f"{first.task} on {host}\n{_moment(first.start)} for "
                       f"{_dur(first.end - first.start)}\n{first.outcome or 'still running'}")
                colour = KIND_COLOURS.get(first.kind or "", "#5f6b77")
                if first.outcome == "failed":
                    colour = "#b5443c"
            else:
                tip = (f"{j - i + 1} {'failed ' if failed else ''}tasks on {host}\n"
                       f"{_moment(first.start)} to {_moment(last.end)}")
                colour = "#b5443c" if failed else "#2f6db3"
            spans.append(GanttBar(row[host], first.start, last.end, colour, tip))
            i = j + 1
        spans += _gaps(host, row[host], host_bars, tl.start, tl.stop, span)
    idle = tl.idle_seconds() / (span * max(len(tl.hosts), 1))
    head = (f"<h3>Job {esc(tl.jobid)}"
            f"{' on ' + esc(tl.machine) if tl.machine else ''}: {len(tl.hosts)} nodes, "
            f"{_dur(tl.stop - tl.start)}, idle {idle:.0%} of node time</h3>")
    more = note(f"{len(tl.hosts) - ROWS} more hosts not drawn.") if len(tl.hosts) > ROWS else ""
    return head + more + gantt([str(h) for h in hosts], spans, start=tl.start, end=tl.stop,
                               x_text=when)


def _gaps(host: str, row: int, host_bars: Sequence, start: float, stop: float,
          span: float) -> list[GanttBar]:
    """The idle stretches of one host longer than a pixel or so (at most 60 of them)."""
    out: list[GanttBar] = []
    at = start
    for b in [*host_bars, None]:
        until = stop if b is None else b.start
        if until - at > span / 600:
            out.append(GanttBar(row, at, until, "", f"{host} idle {_dur(until - at)}\n"
                                f"{_moment(at)} to {_moment(until)}", idle=True))
        if b is not None:
            at = max(at, b.end)
    out.sort(key=lambda g: -(g.end - g.start))
    return out[:60]


def _utilisation(c: Campaign, when: When) -> str:
    points = [(t, v) for t, v in c.utilisation() if v == v]
    if not points:
        return note("No allocation time to measure.")
    busy = sum(b.end - b.start for tl in c.timelines for b in tl.bars)
    held = sum(len(tl.hosts) * (tl.stop - tl.start) for tl in c.timelines)
    head = note(f"Node time running tasks over node time held by the allocations: "
                f"{busy / held:.1%} overall." if held > 0 else "")
    return head + lines([Series("utilisation", PALETTE[0], [(t, 100 * v) for t, v in points])],
                        x_text=when, y_text=lambda v: f"{v:.0f}%", y_label="busy nodes",
                        y_max=100.0)


def _failures(c: Campaign) -> str:
    outcomes = c.report.outcomes
    ordered = [o for o in OUTCOMES if o in outcomes] + [o for o in outcomes if o not in OUTCOMES]
    total = sum(outcomes.values()) or 1
    out = ["<h3>Runs by outcome</h3>", bars(
        [Bar(o, outcomes[o], OUTCOME_COLOURS.get(o, "#5f6b77"),
             f"{o}: {outcomes[o]:,} runs ({outcomes[o] / total:.1%})") for o in ordered],
        value_text=lambda v: f"{v:,.0f}")]
    codes = c.exit_codes()
    if codes:
        top = codes.most_common(20)
        out += ["<h3>Failed runs by exit code or signal</h3>", bars(
            [Bar(k, n, "#b5443c", f"{k}: {n:,} failed runs") for k, n in top],
            value_text=lambda v: f"{v:,.0f}")]
        if len(codes) > len(top):
            out.append(note(f"{len(codes) - len(top)} rarer codes not drawn."))
    else:
        out.append(note("No run failed."))
    return "".join(out)


def _slowest(c: Campaign) -> str:
    rows = [[r.task, r.project, Sort(_dur(r.seconds), r.seconds), r.nodes, r.outcome,
             r.jobid, Sort(_moment(r.start), r.start)] for r in c.slowest()]
    if not rows:
        return note("No run has ended yet.")
    return (note(f"The {len(rows)} longest of {len(c.runs):,} runs.")
            + table(["task", "project", "ran", "nodes", "outcome", "batch job", "started"],
                    rows))


def _retries(c: Campaign) -> str:
    many = c.retried()
    if not many:
        return note("No task ran more than once.")
    shown = many[:TOP]
    rows = [[task, len(rs), " → ".join(r.outcome for r in rs), rs[-1].outcome,
             Sort(_dur(sum(r.seconds for r in rs)), sum(r.seconds for r in rs))]
            for task, rs in shown]
    return (note(f"{len(many):,} tasks ran more than once"
                 + (f"; the {len(shown)} with the most runs:" if len(many) > len(shown) else ":"))
            + table(["task", "runs", "outcomes in order", "last", "time in all"], rows))


def _ondemand(c: Campaign) -> str:
    od = c.report.ondemand
    rate = "–" if od.rate is None else f"{od.rate:.0%}"
    out = [cards([(f"{od.arrivals:,}", "on-demand arrivals"),
                  (f"{od.starts:,}", "on-demand starts"),
                  (rate, f"instant starts ({od.instant} of {od.known})"),
                  (f"{od.preemptions:,}", "preemptions"), (f"{od.shrinks:,}", "shrinks"),
                  (f"{od.lost_node_hours:,.2f}", "node-hours lost to preemption")])]
    if c.notices:
        shown_notices = c.notices[:TOP]
        out.append(note(f"{len(c.notices):,} advance notices held nodes"
                        + (f"; the first {len(shown_notices)}:"
                           if len(shown_notices) < len(c.notices) else ":")))
        out.append(table(["notice", "nodes held", "from", "held for", "ended", "batch job"], [
            [n.notice, n.hosts, Sort(_moment(n.reserved), n.reserved),
             Sort(_dur(n.released - n.reserved), n.released - n.reserved)
             if n.released is not None else "still held", n.reason or "–", n.jobid]
            for n in shown_notices]))
    else:
        out.append(note("No advance notice held nodes."))
    if c.preemptions:
        shown = c.preemptions[:TOP]
        out.append(note(f"{len(c.preemptions):,} preemptions"
                        + (f"; the first {len(shown)}:" if len(shown) < len(c.preemptions)
                           else ":")))
        out.append(table(["when", "task", "for", "node-hours lost", "batch job"], [
            [Sort(_moment(p["time"]), p["time"]), str(p.get("task")),
             str(p.get("for_task") or "a reservation"),
             float(p.get("lost_node_seconds") or 0) / 3600, p["jobid"]] for p in shown]))
    return "".join(out)


def _projects(c: Campaign) -> str:
    if not c.report.projects:
        return note("No run has ended yet.")
    rows = []
    for p in c.report.projects:
        eff = p.cpu_efficiency
        rows.append([p.name, p.node_hours, p.gpu_hours, p.runs, p.cpu_hours,
                     Sort("n/a" if eff is None else f"{eff:.1%}",
                          float("nan") if eff is None else eff),
                     ", ".join(f"{k} {v}" for k, v in p.outcomes.items())])
    total = sum(p.node_hours for p in c.report.projects) or 1.0
    chart = bars([Bar(p.name, p.node_hours, PALETTE[i % len(PALETTE)],
                      f"{p.name}: {p.node_hours:,.2f} node-hours "
                      f"({p.node_hours / total:.1%})")
                  for i, p in enumerate(c.report.projects)],
                 value_text=lambda v: f"{v:,.1f} node-h")
    return chart + table(["project", "node-hours", "GPU-hours", "runs", "CPU-hours",
                          "CPU efficiency", "outcomes"], rows)
