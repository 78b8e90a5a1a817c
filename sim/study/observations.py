"""The paper's 17 observations (``paper-observations.md``), each judged on our tables.

Every observation is a function of an :class:`Evidence`: the results tables of one trace at
one load (the policies on W1..W5, and the variant studies on W5). It returns a
:class:`Verdict`, one of four words (:class:`Word`):

- **holds**: every part of the claim shows, outside the noise;
- **contradicted**: some part shows the opposite, outside the noise;
- **undecided**: some part's difference lies inside its 95% interval (and none is
  contradicted): more seeds might decide it;
- **cannot judge**: some part cannot move at this load (utilisation, when the work offered is
  below the machine's capacity: every policy then does the work as it comes), or the
  evidence lacks a figure; and no other part is contradicted or undecided.

How each part is judged (paired runs, readings, tolerances) is :mod:`sim.study.judging`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sim.study.aggregate import ResultsTable
from sim.study.grid import BASELINE, MECHANISM_NAMES
from sim.study.judging import (
    ABOUT,
    MUCH,
    RANK,
    SLIGHT,
    UTIL_GAIN,
    Checks,
    CUx,
    Evidence,
    Lacking,
    Observation,
    Paired,
    Verdict,
    Word,
    average,
    better,
    decide,
    hours,
    mechs,
    paired,
    percent,
    show_of,
)


def obs1(e: Evidence) -> Verdict:
    t = e.paper
    c = Checks(t)
    base_u, mech_u = paired(t, BASELINE, "utilisation"), mechs(t, "utilisation")
    gain = mech_u / base_u - 1
    c.sign(gain - UTIL_GAIN, f"utilisation {percent(base_u.mean)} → {percent(mech_u.mean)} "
                             f"({100 * gain.mean:+.1f}%, paper > +5%)", utilisation=True)
    base_i, mech_i = paired(t, BASELINE, "instant_start"), mechs(t, "instant_start")
    c.band(base_i, 0.22 - ABOUT, 0.22 + ABOUT, f"baseline instant start "
                                                f"{percent(base_i.mean)} (paper 22%)")
    c.band(mech_i, 0.98 - ABOUT, 1.0, f"mechanisms' instant start {percent(mech_i.mean)} "
                                      f"(paper 98%)")
    base_t, mech_t = paired(t, BASELINE, "turnaround_all"), mechs(t, "turnaround_all")
    c.sign(mech_t - base_t, f"turnaround {hours(base_t.mean)} → {hours(mech_t.mean)} "
                            f"(paper 15 h → 22 h)")
    return c.verdict(1)


def obs2(e: Evidence) -> Verdict:
    t = e.paper
    c = Checks(t)
    for metric, higher_is_worse, label in (("turnaround_all", True, "longest turnaround"),
                                          ("utilisation", False, "lowest utilisation"),
                                          ("preempt_malleable", True,
                                           "highest malleable preemption")):
        worst = paired(t, "N&PAA", metric)
        others = {m: paired(t, m, metric) for m in MECHANISM_NAMES if m != "N&PAA"}
        # N&PAA is worst when it is worse than the best of the rest's worst, run by run:
        # against each other mechanism in turn; the part is the weakest comparison
        diffs = [worst - o if higher_is_worse else o - worst for o in others.values()]
        words = [decide(d) for d in diffs]
        word = max(words, key=RANK.__getitem__)
        cells = frozenset().union(*(d.cells for d, w in zip(diffs, words, strict=True)
                                    if w is Word.UNDECIDED))
        runner = max(others, key=lambda m: others[m].mean * (1 if higher_is_worse else -1))
        show = show_of(metric)
        c.part(word, f"{label}: N&PAA {show(worst.mean)}, the worst of the others {runner} "
                     f"{show(others[runner].mean)}", seeds=worst.seeds(),
               utilisation=metric == "utilisation", cells=cells)
    return c.verdict(2)


def obs3(e: Evidence) -> Verdict:
    t = e.paper
    c = Checks(t)
    pairs = [(f"{n}&SPAA", f"{n}&PAA") for n in ("N", "CUA", "CUP")]
    for a, b in pairs:
        better(c, t, a, b, "utilisation", True, "utilisation")
    for a, b in pairs:
        better(c, t, a, b, "preempt_malleable", False, "malleable preemption")
    rise = mechs(t, "preempt_rigid", [a for a, _ in pairs]) - \
        mechs(t, "preempt_rigid", [b for _, b in pairs])
    c.band(rise, 0.0, SLIGHT, f"rigid preemption SPAA − PAA {100 * rise.mean:+.1f} points "
                              f"(paper: rises slightly)")
    return c.verdict(3)


def obs4(e: Evidence) -> Verdict:
    t = e.paper
    c = Checks(t)
    pairs = [(f"{n}&PAA", f"{n}&SPAA") for n in ("CUA", "CUP")]
    for a, b in pairs:
        better(c, t, a, b, "turnaround_all", False, "turnaround")
    for a, b in pairs:
        better(c, t, a, b, "preempt_rigid", False, "rigid preemption")
    return c.verdict(4)


def obs5(e: Evidence) -> Verdict:
    t = e.paper
    c = Checks(t)
    pairs = [(f"CUA&{a}", f"CUP&{a}") for a in ("PAA", "SPAA")]
    for a, b in pairs:
        better(c, t, a, b, "turnaround_all", False, "turnaround")
    for a, b in pairs:
        better(c, t, a, b, "utilisation", True, "utilisation")
    return c.verdict(5)


def obs6(e: Evidence) -> Verdict:
    t = e.paper
    c = Checks(t)
    for m in CUx:
        mal, rig = paired(t, m, "turnaround_malleable"), paired(t, m, "turnaround_rigid")
        c.sign(rig - mal, f"{m} malleable {hours(mal.mean)} vs rigid {hours(rig.mean)}")
    return c.verdict(6)


def obs7(e: Evidence) -> Verdict:
    t = e.paper
    c = Checks(t)
    best = paired(t, "N&SPAA", "turnaround_rigid")
    for m in MECHANISM_NAMES:
        if m != "N&SPAA":
            other = paired(t, m, "turnaround_rigid")
            c.sign(other - best, f"rigid turnaround N&SPAA {hours(best.mean)} vs {m} "
                                 f"{hours(other.mean)}")
    mal = paired(t, "N&SPAA", "turnaround_malleable")
    c.shown.append(f"N&SPAA malleable {hours(mal.mean)} (paper: both about 24 h)")
    return c.verdict(7)


def obs8(e: Evidence) -> Verdict:
    t = e.paper
    c = Checks(t)
    for m in MECHANISM_NAMES:
        pm, pr = paired(t, m, "preempt_malleable"), paired(t, m, "preempt_rigid")
        c.sign(pm - pr, f"{m} preempted malleable {percent(pm.mean)} vs rigid {percent(pr.mean)}")
    mal, rig = mechs(t, "turnaround_malleable"), mechs(t, "turnaround_rigid")
    c.sign(rig - mal, f"yet turnaround malleable {hours(mal.mean)} vs rigid {hours(rig.mean)}")
    return c.verdict(8)


def obs9(e: Evidence) -> Verdict:
    t = e.paper
    c = Checks(t)
    share = paired(t, BASELINE, "ondemand_work_share")
    c.band(share, 0.03, 0.15, f"on-demand work {percent(share.mean)} (paper 3–15%)")
    rates = [paired(t, m, "instant_start") for m in MECHANISM_NAMES]
    mean = average(rates)
    c.band(mean, 0.98 - ABOUT, 1.0, f"instant start {percent(mean.mean)} (paper about 98%)")
    keys = set(rates[0].values).intersection(*(r.values for r in rates[1:]))
    spread = Paired({k: max(r.values[k] for r in rates) - min(r.values[k] for r in rates)
                     for k in sorted(keys)}, average(rates).cells)
    c.band(spread, 0.0, SLIGHT, f"spread between mechanisms {100 * spread.mean:.1f} points")
    return c.verdict(9)


def obs10(e: Evidence) -> Verdict:
    t = e.paper
    c = Checks(t)
    base, mech = paired(t, BASELINE, "turnaround_all"), mechs(t, "turnaround_all")
    rise = mech / base - 1
    c.band(rise, 0.30 - ABOUT, 0.30 + ABOUT, f"turnaround {hours(base.mean)} → {hours(mech.mean)} "
                                             f"({100 * rise.mean:+.0f}%, paper about +30%)")
    return c.verdict(10)


def _workloads(t: ResultsTable | None) -> tuple[str, ...]:
    if t is None or len(t.workloads) < 2:
        raise Lacking("workloads")
    return t.workloads


def _on(t: ResultsTable | None, policies: Sequence[str], metric: str, w: str) -> Paired:
    return mechs(t, metric, policies, workload=w).by_seed()


def obs11(e: Evidence) -> Verdict:
    t = e.paper
    c = Checks(t)
    cup = ("CUP&PAA", "CUP&SPAA")
    workloads = _workloads(t)
    if "W2" not in workloads:
        raise Lacking("W2")
    for metric, higher, word in (("turnaround_all", False, "turnaround"),
                                 ("utilisation", True, "utilisation"),
                                 ("preempt_rigid", False, "rigid preemption")):
        w2 = _on(t, cup, metric, "W2")
        show = show_of(metric)
        for w in workloads:
            if w != "W2":
                other = _on(t, cup, metric, w)
                c.sign(w2 - other if higher else other - w2,
                       f"CUP {word} W2 {show(w2.mean)} vs {w} {show(other.mean)}",
                       utilisation=metric == "utilisation")
    return c.verdict(11)


def obs12(e: Evidence) -> Verdict:
    t = e.paper
    c = Checks(t)
    cua = ("CUA&PAA", "CUA&SPAA")
    workloads = _workloads(t)
    if "W4" not in workloads:
        raise Lacking("W4")
    w4 = _on(t, cua, "turnaround_all", "W4")
    for w in workloads:
        if w != "W4":
            other = _on(t, cua, "turnaround_all", w)
            c.sign(other - w4, f"CUA turnaround W4 {hours(w4.mean)} vs {w} {hours(other.mean)}")
    inst = _on(t, cua, "instant_start", "W4")
    rest = average([_on(t, cua, "instant_start", w) for w in workloads if w != "W4"])
    c.sign(inst - rest, f"CUA instant start W4 {percent(inst.mean)} vs others {percent(rest.mean)}")
    return c.verdict(12)


def _variant(e: Evidence, name: str) -> ResultsTable:
    t = e.variants.get(name)
    if t is None or len(t.variants) < 2:
        raise Lacking(name)
    return t


def _label(t: ResultsTable, key: str, value: float) -> str:
    for v in t.variants:
        if f"{key}={value:g}" in v.split(","):
            return v
    raise Lacking(f"{key}={value:g}")


def obs13(e: Evidence) -> Verdict:
    t = _variant(e, "checkpoint")
    c = Checks(t)
    often = _label(t, "checkpoint_scale", 0.5)
    for m in MECHANISM_NAMES:
        r0, r1 = (paired(t, m, "turnaround_rigid", variant=v) for v in (t.reference, often))
        u0, u1 = (paired(t, m, "utilisation", variant=v) for v in (t.reference, often))
        c.sign(r0 - r1, f"{m} rigid {hours(r0.mean)} → {hours(r1.mean)}")
        c.sign(u1 - u0, f"{m} utilisation {percent(u0.mean)} → {percent(u1.mean)}",
               utilisation=True)
    return c.verdict(13)


def obs14(e: Evidence) -> Verdict:
    t = _variant(e, "failures")
    c = Checks(t)
    worst = t.variants[-1]
    for metric, up in (("utilisation", False), ("instant_start", False),
                       ("preempt_rigid", True), ("preempt_malleable", True),
                       ("turnaround_rigid", True)):
        a = mechs(t, metric, variant=t.reference)
        b = mechs(t, metric, variant=worst)
        show = show_of(metric)
        c.sign(b - a if up else a - b, f"{metric} {show(a.mean)} → {show(b.mean)}",
               utilisation=metric == "utilisation")
    c.shown.append(f"({worst} against none, mean of the six)")
    return c.verdict(14)


def obs15(e: Evidence) -> Verdict:
    t = _variant(e, "malleable-min")
    c = Checks(t)
    big = t.variants[-1]
    rise = {m: paired(t, m, "turnaround_all", variant=big) - paired(t, m, "turnaround_all",
                                                            variant=t.reference)
            for m in MECHANISM_NAMES}
    mean = average(list(rise.values()))
    c.sign(mean, f"turnaround {mean.mean:+.2f} h from {t.reference} to {big} (mean)")
    spaa = average([rise[m] for m in MECHANISM_NAMES if m.endswith("SPAA")])
    paa = average([rise[m] for m in MECHANISM_NAMES if m.endswith("&PAA")])
    c.sign(spaa - paa, f"under SPAA {spaa.mean:+.2f} h vs PAA {paa.mean:+.2f} h")
    return c.verdict(15)


def obs16(e: Evidence) -> Verdict:
    t = _variant(e, "setup")
    c = Checks(t)
    low, high = _label(t, "rigid_setup_shift", -0.05), _label(t, "rigid_setup_shift", 0.05)
    turn = [mechs(t, "turnaround_all", variant=v) for v in (low, t.reference, high)]
    util = [mechs(t, "utilisation", variant=v) for v in (low, t.reference, high)]
    shown = " / ".join(hours(x.mean) for x in turn)
    c.sign(turn[1] - turn[0], f"turnaround at rigid setup 0–5/5–10/10–15%: {shown} (first "
                              f"step)")
    c.sign(turn[2] - turn[1], "turnaround, second step")
    shown = " / ".join(percent(x.mean) for x in util)
    c.sign(util[0] - util[1], f"utilisation {shown} (first step)", utilisation=True)
    c.sign(util[1] - util[2], "utilisation, second step", utilisation=True)
    return c.verdict(16)


def obs17(e: Evidence) -> Verdict:
    t = _variant(e, "setup")
    c = Checks(t)
    low = _label(t, "rigid_setup_shift", -0.05)
    a = mechs(t, "preempt_rigid", variant=t.reference)
    b = mechs(t, "preempt_rigid", variant=low)
    c.sign(b - a * MUCH, f"rigid preemption {percent(a.mean)} at 5–10% setup → {percent(b.mean)} "
                         f"at 0–5% (much more: ≥ {MUCH:g}x)")
    return c.verdict(17)


OBSERVATIONS: tuple[Observation, ...] = (
    Observation(1, "The mechanisms raise utilisation by > 5%, instant start 22% → 98%, "
                   "turnaround 15 h → 22 h", obs1),
    Observation(2, "N&PAA is worst: longest turnaround, lowest utilisation, most malleable "
                   "preemption", obs2),
    Observation(3, "SPAA beats PAA on utilisation and malleable preemption; rigid preemption "
                   "rises slightly", obs3),
    Observation(4, "PAA (N excepted) gives lower turnaround and rigid preemption than SPAA", obs4),
    Observation(5, "CUA beats CUP slightly on turnaround and utilisation", obs5),
    Observation(6, "Under CUA/CUP × PAA/SPAA malleable jobs turn around faster than rigid",
                obs6),
    Observation(7, "N&SPAA gives the lowest rigid-job turnaround of the six", obs7),
    Observation(8, "Malleable jobs are preempted more often than rigid, yet turn around "
                   "faster", obs8),
    Observation(9, "On-demand work is 3–15%; about 98% start at once under every mechanism",
                obs9),
    Observation(10, "The mechanisms raise average turnaround by about 30%", obs10),
    Observation(11, "CUP does best on W2 (accurate notices)", obs11),
    Observation(12, "CUA has its lowest turnaround on W4 (late arrivals); instant start rises",
                obs12),
    Observation(13, "Checkpointing more often than Daly's optimum helps every mechanism", obs13),
    Observation(14, "Failures lower utilisation and instant start, raise preemption and rigid "
                    "turnaround", obs14),
    Observation(15, "A larger malleable minimum hurts, most of all under SPAA", obs15),
    Observation(16, "A lower setup overhead is better", obs16),
    Observation(17, "With rigid setup at 0–5% rigid jobs are preempted much more often", obs17),
)

NEEDS: Mapping[int, tuple[str, tuple[str, ...]]] = {
    **{n: ("paper", ("easy", *MECHANISM_NAMES)) for n in (1, 9, 10)},
    **{n: ("paper", MECHANISM_NAMES) for n in (2, 3, 5, 7, 8)},
    4: ("paper", CUx), 6: ("paper", CUx),
    11: ("paper", ("CUP&PAA", "CUP&SPAA")), 12: ("paper", ("CUA&PAA", "CUA&SPAA")),
    13: ("checkpoint", MECHANISM_NAMES), 14: ("failures", MECHANISM_NAMES),
    15: ("malleable-min", MECHANISM_NAMES), 16: ("setup", MECHANISM_NAMES),
    17: ("setup", MECHANISM_NAMES),
}
"""For each observation, the part of the study whose runs it reads and the policies in them:
what more seeds must run when its verdict is undecided (:mod:`sim.study.full`)."""


def judge_all(evidence: Evidence) -> list[Verdict]:
    """Every observation on ``evidence`` (under its reading); one that lacks figures cannot
    be judged."""
    evidence = evidence.read()
    out = []
    for o in OBSERVATIONS:
        try:
            out.append(o.judge(evidence))
        except Lacking as e:
            out.append(Verdict(o.number, "n/a", Word.CANNOT,
                               unjudged=f"the study lacks {e.args[0]}"))
    return out
