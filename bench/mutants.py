"""Mutation testing of the modules that carry the project's promises: the kill rate per module
and the mutants that survive.

A mutant is one small deliberate bug (``bench/mutants_ops.py`` lists the kinds: a comparison's
boundary, a flag dropped from ``O_RDONLY | O_NOFOLLOW``, a call removed, ...), plus the
hand-written mutants below that an audit found (the lease written after the claim's rename).
Each is tried against its module's own tests only; it is *killed* when a test fails or hangs.
A survivor is a bug the tests would let through, unless it is *equivalent* (no behaviour can
tell it from the original): ``bench/mutants_equivalent.txt`` explains each of those, and the
list printed here marks them.

How it runs, to fit a small machine shared with others: the code is copied to a scratch
folder once; one baseline run of each module's tests (under ``coverage``, when installed, in
the test process and in the Python processes the tests start) records which tests run each
line; each mutant is then written into the copy and only the tests that run its lines are run,
quickest first, in a forked child (pytest already imported), stopping at the first failure,
with a time limit of three times their baseline time plus ten seconds, and the same for each
test on its own (a mutant that hangs one test is a timeout in that test's time). A change at
module level (a constant) runs every test, those that run the lines that read it first: a
test may read it itself. A mutant whose lines no test was seen to run is listed as such,
untried (a process killed with SIGKILL saves no coverage, so a very few of them may be reached
after all). One mutant runs at a time, at low priority: one core for this, the other for
everyone else (the equivalent of mutmut's ``--max-children 1``). Past ``--budget`` seconds
per module the rest is left untried; mutants are tried in a shuffled order
(``--seed``), so that a partial run is a fair sample.

    python bench/mutants.py [--module queue/disk --module claim+lease ...] [--budget 1800]
                            [--seed 0] [--list] [--json results.json]

Modules: queue/disk, claim+lease, policy, study.
"""

from __future__ import annotations

import argparse
import ast
import compileall
import contextlib
import json
import os
import random
import select
import shutil
import signal
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutants_ops import Mutant, mutants_of

REPO = Path(__file__).resolve().parent.parent
EQUIVALENT = Path(__file__).resolve().parent / "mutants_equivalent.txt"


@dataclass(frozen=True)
class Target:
    """A file to mutate; ``functions``: only inside these (qualified names), else all."""

    path: str
    functions: frozenset[str] | None = None


@dataclass(frozen=True)
class Module:
    """A module that carries promises: its files and its own tests."""

    name: str
    targets: tuple[Target, ...]
    tests: tuple[str, ...]


def _policy_files() -> tuple[Target, ...]:
    files = sorted(str(p.relative_to(REPO)) for p in (REPO / "metaq_py/policy").glob("*.py"))
    return tuple(Target(f) for f in [*files, "metaq_py/cluster.py", "metaq_py/holdings.py"])


MODULES = {m.name: m for m in [
    Module("queue/disk", (*(Target(f"metaq_py/queue/disk/{n}.py") for n in
                            ("fileio", "folders", "logfile")),
                          Target("metaq_py/queue/moves.py"), Target("metaq_py/queue/walk.py")),
           ("tests/queue",)),
    Module("claim+lease", (
        Target("metaq_py/queue/lease.py"),
        Target("metaq_py/queue/claiming.py", frozenset({
            "ClaimingQueue.claim", "ClaimingQueue._claim_into", "ClaimingQueue.heartbeat",
            "_job_folder"})),
    ), ("tests/queue",)),
    Module("policy", _policy_files(),
           ("tests/policy", "tests/test_cluster.py", "tests/test_cluster_resize_cost.py")),
    Module("study", (Target("sim/study/observations.py"), Target("sim/study/judging.py")),
           ("tests/sim/study",)),
]}


# --------------------------------------------------------------------------- hand-written mutants


def _lease_after_rename(text: str) -> str:
    """The claim's lease written after its rename, not before (an audit's mutant, issue 35):
    a crash between the two leaves a claimed task without a lease."""
    tree = ast.parse(text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ClaimingQueue")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "_claim_into")
    lease = next(s for s in fn.body if isinstance(s, ast.Expr) and
                 isinstance(s.value, ast.Call) and ast.unparse(s.value.func) == "write_lease")
    rename = next(s for s in fn.body if isinstance(s, ast.Try))
    lines = text.splitlines(keepends=True)
    moved = lines[lease.lineno - 1:lease.end_lineno]
    out = lines[:lease.lineno - 1] + lines[lease.end_lineno:rename.end_lineno] + moved + \
        lines[rename.end_lineno:]
    return "".join(out)


EXTRA: dict[str, list[tuple[str, str, str, Callable[[str], str]]]] = {
    "claim+lease": [("metaq_py/queue/claiming.py", "ClaimingQueue._claim_into",
                     "the lease written after the claim's rename", _lease_after_rename)],
}


def extra_mutants(module: Module) -> list[Mutant]:
    out = []
    for path, function, what, change in EXTRA.get(module.name, []):
        text = (REPO / path).read_text()
        fn = next(n for n in ast.walk(ast.parse(text))
                  if isinstance(n, ast.FunctionDef) and n.name == function.split(".")[-1])
        out.append(Mutant(path, fn.lineno, fn.end_lineno or fn.lineno, function, "(as written)",
                          what, change(text)))
    return out


# --------------------------------------------------------------------------- running tests


def _child(workdir: Path, log: Path, work: Callable[[], int], timeout: float) -> int | None:
    """Run ``work()`` in a forked child, in its own session, in ``workdir``; its exit code, or
    ``None`` when it took longer than ``timeout`` (it and everything it started is killed)."""
    pid = os.fork()
    if pid == 0:  # the child
        code = 3
        try:
            os.setsid()
            os.nice(10)
            os.chdir(workdir)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            sys.path.insert(0, str(workdir))
            os.environ["PYTHONPATH"] = str(workdir)
            code = work()
        except BaseException as e:  # the child reports and exits, whatever happened
            print(f"mutants: child failed: {e!r}", file=sys.stderr)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            os.killpg(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # whatever the tests left behind
    return os.waitstatus_to_exitcode(status) if ready else None


_PYTEST = ["-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=", "--no-header", "-W", "ignore"]


HUNG = 124
"""The exit code of a child whose test ran past its own time limit (see :func:`_pytest`)."""


def _pytest(ids: list[str], limits: dict[str, float] | None = None) -> Callable[[], int]:
    """Run the tests ``ids``; with ``limits``, a test that runs longer than its limit ends the
    run at once with :data:`HUNG`: a mutant that makes one test hang (a read that loops) is
    then caught in that test's time, not in the time of all of them."""

    class Alarm:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_protocol(self, item, nextitem):  # type: ignore[no-untyped-def]
            signal.signal(signal.SIGALRM, lambda *_: os._exit(HUNG))
            signal.setitimer(signal.ITIMER_REAL, (limits or {}).get(item.nodeid, 0.0))
            yield
            signal.setitimer(signal.ITIMER_REAL, 0.0)

    plugins = [Alarm()] if limits else []
    return lambda: int(pytest.main([*_PYTEST, *ids], plugins=plugins))


@dataclass
class Baseline:
    """The module's tests as they ran on the original code."""

    durations: dict[str, float]
    lines: dict[str, dict[int, list[str]]]
    failed: list[str]
    covered: bool


_SITECUSTOMIZE = """\
# Written by bench/mutants.py in its scratch copy: a Python process a test starts records
# which lines of the mutated module it runs, under the name of the test that started it.
import os
if os.environ.get("METAQ_MUTANTS_COVER") and os.environ.get("METAQ_MUTANTS_CONTEXT"):
    import atexit, coverage
    _cov = coverage.Coverage(
        data_file=os.path.join(os.environ["METAQ_MUTANTS_COVER"], "sub"), data_suffix=True,
        include=os.environ["METAQ_MUTANTS_FILES"].split(os.pathsep),
        context=os.environ["METAQ_MUTANTS_CONTEXT"])
    _cov.start()
    atexit.register(lambda: (_cov.stop(), _cov.save()))
"""


def baseline(module: Module, workdir: Path, log: Path) -> Baseline:
    """Run the module's tests once on the original code in ``workdir``, recording each test's
    time and outcome and (with coverage) the lines of the module's files each runs."""
    out = log.with_suffix(".json")

    def work() -> int:
        try:
            import coverage
        except ImportError:
            coverage = None
        files = [str(workdir / t.path) for t in module.targets]
        cov = coverage.Coverage(data_file=None, include=files) if coverage else None
        if cov:  # and in the Python processes the tests start (see _SITECUSTOMIZE)
            subs = log.parent / "subprocess-coverage"
            subs.mkdir()
            (workdir / "sitecustomize.py").write_text(_SITECUSTOMIZE)
            os.environ.update(METAQ_MUTANTS_COVER=str(subs),
                              METAQ_MUTANTS_FILES=os.pathsep.join(files))
        record: dict[str, dict] = {}

        class Plugin:
            @pytest.hookimpl(hookwrapper=True)
            def pytest_runtest_protocol(self, item, nextitem):  # type: ignore[no-untyped-def]
                os.environ["METAQ_MUTANTS_CONTEXT"] = item.nodeid
                if cov:
                    cov.switch_context(item.nodeid)
                yield
                os.environ.pop("METAQ_MUTANTS_CONTEXT", None)
                if cov:
                    cov.switch_context("")

            def pytest_runtest_logreport(self, report):  # type: ignore[no-untyped-def]
                entry = record.setdefault(report.nodeid, {})
                entry["duration"] = entry.get("duration", 0.0) + report.duration
                if report.failed:
                    entry["failed"] = True

        if cov:
            cov.start()
        code = pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", "--no-header",
                            "-W", "ignore", *module.tests], plugins=[Plugin()])
        lines: dict[str, dict[int, list[str]]] = {}
        if cov:
            cov.stop()
            data = cov.get_data()
            found = [data]
            for sub in subs.glob("sub.*"):
                more = coverage.CoverageData(basename=str(sub))
                more.read()
                found.append(more)
            for t in module.targets:
                by_line: dict[int, set[str]] = defaultdict(set)
                for d in found:
                    for n, cs in d.contexts_by_lineno(str(workdir / t.path)).items():
                        by_line[n].update(cs)
                lines[t.path] = {n: sorted(c) for n, c in by_line.items()}
            (workdir / "sitecustomize.py").unlink()
        out.write_text(json.dumps({"record": record, "lines": lines, "covered": bool(cov)}))
        return int(code)

    code = _child(workdir, log, work, timeout=3600)
    if code is None or not out.exists():
        raise SystemExit(f"mutants: the baseline of {module.name} did not finish; see {log}")
    data = json.loads(out.read_text())
    record = data["record"]
    return Baseline(
        durations={k: v.get("duration", 0.0) for k, v in record.items()},
        lines={p: {int(n): c for n, c in by.items()} for p, by in data["lines"].items()},
        failed=sorted(k for k, v in record.items() if v.get("failed")),
        covered=data["covered"])


# --------------------------------------------------------------------------- trying mutants


@dataclass
class Outcome:
    mutant: Mutant
    result: str  # killed, timeout, survived, uncovered (survived: no test runs it)
    seconds: float


@dataclass
class Tally:
    outcomes: list[Outcome] = field(default_factory=list)
    untried: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def _selected(mutant: Mutant, base: Baseline, everything: list[str]) -> list[str]:
    """The tests that run the mutant's lines, the quickest first (so that a killed mutant is
    killed soon). A module-level change (a constant) may be read by a test itself, which
    coverage of the module cannot see: every test runs, those that run the lines that read
    its name first."""
    if not base.covered:
        return everything
    lines = range(mutant.statement or mutant.line, mutant.end_line + 1)
    if mutant.function == "<module>":
        lines = range(0) if not mutant.uses else mutant.uses
    by_line = base.lines.get(mutant.path, {})
    ids: set[str] = set()
    for n in lines:
        ids.update(by_line.get(n, ()))
    if "" in ids:  # run at import time: every test depends on it
        return everything
    first = sorted((t for t in everything if t in ids), key=lambda t: base.durations[t])
    if mutant.function == "<module>":
        return first + [t for t in everything if t not in ids]
    return first


def try_mutants(module: Module, mutants: list[Mutant], base: Baseline, workdir: Path,
                logs: Path, budget: float, verbose: bool = False) -> Tally:
    """Each mutant against its tests, written into ``workdir`` one at a time, until ``budget``
    seconds have passed."""
    everything = sorted((t for t in base.durations if t not in base.failed),
                        key=lambda t: base.durations[t])
    originals = {t.path: (REPO / t.path).read_text() for t in module.targets}
    tally = Tally()
    start = time.monotonic()
    queue = list(mutants)
    while queue:
        if time.monotonic() - start > budget:
            for m in queue:
                tally.untried[m.path] += 1
            break
        m = queue.pop(0)
        t0 = time.monotonic()
        result = _try_one(m, base, everything, workdir, logs)
        tally.outcomes.append(Outcome(m, result, time.monotonic() - t0))
        if verbose:
            print(f"  {result:9} {time.monotonic() - t0:6.1f} s  {m.path}:{m.line}  {m.key}",
                  file=sys.stderr, flush=True)
        (workdir / m.path).write_text(originals[m.path])
    return tally


def _try_one(m: Mutant, base: Baseline, everything: list[str], workdir: Path,
             logs: Path) -> str:
    """``killed``, ``timeout``, ``survived``, or ``uncovered`` (no test runs its lines)."""
    (workdir / m.path).write_text(m.source)
    ids = _selected(m, base, everything)
    if not ids:
        return "uncovered"
    limit = 3 * sum(base.durations.get(t, 1.0) for t in ids) + 10
    limits = {t: 3 * base.durations.get(t, 1.0) + 10 for t in ids}
    code = _child(workdir, logs / "mutant.log", _pytest(ids, limits), timeout=limit)
    if code is None or code == HUNG:
        return "timeout"
    if code != 0:
        return "killed"
    return "survived"


# --------------------------------------------------------------------------- the report


def read_equivalent(path: Path = EQUIVALENT) -> dict[str, str]:
    """The explained equivalent mutants: a key line (as printed), then its reason indented."""
    out: dict[str, str] = {}
    key = None
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line[0].isspace() and key is not None:
            out[key] = f"{out[key]} {line.strip()}".strip()
        else:
            key = line.strip()
            out[key] = ""
    return out


@dataclass(frozen=True)
class Survivor:
    """A mutant no test killed: ``result`` is ``survived`` or ``uncovered``."""

    path: str
    line: int
    key: str
    result: str


def report(module: Module, tally: Tally, equivalent: dict[str, str], seconds: float) -> dict:
    counts = {}
    for path in [t.path for t in module.targets]:
        got = [o for o in tally.outcomes if o.mutant.path == path]
        counts[path] = (len(got), sum(o.result in ("killed", "timeout") for o in got),
                        tally.untried[path])
    survivors = [Survivor(o.mutant.path, o.mutant.line, o.mutant.key, o.result)
                 for o in tally.outcomes if o.result in ("survived", "uncovered")]
    return print_report(module, seconds, counts, survivors, equivalent)


def print_report(module: Module, seconds: float | None,
                 counts: dict[str, tuple[int, int, int]], survivors: list[Survivor],
                 equivalent: dict[str, str]) -> dict:
    """The table (per file: mutants tried, killed, explained as equivalent, left, untried,
    and the kill rate among the tried ones not equivalent) and the list of survivors."""
    took = "" if seconds is None else f"; {seconds:.0f} s"
    print(f"\n== {module.name} (tests: {' '.join(module.tests)}{took})")
    print(f"{'file':44} {'tried':>6} {'killed':>6} {'equiv':>6} {'left':>5} {'untried':>7} "
          f"{'kill rate':>9}")
    rows = {}
    total = [0, 0, 0]
    for path in [*(t.path for t in module.targets), "total"]:
        if path == "total":
            tried, killed, untried = total
        else:
            tried, killed, untried = counts.get(path, (0, 0, 0))
            total = [a + b for a, b in zip(total, (tried, killed, untried), strict=True)]
        equiv = sum(s.key in equivalent for s in survivors if path in ("total", s.path))
        left = tried - killed - equiv
        rate = killed / (tried - equiv) if tried > equiv else 1.0
        rows[path] = {"tried": tried, "killed": killed, "equivalent": equiv, "left": left,
                      "untried": untried, "rate": rate}
        print(f"{path:44} {tried:6} {killed:6} {equiv:6} {left:5} {untried:7} "
              f"{100 * rate:8.1f}%")
    if survivors:
        print("survivors:")
    for s in sorted(survivors, key=lambda s: (s.path, s.line)):
        mark = "[equivalent] " if s.key in equivalent else (
            "[no test runs it] " if s.result == "uncovered" else "")
        print(f"  {s.path}:{s.line}  {mark}{s.key}")
    return rows


def report_again(saved: Path, equivalent: dict[str, str]) -> None:
    """The report of a run saved with ``--json``, with the explained equivalents as they
    are now (a run reads them when it starts)."""
    for name, got in json.loads(saved.read_text()).items():
        module = MODULES[name]
        counts = {p: (r["tried"], r["killed"], r["untried"]) for p, r in got["rows"].items()
                  if p != "total"}
        survivors = [Survivor(s["key"].split(" | ")[0], s["line"], s["key"], s["result"])
                     for s in got["survivors"]]
        print_report(module, got.get("seconds"), counts, survivors, equivalent)


def scratch_copy(root: Path, module: Module) -> Path:
    """A copy of the repository in ``root`` to mutate, its byte code made except for the
    module's files (compiled from their source every time, mutated or not)."""
    dst = root / "repo"
    shutil.copytree(REPO, dst, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", ".hypothesis", ".pytest_cache", ".ruff_cache", "out", "scratch",
        "build", "*.egg-info"))
    for top in ("metaq_py", "sim", "tests"):
        compileall.compile_dir(dst / top, quiet=1)
    for t in module.targets:
        for pyc in (dst / t.path).parent.glob(f"__pycache__/{Path(t.path).stem}.*.pyc"):
            pyc.unlink()
    return dst


def run_module(module: Module, args: argparse.Namespace, equivalent: dict[str, str]) -> dict:
    started = time.monotonic()
    mutants = [m for t in module.targets
               for m in mutants_of(t.path, (REPO / t.path).read_text(), t.functions)]
    mutants += extra_mutants(module)
    paths = {t.path for t in module.targets}
    stale = [k for k in equivalent if k.split(" | ")[0] in paths
             and k not in {m.key for m in mutants}]
    for key in stale:
        print(f"{module.name}: bench/mutants_equivalent.txt explains a mutant no longer made: "
              f"{key}")
    if args.only:
        mutants = [m for m in mutants if m.path in args.only]
    random.Random(args.seed).shuffle(mutants)
    with tempfile.TemporaryDirectory(prefix="metaq-mutants-") as tmp:
        root = Path(tmp)
        workdir = scratch_copy(root, module)
        base = baseline(module, workdir, root / "baseline.log")
        if base.failed:
            print(f"{module.name}: left out, failing on the original code: {base.failed}")
        tally = try_mutants(module, mutants, base, workdir, root, args.budget,
                            args.verbose)
    seconds = time.monotonic() - started
    rows = report(module, tally, equivalent, seconds)
    return {"rows": rows, "seconds": seconds, "survivors": [
        {"key": o.mutant.key, "line": o.mutant.line, "result": o.result}
        for o in tally.outcomes if o.result in ("survived", "uncovered")]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", action="append", choices=sorted(MODULES),
                    help="a module to test (repeatable; default: all)")
    ap.add_argument("--budget", type=float, default=1800.0,
                    help="seconds of mutants per module (default 1800)")
    ap.add_argument("--seed", type=int, default=0, help="the order mutants are tried in")
    ap.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    ap.add_argument("--only", action="append", metavar="PATH",
                    help="only the mutants of this file of the module (repeatable)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each mutant's result")
    ap.add_argument("--json", type=Path, help="write the figures and survivors here")
    ap.add_argument("--again", type=Path, metavar="JSON",
                    help="print the report of a run saved with --json again, with the "
                         "equivalent mutants explained by now; run nothing")
    args = ap.parse_args()
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    equivalent = read_equivalent()
    if args.again:
        report_again(args.again, equivalent)
        return
    results = {}
    for name in args.module or sorted(MODULES):
        module = MODULES[name]
        if args.list:
            for t in module.targets:
                for m in mutants_of(t.path, (REPO / t.path).read_text(), t.functions):
                    print(f"{m.path}:{m.line}  {m.key}")
            for m in extra_mutants(module):
                print(f"{m.path}:{m.line}  {m.key}")
            continue
        results[name] = run_module(module, args, equivalent)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
